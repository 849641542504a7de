"""Privacy: personal data is tokenized before the model sees it, restored in tool arguments.

    .venv/bin/python examples/privacy.py

A CRM server returns customers with e-mails, phones, cards, SSNs and IBANs; an outbox
server sends mail. With ``"privacy": true`` in the workspace's config, the agent's code
(and so the model reading its output) only ever holds tokens such as
``[EMAIL_k7d2m9x4qp]``; codemode swaps them back for the real values on the host, just
before the call, for tools allowed to receive them (sinks). The example ends by checking
what the outbox really received against everything the model was shown.
"""

from __future__ import annotations

import asyncio
import json

from _support import banner, fixture_server, make_workspace, scratch, show

from codemode import Session


async def main() -> None:
    with scratch("privacy") as root:
        outbox = root / "outbox.jsonl"
        servers = {
            "crm": fixture_server("crm_server.py"),
            "outbox": fixture_server("outbox_server.py", env={"OUTBOX_FILE": str(outbox)}),
        }
        # The key stays outside the workspace (by default: ~/.config/codemode/privacy/).
        config = {"privacy": {"enabled": True, "vault": {"key_file": str(root / "privacy.key")}}}
        base = make_workspace(root, servers, config)
        seen: list[str] = []  # everything the model is shown
        async with Session.from_base(base) as s:
            banner("1. The CRM's records reach the code with tokens in place of personal data")
            r = await show(
                s,
                "customers = tools.crm.list_customers()\n"
                "for c in customers:\n"
                "    print(c['name'], c['email'], c['phone'], c['card'])",
            )
            seen.append(r.to_text())

            banner("2. Values inside free text are tokenized too")
            r = await show(s, "print(tools.crm.customer_note(customer_id=1001))")
            seen.append(r.to_text())

            banner("3. A token in a tool's arguments is the real value for the tool")
            r = await show(
                s,
                "found = tools.crm.find_customer(email=customers[2]['email'])  # format: email\n"
                "print('found customer', found['id'], found['name'])",
            )
            seen.append(r.to_text())

            banner("4. Tool to tool: the outbox (a sink) receives the real addresses")
            r = await show(
                s,
                "for c in customers:\n"
                "    tools.outbox.send(to=c['email'], subject='Your invoice',\n"
                "                      body=f\"Dear {c['name']}, card {c['card']} was billed.\")\n"
                "print('sent', len(customers), 'messages')",
            )
            seen.append(r.to_text())

        banner("5. On the host: what the outbox server really received (never shown to the model)")
        received = [json.loads(line) for line in outbox.read_text().splitlines()]
        for msg in received:
            print(f"  to={msg['to']:<28} body={msg['body'][:60]}")
        model_view = "\n".join(seen)
        cards = [m["body"].split(" card ")[1].removesuffix(" was billed.") for m in received]
        real = [msg["to"] for msg in received] + cards
        leaked = [value for value in real if value in model_view]
        print(f"\n  real e-mails and cards delivered: {len(real)}; model saw: {len(leaked)}")


if __name__ == "__main__":
    asyncio.run(main())
