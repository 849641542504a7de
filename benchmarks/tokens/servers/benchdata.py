"""Deterministic data behind the token benchmark's servers (standard library only).

Every generator takes its sizes as arguments and a fixed seed, so two runs of the benchmark
(on any machine) see byte-identical documents, sheets and catalogs, and the token counts
only change when the code does.
"""

from __future__ import annotations

import hashlib
import random
from typing import Any

# ---------------------------------------------------------------- meeting transcript

SPEAKERS = [
    "Dana Whitfield (Acme)",
    "Marcus Oyelaran (Acme)",
    "Priya Raman (Northwind)",
    "Tom Becker (Northwind)",
    "Lena Kowalski (Northwind)",
]
_OPENERS = [
    "So",
    "Right,",
    "Okay,",
    "Honestly,",
    "Just to add,",
    "From our side,",
    "To be clear,",
    "If I may,",
    "Good point, and",
    "Building on that,",
    "Quick question:",
    "Agreed, and",
]
_SUBJECTS = [
    "the renewal",
    "the pilot in the Rotterdam warehouse",
    "our Q3 forecast",
    "the data migration",
    "the security review",
    "the pricing proposal",
    "the onboarding plan",
    "the API integration",
    "the support contract",
    "the rollout to the second region",
    "the procurement process",
    "the dashboard for the operations team",
    "the SSO requirement",
    "the invoice schedule",
]
_VERBS = [
    "depends on",
    "is blocked by",
    "should come before",
    "is tied to",
    "will affect",
    "needs sign-off on",
    "has to line up with",
    "could slip because of",
    "moves faster with",
]
_OBJECTS = [
    "legal's redlines",
    "the budget approval in October",
    "the new head of IT",
    "the audit findings",
    "the volume discount",
    "two more integration sprints",
    "the SOC 2 report",
    "the training sessions",
    "the freight contract",
    "the change freeze in December",
    "the vendor consolidation",
    "headcount",
]
_TAILS = [
    "and we should capture that in the notes.",
    "so let's not lose track of it.",
    "which nobody has written down yet.",
    "and I'd like a date on it.",
    "as far as I can tell.",
    "and that's the main risk for us.",
    "if we want to hit the January target.",
    "and we discussed this last time as well.",
    "so I'll follow up by email.",
    "and finance will ask about it.",
    "so please flag it in the CRM.",
    "for what it's worth.",
]


def meeting_transcript(words: int = 10_000, seed: int = 7) -> str:
    """A sales meeting transcript of about ``words`` words, with timestamps and speakers."""
    rng = random.Random(seed)
    lines = [
        "Meeting: Acme x Northwind quarterly business review",
        "Date: 2026-11-20  Duration: 2h 05m  Recorded and transcribed automatically",
        "",
    ]
    count = 0
    seconds = 0
    while count < words:
        speaker = rng.choice(SPEAKERS)
        parts = []
        for _ in range(rng.randint(1, 3)):
            parts.append(
                f"{rng.choice(_OPENERS)} {rng.choice(_SUBJECTS)} {rng.choice(_VERBS)} "
                f"{rng.choice(_OBJECTS)} {rng.choice(_TAILS)}"
            )
        text = " ".join(parts)
        stamp = f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
        line = f"[{stamp}] {speaker}: {text}"
        lines.append(line)
        count += len(line.split())
        seconds += rng.randint(6, 25)
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- sheet

SHEET_COLUMNS = ["order_id", "date", "region", "customer", "product", "qty", "amount", "status"]
_REGIONS = ["north", "south", "east", "west", "central"]
_PRODUCTS = ["widget", "gadget", "sprocket", "gizmo", "doohickey", "flange", "bracket"]
_STATUSES = ["paid", "shipped", "pending", "refunded"]
MATCH_STATUS = "disputed"  # the filter the scenario asks for; exactly MATCHES rows carry it
MATCHES = 5


def sheet_rows(rows: int = 10_000, seed: int = 11) -> list[list[Any]]:
    """Order rows; exactly ``MATCHES`` of them (spread through the sheet) are disputed."""
    rng = random.Random(seed)
    special = {(i + 1) * rows // (MATCHES + 1) for i in range(MATCHES)}
    out: list[list[Any]] = []
    for i in range(rows):
        status = MATCH_STATUS if i in special else rng.choice(_STATUSES)
        qty = rng.randint(1, 40)
        out.append(
            [
                f"SO-{100000 + i}",
                f"2026-{rng.randint(1, 10):02d}-{rng.randint(1, 28):02d}",
                rng.choice(_REGIONS),
                f"CUST-{rng.randint(1000, 9999)}",
                rng.choice(_PRODUCTS),
                qty,
                round(qty * rng.uniform(4.0, 90.0), 2),
                status,
            ]
        )
    return out


# ---------------------------------------------------------------- jobs


def job_report(job_id: str, lines: int = 40) -> dict[str, Any]:
    """The result of a finished reporting job: a per-region, per-week revenue summary."""
    rng = random.Random(job_id)
    rows: list[dict[str, Any]] = [
        {
            "week": f"2026-W{w:02d}",
            "region": region,
            "orders": rng.randint(80, 400),
            "revenue": round(rng.uniform(5_000, 60_000), 2),
        }
        for w in range(1, lines // len(_REGIONS) + 1)
        for region in _REGIONS
    ]
    total = round(sum(r["revenue"] for r in rows), 2)
    return {"job_id": job_id, "report": "weekly_revenue", "rows": rows, "total_revenue": total}


# ---------------------------------------------------------------- customers (PII)

_FIRST = [
    "Ava",
    "Liam",
    "Noah",
    "Mia",
    "Ethan",
    "Zoe",
    "Omar",
    "Ines",
    "Yuki",
    "Sven",
    "Chloe",
    "Ravi",
]
_LAST = ["Moreau", "Okafor", "Lindqvist", "Tanaka", "Haddad", "Novak", "Silva", "Brennan", "Khan"]
_DOMAINS = ["example.com", "mail.example.org", "corp.example.net"]


def customers(n: int = 100, seed: int = 23) -> list[dict[str, Any]]:
    """Customers with unique e-mail addresses and phone numbers."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        first, last = rng.choice(_FIRST), rng.choice(_LAST)
        out.append(
            {
                "id": f"C-{i + 1:04d}",
                "name": f"{first} {last}",
                "email": f"{first.lower()}.{last.lower()}{i + 1}@{rng.choice(_DOMAINS)}",
                "phone": f"+1-555-{rng.randint(100, 999):03d}-{1000 + i:04d}",
                "company": f"{rng.choice(_LAST)} {rng.choice(['LLC', 'GmbH', 'Inc', 'BV'])}",
                "segment": rng.choice(["enterprise", "mid-market", "smb"]),
            }
        )
    return out


# ---------------------------------------------------------------- wide catalog

# 50 business domains, two resource nouns each; 10 verbs x 2 nouns = 20 tools per server.
CATALOG_DOMAINS: list[tuple[str, str, str]] = [
    ("inventory", "stock_level", "warehouse"),
    ("shipping", "shipment", "carrier"),
    ("billing", "invoice", "payment"),
    ("hr", "employee", "leave_request"),
    ("payroll", "payslip", "pay_run"),
    ("recruiting", "candidate", "job_posting"),
    ("ticketing", "ticket", "queue"),
    ("marketing", "campaign", "audience"),
    ("analytics", "dashboard", "metric"),
    ("procurement", "purchase_order", "supplier"),
    ("legal", "contract", "clause"),
    ("facilities", "room_booking", "building"),
    ("fleet", "vehicle", "trip"),
    ("support_kb", "article", "category"),
    ("calendar", "event", "attendee"),
    ("chat", "channel", "message"),
    ("wiki", "page", "space"),
    ("crm_leads", "lead", "opportunity"),
    ("accounting", "journal_entry", "ledger"),
    ("tax", "tax_return", "filing"),
    ("assets", "laptop", "license"),
    ("security", "incident", "alert"),
    ("identity", "user_account", "group"),
    ("devops", "deployment", "pipeline"),
    ("monitoring", "monitor", "outage"),
    ("storage", "bucket", "object"),
    ("dns", "zone", "record"),
    ("cdn", "cache_rule", "origin"),
    ("email", "mailbox", "email_template"),
    ("sms", "sms_message", "sender_id"),
    ("surveys", "survey", "response"),
    ("events", "conference", "ticket_type"),
    ("learning", "course", "enrollment"),
    ("compliance", "policy", "control"),
    ("risk", "risk_item", "mitigation"),
    ("quality", "inspection", "defect"),
    ("manufacturing", "work_order", "production_line"),
    ("maintenance", "maintenance_task", "spare_part"),
    ("energy", "meter", "reading"),
    ("real_estate", "lease", "property"),
    ("travel", "booking", "itinerary"),
    ("expenses", "expense_report", "receipt"),
    ("grants", "grant", "milestone"),
    ("research", "experiment", "dataset"),
    ("clinic", "appointment", "patient_visit"),
    ("pharmacy", "prescription", "drug"),
    ("restaurant", "reservation", "menu_item"),
    ("retail_pos", "sale", "register"),
    ("loyalty", "member", "reward"),
    ("subscriptions", "subscription", "plan"),
]
CATALOG_SMALL = ["inventory", "shipping", "billing", "hr", "ticketing"]  # the 100-tool variant
_CATALOG_VERBS = [
    ("list", "List {pl} in the {dom} system, newest first, with optional filters."),
    ("get", "Get one {n} from the {dom} system by its identifier, with all fields."),
    ("create", "Create a new {n} in the {dom} system and return it with its new identifier."),
    ("update", "Update fields of an existing {n} in the {dom} system. Unset fields are kept."),
    ("delete", "Delete a {n} from the {dom} system. This cannot be undone."),
    ("search", "Full-text search over {pl} in the {dom} system."),
    ("export", "Export {pl} from the {dom} system as CSV or JSON for reporting."),
    ("archive", "Archive a {n} in the {dom} system so it no longer shows in default lists."),
    ("count", "Count {pl} in the {dom} system matching the given filters."),
    ("history", "Show the change history of a {n} in the {dom} system (who, what, when)."),
]


def _param(
    kind: str, desc: str, *, required: bool = False, enum: list[str] | None = None
) -> dict[str, Any]:
    return {"type": kind, "description": desc, "required": required, "enum": enum}


def catalog_tools(domain: str) -> list[dict[str, Any]]:
    """The 20 generated tool specs of one catalog server: name, description, params."""
    nouns = next(d[1:] for d in CATALOG_DOMAINS if d[0] == domain)
    dom = domain.replace("_", " ")
    tools = []
    for noun in nouns:
        n = noun.replace("_", " ")
        pl = n + "s"
        for verb, template in _CATALOG_VERBS:
            params: dict[str, dict[str, Any]] = {}
            if verb in ("get", "update", "delete", "archive", "history"):
                params[f"{noun}_id"] = _param("string", f"Identifier of the {n}.", required=True)
            if verb in ("list", "search", "export", "count"):
                params["status"] = _param(
                    "string", f"Only {pl} with this status.", enum=["active", "archived", "draft"]
                )
                params["created_after"] = _param("string", "ISO date; only items created after it.")
            if verb in ("list", "search", "history"):
                params["limit"] = _param("integer", "Maximum number of items to return (1-500).")
            if verb == "search":
                params["query"] = _param("string", "Words to look for.", required=True)
            if verb in ("create", "update"):
                params["name"] = _param(
                    "string", f"Display name of the {n}.", required=verb == "create"
                )
                params["owner"] = _param("string", "E-mail of the responsible person.")
                params["tags"] = _param("array", "Free-form labels.")
            if verb == "export":
                params["format"] = _param("string", "Output format.", enum=["csv", "json"])
            if verb == "delete":
                params["confirm"] = _param("boolean", "Must be true to delete.", required=True)
            plural = verb in ("list", "search", "export", "count")
            tools.append(
                {
                    "name": f"{verb}_{noun}{'s' if plural else ''}",
                    "description": template.format(n=n, pl=pl, dom=dom),
                    "params": params,
                }
            )
    if domain == "inventory":
        tools[1] = {
            "name": "get_stock_level",
            "description": "Get the stock level of one SKU in one warehouse: units on hand, "
            "reserved and available.",
            "params": {
                "sku": _param("string", "Stock keeping unit, e.g. SKU-1042.", required=True),
                "warehouse": _param("string", "Warehouse code, e.g. AMS-1.", required=True),
            },
        }
    if domain == "shipping":
        tools[2] = {
            "name": "create_shipment",
            "description": "Create a shipment of a quantity of one SKU from a warehouse to a "
            "customer, and book a carrier.",
            "params": {
                "sku": _param("string", "Stock keeping unit to ship.", required=True),
                "quantity": _param("integer", "Units to ship.", required=True),
                "warehouse": _param("string", "Warehouse code to ship from.", required=True),
                "customer_id": _param("string", "Customer to ship to.", required=True),
                "carrier": _param("string", "Preferred carrier.", enum=["dhl", "ups", "fedex"]),
            },
        }
    return tools


def catalog_result(domain: str, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    """A deterministic, plausible answer to a generated tool call."""
    digest = int(hashlib.sha256(f"{domain}.{tool}:{sorted(args.items())}".encode()).hexdigest(), 16)
    if tool == "get_stock_level":
        on_hand = 20 + digest % 80
        reserved = digest % 7
        return {
            **args,
            "on_hand": on_hand,
            "reserved": reserved,
            "available": on_hand - reserved,
            "updated_at": "2026-11-20T08:00:00Z",
        }
    if tool == "create_shipment":
        return {
            "shipment_id": f"SHP-{digest % 10**8:08d}",
            "status": "booked",
            "carrier": args.get("carrier") or "dhl",
            "eta": "2026-11-24",
            **args,
        }
    return {"ok": True, "tool": f"{domain}.{tool}", "id": f"{digest % 10**6:06d}", "args": args}
