"""OpenAI Agents SDK: the guard as a tool input guardrail (``pip install 'spanassert[openai-agents]'``).

```python
from agents import Agent, function_tool
from spanassert.live.guard_adapters.openai_agents import guard_tools

agent = Agent(name="support", tools=guard_tools([refund, delete_database], processor.guard()))
```

``guard_tools`` gives each ``FunctionTool`` the guard's :func:`tool_input_guardrail` (it may also be
listed by hand: ``function_tool(fn, tool_input_guardrails=[tool_input_guardrail(guard)])``). A
blocked call does not run: the guardrail answers ``reject_content`` with the refusal naming the
rule(s), which the SDK gives the model as the call's output, and the call gets an ``execute_tool``
span carrying the decision (:meth:`Guard.refusal_span`). The SDK's own tracing is not OpenTelemetry,
so by default (``trace_calls=True``) ``guard_tools`` also runs each allowed call inside an
``execute_tool`` span; pass ``trace_calls=False`` when an instrumentation (OpenInference, Logfire)
already turns the SDK's tool spans into OpenTelemetry ones. The guardrail runs before the SDK
invokes the tool, so the decision is recorded in the current trace and the call's span is matched to
it: run the agent inside an agent span (the episode), yours or an instrumentation's.
"""
from __future__ import annotations

import json
import weakref
from typing import Any, Awaitable, Callable, List, Sequence

from ..guard import Guard
from ._common import call_span, require, set_result

# One guardrail object per guard, so that guard_tools does not attach it twice.
_GUARDRAILS: weakref.WeakKeyDictionary[Guard, Any] = weakref.WeakKeyDictionary()


def _arguments(text: Any) -> Any:
    """The SDK hands a guardrail the model's raw JSON text: decide on the object it holds."""
    if isinstance(text, str):
        try:
            return json.loads(text)
        except ValueError:
            return text
    return text


def tool_input_guardrail(guard: Guard) -> Any:
    """A ``ToolInputGuardrail`` that decides each call of the tool(s) it is attached to."""
    agents = require("agents", "openai-agents")
    ToolGuardrailFunctionOutput, ToolInputGuardrail = agents.ToolGuardrailFunctionOutput, agents.ToolInputGuardrail

    existing = _GUARDRAILS.get(guard)
    if existing is not None:
        return existing

    def spanassert_guard(data: Any) -> Any:
        ctx = data.context
        tool = str(ctx.tool_name)
        arguments = _arguments(ctx.tool_arguments)
        call_id = None if ctx.tool_call_id is None else str(ctx.tool_call_id)
        agent = getattr(data.agent, "name", None)
        decision = guard.check(tool, arguments, call_id=call_id, agent=agent)
        if decision.allowed:
            return ToolGuardrailFunctionOutput.allow()
        guard.refusal_span(tool, arguments, decision, call_id=call_id)
        return ToolGuardrailFunctionOutput.reject_content(decision.message, output_info={
            "rules": [r.test_id for r in decision.rules]})

    guardrail = ToolInputGuardrail(guardrail_function=spanassert_guard, name="spanassert_guard")
    _GUARDRAILS[guard] = guardrail
    return guardrail


_Invoke = Callable[[Any, str], Awaitable[Any]]


def _traced(guard: Guard, name: str, invoke: _Invoke) -> _Invoke:
    async def on_invoke_tool(ctx: Any, input_json: str) -> Any:
        call_id = getattr(ctx, "tool_call_id", None)
        with call_span(guard, name, _arguments(input_json), None if call_id is None else str(call_id)) as span:
            result = await invoke(ctx, input_json)
            set_result(span, result)
            return result

    on_invoke_tool.__spanassert_traced__ = True  # type: ignore[attr-defined]  # a marker on the function object
    return on_invoke_tool


def guard_tools(tools: Sequence[Any], guard: Guard, *, trace_calls: bool = True) -> List[Any]:
    """Attach the guard's input guardrail to every ``FunctionTool`` in ``tools`` (in place; other
    tools are returned as they are), and with ``trace_calls`` run each allowed call in an
    ``execute_tool`` span. Returns the list, for ``Agent(tools=...)``."""
    FunctionTool = require("agents", "openai-agents").FunctionTool

    guardrail = tool_input_guardrail(guard)
    out = list(tools)
    for tool in out:
        if not isinstance(tool, FunctionTool):
            continue
        current = list(tool.tool_input_guardrails or [])
        if guardrail not in current:
            tool.tool_input_guardrails = [guardrail, *current]  # first: refuse before other checks run
        if trace_calls and not getattr(tool.on_invoke_tool, "__spanassert_traced__", False):
            tool.on_invoke_tool = _traced(guard, tool.name, tool.on_invoke_tool)
    return out


__all__ = ["tool_input_guardrail", "guard_tools"]
