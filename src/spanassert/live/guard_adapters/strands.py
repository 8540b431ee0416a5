"""Strands Agents: the guard as a before-tool-call hook (``pip install 'spanassert[strands]'``).

```python
from strands import Agent
from spanassert.live.guard_adapters.strands import guard_hooks

agent = Agent(model=..., tools=[...], hooks=[guard_hooks(guard)])
```

Strands fires ``BeforeToolCallEvent`` before each tool runs; the hook asks the guard about the call
(tool name, input, ``toolUseId``, agent name) and, when it is blocked, sets ``event.cancel_tool`` to
the refusal: Strands then skips the tool and gives the model a tool result with status ``error``
whose text is the refusal, and the agent goes on. Strands writes no tool span for a cancelled call,
so the hook writes one (:meth:`~spanassert.live.guard.Guard.refusal_span`: ``execute_tool <name>``
with the call id, arguments and the decision event) in the agent's trace, and replay of the exported
spans gives the same verdict. Strands is imported when the agent registers the hooks, not before.
"""
from __future__ import annotations

from typing import Any


class GuardHooks:
    """A Strands ``HookProvider`` (the protocol is structural: nothing to subclass) that decides each
    tool call with a :class:`~spanassert.live.guard.Guard` before any other before-tool-call hook."""

    def __init__(self, guard: Any) -> None:
        self.guard = guard

    def register_hooks(self, registry: Any, **kwargs: Any) -> None:
        from ._common import require

        hooks = require("strands.hooks", "strands")
        registry.add_callback(hooks.BeforeToolCallEvent, self.before_tool_call, order=hooks.HookOrder.SDK_FIRST)

    def before_tool_call(self, event: Any) -> None:
        tool_use = event.tool_use
        name = str(tool_use.get("name"))
        arguments = tool_use.get("input")
        raw_id = tool_use.get("toolUseId")
        call_id = None if raw_id is None else str(raw_id)
        decision = self.guard.check(name, arguments, call_id=call_id, agent=getattr(event.agent, "name", None))
        if decision.allowed:
            return
        event.cancel_tool = decision.message  # Strands: skip the tool, the model gets an error result
        self.guard.refusal_span(name, arguments, decision, call_id=call_id)


def guard_hooks(guard: Any) -> GuardHooks:
    """The hooks to pass to ``Agent(hooks=[...])`` (or ``agent.hooks.add_hook``)."""
    return GuardHooks(guard)


__all__ = ["GuardHooks", "guard_hooks"]
