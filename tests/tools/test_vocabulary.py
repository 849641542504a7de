"""The query rewrites discovery shares: values apart, phrasal verbs and abbreviations."""

from __future__ import annotations

from codemode.tools.vocabulary import PHRASES, SYNONYMS, canonical


def test_values_are_replaced_by_their_kind_and_given_back_apart() -> None:
    assert canonical("read the config.yaml") == ("read the file", "config.yaml")
    assert canonical("open https://example.com now") == ("open url now", "https://example.com")
    assert canonical("mail bob@example.com") == ("mail email", "bob@example.com")
    assert canonical("what's new in #general") == ("what's new in channel", "#general")
    assert canonical("unpack v1.2.tar.gz") == ("unpack file", "v1.2.tar.gz")


def test_a_library_named_like_a_javascript_file_is_not_a_file() -> None:
    assert canonical("Next.js routing and app.js") == ("Next.js routing and file", "app.js")


def test_a_query_without_values_or_phrases_is_kept_as_it_is() -> None:
    assert canonical("list my tools") == ("list my tools", "")
    assert canonical("fix issue #42") == ("fix issue #42", "")


def test_abbreviations_and_phrasal_verbs_are_replaced_by_their_plain_words() -> None:
    assert canonical("merge PR 17") == ("merge pull request 17", "")
    assert canonical("turn on dark mode") == ("enable dark mode", "")
    assert canonical("Turn Off the flag") == ("disable the flag", "")
    assert canonical("what\u2019s in the folder") == ("list contents the folder", "")


def test_the_tables_hold_lower_case_words() -> None:
    words = [w for group in SYNONYMS for w in group.split()]
    assert all(w.isalpha() and w.islower() for w in words)
    assert all(p == p.lower() and v for p, v in PHRASES.items())
