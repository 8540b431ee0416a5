"""Google ADK: the guard as ADK callbacks (``pip install 'spanassert[google-adk]'``).

```python
from google.adk.agents import Agent
from spanassert.live.guard_adapters.google_adk import guard_callbacks

agent = Agent(name="support", model=..., tools=[...], **guard_callbacks(guard))
```

ADK calls ``before_tool_callback`` with the tool, its arguments and the tool context before the tool
runs; a dict returned there answers the call in place of the tool. A blocked call gets
``{"error": <refusal>}``, ADK's shape for a tool that failed (the model reads the function response
and carries on); an allowed call gets None and runs.

ADK writes its own ``execute_tool`` span around that callback and the tool, but opens it with no
attributes (tool name, call id and arguments are set when it ends), and a decision asked from inside
a tool span is the one its start made: argument rules would not see the arguments. So
``after_model_callback`` decides each function call of the model's response as the model asks for
it, arguments included, before ADK opens the call's span; the span adopts that decision at its start
(same call id, else same tool, oldest first), and ``before_tool_callback`` reads it from inside the
span. Each call is recorded once, the span carries the decision event, and replay gives the same
verdicts. Use both (:func:`guard_callbacks`): ``before_tool_callback`` alone blocks forbidden tools,
counts, order and the rules that judge a call on its own arguments (the guard judges the arguments
it is given inside a span that had none), but values flowing into the arguments (``trace_no_flow``)
only alert. A function call the model asks for and ADK never runs stays recorded as a call.

This module imports nothing from ADK: it reads the attributes ADK passes (``tool.name``,
``tool_context.function_call_id``, ``agent_name``, the response's ``function_call`` parts).
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Optional

BeforeToolCallback = Callable[[Any, Dict[str, Any], Any], Optional[Dict[str, Any]]]


def before_tool_callback(guard: Any) -> BeforeToolCallback:
    """An ADK ``before_tool_callback`` that asks ``guard`` (a :class:`~spanassert.live.guard.Guard`)
    about each call (the decision :func:`after_model_callback` made, when it did)."""

    def callback(tool: Any, args: Dict[str, Any], tool_context: Any) -> Optional[Dict[str, Any]]:
        decision = guard.check(str(getattr(tool, "name", tool)), args,
                               call_id=getattr(tool_context, "function_call_id", None),
                               agent=getattr(tool_context, "agent_name", None))
        return None if decision.allowed else {"error": decision.message}

    return callback


def after_model_callback(guard: Any) -> Callable[[Any, Any], None]:
    """An ADK ``after_model_callback`` that decides each function call of a model response when the
    model asks for it, with its arguments, before ADK opens the call's span (which has none at its
    start): :func:`before_tool_callback` then finds the decision, argument rules included."""

    def callback(callback_context: Any, llm_response: Any) -> None:
        content = getattr(llm_response, "content", None)
        for part in getattr(content, "parts", None) or ():
            call = getattr(part, "function_call", None)
            if call is None or not getattr(call, "name", None):
                continue
            args = getattr(call, "args", None)
            guard.check(str(call.name), dict(args) if args else {}, call_id=getattr(call, "id", None),
                        agent=getattr(callback_context, "agent_name", None))

    return callback


def guard_callbacks(guard: Any) -> Dict[str, Any]:
    """Both callbacks, as ``Agent(**guard_callbacks(guard))`` takes them. With callbacks of your own,
    pass lists with these first (ADK runs a list in order and stops at the first answer)."""
    return {"before_tool_callback": before_tool_callback(guard), "after_model_callback": after_model_callback(guard)}


__all__ = ["guard_callbacks", "before_tool_callback", "after_model_callback"]
