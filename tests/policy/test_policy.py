"""Tool policy: allow, deny or ask by name and by trusted annotations; denied calls never
reach the upstream server, and denied tools vanish from discovery."""

from __future__ import annotations

from typing import Any

import pytest

from codemode import ToolDenied
from codemode.errors import ConfigError
from codemode.policy import Policy, PolicyConfig, hints
from codemode.tools.registry import ToolRegistry
from codemode.tools.spec import ToolSpec
from codemode.workspace import Workspace

pytestmark = pytest.mark.anyio

CATCH = """
try:
    tools.notes.{tool}({args})
    outcome = "ran"
except ToolDenied as e:
    outcome = ("denied", e.reason, str(e))
outcome
"""


async def attempt(session: Any, tool: str, args: str = "") -> Any:
    result = await session.run(CATCH.format(tool=tool, args=args))
    assert result.error is None, result.error
    return result.value


async def test_a_denied_call_raises_ToolDenied_in_the_code_and_never_reaches_the_server(
    notes_ws: Any, open_notes: Any
) -> None:
    notes_ws.configure({"policy": {"destructive": "deny"}})
    async with open_notes(notes_ws) as s:
        denied = await attempt(s, "delete_note", "name='hello'")
        ran = await attempt(s, "read_note", "name='hello'")
    assert denied[0:2] == ["denied", "policy"]
    assert "notes.delete_note: denied by the workspace's policy" in denied[2]
    assert '"destructive": "deny"' in denied[2]
    assert ran == "ran"
    assert notes_ws.calls() == ["read_note"]


async def test_an_untrusted_server_gets_the_mcp_defaults_so_destructive_deny_denies_all(
    notes_ws: Any, open_notes: Any
) -> None:
    notes_ws.configure({"policy": {"destructive": "deny"}}, trusted=False)
    async with open_notes(notes_ws) as s:
        outcomes = [await attempt(s, t) for t in ("read_note", "list_notes", "write_note")]
    assert all(o[0] == "denied" for o in outcomes)
    assert 'not marked "trusted" in mcp.json' in outcomes[0][2]
    assert notes_ws.calls() == []


async def test_a_tool_that_declares_nothing_counts_as_destructive_on_a_trusted_server(
    notes_ws: Any, open_notes: Any
) -> None:
    notes_ws.configure({"policy": {"destructive": "deny"}})
    async with open_notes(notes_ws) as s:
        plain = await attempt(s, "plain")
        write = await attempt(s, "write_note", "name='a', text='b'")
    assert plain[0] == "denied" and "declares no such hint" in plain[2]
    assert write == "ran"
    assert notes_ws.calls() == ["write_note"]


async def test_name_rules_come_first_and_the_first_match_decides(
    notes_ws: Any, open_notes: Any
) -> None:
    notes_ws.configure(
        {
            "policy": {
                "destructive": "deny",
                "rules": [
                    {"tools": "notes.delete_*", "action": "allow"},
                    {"tools": ["notes.*"], "action": "deny", "read_only": True},
                ],
            }
        }
    )
    async with open_notes(notes_ws) as s:
        delete = await attempt(s, "delete_note", "name='todo'")
        read = await attempt(s, "read_note", "name='todo'")
    assert delete == "ran"
    assert read[0] == "denied" and 'rule 2 (tools "notes.*" when "read_only": true' in read[2]
    assert notes_ws.calls() == ["delete_note"]


async def test_a_rule_on_arguments_decides_per_call_and_leaves_the_tool_in_discovery(
    notes_ws: Any, open_notes: Any
) -> None:
    """Only names outside ``draft-*`` are denied (any case); the tool stays listed, since
    some calls of it are allowed, and the reason names the rule, not the value."""
    rule = {
        "tools": "notes.write_note",
        "action": "deny",
        "args": {"name": {"not_matches": "draft-*"}},
    }
    notes_ws.configure({"policy": {"rules": [rule]}})
    async with open_notes(notes_ws) as s:
        ok = await attempt(s, "write_note", "name='DRAFT-1', text='x'")
        denied = await attempt(s, "write_note", "name='final', text='x'")
        listed = (await s.run('[t["name"] for t in tools.list("notes")]')).value
    assert ok == "ran" and denied[0:2] == ["denied", "policy"]
    assert '"args.name": {"not_matches": ["draft-*"]}' in denied[2] and "final" not in denied[2]
    assert "notes.write_note" in listed
    assert notes_ws.calls() == ["write_note"]


DISGUISED_NAMES = [
    "secret\u200b-plan",  # a zero-width space
    "ｓｅｃｒｅｔ-plan",  # full-width letters
    "SECRET-PLAN\u00ad",  # a soft hyphen
    " secret-plan.",  # surrounding space, a trailing dot
]


async def test_an_argument_rule_holds_for_a_value_disguised_with_unicode(
    notes_ws: Any, open_notes: Any
) -> None:
    """A deny glob on a value, and an allow-list of values, are not bypassed by a value a
    receiving program reads the same (NFKC, invisible characters, case, a trailing dot),
    nor by the argument's name in another case (Go's JSON decoder ignores case): the call
    gets the stricter of the two readings."""
    rules = [
        {"tools": "notes.write_note", "action": "deny", "args": {"name": {"matches": "secret-*"}}},
        {"tools": "notes.read_note", "action": "deny", "args": {"name": {"not_matches": "pub-*"}}},
    ]
    notes_ws.configure({"policy": {"rules": rules}})
    async with open_notes(notes_ws) as s:
        written = [await attempt(s, "write_note", f"name={n!r}, text='x'") for n in DISGUISED_NAMES]
        renamed = [
            await attempt(s, "write_note", "**{'Name': 'secret-plan', 'text': 'x'}"),
            await attempt(s, "write_note", "**{'name': 'ok', 'NAME': 'secret-plan', 'text': 'x'}"),
        ]
        odd = await attempt(s, "read_note", "name='ｐub-x'")
        plain = await attempt(s, "write_note", "name='public-plan', text='x'")
        public = await attempt(s, "read_note", "name='pub-x'")
    assert [w[0] for w in written] == ["denied"] * len(DISGUISED_NAMES), written
    assert [r[0] for r in renamed] == ["denied", "denied"], renamed
    assert odd[0] == "denied" and plain == "ran" and public == "ran"
    assert notes_ws.calls() == ["write_note", "read_note"]


async def test_a_domain_rule_holds_for_an_address_written_with_ideographic_full_stops(
    notes_ws: Any, open_notes: Any
) -> None:
    """IDNA, and Python's own ``idna`` codec, read ``。｡．`` as a domain's dots: a mail
    tool delivers ``x@rival。example`` to rival.example, so a rule on that domain holds
    (also for ``︒``, which NFKC makes ``。``)."""
    addresses = ["x@rival\u3002example", "x@rival\uff61example", "x@rival\ufe12example"]
    assert {a.split("@")[1].encode("idna") for a in addresses[:2]} == {b"rival.example"}
    rule = {
        "tools": "notes.write_note",
        "action": "deny",
        "args": {"name": {"matches": "*@rival.example"}},
    }
    notes_ws.configure({"policy": {"rules": [rule]}})
    async with open_notes(notes_ws) as s:
        tried = [await attempt(s, "write_note", f"name={a!r}, text='x'") for a in addresses]
    assert [t[0] for t in tried] == ["denied"] * len(addresses), tried
    assert notes_ws.calls() == []


URLS_OF_RIVAL = [
    "https://rival%2Eexample/x",  # Node's URL decodes the host: rival.example
    "https://rival.example./x",  # a trailing dot names the same host
    "https://rival.example\\@ok.example/x",  # a backslash ends the host (WHATWG)
    "https://riv\tal.example/x",  # tabs and newlines are dropped
    "https://ok.example@rival.example/x",  # user info, then the host
]


async def test_a_url_rule_holds_for_urls_a_url_parser_reads_as_that_url(
    notes_ws: Any, open_notes: Any
) -> None:
    """Tools that fetch URLs parse them as browsers and Node do (WHATWG): percent-escapes
    in the host, its trailing dot, backslashes, tabs and dot segments in the path do not
    get a URL past a rule on what it reads as."""
    rules = [
        {
            "tools": "notes.write_note",
            "action": "deny",
            "args": {"name": {"matches": "https://rival.example/*"}},
        },
        {
            "tools": "notes.read_note",
            "action": "deny",
            "args": {"name": {"not_matches": "https://ok.example/public/*"}},
        },
    ]
    notes_ws.configure({"policy": {"rules": rules}})
    async with open_notes(notes_ws) as s:
        written = [await attempt(s, "write_note", f"name={u!r}, text='x'") for u in URLS_OF_RIVAL]
        escapes = [
            await attempt(s, "read_note", f"name={u!r}")
            for u in (
                "https://ok.example/public/../admin",
                "https://ok.example/public/%2E%2E/admin",
                "https://ok.example/public\\..\\admin",
            )
        ]
        public = await attempt(s, "read_note", "name='https://ok.example/public/a?next=../b'")
    assert [w[0] for w in written] == ["denied"] * len(URLS_OF_RIVAL), written
    assert [e[0] for e in escapes] == ["denied"] * 3, escapes
    assert public == "ran"


METADATA_ADDRESSES = [
    "http://2852039166/latest",  # one number
    "http://0xa9.0xfe.0xa9.0xfe/latest",  # hex parts
    "http://0251.0376.0251.0376/latest",  # octal parts
    "http://169.254.43518/latest",  # the last part fills the rest
    "http://[::ffff:a9fe:a9fe]/latest",  # IPv4-mapped IPv6
    "http://[2002:a9fe:a9fe::]/latest",  # 6to4
    "http://[64:ff9b::a9fe:a9fe]/latest",  # NAT64
    "http://[::169.254.169.254]/latest",  # IPv4-compatible (deprecated)
    "http://169.254.169.254./latest",
]


async def test_a_rule_on_an_ip_address_holds_for_every_spelling_a_url_parser_accepts(
    notes_ws: Any, open_notes: Any
) -> None:
    """``http://2852039166/`` is http://169.254.169.254/ to browsers and Node (WHATWG
    reads decimal, hex and octal IPv4 parts): a rule keeping tools off the cloud
    metadata address holds for each of these spellings."""
    rule = {
        "tools": "notes.write_note",
        "action": "deny",
        "args": {"name": {"matches": "http://169.254.169.254/*"}},
    }
    notes_ws.configure({"policy": {"rules": [rule]}})
    async with open_notes(notes_ws) as s:
        tried = [
            await attempt(s, "write_note", f"name={u!r}, text='x'") for u in METADATA_ADDRESSES
        ]
        other = await attempt(s, "write_note", "name='http://169.254.169.253/latest', text='x'")
    assert [t[0] for t in tried] == ["denied"] * len(METADATA_ADDRESSES), tried
    assert other == "ran"


async def test_an_address_rule_holds_for_the_addresses_a_mail_library_reads(
    notes_ws: Any, open_notes: Any
) -> None:
    """``Bob <x@rival.example>`` goes to x@rival.example, and so does the second address
    of ``ok@example.com, x@rival.example``: a deny rule sees each address, and an
    allow-list is not met by a list that only starts inside it."""
    rules = [
        {
            "tools": "notes.write_note",
            "action": "deny",
            "args": {"name": {"matches": "*@rival.example"}},
        },
        {
            "tools": "notes.read_note",
            "action": "deny",
            "args": {"name": {"not_matches": "*@example.com"}},
        },
    ]
    notes_ws.configure({"policy": {"rules": rules}})
    sent = ["Bob <x@rival.example>", '"x@example.com" <x@rival.example>', "x@rival.example (Bob)"]
    async with open_notes(notes_ws) as s:
        written = [await attempt(s, "write_note", f"name={a!r}, text='x'") for a in sent]
        listed = await attempt(s, "read_note", "name='x@rival.example, ok@example.com'")
        inside = await attempt(s, "read_note", "name='ok@example.com'")
        plain = await attempt(s, "write_note", "name='Ann <ann@example.com>', text='x'")
    assert [w[0] for w in written] == ["denied"] * len(sent), written
    assert listed[0] == "denied" and inside == "ran" and plain == "ran"


def test_argument_conditions_look_at_every_value_of_a_list_or_object() -> None:
    cfg = PolicyConfig.model_validate(
        {
            "rules": [
                {"tools": "m.send", "action": "deny", "args": {"to": {"matches": "*@evil.test"}}}
            ]
        }
    )
    rule = cfg.rules[0]
    assert rule.args_hold({"to": ["a@ok.test", "B@EVIL.TEST"]})
    assert rule.args_hold({"to": {"primary": "a@ok.test", "cc": ["x@evil.test"]}})
    assert not rule.args_hold({"to": ["a@ok.test"]}) and not rule.args_hold({})
    assert cfg.model_dump()["rules"][0]["args"] == {"to": {"matches": ("*@evil.test",)}}
    bad_conditions: list[dict[str, Any]] = [
        {"matches": "a", "not_matches": "b"},
        {},
        {"matches": []},
    ]
    for bad in bad_conditions:
        with pytest.raises(ValueError, match="matches"):
            PolicyConfig.model_validate({"rules": [{"action": "deny", "args": {"to": bad}}]})


async def test_of_several_hint_shortcuts_the_most_restrictive_decides(
    notes_ws: Any, open_notes: Any
) -> None:
    notes_ws.configure({"policy": {"read_only": "allow", "open_world": "deny"}})
    async with open_notes(notes_ws) as s:
        fetch = await attempt(s, "fetch_page", "url='http://example.com'")
        listing = await attempt(s, "list_notes")
    assert fetch[0] == "denied" and '"open_world": "deny"' in fetch[2]
    assert listing == "ran"


async def test_denied_tools_are_hidden_from_every_kind_of_discovery(
    notes_ws: Any, open_notes: Any
) -> None:
    notes_ws.configure({"policy": {"destructive": "deny"}})
    code = """
found = [t["name"] for t in tools.search("delete a note", limit=20)]
listed = [t["name"] for t in tools.list("notes")]
try:
    tools.describe("notes.delete_note")
    described = "shown"
except ToolDenied as e:
    described = str(e)
try:
    from servers.notes import delete_note
    imported = True
except ImportError:
    imported = False
from servers.notes import read_note
count = [s["tools"] for s in tools.servers() if s["name"] == "notes"][0]
(found, listed, described, imported, count)
"""
    async with open_notes(notes_ws) as s:
        result = await s.run(code)
        stub = await s.tools.stub_module("servers.notes")
    assert result.error is None, result.error
    found, listed, described, imported, count = result.value
    assert "notes.delete_note" not in found and "notes.plain" not in found
    assert "notes.delete_note" not in listed and "notes.read_note" in listed
    assert described.startswith("notes.delete_note: denied by the workspace's policy")
    assert imported is False
    assert count == len(listed) == 7  # nine tools, delete_note and plain denied
    assert stub is not None and "def delete_note" not in stub and "def read_note" in stub


async def test_hide_denied_false_keeps_denied_tools_in_discovery_but_still_denies_them(
    notes_ws: Any, open_notes: Any
) -> None:
    notes_ws.configure({"policy": {"destructive": "deny", "hide_denied": False}})
    async with open_notes(notes_ws) as s:
        listed = (await s.run('[t["name"] for t in tools.list("notes")]')).value
        denied = await attempt(s, "delete_note", "name='x'")
    assert "notes.delete_note" in listed
    assert denied[0] == "denied"


async def test_the_agent_can_catch_a_denial_as_ToolError_or_PermissionError(
    notes_ws: Any, open_notes: Any
) -> None:
    notes_ws.configure({"policy": {"default": "deny"}})
    code = """
caught = []
for kind in (ToolError, PermissionError, ToolDenied):
    try:
        tools.notes.read_note(name="x")
    except kind as e:
        caught.append(type(e).__name__)
caught
"""
    async with open_notes(notes_ws) as s:
        result = await s.run(code)
    assert result.value == ["ToolDenied"] * 3


async def test_python_tools_are_trusted_with_the_annotations_the_host_declares(
    notes_ws: Any, open_notes: Any
) -> None:
    notes_ws.configure({"policy": {"destructive": "deny"}})
    async with open_notes(notes_ws) as s:
        s.register_tool(lambda: 1, server="local", name="peek", annotations={"readOnlyHint": True})
        s.register_tool(lambda: 2, server="local", name="poke")
        peek = await s.run("tools.local.peek()")
        poke = await s.run("tools.local.poke()")
    assert peek.value == 1
    assert poke.error is not None and poke.error.type == "ToolDenied"


def test_a_typo_in_a_guardrail_section_is_an_error_not_a_warning(notes_ws: Any) -> None:
    """A misspelt guard would silently stay off: unlike other sections, it stops the open."""
    notes_ws.configure({"policy": {"destructiv": "deny"}})
    with pytest.raises(
        ConfigError,
        match=r"config\.json:\S* unknown setting of the policy "
        r"section 'destructiv' \(did you mean 'destructive'\?\)",
    ):
        Workspace.open(notes_ws.base)
    notes_ws.configure({"budget": {"run": {"tool_call": 3}}})
    with pytest.raises(ConfigError, match=r"budget\.run\['tool_call'\]: unknown setting"):
        Workspace.open(notes_ws.base)
    notes_ws.configure({"policy": {"rules": [{"tools": "x.*", "action": "maybe"}]}})
    with pytest.raises(
        ConfigError,
        match=r"policy\.rules\[0\]\['action'\]: expected one of \"allow\", \"deny\", \"ask\"",
    ):
        Workspace.open(notes_ws.base)


def test_a_mistaken_argument_rule_says_what_to_write(notes_ws: Any) -> None:
    """A glob where a condition belongs, or a list where an object does, was refused with
    "expected a string, got the string" and "expected a list of values"."""
    for args, said in [
        ({"to": "*@x.test"}, r'"to": give a condition object, \{"matches": \[globs\]\}'),
        ("to", r'give an object, \{"to": \{"not_matches"'),
        ([["to", {"matches": "a"}]], r"give an object, .* not \[\[\"to\""),
    ]:
        rule = {"tools": "notes.write_note", "action": "deny", "args": args}
        notes_ws.configure({"policy": {"rules": [rule]}})
        with pytest.raises(ConfigError, match=r"policy\.rules\[0\]\['args'\]: " + said):
            Workspace.open(notes_ws.base)


async def test_a_call_marked_ask_never_runs_without_an_approval_layer() -> None:
    """Fail closed: the registry refuses a call still waiting for approval."""
    from codemode.policy.layer import policy_layer

    ran: list[int] = []
    registry = ToolRegistry()
    registry.register(lambda: ran.append(1), server="local", name="touch")
    registry.use(policy_layer(Policy(PolicyConfig(default="ask"))), "policy")
    with pytest.raises(ToolDenied, match="no approval layer answered"):
        await registry.call("local", "touch")
    assert ran == []


def test_hints_believe_annotations_only_from_trusted_sources() -> None:
    claims = {"readOnlyHint": True, "openWorldHint": False}
    untrusted = hints(ToolSpec("s", "t", annotations=claims))
    trusted = hints(ToolSpec("s", "t", annotations=claims, trusted=True))
    assert (untrusted.read_only, untrusted.destructive, untrusted.open_world) == (
        False,
        True,
        True,
    )
    assert (trusted.read_only, trusted.destructive, trusted.open_world) == (True, False, False)
