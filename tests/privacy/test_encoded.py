"""Personal data that arrives encoded (base64, hex, URL, JSON/\\x/HTML escapes, full-width
forms) is found by decoding bounded candidates, and the whole encoded span becomes one
token."""

from __future__ import annotations

import base64
import importlib.util
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus

import pytest

from codemode import Session, SubprocessExecutor
from codemode.privacy.config import PrivacyConfig
from codemode.privacy.encoded import decode_escapes
from codemode.privacy.engine import Privacy
from codemode.privacy.stream import StreamScanner
from codemode.privacy.tokens import TOKEN_RE
from codemode.privacy.vault import Vault
from codemode.workspace import Workspace

from .conftest import CUSTOMERS, SERVERS, PrivateWorkspace


def _server_encoder() -> Callable[[dict[str, Any]], dict[str, str]]:
    """The CRM test server's own encoder, loaded by path: another ``crm_server`` module
    (the token benchmark's) shares its name."""
    path = Path(SERVERS) / "crm_server.py"
    spec = importlib.util.spec_from_file_location("crm_fixture_server", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    encoder: Callable[[dict[str, Any]], dict[str, str]] = module._encoded
    return encoder


_encoded = _server_encoder()

EMAIL = "alice.martin@example.com"
PHONE = "+44 20 7946 0958"
CARD = "4111 1111 1111 1111"


@pytest.fixture(scope="module")
def engine() -> Privacy:
    return Privacy(PrivacyConfig(enabled=True), Vault(b"k" * 32))


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


ENCODED = {
    "base64": b64(f"contact: {EMAIL}"),
    "base64 without padding": b64(f"to {EMAIL}!").rstrip("="),
    "base64url of JSON": base64.urlsafe_b64encode(
        json.dumps({"e": EMAIL, "p": PHONE, "note": "ünïcode ✓"}).encode()
    ).decode(),
    "hex": EMAIL.encode().hex(),
    "hex in capitals": EMAIL.encode().hex().upper(),
    "hex of a card": CARD.replace(" ", "").encode().hex(),
    "URL-encoded": quote(EMAIL, safe=""),
    "form-encoded phone": quote_plus(PHONE),
    "percent-encoded every character": "".join(f"%{b:02X}" for b in EMAIL.encode()),
    "JSON \\u escape": json.dumps(EMAIL).replace("@", "\\u0040").strip('"'),
    "JSON escapes everywhere": "".join(f"\\u{ord(c):04x}" for c in EMAIL),
    "\\x escape": EMAIL.replace("@", "\\x40"),
    "HTML decimal entity": EMAIL.replace("@", "&#64;"),
    "HTML hex entity": EMAIL.replace("@", "&#x40;").replace(".", "&#X2e;"),
    "base64 of URL-encoded": b64(f"to={quote(EMAIL)}"),
    "hex of base64": b64(EMAIL).encode().hex(),
    "full-width forms": EMAIL.replace("@", "\uff20").replace(".", "\uff0e"),
}


@pytest.mark.parametrize("name", list(ENCODED))
def test_an_encoded_value_becomes_one_token_for_the_whole_span(engine: Privacy, name: str) -> None:
    encoded = ENCODED[name]
    text = f'{{"id": 7, "blob": "{encoded}", "status": "ok"}}'
    out = engine.protect_text(text)
    token = engine.vault.token(
        "CREDIT_CARD" if "card" in name else "PHONE" if "phone" in name else "EMAIL", encoded
    )
    assert out == f'{{"id": 7, "blob": "{token}", "status": "ok"}}', out


def test_the_token_of_an_encoded_span_restores_to_the_exact_encoded_text(
    engine: Privacy,
) -> None:
    blob = ENCODED["base64"]
    protected = engine.protect_text(f"attachment {blob} end")
    token = TOKEN_RE.search(protected)
    assert token is not None
    restored, _ = engine.restore({"body": token.group(0)}, sink=True)
    assert restored == {"body": blob}


def test_base64_wrapped_over_lines_is_decoded_as_one_block(engine: Privacy) -> None:
    # MIME wraps at 76 characters; here the e-mail straddles the line break.
    body = f"Please reply to our valued customer by mail at {EMAIL} soon.".encode()
    wrapped = base64.encodebytes(body).decode()
    assert wrapped.count("\n") == 2
    out = engine.protect_text(f"mail:\n{wrapped}done\n")
    assert out.startswith("mail:\n[EMAIL_") and out.endswith("\ndone\n"), out
    assert not any(line in out for line in wrapped.split())
    # Streamed line by line, the block is held until its last line is in.
    s = StreamScanner(engine)
    streamed = "".join(s.feed(line) for line in f"mail:\n{wrapped}done\n".splitlines(True))
    assert streamed + s.close() == out


NOT_PERSONAL = [
    "123e4567e89b12d3a456426614174000",  # a UUID without dashes
    "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",  # sha-256
    "SomeVeryLongIdentifierName_with_parts",
    "/api/v1/customers/export/latest",
    b64("this is plain text with nothing personal in it"),
    base64.b64encode(bytes(range(256))).decode(),  # binary data
    "50% of 100%, 20%OFF, %zz",
    "C:\\\\Users\\\\x41\\\\docs and \\\\u00e9t\\u00e9",
    "&#169; 2024 ACME &amp; Co",
    "12345678901234567890123456789012",  # a long numeric id
    "ORD-2024-000123456789 SKU-AB12CD34EF56",
    # Japanese text with full-width punctuation and letters, nothing personal.
    "\u65e5\u672c\u8a9e\uff08\u5168\u89d2\uff09\uff01 \uff21\uff22\uff23",
]


@pytest.mark.parametrize("text", NOT_PERSONAL)
def test_encoded_looking_text_without_personal_data_is_left_alone(
    engine: Privacy, text: str
) -> None:
    assert engine.protect_text(text) == text


def test_decoding_can_be_turned_off(engine: Privacy) -> None:
    off = Privacy(PrivacyConfig(enabled=True, decode=False), Vault(b"k" * 32))
    assert off.protect_text(ENCODED["base64"]) == ENCODED["base64"]
    assert engine.protect_text(ENCODED["base64"]) != ENCODED["base64"]


def test_escapes_decode_to_the_characters_they_stand_for() -> None:
    assert decode_escapes("a\\u0040b\\x2ec &#64;&#x41; \\ud83d\\ude00") == "a@b.c @A 😀"


def test_a_large_result_full_of_encoding_lookalikes_costs_bounded_time(engine: Privacy) -> None:
    # 1 MB of base64-alphabet runs, %-escapes and \\u escapes: each run is decoded once at
    # most and decoded text is never longer than the run, so this stays linear.
    chunk = "QUJD" * 40 + " %41%42 \\u0041\\u0042 " + "deadbeef" * 8 + "\n"
    text = chunk * (1_000_000 // len(chunk))
    t0 = time.process_time()
    assert engine.protect_text(text) == text
    # Generous (the machine may be loaded); quadratic behaviour would take minutes.
    assert time.process_time() - t0 < 60


@pytest.mark.anyio
async def test_encoded_contact_details_from_a_tool_show_as_tokens_and_a_sink_gets_the_blob(
    private_ws: PrivateWorkspace,
) -> None:
    code = (
        "x = tools.crm.export_customer(customer_id=1001)\n"
        "print(x)\n"
        "tools.outbox.send(to='ops@example.net', subject='export', body=x['base64'])\n"
        "x"
    )
    workspace = Workspace.open(private_ws.base)
    async with Session.for_workspace(
        workspace, executor=SubprocessExecutor(memory_limit_mb=1024)
    ) as s:
        r = await s.run(code)
    assert r.is_ok, r.error
    c = CUSTOMERS[0]
    encoded = _encoded(c)
    seen = r.stdout + json.dumps(r.value)
    leaked = [k for k, v in encoded.items() if any(line in seen for line in v.split())]
    assert leaked == [] and c["email"] not in seen, seen
    assert len(TOKEN_RE.findall(r.stdout)) >= len(encoded)
    # The outbox (a sink) received the base64 blob itself, as the CRM returned it.
    assert private_ws.received()[-1]["body"] == encoded["base64"]


def test_a_long_wrapped_block_streamed_in_chunks_leaks_no_value_and_costs_linear_time(
    engine: Privacy,
) -> None:
    # 300 KB of base64 wrapped at 76 (CRLF, as in mail),
    # with e-mails all along it, some across line breaks, printed in ~4 KB chunks.
    filler = "Lorem ipsum dolor sit amet, consectetur adipiscing elit. " * 3
    body = "".join(f"{filler}write to user{i}@example.com today. " for i in range(1200))
    wrapped = base64.encodebytes(body.encode()).decode().replace("\n", "\r\n")
    text = f"attachment follows\r\n{wrapped}end of attachment\r\n"
    t0 = time.process_time()
    outs = []
    for size in (4095, 61):  # some chunks end between a "\r" and its "\n"
        s = StreamScanner(engine)
        outs.append("".join(s.feed(text[i : i + size]) for i in range(0, len(text), size)))
        outs[-1] += s.close()
    assert time.process_time() - t0 < 120  # generous: quadratic rescans would take far more
    out = outs[0]
    assert outs[1] == out
    assert out == engine.protect_text(text)  # the block is one token, as in a result
    assert out.startswith("attachment follows\r\n") and out.endswith("end of attachment\r\n")
    decodable = "".join(line for line in out.splitlines()[1:-1] if TOKEN_RE.search(line) is None)
    leaked = base64.b64decode(decodable + "=" * (-len(decodable) % 4), validate=False)
    assert b"@example.com" not in leaked
