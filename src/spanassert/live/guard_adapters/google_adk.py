"""Google ADK: the guard as a ``before_tool_callback`` (``pip install 'spanassert[google-adk]'``).

```python
from google.adk.agents import Agent
from spanassert.live.guard_adapters.google_adk import before_tool_callback

agent = Agent(name="support", model=..., tools=[...], before_tool_callback=before_tool_callback(guard))
```

ADK calls the callback with the tool, its arguments and the tool context before the tool runs;
a dict returned there answers the call in place of the tool. A blocked call gets
``{"error": <refusal>}``, ADK's shape for a tool that failed (the model reads the function response
and carries on); an allowed call gets None and runs. ADK writes its own ``execute_tool`` span around
the callback and the tool, with the call id; the decision is taken in that span's trace and matched
to it, so the span carries the decision event and replays to the same verdict. The callback is
decided from ADK's function-call id and agent name. This module imports nothing from ADK: it only
reads the attributes ADK passes (``tool.name``, ``tool_context.function_call_id``,
``tool_context.agent_name``).
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Optional

BeforeToolCallback = Callable[[Any, Dict[str, Any], Any], Optional[Dict[str, Any]]]


def before_tool_callback(guard: Any) -> BeforeToolCallback:
    """An ADK ``before_tool_callback`` that asks ``guard`` (a :class:`~spanassert.live.guard.Guard`)
    about each call. With callbacks of the agent's own, pass a list with this one first
    (``before_tool_callback=[before_tool_callback(guard), own]``): ADK stops at the first answer."""

    def callback(tool: Any, args: Dict[str, Any], tool_context: Any) -> Optional[Dict[str, Any]]:
        decision = guard.check(str(getattr(tool, "name", tool)), args,
                               call_id=getattr(tool_context, "function_call_id", None),
                               agent=getattr(tool_context, "agent_name", None))
        return None if decision.allowed else {"error": decision.message}

    return callback


__all__ = ["before_tool_callback"]
