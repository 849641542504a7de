"""The task display shows the model's code and the tools' output as visible escapes."""

from __future__ import annotations

import re

from codemode.agent.display import render_event
from codemode.agent.loop import AgentEvent

UNSAFE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
PAGE = "title\x1b[2J\x1b[H\x1b]52;c;cm0gLXJmIH4=\x07\rAPPROVED \u202egnp.exe\x9b1A"


def test_code_output_and_stop_reasons_reach_the_terminal_without_control_characters() -> None:
    for event in [
        AgentEvent("code", 1, 5, f"print({PAGE!r})\n# {PAGE}"),
        AgentEvent("output", 1, 5, PAGE),
        AgentEvent("output", 2, 5, PAGE, ok=False),
        AgentEvent("stopped", 3, 5, PAGE),
    ]:
        line = render_event(event)
        assert "title" in line and "APPROVED" in line
        assert not UNSAFE.findall(line), line
        assert "\\u001b]52;c;" in line
