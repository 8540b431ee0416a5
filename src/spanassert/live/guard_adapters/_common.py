"""What the adapters share: :func:`require` (a framework missing says which extra installs it), and
tool spans for the adapters of frameworks that write none of their own (LangChain, the OpenAI
Agents SDK). :func:`decided_call` opens the call's ``execute_tool`` span (OpenTelemetry GenAI
conventions: tool name, call id and arguments at its start), then asks the guard from inside it, as
the guard's own decorator does: the decision is the one the span's start made, so the span is the
call's one record (never counted twice, in or out of an agent span), a refused call's span carries
the decision (the ``spanassert.guard.decision`` attribute, the refusal as its result, and the
rules' ``gen_ai.evaluation.result`` events, label ``blocked``, added by the processor on export), and
the exported telemetry holds every decided call and replays to the same verdicts.
Never raises into the application."""
from __future__ import annotations

import contextlib
import importlib
from typing import Any, Iterator, Optional, Tuple

from ...core.emit import ATTR_DECISION, LABEL_BLOCKED
from ..guard import Decision, Guard, encode_arguments

ATTR_OPERATION = "gen_ai.operation.name"
ATTR_TOOL_NAME = "gen_ai.tool.name"
ATTR_CALL_ID = "gen_ai.tool.call.id"
ATTR_ARGUMENTS = "gen_ai.tool.call.arguments"
ATTR_RESULT = "gen_ai.tool.call.result"


def require(module: str, extra: str) -> Any:
    """Import a framework module for an adapter, or say how to install it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(f"this spanassert guard adapter needs `{module}` ({exc}); install it with: "
                          f"pip install 'spanassert[{extra}]'") from exc


def _tracer(guard: Guard) -> Any:
    from opentelemetry import trace

    from ... import __version__

    provider = guard.tracer_provider if guard.tracer_provider is not None else trace.get_tracer_provider()
    return provider.get_tracer("spanassert.guard", __version__)


@contextlib.contextmanager
def call_span(guard: Guard, tool: str, arguments: Any, call_id: Optional[str]) -> Iterator[Any]:
    """The ``execute_tool`` span of one call, current inside the block (None when none could be
    started); an exception from the block is recorded on it and passed on."""
    cm: Any = None
    span: Any = None
    try:
        attrs = {ATTR_OPERATION: "execute_tool", ATTR_TOOL_NAME: tool}
        if call_id is not None:
            attrs[ATTR_CALL_ID] = call_id
        args = encode_arguments(arguments)
        if args is not None:
            attrs[ATTR_ARGUMENTS] = args
        cm = _tracer(guard).start_as_current_span(f"execute_tool {tool}", attributes=attrs)
        span = cm.__enter__()
    except Exception as exc:  # noqa: BLE001 - no span: the call still goes on
        guard.processor.telemetry.internal_error("guard_span", exc)
        cm = None
    if cm is None:
        yield None
        return
    try:
        yield span
    except BaseException as exc:
        if not cm.__exit__(type(exc), exc, exc.__traceback__):
            raise
    else:
        cm.__exit__(None, None, None)


@contextlib.contextmanager
def decided_call(guard: Guard, tool: str, arguments: Any, call_id: Optional[str]) -> Iterator[Tuple[Decision, Any]]:
    """``(decision, span)`` for one call, decided inside its ``execute_tool`` span (``span`` is None
    when none could be started). Run the tool in the block only when ``decision.allowed``."""
    with call_span(guard, tool, arguments, call_id) as span:
        decision = guard.check(tool, arguments, call_id=call_id)
        if decision.blocked and span is not None:
            with contextlib.suppress(Exception):  # the rules' events still go on the exported span
                span.set_attribute(ATTR_DECISION, LABEL_BLOCKED)
            set_result(span, decision.message)  # refused, not failed: as Guard.refusal_span records it
        yield decision, span


def set_result(span: Any, result: Any, error: bool = False) -> None:
    """Record a tool's result (and error status) on its span."""
    if span is None:
        return
    try:
        text = encode_arguments(result)
        if text is not None:
            span.set_attribute(ATTR_RESULT, text)
        if error:
            from opentelemetry.trace import Status, StatusCode

            span.set_status(Status(StatusCode.ERROR))
    except Exception:  # noqa: BLE001 - a result not recorded is not worth failing the call
        pass
