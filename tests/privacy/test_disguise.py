"""Personal data disguised with Unicode that the model reads through (zero-width
characters, digits of other scripts or of full width, no-break spaces, Unicode hyphens,
small or mathematical forms) is found as plainly as the ASCII value, and its token
stands for the text exactly as it was."""

from __future__ import annotations

import json
import time

import pytest

from codemode import Session, SubprocessExecutor
from codemode.privacy.config import PrivacyConfig
from codemode.privacy.engine import Privacy
from codemode.privacy.stream import StreamScanner
from codemode.privacy.tokens import TOKEN_RE
from codemode.privacy.vault import Vault
from codemode.workspace import Workspace

from .conftest import PrivateWorkspace

EMAIL = "alice.martin@example.com"
CARD = "4111 1111 1111 1111"
SSN = "123-45-6789"
ZW = "\u200b"


def _wide(text: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)


def _digits(text: str, zero: int) -> str:
    return "".join(chr(zero + int(c)) if c.isdigit() else c for c in text)


DISGUISED = {
    "zero-width space before @": ("EMAIL", EMAIL.replace("@", ZW + "@")),
    "joiners inside the address": ("EMAIL", "ali\u200cce.mar\u200dtin@exa\u2060mple.com"),
    "soft hyphens": ("EMAIL", "alice\u00ad.martin@example\u00ad.com"),
    "bidi controls": ("EMAIL", "alice.\u202amartin\u202c@example.com"),
    "variation selector": ("EMAIL", "alice.martin\ufe0f@example.com"),
    "small commercial at": ("EMAIL", EMAIL.replace("@", "\ufe6b")),
    "combining marks over the letters": (
        "EMAIL",
        "".join(c + "\u0337" for c in "alice") + "@x.org",
    ),
    "a decomposed accent": ("EMAIL", "jose\u0301.martin@example.com"),
    "mathematical letters": ("EMAIL", "𝐚𝐥𝐢𝐜𝐞@example.com"),
    "full-width card": ("CREDIT_CARD", _wide(CARD).replace(" ", "\u3000")),
    "full-width card, ASCII spaces": ("CREDIT_CARD", _wide(CARD)),
    "Arabic-Indic card": ("CREDIT_CARD", _digits(CARD.replace(" ", ""), 0x660)),
    "Devanagari card": ("CREDIT_CARD", _digits(CARD, 0x966)),
    "mathematical digits": ("CREDIT_CARD", _digits(CARD, 0x1D7CE)),
    "no-break spaces in a card": ("CREDIT_CARD", CARD.replace(" ", "\u00a0")),
    "thin spaces in a card": ("CREDIT_CARD", CARD.replace(" ", "\u2009")),
    "zero-width spaces in a card": ("CREDIT_CARD", CARD.replace(" ", ZW)),
    "Unicode hyphens in a card": ("CREDIT_CARD", CARD.replace(" ", "\u2010")),
    "en dashes in an SSN": ("US_SSN", SSN.replace("-", "\u2013")),
    "full-width SSN digits, hyphen-minus": ("US_SSN", _digits(SSN, 0xFF10)),
    "word joiners in an IBAN": ("IBAN", "GB82\u2060WEST\u20601234\u20605698\u20607654\u206032"),
    # IDNA (and Python's idna codec) reads these as a domain's dots: the address delivers.
    "ideographic full stops": ("EMAIL", "alice\u3002martin@example\u3002com"),
    "half-width ideographic full stop": ("EMAIL", "alice@example\uff61co\uff61jp"),
    "full-width letters, ideographic stop": (
        "EMAIL",
        _wide("alice@example") + "\u3002" + _wide("com"),
    ),
    "small full stop": ("EMAIL", "alice@example\ufe52com"),
    "one dot leader": ("EMAIL", "alice\u2024martin@example\u2024com"),
    "middle dot": ("EMAIL", "alice@example\u00b7com"),
    "katakana middle dot": ("EMAIL", "alice@example\u30fbcom"),
    "Arabic full stop": ("EMAIL", "alice@example\u06d4com"),
}


@pytest.fixture(scope="module")
def engine() -> Privacy:
    return Privacy(PrivacyConfig(enabled=True), Vault(b"k" * 32))


@pytest.mark.parametrize("name", list(DISGUISED))
def test_a_disguised_value_becomes_one_token_for_the_whole_span(engine: Privacy, name: str) -> None:
    entity, disguised = DISGUISED[name]
    context = "SSN " if entity == "US_SSN" else ""
    out = engine.protect_text(f"note: {context}{disguised} (from the CRM)")
    token = engine.vault.token(entity, disguised)
    assert out == f"note: {context}{token} (from the CRM)", out
    restored, _ = engine.restore({"v": token}, sink=True)
    assert restored == {"v": disguised}


NOT_PERSONAL = [
    "\u0928\u092e\u0938\u094d\u0924\u0947 \u0926\u0941\u0928\u093f\u092f\u093e",  # Hindi
    "Cafe\u0301 cre\u0300me bru\u0302le\u0301e, 2 pers.",
    "Prix\u00a0: 1\u00a0000\u00a0€ — livraison\u00a0? Oui\u00a0!",  # French spacing
    "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645 \u06f1\u06f4\u06f0\u06f3",  # Persian
    "\u65e5\u672c\u8a9e\uff08\u5168\u89d2\uff09\uff01\u3000\uff21\uff22\uff23 \uff11\uff12\uff13",
    "family: 👨\u200d👩\u200d👧, flag: 🏳\ufe0f\u200d🌈",
    "pages 12\u201318, call \u2014 later",
    "order \uff10\uff10\uff11\uff12\uff13\uff14\uff15\uff16 shipped",
    # Sentences ending in an ideographic full stop, also right after ASCII words or numbers.
    "東京都に住んでいます。毎朝Pythonでコードを書きます。明日は10時に会議があります。",
    "我用的是Python3。Windows也可以。版本2.0。Next步骤请看文档。谢谢！",
    "ジョン・スミスさんはAT・Tではなく、NTTに勤めています。",
    "El col·legi de Barcelona obre a les 9·30 · paral·lel",
]


@pytest.mark.parametrize("text", NOT_PERSONAL)
def test_text_with_such_characters_but_nothing_personal_is_left_alone(
    engine: Privacy, text: str
) -> None:
    assert engine.protect_text(text) == text


def test_a_disguised_value_split_across_streamed_chunks_leaks_nothing(engine: Privacy) -> None:
    text = f"card {_wide(CARD)} and mail {EMAIL.replace('@', ZW + '@')} done\n"
    s = StreamScanner(engine)
    out = "".join(s.feed(text[i : i + 3]) for i in range(0, len(text), 3)) + s.close()
    assert out == engine.protect_text(text)
    assert len(TOKEN_RE.findall(out)) == 2 and "alice" not in out, out


def test_every_dot_like_character_reads_as_the_dot_of_an_address(engine: Privacy) -> None:
    from codemode.privacy.disguise import DOT_LIKES

    missed = [
        hex(ord(dot))
        for dot in DOT_LIKES
        if "example" in engine.protect_text(f"write to bob{dot}lee@example{dot}org today")
    ]
    assert missed == []


def test_a_sentence_ending_in_an_ideographic_full_stop_opens_no_window() -> None:
    """A dot-like character counts only between ASCII letters or digits: Japanese and
    Chinese text, full of ``。``, is not folded and scanned again for it."""
    from codemode.privacy.disguise import has_disguise

    assert not has_disguise("東京都に住んでいます。毎朝コードを書きます。明日は会議です。")
    assert not has_disguise("我用的是Python。版本很新。谢谢！")
    assert has_disguise("连络alice@example。com")


def test_a_dot_like_character_in_cjk_prose_folds_the_ascii_run_around_it_not_its_line() -> None:
    """Chinese and Japanese prose puts ``。`` after an ASCII word on many lines: each such
    character folds and scans again the run of ASCII it is in and a character each side
    (``benchmarks/privacy/bench_cjk_dots.py`` times it), not its whole line."""
    from codemode.privacy.disguise import folded_windows

    line = "我用的是Python3。Windows也可以，版本很新，请看文档里面的说明。谢谢你的帮助！"
    assert [w[2] for w in folded_windows(line)] == ["是Python3.Windows也可"]
    phone = "電話番号は、いつもの090。1234。5678です。よろしくお願いします。"
    assert [w[2] for w in folded_windows(phone)] == ["電話番号は、いつもの090.1234.5678です"]
    # Latin text keeps its whole window: names hold letters past ASCII.
    assert [w[2] for w in folded_windows("Herr Müller。Hans kommt")] == ["Herr Müller.Hans kommt"]


@pytest.mark.parametrize(
    "text",
    [
        "请联系连络alice@example。com谢谢，我们明天见面讨论这个问题。",
        "毎朝Python3。Windowsで書きます。連絡先はbob。lee@example。orgです。",
        "x" * 300 + "。ご連絡はalice@example・comまで",
    ],
)
def test_an_address_in_cjk_prose_becomes_one_token(engine: Privacy, text: str) -> None:
    out = engine.protect_text(text)
    assert len(TOKEN_RE.findall(out)) == 1 and "example" not in out, out
    assert "Python3。Windows" in out or "Python3" not in text


def test_the_windows_of_a_text_with_a_hit_on_every_line_are_scanned_together() -> None:
    """Each scan has a fixed cost (every detector's set-up): one per window made a text
    with a hit on every line cost up to 2.6 times its plain scan."""
    from codemode.privacy.detectors import builtin_detectors
    from codemode.privacy.disguise import DisguiseDetector
    from codemode.privacy.scan import Scanner

    class Counted(Scanner):
        scans = 0

        def spans_raw(self, text: str) -> list[tuple[int, int, str]]:
            Counted.scans += 1
            return super().spans_raw(text)

    line = "请联系alice@example。com或者打电话，我们明天见面。毎朝Python3。Windowsで書きます。\n"
    text = line * 5000
    found = list(DisguiseDetector(Counted(builtin_detectors(["EMAIL", "PHONE"]))).find(text))
    assert len(found) == 5000 and {e for _, _, e in found} == {"EMAIL"}
    assert all("alice@example。com" in text[s:e] for s, e, _ in found)
    assert Counted.scans < 20, Counted.scans


def test_windows_scanned_together_find_what_each_finds_alone() -> None:
    """No window reads another's words as context (``tel`` before a number) or runs into
    it: the batch finds exactly what one scan per window found."""
    from codemode.privacy.detectors import builtin_detectors
    from codemode.privacy.disguise import DisguiseDetector, folded_windows, unfold_span
    from codemode.privacy.scan import Scanner

    scanner = Scanner(builtin_detectors(["EMAIL", "PHONE", "CREDIT_CARD", "US_SSN"]))
    lines = [
        f"call {_wide('now')} tel",  # folded, its window ends with a phone word
        f"{_wide('4155550123')} ok",
        f"order no {_wide('4155550123')}",
        "連絡先はbob。lee@example。orgです",
        f"card {_wide(CARD)} and {EMAIL.replace('@', ZW + '@')}",
        "電話番号は090。1234。5678です",
        "我用的是Python3。Windows也可以",
    ]
    text = "\n".join(lines * 50)
    alone = set()
    for lo, hi, folded, kept in folded_windows(text):
        for start, end, entity in scanner.spans_raw(folded):
            s, e = unfold_span(text[lo:hi], kept, start, end)
            if text[lo:hi][s:e] != folded[start:end]:
                alone.add((lo + s, lo + e, entity))
    together = set(DisguiseDetector(scanner).find(text))
    assert together == alone and len(together) >= 150, sorted(together ^ alone)[:5]


def test_a_large_text_full_of_such_characters_costs_bounded_time(engine: Privacy) -> None:
    line = "Prix\u00a0: 1\u00a0000\u00a0€, \u65e5\u672c\uff08\u5168\uff09 a\u200cb \u2013 " * 8
    text = (line + "\n") * (1_000_000 // len(line))
    t0 = time.process_time()
    assert engine.protect_text(text) == text
    # Generous (the machine may be loaded); quadratic behaviour would take minutes.
    assert time.process_time() - t0 < 60


@pytest.mark.anyio
async def test_disguised_values_the_code_prints_reach_the_model_as_tokens(
    private_ws: PrivateWorkspace,
) -> None:
    values = {name: text for name, (_, text) in DISGUISED.items()}
    code = (
        f"values = {json.dumps(values, ensure_ascii=False)}\n"
        "for name, text in values.items():\n"
        "    print(name, '=', text)\n"
        "raise ValueError('bad card ' + values['full-width card'])\n"
    )
    workspace = Workspace.open(private_ws.base)
    async with Session.for_workspace(
        workspace, executor=SubprocessExecutor(memory_limit_mb=1024)
    ) as s:
        r = await s.run(code)
    seen = r.stdout + r.stderr + (f"{r.error}\n{r.error.traceback}" if r.error else "")
    leaked = [name for name, text in values.items() if text in seen]
    assert leaked == [], seen
    assert len(TOKEN_RE.findall(r.stdout)) == len(values), r.stdout


def test_the_fold_reads_every_scripts_digits_and_drops_every_format_character() -> None:
    import unicodedata

    from codemode.invisible import PLANES
    from codemode.privacy.disguise import fold

    for lo, hi in PLANES:
        for cp in range(lo, hi):
            c = chr(cp)
            kind = unicodedata.category(c)
            if kind == "Cf":
                assert fold(f"a{c}b") == ("ab", [0, 2]), hex(cp)
            elif kind == "Nd":
                assert fold(c)[0] == str(unicodedata.decimal(c)), hex(cp)
            elif kind == "Zs":
                assert fold(c)[0] == " ", hex(cp)
    assert fold("\u212a\uff20\ufe6b\u00b2")[0] == "K@@2"  # Kelvin sign, full-width, small, ²
