"""LangChain / LangGraph: the guard as tool-call middleware (``pip install 'spanassert[langchain]'``).

```python
from langchain.agents import create_agent
from spanassert.live.guard_adapters.langchain import guard_middleware

agent = create_agent(model, tools, middleware=[guard_middleware(processor.guard())])
```

LangGraph's own ``ToolNode`` takes the same check as its wrappers:
``ToolNode(tools, wrap_tool_call=wrap_tool_call(guard), awrap_tool_call=awrap_tool_call(guard))``.

Each call is decided before the tool runs. A blocked call does not run: the model is given a
``ToolMessage`` (``status="error"``) whose content is the refusal naming the rule(s). LangChain
writes no OpenTelemetry spans itself, so by default (``trace_calls=True``) each call is decided
inside an ``execute_tool`` span the adapter opens for it (the tool runs inside it; a refused call's
span carries the decision). With ``trace_calls=False``, for when an instrumentation (OpenInference,
OpenLLMetry) already writes the tool spans, the call is decided before any span and a refused call
gets its span from :meth:`Guard.refusal_span`.
"""
from __future__ import annotations

from typing import Any, Awaitable, Callable, Optional, Tuple

from ..guard import Decision, Guard
from ._common import decided_call, require, set_result

_Call = Tuple[str, Any, Optional[str]]


def _call(request: Any) -> _Call:
    call = request.tool_call
    cid = call.get("id")
    return str(call.get("name")), call.get("args"), None if cid is None else str(cid)


def _refusal(guard: Guard, call: _Call, decision: Decision, *, write_span: bool) -> Any:
    ToolMessage = require("langchain_core.messages", "langchain").ToolMessage

    name, args, cid = call
    if write_span:  # no span of ours around the call: the refused call's own
        guard.refusal_span(name, args, decision, call_id=cid)
    return ToolMessage(content=decision.message, tool_call_id=cid or "", name=name, status="error")


def _result(span: Any, out: Any) -> None:
    content = getattr(out, "content", None)
    if content is not None:  # a ToolMessage (a Command has no content to record)
        set_result(span, content, error=getattr(out, "status", None) == "error")


def wrap_tool_call(guard: Guard, *, trace_calls: bool = True) -> Callable[[Any, Callable[[Any], Any]], Any]:
    """A LangGraph ``ToolNode(wrap_tool_call=...)`` wrapper deciding each call before it runs."""

    def wrapper(request: Any, handler: Callable[[Any], Any]) -> Any:
        call = _call(request)
        if not trace_calls:
            decision = guard.check(call[0], call[1], call_id=call[2])
            return handler(request) if decision.allowed else _refusal(guard, call, decision, write_span=True)
        with decided_call(guard, *call) as (decision, span):
            if decision.blocked:
                return _refusal(guard, call, decision, write_span=False)
            out = handler(request)
            _result(span, out)
            return out

    return wrapper


def awrap_tool_call(guard: Guard, *, trace_calls: bool = True) -> Callable[[Any, Callable[[Any], Awaitable[Any]]],
                                                                           Awaitable[Any]]:
    """The async form, for ``ToolNode(awrap_tool_call=...)`` (``ainvoke``/``astream``)."""

    async def wrapper(request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        call = _call(request)
        if not trace_calls:
            decision = guard.check(call[0], call[1], call_id=call[2])
            return await handler(request) if decision.allowed else _refusal(guard, call, decision, write_span=True)
        with decided_call(guard, *call) as (decision, span):
            if decision.blocked:
                return _refusal(guard, call, decision, write_span=False)
            out = await handler(request)
            _result(span, out)
            return out

    return wrapper


def guard_middleware(guard: Guard, *, trace_calls: bool = True) -> Any:
    """An ``AgentMiddleware`` for ``langchain.agents.create_agent(..., middleware=[...])`` whose
    ``wrap_tool_call`` / ``awrap_tool_call`` decide each call before it runs."""
    AgentMiddleware: Any = require("langchain.agents.middleware", "langchain").AgentMiddleware

    sync_wrapper = wrap_tool_call(guard, trace_calls=trace_calls)
    async_wrapper = awrap_tool_call(guard, trace_calls=trace_calls)

    class SpanAssertGuardMiddleware(AgentMiddleware):  # type: ignore[misc]  # the framework's class is untyped here
        """spanassert's guard: refuses a call that breaks an ``action: block`` rule."""

        def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
            return sync_wrapper(request, handler)

        async def awrap_tool_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
            return await async_wrapper(request, handler)

    return SpanAssertGuardMiddleware()


__all__ = ["guard_middleware", "wrap_tool_call", "awrap_tool_call"]
