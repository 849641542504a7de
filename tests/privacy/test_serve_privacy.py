"""``codemode serve --privacy`` driven by the official MCP client, every byte it sends
to the client captured: real personal data moves from the CRM to the outbox, and none
of it reaches the client."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters
from mcp_types import TextContent

from codemode.privacy.tokens import TOKEN_RE

from .conftest import CUSTOMERS, REAL_VALUES, PrivateWorkspace, make_private_workspace

pytestmark = pytest.mark.anyio

CARELESS = """
cs = tools.crm.list_customers()
for c in cs:
    print(c)
print(tools.crm.customer_note(customer_id=1001))
for c in cs:
    tools.outbox.send(
        to=c["email"],
        subject="Hello " + c["name"],
        body=f"We will call {c['phone']}. Card {c['card']}, SSN {c['ssn']}, "
        f"IBAN {c['iban']}, last seen from {c['last_ip']}.",
    )
    tools.outbox.record(data=c)
found = tools.crm.find_customer(email=cs[0]["email"])
print("found", found["id"], found["email"])
try:
    tools.crm.fail_for(email=cs[1]["email"])
except Exception as exc:
    print("error:", exc)
artifacts.save("customers", cs)
state.set("first_email", cs[0]["email"])
cs
"""


@asynccontextmanager
async def captured_serve(ws: PrivateWorkspace, capture: Path) -> AsyncIterator[Client]:
    """``codemode serve --privacy`` whose stdout (everything sent to the client) is
    copied to ``capture`` by ``tee`` on its way to the client."""
    serve = [sys.executable, "-m", "codemode", "serve", "--base", str(ws.base), "--privacy"]
    command = " ".join(f"'{a}'" for a in serve) + f" | tee -a '{capture}'"
    params = StdioServerParameters(command="sh", args=["-c", command], env=dict(os.environ))
    async with Client(params, read_timeout_seconds=120) as client:
        yield client


def text_of(result: Any) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, TextContent))


@pytest.fixture
def ws(tmp_path: Path) -> PrivateWorkspace:
    return make_private_workspace(tmp_path, privacy=None)  # on by --privacy alone


async def test_no_real_value_reaches_the_client_while_the_outbox_receives_every_one(
    ws: PrivateWorkspace, tmp_path: Path
) -> None:
    capture = tmp_path / "to_client.jsonl"
    async with captured_serve(ws, capture) as client:
        run = await client.call_tool("run_code", {"code": CARELESS})
        artifact = await client.call_tool("load_artifact", {"name": "customers"})
        state = await client.call_tool("get_state", {"key": "first_email"})
        await client.call_tool("list_tools", {})
    printed = text_of(run)
    assert not run.is_error, printed
    sent = capture.read_text(encoding="utf-8")
    assert sent.count('"jsonrpc"') >= 5  # the capture holds the whole conversation
    leaked = [v for v in REAL_VALUES if v in sent]
    assert leaked == [], f"real values sent to the client: {leaked}"
    # The code printed every record: the model saw their tokens instead.
    assert len(TOKEN_RE.findall(printed)) >= 6 * len(CUSTOMERS)
    assert "found 1001 [EMAIL_" in printed  # find_customer got the real e-mail (format: email)
    assert "error:" in printed and "is locked" in printed
    assert TOKEN_RE.search(text_of(artifact)) and TOKEN_RE.search(text_of(state))
    # The outbox (a sink) received every real value, in the arguments of real calls.
    received = json.dumps(ws.received(), ensure_ascii=False)
    missing = [v for v in REAL_VALUES if v not in received]
    assert missing == [], f"the outbox did not receive: {missing}"
    assert not TOKEN_RE.search(received)


async def test_a_token_saved_in_an_artifact_resolves_in_a_later_session_and_a_forged_one_is_refused(
    ws: PrivateWorkspace, tmp_path: Path
) -> None:
    first = "cs = tools.crm.list_customers()\nartifacts.save('people', cs)\nprint(cs[0]['email'])"
    async with captured_serve(ws, tmp_path / "one.jsonl") as client:
        saved = await client.call_tool("run_code", {"code": first})
    token = text_of(saved).strip()
    assert TOKEN_RE.fullmatch(token), token
    later = (
        "cs = artifacts.load('people')\n"
        "print(cs[0]['email'])\n"
        "print(tools.outbox.send(to=cs[0]['email'], subject='again', body='hello'))"
    )
    forged = "tools.outbox.send(to='[EMAIL_abcdefghij]', subject='x', body='y')"
    async with captured_serve(ws, tmp_path / "two.jsonl") as client:  # a new process
        again = await client.call_tool("run_code", {"code": later})
        refused = await client.call_tool("run_code", {"code": forged})
    assert text_of(again).splitlines()[0] == token
    assert ws.received()[-1]["to"] == CUSTOMERS[0]["email"]
    assert refused.is_error
    assert "unknown token [EMAIL_abcdefghij]" in text_of(refused)
    assert len(ws.received()) == 1  # the forged call never reached the outbox
