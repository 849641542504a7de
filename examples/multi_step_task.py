"""A complex multi-step task: three servers, several runs, one persistent session.

    .venv/bin/python examples/multi_step_task.py

The task: "For this week's meeting notes, tell each attendee the meeting time in their own
timezone, remember who met whom in the knowledge graph, and write a follow-up plan."
The agent's code does it in steps, each building on the variables of the one before (the
session persists): discover the tools it needs, read and parse every note (filesystem),
convert times for every attendee at once (time server, concurrent calls), record people
and meetings with relations (memory server), write the plan back as a file, and keep a
summary as an artifact and a cursor in state for the next run. Only short summaries are
printed: the notes, the graph and the plan stay out of the model's context.
"""

from __future__ import annotations

import asyncio

from _support import banner, make_workspace, npm_server, scratch, show, time_server

from codemode import Session

NOTES = {
    "mon-acme.txt": """\
        when: 2026-11-23 09:30 Europe/Paris
        with: Kenji Sato (Asia/Tokyo), Maria Lopez (America/New_York)
        topic: Renewal of the Acme contract
        todo: Kenji sends the revised quote; Maria checks the legal terms
        """,
    "wed-globex.txt": """\
        when: 2026-11-25 16:00 Europe/Paris
        with: Priya Nair (Asia/Kolkata)
        topic: Globex pilot review
        todo: Priya shares the pilot metrics
        """,
    "thu-initech.txt": """\
        when: 2026-11-26 11:00 Europe/Paris
        with: Maria Lopez (America/New_York), Tom Berg (Europe/Oslo)
        topic: Initech onboarding
        todo: Tom books the kickoff; Maria drafts the onboarding plan
        """,
}

STEP_PARSE = """
import re
folder = NOTES
listing = tools.files.list_directory(path=folder)['content']
names = sorted(line.split()[-1] for line in listing.splitlines() if line.endswith('.txt'))
meetings = []
for name in names:
    text = tools.files.read_text_file(path=f'{folder}/{name}')['content']
    fields = dict(line.strip().split(': ', 1) for line in text.strip().splitlines())
    day, hour, zone = fields['when'].split()
    people = re.findall(r'([^,(]+?) \\(([^)]+)\\)', fields['with'])
    meetings.append({'file': name, 'day': day, 'hour': hour, 'zone': zone,
                     'topic': fields['topic'], 'todo': fields['todo'],
                     'people': [{'name': n.strip(), 'zone': z} for n, z in people]})
meetings.sort(key=lambda m: (m['day'], m['hour']))
print(len(meetings), 'meetings,', sum(len(m['people']) for m in meetings), 'invitations')
"""

STEP_TIMES = """
import asyncio
pairs = [(m, p) for m in meetings for p in m['people']]
converted = await asyncio.gather(*(
    tools.time.convert_time.aio(source_timezone=m['zone'], time=m['hour'],
                                target_timezone=p['zone'])
    for m, p in pairs))
for (m, p), c in zip(pairs, converted):
    p['local'] = c['target']['datetime'][11:16]
for m in meetings:
    print(m['day'], m['hour'], m['topic'][:24].ljust(24), '|',
          ', '.join(f"{p['name']} {p['local']}" for p in m['people']))
"""

STEP_GRAPH = """
people = sorted({p['name'] for m in meetings for p in m['people']})
tools.memory.create_entities(entities=
    [{'name': n, 'entityType': 'person', 'observations': []} for n in people]
    + [{'name': m['topic'], 'entityType': 'meeting',
        'observations': [f"{m['day']} {m['hour']} {m['zone']}", m['todo']]} for m in meetings])
tools.memory.create_relations(relations=[
    {'from': p['name'], 'to': m['topic'], 'relationType': 'attends'}
    for m in meetings for p in m['people']])
graph = tools.memory.read_graph()
print(len(graph['entities']), 'entities,', len(graph['relations']), 'relations in the graph')
maria = tools.memory.open_nodes(names=['Maria Lopez'])
print('Maria Lopez attends:', sorted(r['to'] for r in maria['relations']))
"""

STEP_PLAN = """
lines = ['# Follow-ups', '']
for m in meetings:
    lines.append(f"## {m['topic']} ({m['day']})")
    lines += [f"- [ ] {task.strip()}" for task in m['todo'].split(';')]
    lines.append('')
plan = OUT + '/follow-ups.md'
tools.files.write_file(path=plan, content='\\n'.join(lines))
tasks = sum(line.startswith('- [ ]') for line in lines)
artifacts.save('follow_ups', {'meetings': len(meetings), 'tasks': tasks, 'file': plan},
               description='Follow-up plan of the week')
state.set('last_week_done', max(m['day'] for m in meetings))
print('wrote', plan.rsplit('/', 1)[-1], 'with', tasks, 'tasks; cursor',
      state.get('last_week_done'))
"""


async def main() -> None:
    with scratch("multi-step") as root:
        notes, out = root / "notes", root / "out"
        notes.mkdir()
        out.mkdir()
        for name, text in NOTES.items():
            (notes / name).write_text("\n".join(line.strip() for line in text.splitlines()))
        servers = {
            "files": npm_server("server-filesystem", str(notes), str(out)),
            "memory": npm_server("server-memory", env={"MEMORY_FILE_PATH": str(root / "m.jsonl")}),
            "time": time_server(),
        }
        base = make_workspace(root, servers)
        async with Session.from_base(base) as s:
            banner("1. Find the tools the task needs")
            await show(
                s,
                "for need in ('read a text file', 'convert a time between timezones',\n"
                "             'create entities in the knowledge graph', 'write a file'):\n"
                "    print(need.ljust(40), [h['name'] for h in tools.search(need, limit=2)])",
            )
            banner("2. Read and parse every meeting note (the notes stay in the session)")
            await show(s, STEP_PARSE.replace("NOTES", repr(str(notes))))
            banner("3. Each attendee's local time, all conversions at once")
            await show(s, STEP_TIMES)
            banner("4. Who met whom, in the knowledge graph")
            await show(s, STEP_GRAPH)
            banner("5. The follow-up plan as a file, a summary artifact, a cursor in state")
            await show(s, STEP_PLAN.replace("OUT", repr(str(out))))

        banner("On the host: the plan the agent wrote")
        print("  " + (out / "follow-ups.md").read_text().strip().replace("\n", "\n  "))


if __name__ == "__main__":
    asyncio.run(main())
