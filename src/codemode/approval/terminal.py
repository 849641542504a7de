"""Asking the person at the terminal (``codemode run``): a prompt on stderr, an answer on
stdin. Without a terminal there is no one to ask, and the call is refused saying so.

The answer is read without a thread (the event loop watches the terminal), so a question
that times out leaves no reader behind to swallow the answer to the next one.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import TextIO

from ..execution.base import settle
from .types import Approval, ApprovalRequest, Approver

NO_TERMINAL = (
    "no terminal to ask on (standard input is not a terminal): run `codemode run` in a "
    "terminal to approve calls, or change the workspace's policy"
)
DECLINED = "a person declined it at the terminal"
PROMPT = "Allow it? [y]es / [n]o / [a]lways for this question in this session: "

ANSWERS = {
    "y": Approval(True),
    "yes": Approval(True),
    "a": Approval(True, remember=True),
    "always": Approval(True, remember=True),
    "n": Approval(False, reason=DECLINED),
    "no": Approval(False, reason=DECLINED),
    "": Approval(False, reason=DECLINED),
}


def terminal_approver(stdin: TextIO | None = None, stderr: TextIO | None = None) -> Approver:
    """An approver that prompts on ``stderr`` and reads the answer from ``stdin``."""

    async def approve(request: ApprovalRequest) -> Approval:
        src = stdin if stdin is not None else sys.stdin
        out = stderr if stderr is not None else sys.stderr
        try:
            fd = src.fileno()
            is_tty = os.isatty(fd)
        except (OSError, ValueError):
            is_tty = False
        if not is_tty:
            return Approval(False, reason=NO_TERMINAL)
        out.write(f"\ncodemode: the code wants to call {request.describe()}\n")
        if request.reason:
            out.write(f"  (the policy asks: {request.reason})\n")
        pending = b""
        while True:
            out.write(PROMPT)
            out.flush()
            while b"\n" not in pending:
                chunk = await _read(fd)
                if not chunk:  # end of input: nobody will answer
                    return Approval(False, reason="the terminal closed before an answer")
                pending += chunk
            line, _, pending = pending.partition(b"\n")
            answer = ANSWERS.get(line.decode(errors="replace").strip().lower())
            if answer is not None:
                return answer

    return approve


async def _read(fd: int) -> bytes:
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()
    loop.add_reader(fd, settle, ready)
    try:
        await ready
    finally:
        loop.remove_reader(fd)
    try:
        return os.read(fd, 4096)
    except OSError:
        return b""


__all__ = ["NO_TERMINAL", "terminal_approver"]
