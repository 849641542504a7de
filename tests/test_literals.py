"""The one-pass anchor look-up (google-re2, when installed) sees at least every anchor
the plain ``in`` look-ups see, so the credentials net finds the same with or without it."""

from __future__ import annotations

import random

import pytest

from codemode import redact
from codemode.literals import MIN_CHARS, Anchors, one_pass, re2_available
from codemode.privacy.detectors import _SSN_ANCHORS, SSNDetector
from codemode.redact import find_secrets, forget_secrets, remember_secret

needs_re2 = pytest.mark.skipif(not re2_available(), reason="google-re2 is not installed")

PAD = "order 2025-01-31 total 12.50 EUR; " * (MIN_CHARS // 30 + 1)


def plain(anchors: Anchors, text: str) -> set[tuple[str, bool]]:
    lower = text.lower()
    return {(a, fold) for a, fold in anchors.anchors if a in (lower if fold else text)}


@needs_re2
@pytest.mark.parametrize(
    "tail",
    [
        "",
        "Authorization: Bearer abc",
        "API_KEY=xyz sk-proj-123",
        "\u212aey=1",  # the Kelvin sign lowers to "k"
        "Ａｕｔｈ ghp_x",  # full-width letters: no ASCII anchor
        "Chloé \u0130 TOKEN -----BEGIN",
        "\ud800 secret",  # a lone surrogate (surrogateescape'd bytes)
    ],
)
def test_re2_sees_every_anchor_the_plain_look_ups_see(tail: str) -> None:
    anchors = redact._ANCHORS
    text = PAD + tail
    got = anchors.possible(text)
    assert got is not None
    assert got >= plain(anchors, text)


def test_short_texts_are_looked_up_anchor_by_anchor() -> None:
    assert redact._ANCHORS.possible("token abc") is None


def random_text(rng: random.Random) -> str:
    pieces = [
        "password=hunter2-2024",
        "Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJlLXh5eg",
        "ghp_" + "a1" * 12,
        "AKIA" + "B" * 16,
        "https://bob:pa55word@example.com/x",
        "monkey business",
        "tokenization",
        "Chloé Müller",
        "\u212aEY: 1234567",
        " ",
        "\x00",
    ]
    return PAD + "".join(rng.choice(pieces) for _ in range(40))


@pytest.mark.parametrize("seed", range(6))
def test_the_credentials_net_finds_the_same_with_and_without_re2(seed: int) -> None:
    rng = random.Random(seed)
    texts = [random_text(rng) for _ in range(20)]
    got = [sorted(find_secrets(t)) for t in texts]
    Anchors.enabled = False
    try:
        want = [sorted(find_secrets(t)) for t in texts]
    finally:
        Anchors.enabled = True
    assert any(want)
    assert got == want


def test_many_remembered_secrets_are_found_as_one_by_one_look_ups_find_them() -> None:
    secrets = [f"secret-value-{i:03d}-x" for i in range(60)]
    secrets += ["Paßwort-Müller-1", "пароль-секрет-7", "bad-\udcff-bytes-9", "multi\nline-secret"]
    try:
        for s in secrets:
            remember_secret(s)
        texts = [
            PAD + " ".join(secrets[::7]) + " секрет Müller",
            PAD + "пароль-секрет-7 and bad-\udcff-bytes-9 and multi\nline-secret",
            PAD + "Paßwort-Müller-1 secret-value-059-x",
            PAD + "none of them",
        ]
        got = [sorted(find_secrets(t)) for t in texts]
        Anchors.enabled = False
        try:
            want = [sorted(find_secrets(t)) for t in texts]
        finally:
            Anchors.enabled = True
        assert all(want[:3]) and got == want
        assert len(want[1]) == 3
    finally:
        forget_secrets()


@pytest.mark.parametrize("seed", range(4))
def test_shared_anchors_answer_in_one_pass_as_each_alone(seed: int) -> None:
    """Within ``one_pass`` the net's and the SSN detector's anchors share one RE2 pass
    (nested for another text): each gets the answer its own pass gives."""
    rng = random.Random(seed)
    texts = [random_text(rng) + rng.choice(["", " SSN 123456789", " social"]) for _ in range(10)]
    texts.append("short ssn")
    ssn = SSNDetector()
    for text in texts:
        alone = (redact._ANCHORS.possible(text), _SSN_ANCHORS.possible(text))
        found = (sorted(find_secrets(text)), list(ssn.find(text)))
        inner = PAD + "ghp_x Ssn"
        with one_pass(text):
            assert _SSN_ANCHORS.possible(text) == alone[1]
            with one_pass(inner):  # another text's scope, then this one's again
                assert redact._ANCHORS.possible(inner) == redact._ANCHORS.possible(inner + " ")
            assert redact._ANCHORS.possible(text) == alone[0]
            assert (sorted(find_secrets(text)), list(ssn.find(text))) == found
