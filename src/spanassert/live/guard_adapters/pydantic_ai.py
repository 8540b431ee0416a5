"""pydantic-ai: the guard as a capability deciding each call in the framework's own tool-execution
hook, ``wrap_tool_execute`` (``pip install 'spanassert[pydantic-ai]'``).

```python
from pydantic_ai import Agent
from spanassert.live.guard_adapters.pydantic_ai import guard_capability

Agent.instrument_all()  # pydantic-ai's OpenTelemetry spans (or the Instrumentation capability)
agent = Agent(model, tools=[refund], capabilities=[guard_capability(processor.guard())])
```

A blocked call does not run: the hook raises ``SkipToolExecution`` with the refusal naming the
rule(s), which pydantic-ai gives the model as the call's result. With pydantic-ai's OpenTelemetry
instrumentation on (``Agent.instrument_all()`` or the ``Instrumentation`` capability), the hook runs inside the
``execute_tool`` span pydantic-ai writes for the call: the guard's decision is the one that span's
start made, and the span is exported carrying the decision event. Without it, the adapter opens an
``execute_tool`` span for each call and decides inside it (``trace_calls=False``: no span of its own;
a refused call's span is :meth:`Guard.refusal_span`'s).
"""
from __future__ import annotations

from typing import Any, Awaitable, Callable, Optional

from ...core.emit import ATTR_DECISION, LABEL_BLOCKED
from ..guard import Guard
from ._common import decided_call, require, set_result

ATTR_CALL_ID = "gen_ai.tool.call.id"


def _in_tool_span(call_id: Optional[str]) -> Any:
    """The current span when it is pydantic-ai's span of this very call (else None)."""
    from opentelemetry import trace

    span = trace.get_current_span()
    attributes = getattr(span, "attributes", None)
    if call_id is None or not span.is_recording() or not attributes:
        return None
    return span if attributes.get(ATTR_CALL_ID) == call_id else None


def guard_capability(guard: Guard, *, trace_calls: bool = True) -> Any:
    """A pydantic-ai capability (``Agent(capabilities=[...])``) refusing calls that break an
    ``action: block`` rule before they run. ``trace_calls``: when pydantic-ai's instrumentation is
    off, decide each call inside an ``execute_tool`` span of the adapter's (the default; the tool
    runs inside it), or (False, for another instrumentation that writes the tool spans) before any
    span, a refused call getting its span from :meth:`Guard.refusal_span`."""
    AbstractCapability: Any = require("pydantic_ai.capabilities", "pydantic-ai").AbstractCapability
    SkipToolExecution = require("pydantic_ai.exceptions", "pydantic-ai").SkipToolExecution

    class SpanAssertGuard(AbstractCapability[Any]):  # type: ignore[misc]  # the framework's class is untyped here
        """spanassert's guard: decides each tool call before it runs."""

        async def wrap_tool_execute(self, ctx: Any, *, call: Any, tool_def: Any, args: Any,
                                    handler: Callable[[Any], Awaitable[Any]]) -> Any:
            tool = str(call.tool_name)
            call_id = None if call.tool_call_id is None else str(call.tool_call_id)
            arguments = call.args_as_dict()  # what pydantic-ai's span records (the model's arguments)
            own = _in_tool_span(call_id)
            if own is None and trace_calls:
                with decided_call(guard, tool, arguments, call_id) as (decision, span):
                    if decision.allowed:
                        result = await handler(args)
                        set_result(span, result)
                        return result
                raise SkipToolExecution(decision.message)
            decision = guard.check(tool, arguments, call_id=call_id)
            if decision.allowed:
                return await handler(args)
            if own is not None:
                # pydantic-ai's own span of the call: its export carries the rules' events
                own.set_attribute(ATTR_DECISION, LABEL_BLOCKED)
            else:
                guard.refusal_span(tool, arguments, decision, call_id=call_id)
            raise SkipToolExecution(decision.message)

    return SpanAssertGuard()


__all__ = ["guard_capability"]
