"""A value the vault holds is found again when it comes back disguised with Unicode (a
zero-width space, full-width digits, soft hyphens...) where no detector would recognise
it, and its token replaces the text exactly as it was (``known.KnownValues._disguised``)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from codemode import Session, SubprocessExecutor
from codemode.privacy.config import PrivacyConfig
from codemode.privacy.engine import Privacy
from codemode.privacy.known import FIND_MAX
from codemode.privacy.stream import StreamScanner
from codemode.privacy.tokens import TOKEN_RE
from codemode.privacy.vault import Vault
from codemode.workspace import Workspace

from .conftest import make_private_workspace

PHONE = "5551234567"
ZW = "\u200b"


def _digits(text: str, zero: int) -> str:
    return "".join(chr(zero + int(c)) if c.isdigit() else c for c in text)


DISGUISED = {
    "zero-width space": f"555{ZW}1234567",
    "zero-width spaces between every digit": ZW.join(PHONE),
    "word joiner and zero-width non-joiner": "555\u20601234\u200c567",
    "soft hyphens": "555\u00ad123\u00ad4567",
    "bidi controls": "555\u202a123\u202c4567",
    "full-width digits": _digits(PHONE, 0xFF10),
    "Arabic-Indic digits": _digits(PHONE, 0x660),
    "mathematical digits": _digits(PHONE, 0x1D7CE),
    "combining marks": "".join(c + "\u0337" for c in PHONE),
}


def held_engine(config: PrivacyConfig | None = None) -> tuple[Privacy, str]:
    """An engine whose vault holds ``PHONE`` (found by its field name only), and its token."""
    e = Privacy(config or PrivacyConfig(enabled=True), Vault(os.urandom(32)))
    token = e.protect({"phone": PHONE})[0]["phone"]
    assert TOKEN_RE.fullmatch(token)
    return e, token


def test_no_detector_finds_the_value_out_of_its_field() -> None:
    """What the tests below rely on: only the held-values search finds these."""
    fresh = Privacy(PrivacyConfig(enabled=True), Vault(os.urandom(32)))
    for text in [f"ledger ref {PHONE} settled", *DISGUISED.values()]:
        assert fresh.protect_text(f"ledger ref {text} settled") == f"ledger ref {text} settled"


@pytest.mark.parametrize("name", list(DISGUISED))
def test_a_disguised_held_value_in_free_text_becomes_one_token_for_its_exact_span(
    name: str,
) -> None:
    e, _ = held_engine()
    disguised = DISGUISED[name]
    out = e.protect_text(f"ledger ref {disguised} settled")
    token = e.vault.token("PHONE", disguised)
    assert out == f"ledger ref {token} settled", out
    restored, _ = e.restore({"v": out}, sink=True)
    assert restored == {"v": f"ledger ref {disguised} settled"}


@pytest.mark.parametrize("name", list(DISGUISED))
def test_a_field_that_is_a_disguised_held_value_becomes_its_token(name: str) -> None:
    e, _ = held_engine()
    disguised = DISGUISED[name]
    out, _ = e.protect({"ref": disguised, "other": "x"})
    assert out == {"ref": e.vault.token("PHONE", disguised), "other": "x"}


def test_plain_and_disguised_in_one_text_far_past_a_window_of_other_characters() -> None:
    e, token = held_engine()
    prose = "Prix\u00a0: 1\u00a0000\u00a0€, caf\u00e9 cre\u0300me \u2013 " * 40
    text = f"{prose}{PHONE} / {prose}555{ZW}1234567; {DISGUISED['full-width digits']}."
    out = e.protect_text(text)
    zw, wide = (
        e.vault.token("PHONE", DISGUISED[k]) for k in ["zero-width space", "full-width digits"]
    )
    assert out == f"{prose}{token} / {prose}{zw}; {wide}.", out


NOT_HELD = [
    f"ledger ref 555{ZW}1234568 settled",  # another number
    f"ledger ref 1555{ZW}1234567 settled",  # inside a longer number
    f"ledger ref {_digits('55512345678', 0xFF10)} settled",
    f"ref 555{ZW}1234567{_digits('8', 0xFF10)}",
    "Prix\u00a0: 1\u00a0000\u00a0€ — livraison\u00a0? Oui\u00a0!",
    "\u65e5\u672c\u8a9e\uff08\u5168\u89d2\uff09\uff01\u3000\uff21\uff22\uff23 \uff11\uff12\uff13",
    "family: 👨\u200d👩\u200d👧, pages 12\u201318 \u00ad",
]


@pytest.mark.parametrize("text", NOT_HELD)
def test_text_with_such_characters_and_no_held_value_is_left_alone(text: str) -> None:
    e, _ = held_engine()
    assert e.protect_text(text) == text
    assert e.protect({"note": text})[0] == {"note": text}


def test_with_decode_off_the_held_values_search_stays_exact() -> None:
    e, token = held_engine(PrivacyConfig(enabled=True, decode=False))
    assert e.protect_text(f"ref {PHONE}") == f"ref {token}"
    assert e.protect_text(f"ref 555{ZW}1234567") == f"ref 555{ZW}1234567"


@pytest.mark.parametrize("size", [1, 3, 7])
def test_streamed_output_gets_a_disguised_held_value_tokenized_across_chunks(size: int) -> None:
    e, token = held_engine()
    disguised = DISGUISED["zero-width space"]
    text = f"ledger ref {PHONE} and {disguised} settled\nnext ref {DISGUISED['soft hyphens']}\n"
    stream = StreamScanner(e)
    out = "".join(stream.feed(text[i : i + size]) for i in range(0, len(text), size))
    out += stream.close()
    zw, soft = (e.vault.token("PHONE", DISGUISED[k]) for k in ["zero-width space", "soft hyphens"])
    assert out == f"ledger ref {token} and {zw} settled\nnext ref {soft}\n", out


def test_streamed_chunks_cut_at_the_disguising_character() -> None:
    e, _ = held_engine()
    stream = StreamScanner(e)
    out = stream.feed("ledger ref 555") + stream.feed(ZW) + stream.feed("1234567 settled\n")
    out += stream.close()
    assert out == f"ledger ref {e.vault.token('PHONE', f'555{ZW}1234567')} settled\n"


@pytest.mark.anyio
async def test_code_printing_a_held_value_disguised_shows_the_model_only_tokens(
    tmp_path: Path,
) -> None:
    """The repro: a number tokenized under ``"phone"`` by one tool, printed by code with a
    zero-width space (or full-width digits...) where no detector recognises it."""
    ws = make_private_workspace(tmp_path)

    def contacts() -> list[dict[str, str]]:
        """Contacts."""
        return [{"owner": "Dana", "phone": PHONE}]

    code = (
        "c = tools.local.contacts()[0]\n"
        f"disguised = {json.dumps(DISGUISED, ensure_ascii=False)}\n"
        "for name, text in disguised.items():\n"
        "    print(name, 'ledger ref', text)\n"
        "disguised\n"
    )
    async with Session.for_workspace(
        Workspace.open(ws.base), executor=SubprocessExecutor(memory_limit_mb=1024)
    ) as s:
        s.register_tool(contacts)
        r = await s.run(code)
    assert r.is_ok, r.error
    shown = r.stdout + json.dumps(r.value, ensure_ascii=False) + r.stderr
    leaked = [name for name, text in DISGUISED.items() if text in shown]
    assert leaked == [], shown
    assert PHONE not in shown
    assert len(TOKEN_RE.findall(r.stdout)) == len(DISGUISED), r.stdout


def test_a_held_name_with_a_no_break_space_among_many_held_values() -> None:
    """Past ``FIND_MAX`` held values the search goes by words: the folded windows too."""
    names = {
        "enabled": True,
        "recognizers": [
            {"name": "PERSON", "pattern": r"[A-Z][a-z]+ [A-Z][a-z]+", "context": ["name"]}
        ],
    }
    e = Privacy(PrivacyConfig.model_validate(names), Vault(os.urandom(32)))
    e.protect([{"phone": f"650555{i:04d}"} for i in range(FIND_MAX + 10)])
    assert TOKEN_RE.fullmatch(e.protect({"name": "Anna Lee"})[0]["name"])
    assert e.protect_text("met Anna Lee today") != "met Anna Lee today"
    for disguised in ["Anna\u00a0Lee", "An\u200bna Lee", "Anna\u2009Lee", "A\u00adnna Lee"]:
        text = f"met {disguised}, 6505550003 and 650{ZW}5550004 today"
        out = e.protect_text(text)
        assert out == (
            f"met {e.vault.token('PERSON', disguised)}, {e.vault.token('PHONE', '6505550003')}"
            f" and {e.vault.token('PHONE', f'650{ZW}5550004')} today"
        ), out
