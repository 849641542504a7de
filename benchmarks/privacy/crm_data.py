"""Synthetic CRM records for the privacy benchmark: unique personal data in every row.

Deterministic and fast (no Faker at run time): names, streets and cities come from small
pools, and the row number makes every e-mail, phone, card and IBAN unique, as in a real
customer list. About 1 KB of JSON per row.
"""

from __future__ import annotations

import random
from typing import Any

FIRST = [
    "Alice",
    "Bruno",
    "Chloé",
    "Dmitri",
    "Elena",
    "Farid",
    "Grace",
    "Hiro",
    "Ines",
    "Jonas",
    "Kemal",
    "Laura",
    "Mateo",
    "Nora",
    "Oskar",
    "Priya",
    "Quentin",
    "Rosa",
    "Sven",
    "Tara",
]
LAST = [
    "Martin",
    "Keller",
    "Dubois",
    "Ivanov",
    "Rossi",
    "Haddad",
    "Lee",
    "Tanaka",
    "García",
    "Berg",
    "Yilmaz",
    "Schmidt",
    "López",
    "Nowak",
    "Larsen",
    "Patel",
    "Moreau",
    "Silva",
]
CITY = ["Springfield", "Lyon", "Hamburg", "Osaka", "Porto", "Leeds", "Austin", "Turin"]
DOMAIN = ["example.com", "example.org", "mail.example.net", "corp.example.de"]
STATUS = ["active", "churned", "trial", "paused"]
NOTES = [
    "Asked for a callback about the renewal; prefers mornings.",
    "Upgraded to the team plan after the demo last week.",
    "Invoice disputed, see ticket in the support queue.",
    "Interested in the annual discount, follow up in Q3.",
    "Met at the trade fair; wants a quote for 40 seats.",
]


def _luhn_complete(prefix: str) -> str:
    digits = [int(c) for c in prefix]
    total = 0
    for i, d in enumerate(reversed(digits)):
        if i % 2 == 0:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return prefix + str((10 - total % 10) % 10)


def _iban(n: int) -> str:
    bban = f"37040044{n:010d}"
    check = 98 - int(bban + "131400") % 97  # DE = 13 14, then 00
    return f"DE{check:02d}{bban}"


def crm_rows(count: int, seed: int = 7) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    rows = []
    for i in range(count):
        first, last = rng.choice(FIRST), rng.choice(LAST)
        rows.append(
            {
                "id": 100_000 + i,
                "name": f"{first} {last}",
                "email": f"{first.lower()}.{last.lower()}{i}@{rng.choice(DOMAIN)}",
                "phone": f"+1 {200 + i % 700:03d}-555-{i % 10_000:04d}",
                "card": _luhn_complete(f"4{i:014d}"),
                "iban": _iban(i),
                "company": f"{rng.choice(LAST)} {rng.choice(['GmbH', 'Ltd', 'SA', 'Inc'])}",
                "address": f"{rng.randrange(1, 300)} Main Street, {rng.choice(CITY)}",
                "status": rng.choice(STATUS),
                "created_at": f"2025-{1 + i % 12:02d}-{1 + i % 28:02d}T10:{i % 60:02d}:00Z",
                "amount": round(rng.uniform(10, 50_000), 2),
                "order_ids": [f"ORD-{i:06d}-{k}" for k in range(3)],
                "tags": rng.sample(["vip", "newsletter", "b2b", "eu", "us", "beta"], 2),
                "notes": " ".join(rng.sample(NOTES, 2))
                + f" Last order total 1,{i % 1000:03d}.50 USD.",
            }
        )
    return rows


def table_rows(count: int, seed: int = 11, start: int = 0) -> list[dict[str, Any]]:
    """A narrow customer table (~150 bytes of JSON per row): two personal values a row;
    rows ``start`` to ``start + count`` (other pages hold other values)."""
    rng = random.Random(seed + start)
    out = []
    for i in range(start, start + count):
        first, last = rng.choice(FIRST), rng.choice(LAST)
        out.append(
            {
                "id": 100_000 + i,
                "name": f"{first} {last}",
                "email": f"{first.lower()}.{last.lower()}{i}@{rng.choice(DOMAIN)}",
                "phone": f"+1 {200 + i % 700:03d}-555-{i % 10_000:04d}",
                "city": rng.choice(CITY),
                "lifetime_value": round(rng.uniform(10, 50_000), 2),
                "created_at": f"2025-{1 + i % 12:02d}-{1 + i % 28:02d}",
            }
        )
    return out


def order_rows(count: int, seed: int = 13) -> list[dict[str, Any]]:
    """Typical business records (orders, ~700 bytes each) with one e-mail in five rows."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        row: dict[str, Any] = {
            "order_id": f"ORD-{i:08d}",
            "sku": f"SKU-{rng.randrange(1000, 9999)}-{rng.randrange(1000, 9999)}",
            "product": rng.choice(["Desk lamp", "Office chair", "Monitor arm", "USB-C dock"]),
            "quantity": rng.randrange(1, 40),
            "unit_price": round(rng.uniform(5, 900), 2),
            "currency": rng.choice(["EUR", "USD", "GBP"]),
            "status": rng.choice(["paid", "shipped", "refunded", "open"]),
            "warehouse": rng.choice(["AMS-1", "FRA-2", "LHR-3"]),
            "created_at": f"2025-{1 + i % 12:02d}-{1 + i % 28:02d}T{i % 24:02d}:15:00Z",
            "updated_at": f"2025-{1 + i % 12:02d}-{1 + i % 28:02d}T{i % 24:02d}:45:10Z",
            "version": f"{rng.randrange(1, 5)}.{rng.randrange(0, 20)}.{rng.randrange(0, 50)}",
            "notes": " ".join(rng.sample(NOTES, 3)),
        }
        if i % 5 == 0:
            row["contact"] = f"buyer{i}@{rng.choice(DOMAIN)}"
        out.append(row)
    return out
