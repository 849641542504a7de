"""The agent runner: a model writes code, codemode runs it, until the task is answered.

```python
from codemode.agent import create_agent, execute_task

result, output, error = execute_task("How many notes mention Paris?")
agent = create_agent(llm_provider="openai", llm_model="gpt-4o-mini")
r = agent.execute_task("...")          # TaskResult: success, steps, usage, tool_calls...
```

Providers (``openai`` for OpenAI, Azure OpenAI and compatible servers; ``anthropic``)
are optional extras: ``pip install 'codemode[agent]'``. Without any model configured, a
task runs the saved skill that clearly matches it, or fails saying how to configure one.
"""

from __future__ import annotations

from .agent import Agent, aexecute_task, create_agent, execute_task
from .chat import CodeBlockRun, run_code_blocks
from .config import LLMConfig, resolve_llm_config
from .loop import AgentEvent, Limits
from .messages import extract_code_blocks
from .result import CodeRun, Step, TaskResult

__all__ = [
    "Agent",
    "AgentEvent",
    "CodeBlockRun",
    "CodeRun",
    "LLMConfig",
    "Limits",
    "Step",
    "TaskResult",
    "aexecute_task",
    "create_agent",
    "execute_task",
    "extract_code_blocks",
    "resolve_llm_config",
    "run_code_blocks",
]
