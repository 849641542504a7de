"""LLM integration: the agent runner drives a model that writes code until it can answer.

    .venv/bin/python examples/llm_integration.py                 # offline: a scripted model
    .venv/bin/python examples/llm_integration.py --wire anthropic # the same, Anthropic format

Offline (the default when no model is configured), the model is codemode's
``FakeLLMServer``: a real HTTP server on 127.0.0.1 speaking the OpenAI chat-completions
(or Anthropic messages) wire format, playing a script of replies. The official ``openai``
and ``anthropic`` SDKs talk to it exactly as they talk to the real services, so every
other part is real: the agent loop, the sandboxed session, the filesystem MCP server.

To use a real model, configure one the usual way (docs/agent.md) and run the same command:

    OPENAI_API_KEY=sk-... LLM_MODEL=gpt-4o-mini .venv/bin/python examples/llm_integration.py
    LLM_PROVIDER=anthropic ANTHROPIC_API_KEY=... .venv/bin/python examples/llm_integration.py

(``OPENAI_BASE_URL`` points the OpenAI provider at any compatible server; ``--fake`` keeps
the scripted model even when a real one is configured.)
"""

from __future__ import annotations

import argparse
import re
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from _support import banner, make_workspace, npm_server, scratch

from codemode.agent import TaskResult, create_agent, resolve_llm_config
from codemode.agent.testing import Answer, Code, FakeLLMServer, RecordedRequest

NOTES = {
    "monday.txt": "Standup, then lunch with Ana. Book the train to Paris.\n",
    "tuesday.txt": "Quarterly numbers due. Call the bank.\n",
    "friday.txt": "Paris offsite: confirm the hotel near Gare de Lyon.\n",
}
KEY = "sk-fake-offline"


def scripted_model(folder: Path) -> list[Any]:
    """What a capable model does with this task: discover, compute in code, answer."""

    def answer(request: RecordedRequest) -> Answer:
        found = re.search(r"(\d+) of (\d+) notes: (.*)", request.last_tool_output())
        if found is None:
            return Answer("I could not count the notes.")
        return Answer(f"{found[1]} of your {found[2]} notes mention Paris ({found[3]}).")

    return [
        Code(
            "for need in ('list the files of a directory', 'read a text file'):\n"
            "    print(need, '->', [hit['name'] for hit in tools.search(need, limit=2)])"
        ),
        Code(
            f"folder = {str(folder)!r}\n"
            "listing = tools.files.list_directory(path=folder)['content']\n"
            "names = [line.split()[-1] for line in listing.splitlines()]\n"
            "hits = [n for n in names\n"
            "        if 'Paris' in tools.files.read_text_file(path=f'{folder}/{n}')['content']]\n"
            "print(len(hits), 'of', len(names), 'notes:', ', '.join(sorted(hits)))"
        ),
        answer,
    ]


def report(result: TaskResult) -> None:
    for step in result.steps:
        for run in step.runs:
            banner(f"step {step.index}: the model's code ({'ok' if run.ok else 'failed'})")
            print("  " + run.code.replace("\n", "\n  "))
            print("  -> " + run.output.strip().replace("\n", "\n     "))
    banner("answer")
    print(f"  {result.result}")
    print(f"  success={result.success} stop_reason={result.stop_reason} steps={len(result.steps)}"
          f" tool_calls={len(result.tool_calls)}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description="The agent runner driving a model.")
    parser.add_argument("--fake", action="store_true", help="the scripted model, always")
    parser.add_argument("--wire", choices=["openai", "anthropic"], default="openai",
                        help="the wire format the scripted model speaks")  # fmt: skip
    args = parser.parse_args()
    with scratch("llm") as root, ExitStack() as stack:
        notes = root / "notes"
        notes.mkdir()
        for name, text in NOTES.items():
            (notes / name).write_text(text)
        base = make_workspace(root, {"files": npm_server("server-filesystem", str(notes))})
        configured = resolve_llm_config(base).config.effective_provider != "none"
        llm: dict[str, Any] = {}
        fake: FakeLLMServer | None = None
        if configured and not args.fake:
            banner("Using the model configured in the environment (docs/agent.md)")
        else:
            fake = stack.enter_context(FakeLLMServer(scripted_model(notes), api_key=KEY))
            url = fake.openai_url if args.wire == "openai" else fake.anthropic_url
            llm = {"llm_provider": args.wire, "llm_base_url": url, "llm_api_key": KEY}
            banner(f"No model configured: a scripted model on {url} ({args.wire} wire format)")
        task = f"How many of my notes in {notes} mention Paris?"
        print(f"  task: {task}")
        with create_agent(base=base, **llm) as agent:
            result = agent.execute_task(task)
        report(result)
        if fake is not None:
            requests = fake.requests
            print(f"  the scripted model served {len(requests)} requests; the first offered"
                  f" the tools {requests[0].tool_names}")  # fmt: skip


if __name__ == "__main__":
    main()
