"""Progressive disclosure: find tools by need, at the detail the next step needs, then call.

    .venv/bin/python examples/progressive_disclosure.py

Three real MCP servers are connected (filesystem, memory, time: 25 tools).
Instead of loading every definition into the model's context, the agent's code searches by
need: names first, then one-line descriptions of the best hits, then the full signature of
the one it picks, and calls it. At the end the example compares what discovery showed with
the size of the whole catalog.
"""

from __future__ import annotations

import asyncio

from _support import banner, make_workspace, npm_server, scratch, show, time_server

from codemode import Session


async def main() -> None:
    with scratch("disclosure") as root:
        notes = root / "notes"
        notes.mkdir()
        (notes / "trip.txt").write_text("Flight to Tokyo on Friday; call Kenji at 9:00.\n")
        servers = {
            "files": npm_server("server-filesystem", str(notes)),
            "memory": npm_server("server-memory", env={"MEMORY_FILE_PATH": str(root / "m.jsonl")}),
            "time": time_server(),
        }
        base = make_workspace(root, servers)
        shown = 0
        async with Session.from_base(base) as s:
            banner("0. What is connected (the model never sees this listing)")
            await show(
                s,
                "import json\n"
                "catalog = tools.list(detail='full')\n"
                "servers = sorted({t['name'].split('.')[0] for t in catalog})\n"
                "print(len(catalog), 'tools on', ', '.join(servers))\n"
                "catalog_chars = len(json.dumps(catalog))\n"
                "print(catalog_chars, 'characters if every definition were loaded up front')",
            )
            catalog_chars = int((await s.run("catalog_chars")).value)

            banner("1. Search by need, names only (cheapest)")
            r = await show(
                s,
                "for hit in tools.search('current time in a timezone', detail='name', limit=5):\n"
                "    print(hit['name'])",
            )
            shown += len(r.stdout)

            banner("2. One-line descriptions of the two best hits")
            r = await show(
                s,
                "for hit in tools.search('current time in a timezone', detail='description',"
                " limit=2):\n"
                "    print(hit['name'], '-', hit['description'])",
            )
            shown += len(r.stdout)

            banner("3. The full signature of the chosen tool, and the call")
            r = await show(s, "print(tools.time.get_current_time.help)")
            shown += len(r.stdout)
            r = await show(
                s,
                "now = tools.time.get_current_time(timezone='Asia/Tokyo')\n"
                "print('Tokyo:', now['datetime'][:16], 'DST' if now['is_dst'] else 'no DST')",
            )

            banner("4. A second need, straight to the detail it needs")
            r = await show(
                s,
                "hit = tools.search('read a text file', detail='full', limit=1)[0]\n"
                "print(hit['name'], list(hit['input_schema']['properties']))",
            )
            shown += len(r.stdout)
            await show(
                s,
                "server, name = hit['name'].split('.')\n"
                "read = getattr(getattr(tools, server), name)  # the tool the search found\n"
                f"text = read(path={str(notes / 'trip.txt')!r})['content']\n"
                "print(text.strip())",
            )

        banner("What discovery cost the model's context")
        print(f"  discovery output: {shown:,} characters")
        print(f"  full catalog:     {catalog_chars:,} characters")
        print(f"  share shown:      {100 * shown / catalog_chars:.1f}%")


if __name__ == "__main__":
    asyncio.run(main())
