"""Restoring tokens in arguments: at any depth, only for sinks, forged ones refused."""

from __future__ import annotations

import pytest

from codemode.errors import ToolArgumentError
from codemode.privacy.config import PrivacyConfig
from codemode.privacy.engine import Privacy
from codemode.privacy.vault import Vault


def engine(**options: object) -> Privacy:
    return Privacy(PrivacyConfig(enabled=True, **options), Vault(b"k" * 32))


def test_tokens_are_restored_at_any_depth_in_keys_and_inside_longer_strings() -> None:
    p = engine()
    data, _ = p.protect({"email": "alice@example.com", "phone": "+44 20 7946 0958"})
    e, ph = data["email"], data["phone"]
    args = {"to": [e], "body": f"Dear {e}, we call {ph}.", e: {"nested": (ph,)}}
    real, restored = p.restore(args, sink=True)
    assert real == {
        "to": ["alice@example.com"],
        "body": "Dear alice@example.com, we call +44 20 7946 0958.",
        "alice@example.com": {"nested": ["+44 20 7946 0958"]},
    }
    assert restored == {"alice@example.com": e, "+44 20 7946 0958": ph}
    assert args["to"] == [e]  # the caller's arguments are not modified


def test_a_non_sink_gets_the_tokens_and_a_forged_token_is_refused_everywhere() -> None:
    p = engine()
    token = p.protect_text("alice@example.com")
    assert p.restore({"to": token}, sink=False) == ({"to": token}, {})
    for sink in (True, False):
        with pytest.raises(ToolArgumentError, match=r"unknown token \[EMAIL_aaaaaaaaaa\]"):
            p.restore({"to": "[EMAIL_aaaaaaaaaa]"}, sink=sink, where="mail.send")


def test_unknown_tokens_pass_as_text_when_policy_says_so() -> None:
    p = engine(unknown_tokens="pass")
    assert p.restore({"to": "[EMAIL_aaaaaaaaaa]"}, sink=True)[0] == {"to": "[EMAIL_aaaaaaaaaa]"}


def test_values_restored_into_a_sink_are_replaced_in_its_result_even_undetected() -> None:
    p = engine()
    token = p.vault.token("CUSTOMER", "Globex")
    out, _ = p.protect({"echo": "stored Globex"}, literal={"Globex": token})
    assert out == {"echo": f"stored {token}"}


def test_a_text_repeated_in_many_rows_is_tokenized_in_every_row_with_its_context() -> None:
    p = engine()
    note = "Customer asked us to call back; write to alice@example.com or ring the desk."
    bare = "4155550132 is the number to use for the callback after the demo, thank you."
    rows = [{"id": i, "notes": note, "phone": bare, "order_ref": bare} for i in range(50)]
    out, report = p.protect(rows)
    email = p.vault.token("EMAIL", "alice@example.com")
    phone = p.vault.token("PHONE", "4155550132")
    for row in out:
        assert row["notes"] == note.replace("alice@example.com", email)
        # The key before a text is its context: a phone under "phone", an id elsewhere.
        assert row["phone"].startswith(phone) and row["order_ref"] == bare
    assert report.found == {"EMAIL": 50, "PHONE": 50}
    assert rows[0]["notes"] == note  # the tool's own object is never modified


def test_a_large_result_is_tokenized_as_each_of_its_strings_would_be_alone() -> None:
    p = engine()
    note = "Call +44 20 7946 0958 or write to bob@example.com, " + "then wait. " * 5
    rows = [
        {"notes": note, "email": f"a{i}@example.com", "ids": ["x", f"b{i}@example.org"]}
        for i in range(50)
    ]
    rows.append({"alice@example.com": "two: c@example.com and +44 20 7946 0958"})
    out, report = p.protect(rows)
    alone = [{k: p.protect_text(v) for k, v in r.items() if isinstance(v, str)} for r in rows]
    assert [{k: v for k, v in r.items() if k != "ids"} for r in out[:50]] == alone[:50]
    assert [r["ids"] for r in out[:50]] == [
        ["x", p.protect_text(f"b{i}@example.org")] for i in range(50)
    ]
    assert out[50] == {p.protect_text("alice@example.com"): alone[50]["alice@example.com"]}
    assert report.found == {"EMAIL": 50 * 3 + 2, "PHONE": 50 + 1}
    assert rows[0]["email"] == "a0@example.com"  # the caller's value is not modified


def test_callers_without_a_session_do_not_push_out_a_session_s_vault() -> None:
    """Each caller without a session has a vault of its own (``context.ephemeral_client``);
    a burst of them must not evict the engine, hence the in-memory vault, of a session
    still in use: its tokens would stop restoring."""
    from codemode.context import CallContext, ephemeral_client
    from codemode.privacy.layers import MAX_SESSION_ENGINES, engine_for

    config = PrivacyConfig(enabled=True, vault={"scope": "session"})
    live = CallContext(client="mcp:live-session")
    token = engine_for(config, live).protect_text("alice@example.com")
    for _ in range(MAX_SESSION_ENGINES + 1):
        engine_for(config, CallContext(client=ephemeral_client()))
    real, _ = engine_for(config, live).restore({"to": token}, sink=True)
    assert real == {"to": "alice@example.com"}


def test_a_scan_leaves_the_garbage_collector_as_it_found_it_even_when_it_refuses() -> None:
    import gc

    from codemode.errors import PrivacyBlocked

    blocking = engine(action="block")
    assert gc.isenabled()
    try:
        with pytest.raises(PrivacyBlocked):
            blocking.protect(["alice@example.com"])
        assert gc.isenabled()
        gc.disable()  # (the application's choice: a scan does not turn it back on)
        assert engine().protect("alice@example.com")[0].startswith("[EMAIL_")
        assert not gc.isenabled()
    finally:
        gc.enable()
