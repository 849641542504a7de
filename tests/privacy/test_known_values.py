"""Values the vault holds are tokenized wherever they come back, even where no detector
would recognise them out of context (``codemode.privacy.known``)."""

from __future__ import annotations

import json
import os
import random
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from codemode import Session, SubprocessExecutor
from codemode.context import CallContext
from codemode.privacy.config import PrivacyConfig
from codemode.privacy.engine import Privacy
from codemode.privacy.known import FIND_MAX, MIN_INSIDE, MIN_WHOLE, SEARCH_MAX, KnownValues
from codemode.privacy.layers import engine_for, reset_engines
from codemode.privacy.tokens import TOKEN_RE
from codemode.privacy.vault import Vault
from codemode.workspace import Workspace

from .conftest import PrivateWorkspace, make_private_workspace

ACCOUNT = "4402117755"
PHONE = "6505550123"
ACCOUNTS = {
    "enabled": True,
    "recognizers": [{"name": "ACCOUNT", "pattern": r"\b\d{10}\b", "context": ["account"]}],
}


def engine(config: PrivacyConfig | None = None) -> Privacy:
    return Privacy(config or PrivacyConfig(enabled=True), Vault(os.urandom(32)))


def protect(e: Privacy, value: Any) -> Any:
    out, _ = e.protect(value)
    return out


# -- the engine ----------------------------------------------------------------------


def test_a_value_found_by_its_field_name_is_tokenized_as_a_plain_field_elsewhere() -> None:
    e = engine()
    first = protect(e, {"phone": PHONE})
    token = first["phone"]
    assert TOKEN_RE.fullmatch(token)
    assert protect(e, {"order_id": PHONE}) == {"order_id": token}
    assert protect(e, [PHONE, "other"]) == [token, "other"]
    assert protect(e, PHONE) == token


def test_values_indexed_ahead_in_the_background_are_found_as_a_scan_finds_them() -> None:
    e = engine()
    rows = [{"phone": f"650555{i:04d}", "email": f"user{i}@example.com"} for i in range(1500)]
    out = protect(e, rows)
    assert e.known._size == 0  # nothing held when the scan looked
    e.index_soon()  # 3,000 new values: a thread indexes them
    indexer = e.known._indexer
    if indexer is not None:
        indexer.join()
    assert e.known._size == len(e.vault.held()) == 3000
    # Found again out of context, inside free text, with the tokens issued before.
    notes = [f"item 650555{i:04d} shipped" for i in range(0, 1500, 7)]
    assert protect(e, notes) == [f"item {out[i]['phone']} shipped" for i in range(0, 1500, 7)]
    e.index_soon()  # nothing new: no thread
    assert e.known._indexer is None


def test_a_held_value_inside_free_text_gets_the_same_token() -> None:
    e = engine()
    token = protect(e, {"phone": PHONE})["phone"]
    note = f"Reference {PHONE}, see ({PHONE}); ref:{PHONE}."
    assert protect(e, {"memo": note}) == {"memo": f"Reference {token}, see ({token}); ref:{token}."}


def test_a_held_value_inside_a_longer_number_or_word_is_left_alone() -> None:
    e = engine()
    protect(e, {"phone": PHONE})
    for text in (f"1{PHONE}", f"{PHONE}9", f"ID{PHONE}", f"order {PHONE}7 shipped"):
        assert protect(e, {"ref": text}) == {"ref": text}


def test_a_held_value_joined_to_a_longer_one_leaves_that_one_to_the_detectors() -> None:
    e = engine()
    protect(e, {"email": "bob@example.org"})
    protect(e, {"name": "Anna Lee"})
    for text, longer in (
        ("write to alice.bob@example.org today", "alice.bob@example.org"),
        ("or bob@example.org.uk", "bob@example.org.uk"),
    ):
        out = protect(e, {"note": text})["note"]
        (token,) = [m.group(0) for m in TOKEN_RE.finditer(out)]
        assert out == text.replace(longer, token)  # the whole address, one token
        assert e.restore({"to": token}, sink=True)[0] == {"to": longer}
    assert protect(e, {"note": "Anna Lee-Smith"}) == {"note": "Anna Lee-Smith"}


THREE_WORDS = {"name": "FULLNAME", "pattern": r"\b[A-Z][a-z]+ [A-Z][a-z]+ [A-Z][a-z]+\b"}


@pytest.mark.parametrize(
    ("held", "text", "longer"),
    [
        ("Anna Lee", "Meeting with Anna Lee Smith today", "Anna Lee Smith"),  # held inside
        ("Lee Smith", "met Kim Anna Lee Smith today", "Kim Anna Lee Smith"),  # partly overlapping
    ],
)
def test_a_held_value_inside_a_longer_detected_one_leaves_no_part_of_it_in_clear(
    held: str, text: str, longer: str
) -> None:
    """The detectors run on the whole text first; where a held value and a detected one
    overlap, one token covers both (named by the longer): never ``[NAME_1] Smith``. The
    stream scanner's ``spans`` resolves the same text the same way."""
    config = PrivacyConfig.model_validate({"enabled": True, "recognizers": [THREE_WORDS]})
    e = engine(config)
    held_token = e.vault.token("PERSON", held)  # as NER would have found it earlier
    out = protect(e, {"note": text})["note"]
    (token,) = [m.group(0) for m in TOKEN_RE.finditer(out)]
    assert out == text.replace(longer, token) and token != held_token
    assert e.restore({"v": token}, sink=True)[0] == {"v": longer}
    assert [text[sp.start : sp.end] for sp in e.spans(text)] == [longer]
    alone = protect(e, {"note": f"{held} said hi"})["note"]
    assert alone == f"{held_token} said hi"  # where nothing longer is detected: its token


def test_a_held_value_longer_than_what_a_detector_finds_in_it_keeps_its_token() -> None:
    e = engine(PrivacyConfig.model_validate({"enabled": True, "recognizers": [THREE_WORDS]}))
    held = "Anna Lee Smith Jones"
    token = e.vault.token("PERSON", held)
    assert protect(e, {"note": f"from {held} today"}) == {"note": f"from {token} today"}
    assert [(sp.start, sp.end) for sp in e.spans(f"from {held}")] == [(5, 5 + len(held))]


def test_a_held_value_of_a_few_digits_is_not_looked_for_again() -> None:
    pins = {"name": "PIN", "pattern": r"\b\d{4}\b", "context": ["pin"]}
    e = engine(PrivacyConfig.model_validate({"enabled": True, "recognizers": [pins]}))
    token = protect(e, {"note": "pin 2024"})["note"].split()[1]
    assert TOKEN_RE.fullmatch(token)
    assert protect(e, {"year": "2024"}) == {"year": "2024"}  # a year, not the PIN


def test_values_the_vault_purged_are_no_longer_looked_for() -> None:
    now = [1000.0]
    vault = Vault(os.urandom(32), ttl=60, clock=lambda: now[0])
    e = Privacy(PrivacyConfig(enabled=True), vault)
    token = protect(e, {"phone": PHONE})["phone"]
    assert protect(e, {"ref": f"see {PHONE}"}) == {"ref": f"see {token}"}
    now[0] += 120
    assert vault.purge() == 1
    assert PHONE not in vault.held()
    assert protect(e, {"ref": f"see {PHONE}"}) == {"ref": f"see {PHONE}"}


def test_the_detectors_still_win_where_they_find_a_longer_value() -> None:
    e = engine()
    token = protect(e, {"phone": PHONE})["phone"]
    out = protect(e, {"contact": "mail bob@example.org or call " + PHONE})
    assert PHONE not in json.dumps(out) and "bob@example.org" not in json.dumps(out)
    assert token in out["contact"]


def test_short_values_and_lower_case_words_are_never_searched_for_again() -> None:
    config = PrivacyConfig.model_validate(
        {"enabled": True, "deny": {"CODE": ["USA", "active", "Anna"], "CITY": ["Madrid"]}}
    )
    e = engine(config)
    protect(e, {"a": "USA", "b": "active", "c": "Anna", "d": "Madrid"})
    # The deny-list still finds its own values (it is a detector); the held-values net
    # must not add anything else: checked with a config without the deny-list.
    bare = Privacy(PrivacyConfig(enabled=True), e.vault)
    assert len("USA") < MIN_WHOLE and len("Anna") < MIN_INSIDE <= len("Madrid")
    out = protect(bare, {"x": "USA", "y": "active", "z": "Anna", "t": "Hanna in Madrid"})
    assert out["x"] == "USA" and out["y"] == "active"
    assert TOKEN_RE.fullmatch(out["z"])  # a whole field of 4+ characters
    assert out["t"].startswith("Hanna in [CODE_") or out["t"].startswith("Hanna in [CITY_")


def test_the_same_vault_issues_the_same_token_in_another_engine_only() -> None:
    vault = Vault(os.urandom(32))
    token = protect(Privacy(PrivacyConfig(enabled=True), vault), {"phone": PHONE})["phone"]
    again = Privacy(PrivacyConfig(enabled=True), vault)
    assert protect(again, {"ref": PHONE}) == {"ref": token}
    other = engine()
    assert protect(other, {"ref": PHONE}) == {"ref": PHONE}


def test_many_held_values_are_found_by_their_words_as_one_by_one() -> None:
    """Past ``FIND_MAX`` held values the search goes by an index of words: the same
    spans as searching each value, on random texts."""
    rnd = random.Random(7)
    e = engine()
    numbers = [str(rnd.randrange(10**9, 10**10)) for _ in range(FIND_MAX * 3)]
    protect(e, [{"phone": n} for n in numbers])
    assert len(e.vault.held()) >= FIND_MAX * 3
    for _ in range(50):
        words = [rnd.choice([*numbers[:20], "call", "x", "7", "(", ")", ", "]) for _ in range(30)]
        text = " ".join(words)
        out = protect(e, {"memo": text})["memo"]
        assert not any(n in out for n in numbers if n in text.split())
    assert protect(e, {"memo": "nothing here 12"}) == {"memo": "nothing here 12"}


def test_many_held_values_of_common_words_are_matched_text_by_text() -> None:
    """Phone numbers share their words (area codes, "555"): past ``SEARCH_MAX`` such
    values the texts are matched one by one; the same replacements as a plain search."""
    rnd = random.Random(3)
    e = engine()
    phones = [f"+1 {rnd.randrange(200, 210)}-555-{n:04d}" for n in range(SEARCH_MAX * 4)]
    for p in phones:
        e.vault.token("PHONE", p)
    texts = []
    for _ in range(40):
        picked = rnd.sample(phones, 3)
        texts.append(f"call {picked[0]} or ({picked[1]}), not 9{picked[2]} nor {picked[2]}1")
    texts.append(f"+1 555-555-{SEARCH_MAX * 8:04d} is not held")
    # The held-values net alone (the phone detector finds some of these by itself).
    whole, inside = e.known.find(texts)
    assert whole == {}
    for i, text in enumerate(texts):
        want = []
        for p in phones:
            for m in re.finditer(rf"(?<![^\W_]){re.escape(p)}(?![^\W_])", text):
                want.append((m.start(), m.end(), "PHONE"))
        assert inside.get(i, []) == sorted(want), text


@pytest.mark.parametrize("picked", [1, 3])
def test_held_values_of_many_words_are_found_by_a_window_of_their_words(picked: int) -> None:
    """Addresses and phones by three words in a row: the same spans as a plain search,
    with their words shuffled, glued or split across texts around them as decoys."""
    rnd = random.Random(picked)
    e = engine()
    held = [f"{n} Rue des Lilas {rnd.randrange(10)}, Lyon {rnd.randrange(100)}" for n in range(80)]
    held += [f"+33 {rnd.randrange(1, 3)} 55 {n:02d} {rnd.randrange(100):02d}" for n in range(80)]
    for v in held:
        e.vault.token("ADDRESS", v)
    texts = []
    for _ in range(30):
        chosen = rnd.sample(held, picked)
        decoy = rnd.choice(held)
        texts.append(
            f"see {' / '.join(chosen)}; not {decoy}9 nor {' '.join(reversed(decoy.split()))}"
        )
        texts.append(decoy[: len(decoy) // 2])
        texts.append(decoy[len(decoy) // 2 :])
    whole, inside = e.known.find(texts)
    assert whole == {}
    for i, text in enumerate(texts):
        want: list[tuple[int, int, str]] = []
        for v in sorted(held, key=len, reverse=True):
            for m in re.finditer(rf"(?<![^\W_]){re.escape(v)}(?![^\W_])", text):
                if not any(m.start() < b and a < m.end() for a, b, _ in want):
                    want.append((m.start(), m.end(), "ADDRESS"))
        assert inside.get(i, []) == sorted(want), text


@pytest.mark.parametrize("filler", [0, FIND_MAX * 2])
def test_held_values_are_found_next_to_non_ascii_characters_and_in_other_scripts(
    filler: int,
) -> None:
    e = engine()
    for n in range(filler):  # past FIND_MAX: the word index
        e.vault.token("ACCOUNT", f"ACC{n:08d}")
    names = {"Chloé Dubois": "", "Алексей Смирнов": "", "諸葛孔明先生": ""}
    for name in names:
        names[name] = e.vault.token("PERSON", name)
    text = "«Chloé Dubois» — Алексей Смирнов, 諸葛孔明先生; not Chloé Duboisé"
    out = protect(e, {"memo": text})["memo"]
    chloe, alexei, lee = names.values()
    assert out == f"«{chloe}» — {alexei}, {lee}; not Chloé Duboisé"


def test_action_redact_and_block_apply_to_held_values_too() -> None:
    vault = Vault(os.urandom(32))
    protect(Privacy(PrivacyConfig(enabled=True), vault), {"phone": PHONE})
    redact = Privacy(PrivacyConfig(enabled=True, action="redact"), vault)
    assert protect(redact, {"ref": PHONE}) == {"ref": "[PHONE]"}
    block = Privacy(PrivacyConfig(enabled=True, action="block"), vault)
    from codemode.errors import PrivacyBlocked

    with pytest.raises(PrivacyBlocked):
        block.protect({"ref": PHONE})


def test_tenants_of_one_workspace_never_see_each_others_held_values(tmp_path: Path) -> None:
    reset_engines()
    config = PrivacyConfig(enabled=True)
    ws = str(tmp_path)
    a = engine_for(config, CallContext(tenant="acme", workspace=ws))
    b = engine_for(config, CallContext(tenant="globex", workspace=ws))
    token = protect(a, {"phone": PHONE})["phone"]
    a.vault.flush()
    assert protect(a, {"ref": PHONE}) == {"ref": token}
    assert protect(b, {"ref": PHONE}) == {"ref": PHONE}
    # A later process of tenant acme (a fresh engine reading the persisted vault) knows it.
    reset_engines()
    later = engine_for(config, CallContext(tenant="acme", workspace=ws))
    assert protect(later, {"ref": PHONE}) == {"ref": token}
    reset_engines()


def test_the_log_net_applies_every_tenants_own_deny_list(tmp_path: Path) -> None:
    """One process, one log: a record quoting a tenant's customer name is redacted by that
    tenant's deny-list even when another tenant's engine was built first."""
    import logging

    reset_engines()
    first = PrivacyConfig.model_validate({"enabled": True, "deny": {"CUSTOMER": ["Initech"]}})
    second = PrivacyConfig.model_validate({"enabled": True, "deny": {"PROJECT": ["Bluebird"]}})
    engine_for(first, CallContext(tenant="acme", workspace=str(tmp_path / "a")))
    engine_for(second, CallContext(tenant="globex", workspace=str(tmp_path / "g")))
    record = logging.getLogger("codemode.test").makeRecord(
        "codemode.test", logging.WARNING, __file__, 1, "%s for %s", ("Initech", "Bluebird"), None
    )
    message = record.getMessage()
    assert "Initech" not in message and "Bluebird" not in message, message
    assert "[CUSTOMER]" in message and "[PROJECT]" in message
    reset_engines()


def test_the_log_net_redacts_a_tenants_value_that_holds_another_tenants(tmp_path: Path) -> None:
    """Each tenant's detectors look at the record as written: one tenant's redaction of a
    part must not hide from another the whole of its own value (the rest would leak)."""
    import logging

    reset_engines()
    first = PrivacyConfig.model_validate({"enabled": True, "deny": {"CUSTOMER": ["Initech"]}})
    second = PrivacyConfig.model_validate(
        {"enabled": True, "deny": {"PROJECT": ["Initech Bluebird Launch"]}}
    )
    engine_for(first, CallContext(tenant="acme", workspace=str(tmp_path / "a")))
    engine_for(second, CallContext(tenant="globex", workspace=str(tmp_path / "g")))
    record = logging.getLogger("codemode.test").makeRecord(
        "codemode.test",
        logging.WARNING,
        __file__,
        1,
        "plan: %s.",
        ("Initech Bluebird Launch",),
        None,
    )
    message = record.getMessage()
    assert "Bluebird" not in message and "Launch" not in message, message
    assert message.startswith("plan: [") and message.endswith("]."), message
    reset_engines()


def test_forgotten_engines_and_their_vaults_are_not_kept_by_the_log_net() -> None:
    """``reset_engines`` (a changed key file) forgets every engine: the log net must not
    keep the old ones, and the real values in their in-memory vaults, alive."""
    import gc
    import weakref

    reset_engines()
    config = PrivacyConfig.model_validate({"enabled": True, "vault": {"scope": "session"}})
    engine = engine_for(config, CallContext(client="mcp:old"))
    engine.protect_text("alice@example.com")
    gone = weakref.ref(engine)
    del engine
    reset_engines()
    gc.collect()
    assert gone() is None


def test_streamed_output_gets_held_values_tokenized_even_split_across_chunks() -> None:
    from codemode.privacy.stream import StreamScanner

    e = engine()
    token = protect(e, {"phone": PHONE})["phone"]
    stream = StreamScanner(e)
    out = stream.feed("ledger ref 65055") + stream.feed("50123 settled\n") + stream.close()
    assert out == f"ledger ref {token} settled\n"


# -- a real session ------------------------------------------------------------------


@asynccontextmanager
async def opened(ws: PrivateWorkspace) -> AsyncIterator[Session]:
    workspace = Workspace.open(ws.base)
    async with Session.for_workspace(
        workspace, executor=SubprocessExecutor(memory_limit_mb=1024)
    ) as s:
        yield s


@pytest.mark.anyio
async def test_a_value_tokenized_from_one_tool_comes_back_tokenized_from_another(
    tmp_path: Path,
) -> None:
    ws = make_private_workspace(tmp_path, privacy=ACCOUNTS)

    def accounts() -> list[dict[str, str]]:
        """Accounts by owner."""
        return [{"phone": PHONE, "owner": "Dana", "account": ACCOUNT}]

    def ledger() -> dict[str, Any]:
        """The ledger: the same numbers with no field name that says what they are."""
        return {
            "rows": [{"ref": ACCOUNT, "amount": 12.5}, {"ref": PHONE, "amount": 3}],
            "memo": f"Transfer {ACCOUNT} settled; callback {PHONE}.",
        }

    code = (
        "a = tools.local.accounts()[0]\n"
        "l = tools.local.ledger()\n"
        "print(a, l)\n"
        "assert l['rows'][0]['ref'] == a['account'] and l['rows'][1]['ref'] == a['phone']\n"
        "assert a['account'] in l['memo'] and a['phone'] in l['memo']\n"
        "tools.outbox.record(data={'ref': l['rows'][0]['ref'], 'memo': l['memo']})\n"
        "l"
    )
    async with opened(ws) as s:
        s.register_tool(accounts)
        s.register_tool(ledger)
        r = await s.run(code)
    assert r.is_ok, r.error
    shown = r.stdout + json.dumps(r.value) + r.stderr
    assert ACCOUNT not in shown and PHONE not in shown
    assert "[ACCOUNT_" in shown and "[PHONE_" in shown
    # The sink received the real values, restored from the tokens of the second tool.
    received = json.dumps(ws.received())
    assert ACCOUNT in received and PHONE in received
    assert TOKEN_RE.search(received) is None


@pytest.mark.anyio
async def test_a_held_value_printed_by_code_is_tokenized_in_the_run_output(
    tmp_path: Path,
) -> None:
    """The second net (the run's output) knows held values too: code that rebuilds a
    value from a tool's result in a form the detectors miss still prints a token."""
    ws = make_private_workspace(tmp_path, privacy=ACCOUNTS)

    def accounts() -> list[dict[str, str]]:
        """Accounts by owner."""
        return [{"owner": "Dana", "account": ACCOUNT}]

    async with opened(ws) as s:
        s.register_tool(accounts)
        r = await s.run(f"tools.local.accounts()\nprint('ref', {ACCOUNT!r})")
    assert r.is_ok, r.error
    assert ACCOUNT not in r.stdout and "[ACCOUNT_" in r.stdout


@pytest.mark.anyio
async def test_a_name_found_by_its_field_never_reaches_the_mcp_client_from_a_note(
    tmp_path: Path,
) -> None:
    """``codemode serve``, every byte to the client captured: a name tokenized under
    ``"name"`` in the CRM's records comes back inside the CRM's free-text note (where no
    context word marks it), and from code that spells it out."""
    from .test_serve_privacy import captured_serve, text_of

    names = {
        "enabled": True,
        "recognizers": [
            {"name": "PERSON", "pattern": r"[A-Z][a-z]+ [A-Z][a-z]+", "context": ["name"]}
        ],
    }
    ws = make_private_workspace(tmp_path, privacy=names)
    code = (
        "cs = tools.crm.list_customers()\n"
        "print([c['name'] for c in cs])\n"
        "print(tools.crm.customer_note(customer_id=1001))\n"
        "print('Dear ' + 'Alice' + ' ' + 'Martin')\n"
        "tools.outbox.send(to=cs[0]['email'], subject='Hello ' + cs[0]['name'], body='-')\n"
    )
    capture = tmp_path / "to_client.jsonl"
    async with captured_serve(ws, capture) as client:
        run = await client.call_tool("run_code", {"code": code})
    printed = text_of(run)
    assert not run.is_error, printed
    assert printed.count("[PERSON_") >= 3, printed
    assert "Alice Martin" not in capture.read_text() and "Alice Martin" not in printed
    assert "Hello Alice Martin" in json.dumps(ws.received())


def test_binary_holding_a_short_restored_value_by_chance_is_not_withheld() -> None:
    from codemode.errors import PrivacyBlocked
    from codemode.privacy.echo import withhold_echoed_binary

    image = b"\x89PNG\r\n\x1a\n\x00\xffUS\x00\xfe" + os.urandom(64)
    withhold_echoed_binary({"png": image}, {"US": "[COUNTRY_ab]"}, where="")  # passes
    with pytest.raises(PrivacyBlocked):
        withhold_echoed_binary({"png": image + PHONE.encode()}, {PHONE: "[PHONE_ab]"}, where="")


def test_expired_values_are_purged_as_the_engine_scans_with_no_call_to_purge() -> None:
    now = [1000.0]
    vault = Vault(os.urandom(32), ttl=60, clock=lambda: now[0])
    e = Privacy(PrivacyConfig(enabled=True), vault)
    token = protect(e, {"phone": PHONE})["phone"]
    now[0] += 61  # expired, and a purge interval (the TTL, when under an hour) passed
    assert protect(e, {"ref": f"see {PHONE}"}) == {"ref": f"see {PHONE}"}
    assert PHONE not in vault.held() and vault.value(token) is None


class _PurgedWhileRead(dict[str, str]):
    """A held map as a scan in one thread may see it while another thread purges: its
    keys were copied before the value behind one of them was taken out."""

    def __iter__(self) -> Any:
        return iter([*super().__iter__(), "gone.value@example.org"])

    def __len__(self) -> int:
        return super().__len__() + 1


def test_a_value_purged_while_the_index_grows_is_skipped() -> None:
    held = _PurgedWhileRead({"kept.value@example.org": "[EMAIL_abcdefghij]"})
    whole, _ = KnownValues(held).find(["kept.value@example.org", "gone.value@example.org"])
    assert whole == {0: "EMAIL"}


def test_a_purge_never_shows_other_threads_a_held_map_without_its_live_values() -> None:
    """Readers in other threads hold the vault's ``held`` dict while a purge runs: every
    state it passes through must still hold the values that live (it was cleared, then
    filled again: a scan between the two found no held value, and let it through)."""
    now = [1000.0]
    vault = Vault(os.urandom(32), ttl=60, clock=lambda: now[0])
    vault.token("PERSON", "Old Value Expired")
    now[0] += 40
    live = vault.token("PERSON", "Anna Lee Live")
    now[0] += 30  # the first has expired, the second lives

    states: list[bool] = []

    class Watched(dict[str, str]):
        """The held map, noting after each change whether the live value is in it."""

        def _note(self) -> None:
            states.append(self.get("Anna Lee Live") == live)

        def clear(self) -> None:
            super().clear()
            self._note()

        def update(self, *a: Any, **k: Any) -> None:
            super().update(*a, **k)
            self._note()

        def __setitem__(self, key: str, value: str) -> None:
            super().__setitem__(key, value)
            self._note()

        def __delitem__(self, key: str) -> None:
            super().__delitem__(key)
            self._note()

        def pop(self, *a: Any) -> Any:
            out = super().pop(*a)
            self._note()
            return out

    vault._by_value = Watched(vault._by_value)
    assert vault.purge() == 1
    assert states and all(states)
    assert dict(vault.held()) == {"Anna Lee Live": live}
