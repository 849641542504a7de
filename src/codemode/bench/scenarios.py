"""The scenarios of the token benchmark, each scripted in both modes (run by
:mod:`codemode.bench.runner`).

The scripted agent does what a competent model would do with the context it has: in direct
mode it calls the upstream tools it was given; in code mode it discovers the tools it needs
(``search_tools`` with words from the task), reads each one's signature and result schema
(``get_tool``, or ``print(tools.<server>.<tool>.help)`` in the ``minimal`` profile, which
lists no ``get_tool``), sends one piece of code, and answers from what the code printed.

Nothing is taken on faith: if ``search_tools`` does not surface the tool the script is
about to use, the run fails; and every turn passes the hindsight check of
:class:`codemode.bench.tokens.Agent` (a result key, argument or tool the transcript has not
shown the model fails the run).
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from codemode.bench.tokens import Agent, BenchError, Transcript

DOC_ID = "mtg-2026-11-20-acme-northwind"
RECORD_ID = "00Q5f000001abcXYZ"
SHEET_ID = "orders-2026"
EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
PHONE = re.compile(r"\+1-555-\d{3}-\d{4}")

Script = Callable[[Agent], Awaitable[Transcript]]
CodeScript = Callable[[Agent, str], Awaitable[Transcript]]


@dataclass(frozen=True)
class Scenario:
    name: str
    title: str
    task: str
    direct: Script
    codemode: CodeScript
    catalog: str = "realistic"  # realistic | wide | article
    target_pct: float | None = None
    privacy: bool = False
    """Code mode runs with ``"privacy": true``; the CRM records what it received."""


Need = tuple[tuple[str, ...], list[str]]
"""Search queries to try in order (words of the task), and the tools the script will use."""


async def discover(agent: Agent, profile: str, *needs: Need) -> None:
    """Find the tools each need names, one ``search_tools`` per need in one turn; a need
    whose tools did not show up is searched again with its next query in another turn
    (counted, as a model would). Then read their signatures and result schemas."""
    pending = list(needs)
    attempt = 0
    while pending:
        batch = [(queries[attempt], tools) for queries, tools in pending]
        found = await agent.turn(
            *[
                ("search_tools", {"query": q, "detail_level": "description", "limit": 3})
                for q, _ in batch
            ]
        )
        missed = [
            need
            for need, text in zip(pending, found, strict=True)
            if not all(re.search(rf"(?m)^{re.escape(t)}\(", text) for t in need[1])
        ]
        attempt += 1
        for queries, tools in missed:
            if attempt >= len(queries):
                raise BenchError(f"search_tools did not surface {tools} for any of {queries}")
        pending = missed
    chosen = [t for _, tools in needs for t in tools]
    if profile == "minimal":  # no get_tool: read them from code
        await run_code(agent, "\n".join(f"print(tools.{t}.help)" for t in chosen))
    else:
        await agent.turn(*[("get_tool", {"name": t}) for t in chosen])


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


async def crm_codemode(agent: Agent, profile: str) -> Transcript:
    await discover(
        agent,
        profile,
        (("download document", "document store get document text"), ["docs.get_document"]),
        (("attach to CRM record", "attach document to CRM record"), ["crm.attach_document"]),
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


async def sheet_codemode(agent: Agent, profile: str) -> Transcript:
    await discover(agent, profile, (("orders sheet rows",), ["sheets.get_sheet"]))
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


async def jobs_codemode(agent: Agent, profile: str) -> Transcript:
    await discover(
        agent,
        profile,
        (("report job",), ["jobs.start_job", "jobs.get_job_status", "jobs.get_job_result"]),
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


async def wide_codemode(agent: Agent, profile: str) -> Transcript:
    await discover(
        agent,
        profile,
        (
            ("units of SKU available in warehouse", "inventory stock of a SKU"),
            ["inventory.get_stock_level"],
        ),
        (
            ("ship units to customer", "create a shipment to a customer"),
            ["shipping.create_shipment"],
        ),
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


# Keys spelled out (not looped over) so the hindsight check sees each one the code uses.
CODE_5 = """\
people = tools.customers.list_customers()["customers"]
contacts = [
    {"name": p["name"], "email": p["email"], "phone": p["phone"], "company": p["company"]}
    for p in people
]
res = tools.crm.import_contacts(contacts=contacts)
print("imported", res["imported"], "skipped", res["skipped"])
"""


# The careless agent prints the whole customer list before importing it.
CODE_5_CARELESS = """\
people = tools.customers.list_customers()["customers"]
print(people)
contacts = [
    {"name": p["name"], "email": p["email"], "phone": p["phone"], "company": p["company"]}
    for p in people
]
res = tools.crm.import_contacts(contacts=contacts)
print("imported", res["imported"], "skipped", res["skipped"])
"""


async def _import_contacts(agent: Agent, profile: str, code: str) -> Transcript:
    await discover(
        agent,
        profile,
        (("customers in the customer database",), ["customers.list_customers"]),
        (("import contacts into the CRM",), ["crm.import_contacts"]),
    )
    printed = await run_code(agent, code)
    imported = printed.strip().splitlines()[-1].split()[1]
    return agent.answer(f"Imported {imported} contacts into the CRM.")


async def privacy_codemode(agent: Agent, profile: str) -> Transcript:
    return await _import_contacts(agent, profile, CODE_5)


async def careless_codemode(agent: Agent, profile: str) -> Transcript:
    return await _import_contacts(agent, profile, CODE_5_CARELESS)


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
        catalog="wide",
    ),
    Scenario(
        "privacy",
        "Customer list with e-mails and phones moved from one tool to another",
        TASK_5,
        privacy_direct,
        privacy_codemode,
        privacy=True,
    ),
    Scenario(
        "privacy-careless",
        "The same import by a careless agent that prints the whole customer list",
        TASK_5,
        privacy_direct,
        careless_codemode,
        privacy=True,
    ),
    Scenario(
        "article-scale",
        "2-hour meeting transcript (25,000 words) from a document server to a CRM, with "
        "1,000+ real tool definitions on 20+ servers connected",
        TASK_1,
        crm_direct,
        crm_codemode,
        catalog="article",
        target_pct=98.7,
    ),
]
NAMES = [s.name for s in SCENARIOS]
