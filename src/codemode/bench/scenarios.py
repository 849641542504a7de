"""The five scenarios of the token benchmark, each scripted in both modes.

The scripted agent does what a competent model would do with the context it has: in direct
mode it calls the upstream tools it was given; in code mode it discovers the tools it needs
(``search_tools``, ``get_tool``), sends one piece of code, and answers from what the code
printed. Discovery is checked: if ``search_tools`` does not surface the tool the script is
about to use, the run fails instead of pretending.
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from codemode.bench.tokens import (
    Agent,
    BenchError,
    ScenarioResult,
    Sizes,
    Transcript,
    codemode_caller,
    codemode_client,
    connect_all,
    direct_caller,
    direct_definitions,
    realistic_catalog,
    wide_catalog,
)

DOC_ID = "mtg-2026-11-20-acme-northwind"
RECORD_ID = "00Q5f000001abcXYZ"
SHEET_ID = "orders-2026"
EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
PHONE = re.compile(r"\+1-555-\d{3}-\d{4}")

Script = Callable[[Agent], Awaitable[Transcript]]


@dataclass(frozen=True)
class Scenario:
    name: str
    title: str
    task: str
    direct: Script
    codemode: Script
    wide: bool = False
    target_pct: float | None = None


async def discover(agent: Agent, *needs: tuple[str, str]) -> None:
    """Turn 1: one ``search_tools`` per need; turn 2: ``get_tool`` for each tool found."""
    found = await agent.turn(
        *[
            ("search_tools", {"query": q, "detail_level": "description", "limit": 3})
            for q, _ in needs
        ]
    )
    for (query, tool), text in zip(needs, found, strict=True):
        if tool not in text:
            raise BenchError(f"search_tools({query!r}) did not surface {tool}: {text[:1000]}")
    await agent.turn(*[("get_tool", {"name": tool}) for _, tool in needs])


async def run_code(agent: Agent, code: str) -> str:
    (printed,) = await agent.turn(("run_code", {"code": code}))
    return printed


# ---------------------------------------------------------------- 1 meeting notes to CRM

TASK_1 = (
    f"Download the transcript of yesterday's meeting from the document store (document "
    f"{DOC_ID}) and attach it to the meeting's CRM record {RECORD_ID}."
)


async def crm_direct(agent: Agent) -> Transcript:
    (transcript,) = await agent.turn(("docs__get_document", {"document_id": DOC_ID}))
    args = {"record_id": RECORD_ID, "name": "QBR transcript 2026-11-20.txt", "content": transcript}
    (res,) = await agent.turn(("crm__attach_document", args))
    att = json.loads(res)
    return agent.answer(f"Attached the transcript to record {RECORD_ID} as {att['attachment_id']}.")


CODE_1 = f"""\
text = tools.docs.get_document(document_id={DOC_ID!r})
res = tools.crm.attach_document(record_id={RECORD_ID!r}, name="QBR transcript 2026-11-20.txt",
                                content=text)
print(res["attachment_id"], res["status"], res["chars"], "chars")
"""


async def crm_codemode(agent: Agent) -> Transcript:
    await discover(
        agent,
        ("get document text", "docs.get_document"),
        ("attach document to CRM record", "crm.attach_document"),
    )
    printed = await run_code(agent, CODE_1)
    att_id = printed.split()[0]
    return agent.answer(f"Attached the transcript to record {RECORD_ID} as {att_id}.")


# ---------------------------------------------------------------- 2 large table filter

TASK_2 = (
    f"In the orders sheet {SHEET_ID}, find the orders whose status is 'disputed' and list them."
)


def _rows_answer(rows: list[dict[str, Any]]) -> str:
    lines = [f"{len(rows)} disputed orders:"]
    lines += [
        f"- {r['order_id']} {r['date']} {r['region']} {r['customer']} {r['amount']}" for r in rows
    ]
    return "\n".join(lines)


async def sheet_direct(agent: Agent) -> Transcript:
    (text,) = await agent.turn(("sheets__get_sheet", {"sheet_id": SHEET_ID}))
    sheet = json.loads(text)
    cols = sheet["columns"]
    rows = [
        dict(zip(cols, r, strict=True))
        for r in sheet["rows"]
        if r[cols.index("status")] == "disputed"
    ]
    return agent.answer(_rows_answer(rows))


CODE_2 = f"""\
import json
sheet = tools.sheets.get_sheet(sheet_id={SHEET_ID!r})
cols = sheet["columns"]
for row in sheet["rows"]:
    rec = dict(zip(cols, row))
    if rec["status"] == "disputed":
        print(json.dumps(rec))
"""


async def sheet_codemode(agent: Agent) -> Transcript:
    await discover(agent, ("read spreadsheet rows", "sheets.get_sheet"))
    printed = await run_code(agent, CODE_2)
    rows = [json.loads(line) for line in printed.splitlines() if line.startswith("{")]
    return agent.answer(_rows_answer(rows))


# ---------------------------------------------------------------- 3 multi-step with a loop

TASK_3 = "Run the weekly_revenue report job, wait until it is done, and tell me the total revenue."


async def jobs_direct(agent: Agent) -> Transcript:
    (text,) = await agent.turn(("jobs__start_job", {"report": "weekly_revenue"}))
    job_id = json.loads(text)["job_id"]
    for _ in range(1000):
        (status,) = await agent.turn(("jobs__get_job_status", {"job_id": job_id}))
        if json.loads(status)["status"] == "done":
            break
    (result,) = await agent.turn(("jobs__get_job_result", {"job_id": job_id}))
    total = json.loads(result)["total_revenue"]
    return agent.answer(f"The weekly_revenue job ({job_id}) is done: total revenue {total}.")


# The jobs server finishes by poll count, so a short pause keeps the loop honest but quick.
CODE_3 = """\
import time
job = tools.jobs.start_job(report="weekly_revenue")
polls = 0
while tools.jobs.get_job_status(job_id=job["job_id"])["status"] != "done":
    polls += 1
    time.sleep(0.001)
res = tools.jobs.get_job_result(job_id=job["job_id"])
print(job["job_id"], "done after", polls + 1, "polls; total revenue", res["total_revenue"])
"""


async def jobs_codemode(agent: Agent) -> Transcript:
    await discover(
        agent,
        ("start background report job", "jobs.start_job"),
        ("job status", "jobs.get_job_status"),
        ("job result", "jobs.get_job_result"),
    )
    printed = await run_code(agent, CODE_3)
    job_id, total = printed.split()[0], printed.split()[-1]
    return agent.answer(f"The weekly_revenue job ({job_id}) is done: total revenue {total}.")


# ---------------------------------------------------------------- 4 wide catalog

TASK_4 = (
    "Check how many units of SKU-1042 are available in warehouse AMS-1; if at least 10, ship 10 "
    "units to customer C-0077 with DHL."
)
STOCK = {"sku": "SKU-1042", "warehouse": "AMS-1"}
SHIP = {
    "sku": "SKU-1042",
    "quantity": 10,
    "warehouse": "AMS-1",
    "customer_id": "C-0077",
    "carrier": "dhl",
}


async def wide_direct(agent: Agent) -> Transcript:
    (stock,) = await agent.turn(("inventory__get_stock_level", STOCK))
    available = json.loads(stock)["available"]
    (ship,) = await agent.turn(("shipping__create_shipment", SHIP))
    shipment = json.loads(ship)["shipment_id"]
    return agent.answer(f"{available} units were available; shipped 10 as {shipment}.")


CODE_4 = f"""\
stock = tools.inventory.get_stock_level(sku="SKU-1042", warehouse="AMS-1")
if stock["available"] >= 10:
    ship = tools.shipping.create_shipment(**{SHIP!r})
    print(stock["available"], "available; shipment", ship["shipment_id"], ship["status"])
else:
    print(stock["available"], "available; not shipped")
"""


async def wide_codemode(agent: Agent) -> Transcript:
    await discover(
        agent,
        ("stock level of a SKU in a warehouse", "inventory.get_stock_level"),
        ("create shipment", "shipping.create_shipment"),
    )
    printed = await run_code(agent, CODE_4)
    words = printed.split()
    return agent.answer(f"{words[0]} units were available; shipped 10 as {words[3]}.")


# ---------------------------------------------------------------- 5 privacy

TASK_5 = "Import every customer from the customer database into the CRM as contacts."
_CONTACT_KEYS = ("name", "email", "phone", "company")


async def privacy_direct(agent: Agent) -> Transcript:
    (text,) = await agent.turn(("customers__list_customers", {}))
    people = json.loads(text)["customers"]
    contacts = [{k: p[k] for k in _CONTACT_KEYS} for p in people]
    (res,) = await agent.turn(("crm__import_contacts", {"contacts": contacts}))
    return agent.answer(f"Imported {json.loads(res)['imported']} contacts into the CRM.")


CODE_5 = f"""\
people = tools.customers.list_customers()["customers"]
contacts = [{{k: p[k] for k in {_CONTACT_KEYS!r}}} for p in people]
res = tools.crm.import_contacts(contacts=contacts)
print("imported", res["imported"], "skipped", res["skipped"])
"""


async def privacy_codemode(agent: Agent) -> Transcript:
    await discover(
        agent,
        ("list customers", "customers.list_customers"),
        ("import contacts into CRM", "crm.import_contacts"),
    )
    printed = await run_code(agent, CODE_5)
    return agent.answer(f"Imported {printed.split()[1]} contacts into the CRM.")


def pii_in(transcript: Transcript, values: set[str]) -> tuple[int, int]:
    """(distinct PII values, occurrences) of ``values`` found in the transcript's context."""
    text = "\n".join(e.text for e in transcript.entries)
    found = [v for v in EMAIL.findall(text) + PHONE.findall(text) if v in values]
    return len(set(found)), len(found)


SCENARIOS = [
    Scenario(
        "meeting-notes-to-crm",
        "Meeting transcript from the document store attached to a CRM record",
        TASK_1,
        crm_direct,
        crm_codemode,
        target_pct=98.7,
    ),
    Scenario(
        "large-table-filter",
        "10,000-row sheet, return the 5 rows that match",
        TASK_2,
        sheet_direct,
        sheet_codemode,
    ),
    Scenario(
        "multi-step-loop",
        "Start a job, poll its status until done, fetch the result",
        TASK_3,
        jobs_direct,
        jobs_codemode,
    ),
    Scenario(
        "wide-catalog",
        "50 servers / 1,000 tools, one task using two of them",
        TASK_4,
        wide_direct,
        wide_codemode,
        wide=True,
    ),
    Scenario(
        "privacy",
        "Customer list with e-mails and phones moved from one tool to another",
        TASK_5,
        privacy_direct,
        privacy_codemode,
    ),
]
NAMES = [s.name for s in SCENARIOS]


async def run_pair(
    scenario: Scenario,
    catalog: dict[str, dict[str, Any]],
    scratch: Path,
    executor: str,
    tools: str = "all",
) -> tuple[Transcript, Transcript, int]:
    """Both transcripts of one scenario against one catalog; also the catalog's tool count."""
    async with connect_all(catalog, scratch / "logs") as connected:
        defs = direct_definitions(connected)
        agent = Agent("direct", defs, scenario.task, direct_caller(connected))
        direct = await scenario.direct(agent)
    base = Path(tempfile.mkdtemp(prefix="ws-", dir=scratch))
    async with codemode_client(catalog, base, executor, tools) as (client, cm_defs):
        agent = Agent("code mode", cm_defs, scenario.task, codemode_caller(client))
        code = await scenario.codemode(agent)
    return direct, code, len(defs)


async def run_scenario(
    scenario: Scenario,
    sizes: Sizes,
    scratch: Path,
    executor: str = "sandbox",
    transcripts: Path | None = None,
    tools: str = "all",
) -> ScenarioResult:
    extra: dict[str, Any] = {"serve_tools": tools}
    if scenario.wide:
        catalog = wide_catalog(sizes.catalog_servers)
        direct, code, n_tools = await run_pair(scenario, catalog, scratch, executor, tools)
        small = wide_catalog(sizes.catalog_small_servers)
        direct_s, code_s, n_small = await run_pair(scenario, small, scratch, executor, tools)
        delta = 100 * (code.tokens - code_s.tokens) / code_s.tokens
        extra |= {
            "catalog": f"{len(catalog)} servers / {n_tools} tools vs {len(small)} / {n_small}",
            "tokens_direct_small_catalog": direct_s.tokens,
            "tokens_codemode_small_catalog": code_s.tokens,
            "codemode_catalog_size_delta_pct": round(delta, 2),
            "codemode_catalog_size_within_5pct": abs(delta) <= 5,
        }
        _dump(transcripts, scenario.name + "-small", direct_s, code_s)
    else:
        catalog = realistic_catalog(sizes, scratch)
        direct, code, n_tools = await run_pair(scenario, catalog, scratch, executor, tools)
        extra["catalog"] = f"{len(catalog)} servers / {n_tools} tools ({', '.join(catalog)})"
    if scenario.target_pct is not None:
        extra.update(_target(scenario.target_pct, direct, code))
    if scenario.name == "privacy":
        values = _pii_values(direct)
        d_distinct, d_count = pii_in(direct, values)
        c_distinct, c_count = pii_in(code, values)
        extra.update(
            pii_values_total=len(values),
            pii_in_context_direct=f"{d_distinct} distinct, {d_count} occurrences",
            pii_in_context_codemode=f"{c_distinct} distinct, {c_count} occurrences",
            pii_tokenization="not implemented: code mode keeps PII out only because the code "
            "prints none; nothing stops code from printing it",
        )
        extra["pii_direct"], extra["pii_codemode"] = d_distinct, c_distinct
    _dump(transcripts, scenario.name, direct, code)
    return ScenarioResult.from_transcripts(scenario.name, scenario.title, direct, code, **extra)


def _target(pct: float, direct: Transcript, code: Transcript) -> dict[str, Any]:
    """Whether code mode reached ``pct`` reduction, and if not, what stands in the way."""
    allowed = int(direct.tokens * (1 - pct / 100))
    defs = code.breakdown().get("definitions", 0)
    met = code.tokens <= allowed
    why = (
        "met"
        if met
        else f"{pct}% needs code mode <= {allowed:,} tokens; codemode's own tool definitions "
        f"alone are {defs:,} and discovery + code + output {code.tokens - defs:,}"
    )
    return {"target_pct": pct, "target_met": met, "target_note": why}


def _pii_values(direct: Transcript) -> set[str]:
    """The e-mails and phones the customer server returned (its list_customers result)."""
    result = next(e for e in direct.entries if e.kind == "result")
    return {p[k] for p in json.loads(result.text)["customers"] for k in ("email", "phone")}


def _dump(folder: Path | None, name: str, direct: Transcript, code: Transcript) -> None:
    if folder is None:
        return
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.direct.txt").write_text(direct.text())
    (folder / f"{name}.codemode.txt").write_text(code.text())


async def run_benchmark(
    names: list[str] | None = None,
    sizes: Sizes | None = None,
    *,
    executor: str = "sandbox",
    tools: str = "all",
    transcripts: Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> list[ScenarioResult]:
    """Run the named scenarios (all by default) in the published order."""
    unknown = set(names or []) - set(NAMES)
    if unknown:
        raise BenchError(f"unknown scenario(s) {sorted(unknown)}; choose from {NAMES}")
    sizes = sizes or Sizes()
    results = []
    with tempfile.TemporaryDirectory(prefix="codemode-bench-") as tmp:
        for scenario in SCENARIOS:
            if names and scenario.name not in names:
                continue
            if progress:
                progress(f"running {scenario.name} ...")
            scratch = Path(tmp) / scenario.name
            scratch.mkdir()
            result = await run_scenario(scenario, sizes, scratch, executor, transcripts, tools)
            results.append(result)
    return results
