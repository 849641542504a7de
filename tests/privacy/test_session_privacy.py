"""Privacy on a workspace's sessions (the SDK path), with the real test MCP servers."""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from codemode import Session, SubprocessExecutor
from codemode.privacy.tokens import TOKEN_RE
from codemode.tools.registry import NextCall, ToolCall
from codemode.workspace import Workspace

from .conftest import CUSTOMERS, REAL_VALUES, PrivateWorkspace, make_private_workspace

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def opened(ws: PrivateWorkspace, **sections: Any) -> AsyncIterator[Session]:
    workspace = Workspace.open(ws.base, **sections)
    async with Session.for_workspace(
        workspace, executor=SubprocessExecutor(memory_limit_mb=1024)
    ) as s:
        yield s


def leaks(text: str) -> list[str]:
    return [v for v in REAL_VALUES if v in text]


async def test_a_non_sink_filesystem_server_receives_and_writes_tokens(
    private_ws: PrivateWorkspace,
) -> None:
    if not (private_ws.base / "mcp.json").read_text().count('"files"'):
        pytest.skip("the filesystem server is not installed (.ci/install-test-servers.sh)")
    files = private_ws.files.resolve()
    code = (
        "c = tools.crm.list_customers()[0]\n"
        f"tools.files.write_file(path={str(files)!r} + '/' + c['email'] + '.txt',"
        " content='card ' + c['card'])\n"
        f"print(sorted(tools.files.list_directory(path={str(files)!r})['content'].split()))"
    )
    async with opened(private_ws) as s:
        r = await s.run(code)
    assert r.is_ok, r.error
    written = list(files.iterdir())
    assert len(written) == 1
    assert TOKEN_RE.search(written[0].name) and TOKEN_RE.search(written[0].read_text())
    assert leaks(written[0].name + written[0].read_text()) == []


async def test_a_layer_outside_privacy_sees_only_tokens_even_for_a_sink(
    private_ws: PrivateWorkspace,
) -> None:
    seen: list[str] = []

    async def audit(call: ToolCall, call_next: NextCall) -> Any:
        seen.append(json.dumps(call.args))
        result = await call_next(call)
        seen.append(json.dumps(call.args) + json.dumps(result, default=str))
        return result

    code = (
        "cs = tools.crm.list_customers()\n"
        "for c in cs: tools.outbox.record(data=c)\n"
        "tools.crm.find_customer(email=cs[2]['email'])['id']"
    )
    async with opened(private_ws) as s:
        s.tools.use(audit, stage="audit")
        r = await s.run(code)
    assert r.is_ok and r.value == 1003, r.error
    assert leaks("".join(seen)) == []
    assert TOKEN_RE.search("".join(seen))
    assert len(private_ws.received()) == len(CUSTOMERS)
    assert leaks(json.dumps(private_ws.received())) != []


async def test_the_worker_holds_no_real_value_before_or_after_a_reset(
    private_ws: PrivateWorkspace,
) -> None:
    probe = (
        "import gc\n"
        "strs = [o for o in gc.get_objects() if isinstance(o, (list, dict))]\n"
        "repr(strs)[:10_000_000]"
    )
    async with opened(private_ws) as s:
        r = await s.run(
            "cs = tools.crm.list_customers()\nnotes = tools.crm.customer_note(customer_id=1002)"
        )
        assert r.is_ok, r.error
        inside = await s.run(probe)
        await s.reset()
        after = await s.run("'cs' in globals()")
    assert leaks(str(inside.value)) == []
    assert after.value is False


async def test_redact_replaces_values_for_good_and_block_withholds_them(tmp_path: Path) -> None:
    ws = make_private_workspace(tmp_path / "r", privacy={"enabled": True, "action": "redact"})
    async with opened(ws) as s:
        r = await s.run("c = tools.crm.list_customers()[0]\nprint(c['email'], c['ssn'])")
    assert r.stdout.strip() == "[EMAIL] [US_SSN]"
    ws = make_private_workspace(tmp_path / "b", privacy={"enabled": True, "action": "block"})
    async with opened(ws) as s:
        tool = await s.run("tools.crm.list_customers()")
        printed = await s.run("print('write to bob@example.org')")
    assert tool.error is not None and tool.error.type == "PrivacyBlocked"
    assert leaks(str(tool)) == []
    assert printed.error is not None and printed.error.type == "PrivacyBlocked"
    assert "bob@example.org" not in str(printed)


async def test_an_excluded_type_stays_real_so_code_can_compute_on_it(tmp_path: Path) -> None:
    ws = make_private_workspace(tmp_path, privacy={"enabled": True, "exclude": ["EMAIL"]})
    async with opened(ws) as s:
        r = await s.run(
            "cs = tools.crm.list_customers()\n"
            "print(sorted(c['email'].split('@')[1] for c in cs), cs[0]['ssn'])"
        )
    assert "example.com" in r.stdout and "123-45-6789" not in r.stdout


async def test_a_server_whose_results_are_not_scanned_passes_them_through(tmp_path: Path) -> None:
    ws = make_private_workspace(
        tmp_path, privacy={"enabled": True, "servers": {"crm": {"scan": False}}}
    )
    async with opened(ws) as s:
        r = await s.run(
            "len([c['email'] for c in tools.crm.list_customers() if '@' in c['email']])"
        )
    assert r.value == 3  # the code computed on real values; only its output is scanned


async def test_a_sink_whose_results_are_not_scanned_never_echoes_a_restored_value(
    tmp_path: Path,
) -> None:
    """Another server's protected value, restored into an unscanned sink's arguments, must
    not come back real: spelled out letter by letter, the run's output net cannot see it."""
    ws = make_private_workspace(
        tmp_path, privacy={"enabled": True, "servers": {"outbox": {"scan": False}}}
    )
    async with opened(ws) as s:
        r = await s.run(
            "c = tools.crm.list_customers()[0]\n"
            "back = tools.outbox.record(data={'to': c['email'], 'card': c['card']})\n"
            "print(' '.join(back['stored']['to']), '|', ' '.join(back['stored']['card']))"
        )
    assert r.is_ok, r.error
    assert leaks(r.stdout.replace(" ", "")) == []
    assert leaks(json.dumps(ws.received())) != []  # the sink did get the real values


async def test_a_sink_that_echoes_a_restored_value_into_binary_data_is_withheld(
    private_ws: PrivateWorkspace,
) -> None:
    """No token fits into an image: a restored value found in a sink's binary result
    withholds the result instead of handing the real value to the sandbox."""

    def render(text: str) -> bytes:
        """Render a label (binary, as an image would be)."""
        wide = text.encode("utf-16-le") if text.startswith("u16:") else text.encode()
        return b"\x89PNG\r\n\x1a\n\x00\x00" + wide + b"\x00IEND"

    code = (
        "c = tools.crm.list_customers()[0]\n"
        "try:\n"
        "    png = tools.local.render(text=c['email'])\n"
        "    print(' '.join(png.data.decode('latin-1')))\n"
        "except ToolError as e:\n"
        "    print(type(e).__name__, e)\n"
        "try:\n"
        "    wide = tools.local.render(text='u16:' + c['email'])\n"
        "    print(' '.join(wide.data.decode('latin-1').replace(chr(0), '')))\n"
        "except ToolError as e:\n"
        "    print(type(e).__name__, e)\n"
        "print(' '.join(tools.local.render(text='hello').data[10:15].decode()))"
    )
    async with opened(private_ws) as s:
        s.register_tool(render)
        r = await s.run(code)
    assert r.is_ok, r.error
    assert leaks(r.stdout.replace(" ", "")) == []
    assert r.stdout.count("PrivacyBlocked") == 2 and "restored" in r.stdout
    assert "h e l l o" in r.stdout  # binary without a restored value still passes


async def test_a_server_marked_not_a_sink_never_receives_real_values(tmp_path: Path) -> None:
    ws = make_private_workspace(
        tmp_path, privacy={"enabled": True, "servers": {"outbox": {"sink": False}}}
    )
    async with opened(ws) as s:
        r = await s.run(
            "c = tools.crm.list_customers()[0]\n"
            "tools.outbox.send(to=c['email'], subject='s', body=c['phone'])"
        )
    assert r.is_ok, r.error
    got = json.dumps(ws.received())
    assert leaks(got) == [] and len(TOKEN_RE.findall(got)) == 2


async def test_session_scoped_tokens_do_not_resolve_in_another_session(tmp_path: Path) -> None:
    ws = make_private_workspace(tmp_path, privacy={"enabled": True, "vault": {"scope": "session"}})
    async with opened(ws) as s:
        token = (await s.run("tools.crm.list_customers()[0]['email']")).value
    async with opened(ws) as s:
        r = await s.run(f"tools.outbox.send(to={token!r}, subject='s', body='b')")
    assert r.error is not None and "unknown token" in r.error.message
    assert not (ws.base / "privacy").exists()  # nothing persisted


async def test_log_records_pass_through_the_net(private_ws: PrivateWorkspace) -> None:
    async with opened(private_ws) as s:
        await s.run("1")
    record = logging.getLogger("codemode.test").makeRecord(
        "codemode.test",
        logging.WARNING,
        __file__,
        1,
        "mail %s key %s",
        ("alice@example.com", "sk-abcdefghijklmnopqrstuv"),
        None,
    )
    assert "alice@example.com" not in record.getMessage()
    assert "sk-abcdefghijklmnopqrstuv" not in record.getMessage()
    assert "[EMAIL]" in record.getMessage()


async def test_the_sandbox_can_reach_neither_the_vault_nor_its_key(
    private_ws: PrivateWorkspace, private_home: Path
) -> None:
    from codemode.execution import executor_by_name

    workspace = Workspace.open(private_ws.base)
    session = Session.for_workspace(
        workspace, executor=executor_by_name("sandbox", workspace=workspace)
    )
    async with session as s:
        r = await s.run("tools.crm.list_customers()[0]['email']")
        assert r.is_ok, r.error
        vault = private_ws.base / "privacy"
        keys = list(private_home.rglob("*.key"))
        assert vault.exists() and keys
        probe = (
            "import os\n"
            "def reach(p):\n"
            "    try:\n"
            "        return os.listdir(p) if os.path.isdir(p) else open(p, 'rb').read(1)\n"
            "    except OSError as e:\n"
            "        return type(e).__name__\n"
            f"[reach(p) for p in {[str(vault), str(keys[0]), '/workspace/../privacy']!r}]"
            " + [sorted(os.listdir('/workspace'))]"
        )
        r = await s.run(probe)
    assert r.is_ok, r.error
    *paths, listing = r.value
    assert all(isinstance(p, str) and p.endswith("Error") for p in paths), r.value
    assert "privacy" not in listing


async def test_scrub_gives_layers_outside_privacy_tokens_for_values_the_code_found_itself(
    private_ws: PrivateWorkspace,
) -> None:
    from codemode.privacy import scrub

    written: list[str] = []

    async def audit(call: ToolCall, call_next: NextCall) -> Any:
        written.append(json.dumps(scrub(call.args, call.context)))
        return await call_next(call)

    async with opened(private_ws) as s:
        s.tools.use(audit, stage="audit")
        r = await s.run("tools.outbox.send(to='zoe@example.org', subject='hi', body='x')")
    assert r.is_ok, r.error
    assert "zoe@example.org" not in written[0] and TOKEN_RE.search(written[0])
    assert private_ws.received()[0]["to"] == "zoe@example.org"


async def test_streamed_output_of_a_run_gets_a_scanner_when_privacy_is_on(
    private_ws: PrivateWorkspace, tmp_path: Path
) -> None:
    from codemode.privacy import stream_scanner

    async with opened(private_ws) as s:
        await s.run("1")
        scanner = stream_scanner(s.context)
    assert scanner is not None
    out = scanner.feed("mail alice@ex") + scanner.feed("ample.com now") + scanner.close()
    assert out.startswith("mail [EMAIL_") and "alice" not in out
    off = make_private_workspace(tmp_path / "off", privacy=False)
    async with opened(off) as s:
        await s.run("1")
        assert stream_scanner(s.context) is None


async def test_a_schema_error_about_a_restored_value_shows_its_token(
    private_ws: PrivateWorkspace,
) -> None:
    code = (
        "c = tools.crm.list_customers()[0]\n"
        "try:\n"
        "    tools.crm.find_customer(email=c['phone'])\n"
        "except Exception as exc:\n"
        "    print(type(exc).__name__, exc)\n"
    )
    async with opened(private_ws) as s:
        r = await s.run(code)
    # The server's own check says no (the host leaves ``pattern`` to the server: a
    # server's regex must not run on the host); its message quotes the restored value.
    assert r.stdout.startswith("ToolError crm.find_customer"), r.stdout
    assert "should match pattern" in r.stdout
    assert CUSTOMERS[0]["phone"] not in r.stdout and "[PHONE_" in r.stdout


async def test_a_policy_rule_on_a_recipients_domain_sees_the_address_behind_its_token(
    private_ws: PrivateWorkspace,
) -> None:
    """The code only ever holds tokens for the customers' e-mails. A rule denying
    ``*@example.de`` still stops the mail to Bruno (bruno.keller@example.de): the policy
    stage judges the arguments as the outbox would receive them. A policy-stage plugin
    gets the same view through ``call.revealed()``, while ``call.args``, the denial the
    code sees and the audit-stage layer keep tokens."""
    rule = {"tools": "outbox.send", "action": "deny", "args": {"to": {"matches": "*@EXAMPLE.DE"}}}
    plugin_saw: list[tuple[str, str]] = []
    outside: list[str] = []

    async def plugin(call: ToolCall, call_next: NextCall) -> Any:
        if call.tool == "send":
            plugin_saw.append((call.args["to"], call.revealed()["to"]))
        return await call_next(call)

    async def audit(call: ToolCall, call_next: NextCall) -> Any:
        outside.append(json.dumps(call.args) + json.dumps(call.notes, default=str))
        return await call_next(call)

    code = """
out = []
for c in tools.crm.list_customers():
    try:
        tools.outbox.send(to=c['email'], subject='hello', body='hi')
        out.append(['sent', c['email']])
    except ToolDenied as e:
        out.append(['denied', c['email'], str(e)])
out
"""
    async with opened(private_ws, policy={"rules": [rule]}) as s:
        s.tools.use(plugin, stage="policy")
        s.tools.use(audit, stage="audit")
        r = await s.run(code)
    assert r.is_ok, r.error
    outcomes = r.value
    assert [o[0] for o in outcomes] == ["sent", "denied", "sent"]
    assert all(TOKEN_RE.fullmatch(o[1]) for o in outcomes)
    assert '"args.to": {"matches": ["*@EXAMPLE.DE"]}' in outcomes[1][2]
    assert [m["to"] for m in private_ws.received()] == [
        CUSTOMERS[0]["email"],
        CUSTOMERS[2]["email"],
    ]
    # added after the built-in policy at its stage, so inside it: the denied call never came
    assert [real for _, real in plugin_saw] == [CUSTOMERS[0]["email"], CUSTOMERS[2]["email"]]
    assert all(TOKEN_RE.fullmatch(token) for token, _ in plugin_saw)
    assert leaks(json.dumps(outcomes) + "".join(outside)) == []


async def test_a_server_marked_not_a_sink_by_the_name_agents_call_it_never_receives_real_values(
    tmp_path: Path,
) -> None:
    """``my-outbox`` is ``tools.my_outbox`` to the code: a rule naming the server or a tool
    as discovery shows it (``my_outbox``, ``send_mail``) holds as one naming the original."""
    for rule in (
        {"my_outbox": {"sink": False}},
        {"my-outbox": {"tools": {"send_*": {"sink": False}}}},
    ):
        root = tmp_path / str(len(list(tmp_path.iterdir())))
        ws = make_private_workspace(root, privacy={"enabled": True, "servers": rule})
        mcp = json.loads((ws.base / "mcp.json").read_text())
        outbox = mcp["mcpServers"].pop("outbox")
        outbox["env"]["OUTBOX_TOOL_NAME"] = "send-mail"
        mcp["mcpServers"]["my-outbox"] = outbox
        (ws.base / "mcp.json").write_text(json.dumps(mcp))
        async with opened(ws) as s:
            r = await s.run(
                "c = tools.crm.list_customers()[0]\n"
                "tools.my_outbox.send_mail(to=c['email'], subject='s', body=c['phone'])"
            )
        assert r.is_ok, r.error
        got = json.dumps(ws.received())
        assert leaks(got) == [] and len(TOKEN_RE.findall(got)) == 2, (rule, got)


async def test_a_server_marked_not_a_sink_never_receives_real_values_the_code_holds(
    tmp_path: Path,
) -> None:
    """Real values the code got without tokens (a server whose results are not scanned, a
    file) are tokenized on their way into a non-sink, wherever they are in its arguments:
    dict keys, nested lists, a card number as an integer."""
    ws = make_private_workspace(
        tmp_path,
        privacy={
            "enabled": True,
            "servers": {"crm": {"scan": False}, "outbox": {"sink": False}},
        },
    )
    code = (
        "c = tools.crm.list_customers()[1]\n"
        "assert '@' in c['email'], c  # crm is not scanned: the code holds real values\n"
        "tools.outbox.send(to=c['email'], subject='s', body='call ' + c['phone'])\n"
        "tools.outbox.record(data={c['email']: [c['iban'], {'n': int(c['card'])}]})"
    )
    async with opened(ws) as s:
        r = await s.run(code)
    assert r.is_ok, r.error
    got = json.dumps(ws.received())
    assert leaks(got) == [] and len(TOKEN_RE.findall(got)) == 5, got


async def test_the_audit_log_records_no_real_value_of_a_run_s_code_or_memory_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The audit stages sit outside privacy and write names and code as they saw them: a
    real value the code held (an artifact named after a customer) or wrote (a literal) is
    written as its token, as the docs promise ("no values")."""
    monkeypatch.setenv("CODEMODE_AUDIT_KEY", "audit-test-key-0123456789abcdef")
    ws = make_private_workspace(
        tmp_path, privacy={"enabled": True, "servers": {"crm": {"scan": False}}}
    )
    config = json.loads((ws.base / "config.json").read_text())
    config["audit"] = {"enabled": True, "head_file": str(tmp_path / "outside" / "audit.head")}
    (ws.base / "config.json").write_text(json.dumps(config))
    code = (
        "c = tools.crm.list_customers()[1]\n"
        "artifacts.save(c['email'], {'n': 1})\n"
        f"note = {CUSTOMERS[2]['email']!r}\n"
    )
    async with opened(ws) as s:
        r = await s.run(code)
    assert r.is_ok, r.error
    log = (ws.base / "audit" / "audit.jsonl").read_text()
    assert '"kind":"memory"' in log and '"code":' in log
    assert leaks(log) == [] and len(TOKEN_RE.findall(log)) == 2, log
    run = json.loads(log.splitlines()[-1])
    assert run["code_sha256"] == hashlib.sha256(run["code"].encode()).hexdigest()


async def test_a_privacy_rule_naming_no_server_is_reported(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A misspelt ``"sink": false`` would leave that server a sink without a word."""
    ws = make_private_workspace(
        tmp_path, privacy={"enabled": True, "servers": {"outbx": {"sink": False}}}
    )
    with caplog.at_level(logging.WARNING, logger="codemode.privacy"):
        async with opened(ws) as s:
            r = await s.run("tools.crm.list_customers()[0]['email']")
    assert r.is_ok, r.error
    warned = [rec.getMessage() for rec in caplog.records if "outbx" in rec.getMessage()]
    assert len(warned) == 1 and "no server of" in warned[0] and "outbox" in warned[0], warned


async def test_a_refusal_from_a_layer_that_saw_real_values_reaches_the_code_tokenized(
    private_ws: PrivateWorkspace,
) -> None:
    """Between the audit and privacy stages layers judge real values: a rule naming an
    address, or a plugin quoting what it refused, must not hand the address to the code
    (which would then hold it in clear, and could tie it to its token). Nor must a
    plugin's own failure, which the code would get as a ``HostError`` with its message."""
    bruno, third = CUSTOMERS[1]["email"], CUSTOMERS[2]["email"]
    rule = {"tools": "outbox.send", "action": "deny", "args": {"to": {"matches": bruno}}}

    async def plugin(call: ToolCall, call_next: NextCall) -> Any:
        if call.tool == "send" and call.revealed()["to"] == third:
            raise ValueError(f"no mail to {third}")  # a plugin's bug, not even a ToolError
        return await call_next(call)

    code = """
out = []
for c in tools.crm.list_customers():
    try:
        tools.outbox.send(to=c['email'], subject='hello', body='hi')
        out.append('sent')
    except Exception as e:
        out.append('@' in str(e))  # a bool: the run's own net cannot hide a leak here
out
"""
    async with opened(private_ws, policy={"rules": [rule]}) as s:
        s.tools.use(plugin, stage="policy")
        r = await s.run(code)
    assert r.is_ok, r.error
    assert r.value == ["sent", False, False]
    assert [m["to"] for m in private_ws.received()] == [CUSTOMERS[0]["email"]]


async def test_revealed_arguments_are_the_ones_a_tool_named_by_its_alias_receives(
    tmp_path: Path,
) -> None:
    """``revealed()`` promises the arguments as the tool will receive them. A privacy rule
    written with the name the code calls (``my_outbox``) made ``my-outbox`` a non-sink for
    the privacy stage (tokens) but a sink for ``revealed()`` (real values): a policy rule on
    its arguments judged values the tool never got (and the other way round, a sink named
    so was judged by its tokens while it received the real values)."""
    ws = make_private_workspace(
        tmp_path, privacy={"enabled": True, "servers": {"my_outbox": {"sink": False}}}
    )
    mcp = json.loads((ws.base / "mcp.json").read_text())
    mcp["mcpServers"]["my-outbox"] = mcp["mcpServers"].pop("outbox")
    (ws.base / "mcp.json").write_text(json.dumps(mcp))
    seen: list[str] = []

    async def plugin(call: ToolCall, call_next: NextCall) -> Any:
        if call.tool == "send":
            seen.append(call.revealed()["to"])
        return await call_next(call)

    async with opened(ws) as s:
        s.tools.use(plugin, stage="policy")
        r = await s.run(
            "tools.my_outbox.send(to=tools.crm.list_customers()[0]['email'], subject='s', body='b')"
        )
    assert r.is_ok, r.error
    received = [m["to"] for m in ws.received()]
    assert len(received) == 1 and TOKEN_RE.fullmatch(received[0]), received
    assert seen == received


async def test_the_audit_log_records_no_real_value_of_code_refused_before_privacy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A session's first run refused by a stage outside privacy (code checks) never reached
    the privacy stage, which made the engine ``scrub`` looks for: audit wrote its code,
    with the address written in it, in clear."""
    monkeypatch.setenv("CODEMODE_AUDIT_KEY", "audit-test-key-0123456789abcdef")
    ws = make_private_workspace(tmp_path)
    config = json.loads((ws.base / "config.json").read_text())
    config["audit"] = {"enabled": True, "head_file": str(tmp_path / "outside" / "audit.head")}
    config["code_checks"] = {"mode": "reject"}
    (ws.base / "config.json").write_text(json.dumps(config))
    code = f"note = {CUSTOMERS[2]['email']!r}\neval('1')\n"
    async with opened(ws) as s:
        r = await s.run(code)
    assert r.error is not None and r.error.type == "CodeRejected", r
    log = (ws.base / "audit" / "audit.jsonl").read_text()
    assert '"code":' in log and '"outcome":"rejected"' in log, log
    assert leaks(log) == [] and len(TOKEN_RE.findall(log)) == 1, log


async def test_an_answer_a_layer_gives_in_the_tools_place_holds_no_value_it_was_shown(
    private_ws: PrivateWorkspace,
) -> None:
    """A layer between audit and privacy that answers for the tool (a dry run) after it
    looked at ``revealed()`` never passes the privacy stage: its answer reached the code
    with the recipient's real address, which the code only knew as a token."""

    async def dry_run(call: ToolCall, call_next: NextCall) -> Any:
        if call.tool == "send":
            return {"would_send_to": call.revealed()["to"]}
        return await call_next(call)

    code = """
r = tools.outbox.send(to=tools.crm.list_customers()[1]['email'], subject='s', body='b')
['@' in str(r), str(r).count('[EMAIL_')]  # plain values: the run's own net cannot hide a leak
"""
    async with opened(private_ws) as s:
        s.tools.use(dry_run, stage="policy")
        r = await s.run(code)
    assert r.is_ok, r.error
    assert r.value == [False, 1]
    assert private_ws.received() == []
