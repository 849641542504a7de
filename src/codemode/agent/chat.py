"""For chat backends that keep their own model loop (the seeds' "hybrid" integration).

Given the assistant's reply, run its ```python blocks in a session and get the text to
send back to the model for the natural-language answer::

    ran = await run_code_blocks(reply, session)
    if ran.has_code:
        reply = await my_llm(history + [{"role": "user", "content": ran.follow_up()}])
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from codemode.result import ExecutionResult

from .messages import extract_code_blocks

FOLLOW_UP = (
    "Code execution output:\n{output}\n\n"
    "Answer the user in natural language from this output (run more code only if needed)."
)


@dataclass(slots=True)
class CodeBlockRun:
    """The code blocks of one reply and what running them gave."""

    blocks: list[str]
    results: list[ExecutionResult] = field(default_factory=list)
    limit: int = 8000

    @property
    def has_code(self) -> bool:
        return bool(self.blocks)

    @property
    def ok(self) -> bool:
        return all(r.is_ok for r in self.results) and len(self.results) == len(self.blocks)

    @property
    def output(self) -> str:
        """What the blocks printed, then each one's value or error (one section per block)."""
        parts = []
        for i, r in enumerate(self.results, 1):
            text = r.to_text(self.limit)
            parts.append(f"[block {i}]\n{text}" if len(self.blocks) > 1 else text)
        skipped = len(self.blocks) - len(self.results)
        if skipped:
            parts.append(f"[{skipped} later block(s) not run after the error]")
        return "\n\n".join(parts)

    def follow_up(self, template: str = FOLLOW_UP) -> str:
        """The message to send the model next (``{output}`` in ``template``)."""
        return template.format(output=self.output)


async def run_code_blocks(
    reply: str,
    session: Any,
    *,
    timeout: float | None = None,
    stop_on_error: bool = True,
    untagged: bool = False,
    limit: int = 8000,
) -> CodeBlockRun:
    """Run the reply's ```python blocks in ``session`` in order (state carries over)."""
    ran = CodeBlockRun(extract_code_blocks(reply, untagged=untagged), limit=limit)
    for code in ran.blocks:
        result = await session.run(code, timeout=timeout)
        ran.results.append(result)
        if stop_on_error and not result.is_ok:
            break
    return ran
