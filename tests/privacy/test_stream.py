"""The stream scanner: values split across chunks are still caught."""

from __future__ import annotations

from typing import Any

import pytest

from codemode.privacy.config import PrivacyConfig
from codemode.privacy.engine import Privacy
from codemode.privacy.stream import StreamScanner
from codemode.privacy.tokens import TOKEN_RE
from codemode.privacy.vault import Vault

TEXT = (
    "Dear team, alice@example.com called from +44 20 7946 0958 about card "
    "4111 1111 1111 1111; her IBAN is DE89 3704 0044 0532 0130 00. Tel. 4155550132 too.\n"
)
VALUES = [
    "alice@example.com",
    "+44 20 7946 0958",
    "4111 1111 1111 1111",
    "DE89 3704 0044 0532 0130 00",
    "4155550132",
]


@pytest.fixture(scope="module")
def engine() -> Privacy:
    return Privacy(PrivacyConfig(enabled=True), Vault(b"k" * 32))


def stream(engine: Privacy, chunks: list[str], **kw: Any) -> str:
    s = StreamScanner(engine, **kw)
    return "".join(s.feed(c) for c in chunks) + s.close()


def test_a_value_split_between_two_chunks_is_one_token(engine: Privacy) -> None:
    out = stream(engine, ["write to alice@ex", "ample.com please"], hold=32)
    assert out == f"write to {engine.vault.token('EMAIL', 'alice@example.com')} please"


def test_every_split_point_gives_the_same_text_as_one_scan(engine: Privacy) -> None:
    whole = engine.protect_text(TEXT)
    for cut in range(1, len(TEXT)):
        out = stream(engine, [TEXT[:cut], TEXT[cut:]], hold=64)
        assert out == whole, cut
        assert not any(v in out for v in VALUES)


def test_one_character_at_a_time_leaks_nothing(engine: Privacy) -> None:
    out = stream(engine, list(TEXT * 3), hold=64)
    assert not any(v in out for v in VALUES)
    assert len(TOKEN_RE.findall(out)) == 3 * len(VALUES)


def test_text_is_released_once_it_is_past_the_hold_window(engine: Privacy) -> None:
    s = StreamScanner(engine, hold=16)
    assert s.feed("short") == ""
    assert s.feed(" and now a longer line of plain words") != ""
    assert s.close().endswith("words")


def test_a_context_word_in_an_earlier_chunk_still_counts(engine: Privacy) -> None:
    chunks = ["plain words " * 5 + "Tel.", " ", "4155550132"]
    assert "4155550132" not in stream(engine, chunks, hold=4)
    # Without the already-sent context, "el. 4155550132" is a bare id: that is what
    # the context window is for (a vault that does not hold it yet: a held value is
    # tokenized wherever it appears).
    fresh = Privacy(PrivacyConfig(enabled=True), Vault(b"k" * 32))
    assert "4155550132" in stream(fresh, chunks, hold=4, context=0)


def test_bad_windows_are_refused(engine: Privacy) -> None:
    with pytest.raises(ValueError):
        StreamScanner(engine, hold=0)


def test_a_complete_line_is_released_at_once_and_only_the_open_line_is_held(
    engine: Privacy,
) -> None:
    s = StreamScanner(engine)  # the default 512-character window
    assert s.feed("step 1 done\nwriting to alice@ex") == "step 1 done\n"
    token = engine.vault.token("EMAIL", "alice@example.com")
    assert s.feed("ample.com\n") == f"writing to {token}\n"
    assert s.close() == ""


def test_an_open_private_key_block_is_held_across_line_breaks(engine: Privacy) -> None:
    s = StreamScanner(engine)
    head = "key:\n-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n"
    assert s.feed(head) == "key:\n"
    out = s.feed("q83kd0\n-----END RSA PRIVATE KEY-----\nafter\n") + s.close()
    assert "MIIE" not in out and "q83kd0" not in out and out.endswith("after\n")


def test_a_custom_pattern_that_may_span_lines_keeps_the_whole_window() -> None:
    config = PrivacyConfig.model_validate(
        {"enabled": True, "recognizers": [{"name": "CASE", "pattern": r"CASE\s+\d{6}"}]}
    )
    engine = Privacy(config, Vault(b"k" * 32))
    s = StreamScanner(engine)
    assert not s.lines
    assert s.feed("see CASE\n") == ""  # the number may follow on the next line
    out = s.feed("123456 now\n") + s.close()
    assert "123456" not in out and "[CASE_" in out
