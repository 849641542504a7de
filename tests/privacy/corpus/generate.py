"""Generate the labelled detector corpus (``corpus.jsonl``) with Faker. Run once; frozen.

    .venv/bin/python tests/privacy/corpus/generate.py

The corpus was generated and committed before any detector existed, and is never
regenerated to suit a detector (see README.md beside this file for the labelling rules).
Each line is one snippet::

    {"id": "...", "locale": "de_DE", "form": "json", "text": "...",
     "entities": [{"type": "EMAIL", "start": 12, "end": 31}],
     "negatives": [{"kind": "iso_timestamp", "start": 40, "end": 60}]}

``entities`` are what a detector must find; ``negatives`` are hard negatives placed in
the same text that it must not report (their spans are only for the report).
"""

from __future__ import annotations

import json
import random
import string
from collections.abc import Callable
from pathlib import Path

from faker import Faker

SEED = 20261123
HERE = Path(__file__).resolve().parent
OUT = HERE / "corpus.jsonl"

LOCALES = ("en_US", "en_GB", "de_DE", "fr_FR", "es_ES", "it_IT", "nl_NL", "pt_BR", "ja_JP")
PHONE_CONTEXT = {
    "en_US": ("phone", "Tel.", "mobile", "call"),
    "en_GB": ("phone", "Tel.", "mobile", "ring"),
    "de_DE": ("Telefon", "Tel.", "Handy", "Mobil"),
    "fr_FR": ("téléphone", "tél.", "portable", "Tel"),
    "es_ES": ("teléfono", "Tel.", "móvil", "llamar al"),
    "it_IT": ("telefono", "Tel.", "cellulare", "cell."),
    "nl_NL": ("telefoon", "Tel.", "mobiel", "bel"),
    "pt_BR": ("telefone", "Tel.", "celular", "fone"),
    "ja_JP": ("電話", "TEL", "携帯", "phone"),
}

rng = random.Random(SEED)


def digits(n: int, *, first_nonzero: bool = True) -> str:
    out = [rng.choice(string.digits) for _ in range(n)]
    if first_nonzero:
        out[0] = rng.choice("123456789")
    return "".join(out)


def luhn_ok(number: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(number)):
        d = int(ch)
        if i % 2:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


def not_luhn(n: int) -> str:
    while True:
        s = digits(n)
        if not luhn_ok(s):
            return s


def group(s: str, size: int, sep: str) -> str:
    return sep.join(s[i : i + size] for i in range(0, len(s), size))


# --------------------------------------------------------------------------- positives


def pos_email(f: Faker) -> str:
    return rng.choice([f.email, f.free_email, f.company_email, f.safe_email])()


def pos_phone(f: Faker, locale: str) -> tuple[str, str]:
    """(phone as Faker writes it, the context word placed before it or "")."""
    number: str = f.phone_number()
    if number.isdigit() or rng.random() < 0.3:
        return number, rng.choice(PHONE_CONTEXT[locale])
    return number, ""


def pos_card(f: Faker) -> str:
    kind = rng.choice(
        ["visa16", "visa13", "mastercard", "amex", "discover", "diners", "jcb15", "jcb16"]
    )
    number: str = f.credit_card_number(card_type=kind)
    style = rng.random()
    if style < 0.4:
        return number
    sep = rng.choice([" ", "-"])
    if len(number) == 15 and kind == "amex":
        return sep.join((number[:4], number[4:10], number[10:]))
    return group(number, 4, sep)


def pos_ssn(f: Faker) -> str:
    ssn: str = f.ssn()
    return ssn


def pos_iban(f: Faker) -> str:
    iban: str = f.iban()
    return group(iban, 4, " ") if rng.random() < 0.4 else iban


def pos_ip(f: Faker) -> str:
    r = rng.random()
    if r < 0.35:
        return str(f.ipv4_public())
    if r < 0.55:
        return str(f.ipv4_private())
    if r < 0.85:
        return str(f.ipv6())
    prefix = rng.choice(["2001:db8", "fe80", "2a02:8070", "fd12:3456"])
    return f"{prefix}::{rng.randrange(1, 65535):x}:{rng.randrange(1, 65535):x}"


# --------------------------------------------------------------------------- hard negatives


def neg_order_id(f: Faker) -> str:
    return rng.choice(
        [
            f"ORD-{rng.randrange(2015, 2027)}-{digits(6, first_nonzero=False)}",
            f"#{digits(8)}",
            f"PO{digits(7)}",
            f"INV/{rng.randrange(2018, 2027)}/{digits(5, first_nonzero=False)}",
            f"order {digits(10)}",
        ]
    )


def neg_ten_digit_id(f: Faker) -> str:
    return digits(10)


def neg_long_id(f: Faker) -> str:
    return digits(rng.choice([12, 13, 14, 18, 20]))


def neg_nine_digit_id(f: Faker) -> str:
    return digits(9)


def neg_date(f: Faker) -> str:
    d = f.date_object()
    return rng.choice(
        [
            d.isoformat(),
            d.strftime("%m/%d/%Y"),
            d.strftime("%d.%m.%Y"),
            d.strftime("%d/%m/%Y"),
            d.strftime("%Y%m%d"),
            d.strftime("%d-%m-%Y"),
            d.strftime("%B %d, %Y"),
        ]
    )


def neg_version(f: Faker) -> str:
    a, b, c, d = (rng.randrange(0, 30) for _ in range(4))
    return rng.choice(
        [f"v{a}.{b}.{c}", f"{a}.{b}.{c}", f"{a}.{b}.{c}-rc.{d}", f"{a}.{b}", f"{a}.{b}.{c}.post{d}"]
    )


def neg_uuid(f: Faker) -> str:
    return str(f.uuid4())


def neg_amount(f: Faker) -> str:
    whole = rng.randrange(1, 9_999_999)
    cents = rng.randrange(0, 100)
    return rng.choice(
        [
            f"${whole:,}.{cents:02d}",
            f"{whole:,}.{cents:02d} USD",
            f"{whole:,}".replace(",", ".") + f",{cents:02d} €",
            f"EUR {whole:,}.{cents:02d}",
            f"{whole}.{cents:02d}",
            f"-{whole:,}.{cents:02d}",
        ]
    )


def neg_iso_timestamp(f: Faker) -> str:
    dt = f.date_time()
    return rng.choice(
        [
            dt.isoformat(),
            dt.isoformat() + "Z",
            dt.isoformat() + rng.choice(["+02:00", "-05:00", "+05:30"]),
            dt.strftime("%Y-%m-%d %H:%M:%S"),
            dt.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z",
        ]
    )


def neg_sku(f: Faker) -> str:
    letters = "".join(rng.choice(string.ascii_uppercase) for _ in range(3))
    return rng.choice(
        [
            f"SKU-{digits(4)}-{digits(4)}",
            f"{letters}-{digits(5)}-{rng.choice(string.ascii_uppercase)}{rng.randrange(10)}",
            f"{letters}{digits(6)}",
            f"SKU {digits(3)}-{digits(3)}-{digits(4)}",
        ]
    )


def neg_isbn(f: Faker) -> str:
    return str(rng.choice([f.isbn13, f.isbn10])())


def neg_bad_card(f: Faker) -> str:
    n = not_luhn(16)
    return rng.choice([n, group(n, 4, " "), group(n, 4, "-")])


def neg_bad_iban(f: Faker) -> str:
    iban: str = f.iban()
    check = rng.choice([f"{n:02d}" for n in range(2, 99) if f"{n:02d}" != iban[2:4]])
    return iban[:2] + check + iban[4:]


def neg_bad_ssn(f: Faker) -> str:
    area = rng.choice(["000", "666", f"9{digits(2, first_nonzero=False)}"])
    return f"{area}-{digits(2)}-{digits(4)}"


def neg_time(f: Faker) -> str:
    return rng.choice(
        [f.time(), f.time()[:5], f"{rng.randrange(1, 13)}:{rng.randrange(60):02d} pm"]
    )


def neg_mac(f: Faker) -> str:
    return str(f.mac_address())


def neg_hash(f: Faker) -> str:
    return str(rng.choice([f.sha1, f.md5, f.sha256])())


def neg_coordinates(f: Faker) -> str:
    return f"{f.latitude()}, {f.longitude()}"


def neg_postcode(f: Faker) -> str:
    return str(f.postcode())


def neg_port(f: Faker) -> str:
    return rng.choice(
        [f"localhost:{rng.randrange(1024, 65535)}", f"port {rng.randrange(1, 65535)}"]
    )


def neg_percent(f: Faker) -> str:
    return f"{rng.uniform(0, 100):.{rng.randrange(0, 3)}f}%"


def neg_quantity(f: Faker) -> str:
    return rng.choice(
        [
            f"{rng.randrange(1, 10_000):,} units",
            f"{rng.uniform(0, 500):.1f} kg",
            f"{rng.randrange(1, 1000)} x {rng.randrange(1, 1000)} mm",
        ]
    )


NEGATIVES: dict[str, Callable[[Faker], str]] = {
    "order_id": neg_order_id,
    "ten_digit_id": neg_ten_digit_id,
    "nine_digit_id": neg_nine_digit_id,
    "long_id": neg_long_id,
    "date": neg_date,
    "version": neg_version,
    "uuid": neg_uuid,
    "amount": neg_amount,
    "iso_timestamp": neg_iso_timestamp,
    "sku": neg_sku,
    "isbn": neg_isbn,
    "bad_card": neg_bad_card,
    "bad_iban": neg_bad_iban,
    "bad_ssn": neg_bad_ssn,
    "time": neg_time,
    "mac": neg_mac,
    "hash": neg_hash,
    "coordinates": neg_coordinates,
    "postcode": neg_postcode,
    "port": neg_port,
    "percent": neg_percent,
    "quantity": neg_quantity,
}

# --------------------------------------------------------------------------- snippets


class Builder:
    """Concatenates pieces, recording the spans of labelled and negative ones."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.size = 0
        self.entities: list[dict[str, object]] = []
        self.negatives: list[dict[str, object]] = []

    def text(self, s: str) -> Builder:
        self.parts.append(s)
        self.size += len(s)
        return self

    def entity(self, kind: str, s: str) -> Builder:
        self.entities.append({"type": kind, "start": self.size, "end": self.size + len(s)})
        return self.text(s)

    def negative(self, kind: str, s: str) -> Builder:
        self.negatives.append({"kind": kind, "start": self.size, "end": self.size + len(s)})
        return self.text(s)

    def done(self) -> str:
        return "".join(self.parts)


def any_negative(f: Faker) -> tuple[str, str]:
    kind = rng.choice(list(NEGATIVES))
    return kind, NEGATIVES[kind](f)


def snippet_for(kind: str, value: str, context: str, f: Faker) -> tuple[str, Builder]:
    """Place one positive among hard negatives, in one of several forms."""
    b = Builder()
    form = rng.choice(["sentence", "json", "csv", "log", "kv"])
    nk, nv = any_negative(f)
    nk2, nv2 = any_negative(f)
    label = {
        "EMAIL": "email",
        "PHONE": "phone",
        "CREDIT_CARD": "card",
        "US_SSN": "ssn",
        "IBAN": "iban",
        "IP_ADDRESS": "ip",
    }[kind]
    lead = f"{context} " if context else ""
    if form == "sentence":
        b.text(f"{f.first_name()} asked about {nk.replace('_', ' ')} ").negative(nk, nv)
        b.text(f"; reach them at {lead}").entity(kind, value).text(" before ").negative(nk2, nv2)
        b.text(".")
    elif form == "json":
        b.text('{"ref": "').negative(nk, nv).text(f'", "{label}": "{lead}').entity(kind, value)
        b.text('", "updated": "').negative(nk2, nv2).text('"}')
    elif form == "csv":
        b.negative(nk, nv).text(",").text(lead).entity(kind, value).text(",").negative(nk2, nv2)
    elif form == "log":
        b.negative("iso_timestamp", neg_iso_timestamp(f)).text(" INFO handled ")
        b.negative(nk, nv).text(f" for {lead}").entity(kind, value).text(" in ")
        b.text(f"{rng.randrange(1, 900)} ms")
    else:
        b.text(f"{label}={lead}").entity(kind, value).text(" ref=").negative(nk, nv)
        b.text(" at=").negative(nk2, nv2)
    return form, b


def negative_snippet(kind: str, f: Faker) -> tuple[str, Builder]:
    b = Builder()
    form = rng.choice(["sentence", "json", "csv", "kv"])
    v = NEGATIVES[kind](f)
    nk, nv = any_negative(f)
    if form == "sentence":
        b.text(f"The {kind.replace('_', ' ')} was ").negative(kind, v)
        b.text(" and the next one ").negative(nk, nv).text(".")
    elif form == "json":
        b.text(f'{{"{kind}": "').negative(kind, v).text('", "other": "').negative(nk, nv)
        b.text('"}')
    elif form == "csv":
        b.negative(kind, v).text(",").negative(nk, nv).text(f",{rng.randrange(100)}")
    else:
        b.text(f"{kind}=").negative(kind, v).text(" next=").negative(nk, nv)
    return form, b


def main() -> None:
    rows: list[dict[str, object]] = []
    fakers = {loc: Faker(loc) for loc in LOCALES}
    for i, loc in enumerate(LOCALES):
        fakers[loc].seed_instance(SEED + i)

    def add(kind: str, loc: str, form: str, b: Builder) -> None:
        rows.append(
            {
                "id": f"{kind.lower()}-{loc}-{len(rows):05d}",
                "locale": loc,
                "form": form,
                "text": b.done(),
                "entities": b.entities,
                "negatives": b.negatives,
            }
        )

    per_locale = 70
    for loc in LOCALES:
        f = fakers[loc]
        for _ in range(per_locale):
            form, b = snippet_for("EMAIL", pos_email(f), "", f)
            add("EMAIL", loc, form, b)
            phone, ctx = pos_phone(f, loc)
            form, b = snippet_for("PHONE", phone, ctx, f)
            add("PHONE", loc, form, b)
            form, b = snippet_for("IBAN", pos_iban(f), "", f)
            add("IBAN", loc, form, b)
            form, b = snippet_for("CREDIT_CARD", pos_card(f), "", f)
            add("CREDIT_CARD", loc, form, b)
            form, b = snippet_for("IP_ADDRESS", pos_ip(f), "", f)
            add("IP_ADDRESS", loc, form, b)
    us = fakers["en_US"]
    for _ in range(per_locale * 6):
        form, b = snippet_for("US_SSN", pos_ssn(us), "", us)
        add("US_SSN", "en_US", form, b)
    for kind in NEGATIVES:
        for loc in LOCALES:
            for _ in range(18):
                form, b = negative_snippet(kind, fakers[loc])
                add("NEG", loc, form, b)
    with OUT.open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"wrote {len(rows)} snippets to {OUT}")


if __name__ == "__main__":
    main()
