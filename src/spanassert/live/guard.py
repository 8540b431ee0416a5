"""The guard: a rules file's ``action: block`` tests, decided before a tool runs.

```python
guard = processor.guard()                    # the live processor's episodes, counts and order
decision = guard.check("send_email", {"to": "x@evil.com"})
if decision.blocked:
    ...                                      # give the model decision.message; do not run the tool
```

A decision is the engine's own: the pending call is recorded in its trace's episode exactly as a
tool span starting with these arguments would be (counts, order, data flow so far), and the tool
span that follows, written by the framework or by :meth:`Guard.refusal_span`, is matched to it (by
call id, else by tool and arguments) and not counted again. Asked from inside the tool's own span
(the :meth:`Guard.tool` decorator opens it first), the decision is the one that span's start made.
Only what is decidable when a call starts can block: a forbidden or blocklisted tool, a count that
goes over, an order rule, argument rules and flows into the arguments; rules on results, status,
duration or the episode's end alert as before.

Never raises into the application (except :class:`ToolBlocked` from the decorator, by design): an
internal error is counted (``spanassert.internal_errors``, kind ``guard``, and
``spanassert.guard.decisions`` with ``error``) and the call is allowed or blocked by
``settings.guard.fail_open`` (default: allowed).
"""
from __future__ import annotations

import functools
import inspect
import json
import logging
import random
import re
import time
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Tuple, TypeVar, Union

from opentelemetry.trace import get_current_span

from ..config.model import Config
from ..core.emit import (
    ATTR_DECISION,
    ATTR_EVAL_EXPLANATION,
    ATTR_SPAN_ID,
    EVENT_NAME,
    violation_event_attributes,
)
from ..core.engine import PENDING_PREFIX, Engine
from ..core.escaping import escape_control
from ..core.results import Violation

log = logging.getLogger("spanassert")

MAX_RULE_MESSAGE_CHARS = 300  # one rule's message in a refusal
MAX_REFUSAL_CHARS = 1000  # the whole refusal text the model sees
MAX_TOOL_NAME_CHARS = 128
# A rule's message names the call's span; a call decided before its span exists has none yet.
_PENDING_SPAN = re.compile(r" \(span " + re.escape(PENDING_PREFIX) + r"[0-9a-f]+\)")
DECISION_ALLOWED = "allowed"
DECISION_BLOCKED = "blocked"
DECISION_WOULD_BLOCK = "would_block"

F = TypeVar("F", bound=Callable[..., Any])


class BlockingRule(NamedTuple):
    """A rule that blocks (or, in shadow mode, would block) a call."""

    test_id: str
    assertion: str  # the assertion type (with its name, when it has one)
    message: str


class Decision:
    """What the guard decided about one pending call."""

    __slots__ = ("tool", "call_id", "allowed", "would_block", "rules", "message", "error", "_violations")

    def __init__(self, tool: str, call_id: Optional[str], allowed: bool, would_block: bool,
                 rules: Tuple[BlockingRule, ...], message: str, error: Optional[str] = None,
                 violations: Tuple[Violation, ...] = ()) -> None:
        self.tool = tool
        self.call_id = call_id
        self.allowed = allowed  # run the tool?
        self.would_block = would_block  # a shadow-mode block test would have blocked it
        self.rules = rules  # the tests that block (or would block) it
        self.message = message  # the refusal the model is given (bounded, control characters escaped)
        self.error = error  # an internal error happened (counted); `allowed` followed fail_open
        self._violations = violations  # blocking violations (their span events)

    @property
    def blocked(self) -> bool:
        return not self.allowed

    def __repr__(self) -> str:
        state = "blocked" if self.blocked else ("would_block" if self.would_block else "allowed")
        return f"Decision({self.tool!r}, {state}, rules={[r.test_id for r in self.rules]})"


class ToolBlocked(Exception):
    """Raised by a :meth:`Guard.tool`-decorated function whose call was blocked; ``str()`` is the
    refusal text, ``decision`` the :class:`Decision`."""

    def __init__(self, decision: Decision) -> None:
        super().__init__(decision.message)
        self.decision = decision


def _bounded(text: str, limit: int) -> str:
    text = escape_control(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def refusal_message(tool: str, rules: Tuple[BlockingRule, ...], shadow: bool = False) -> str:
    """The refusal text: the tool, then each rule that blocks it with its message (bounded, escaped)."""
    head = f"spanassert {'would have blocked' if shadow else 'blocked'} the call of " \
           f"`{_bounded(tool, MAX_TOOL_NAME_CHARS)}`"
    parts = [f"rule `{_bounded(r.test_id, MAX_TOOL_NAME_CHARS)}` ({r.assertion}): "
             f"{_bounded(_PENDING_SPAN.sub('', r.message), MAX_RULE_MESSAGE_CHARS)}" for r in rules]
    return _bounded(head + (": " + "; ".join(parts) if parts else ""), MAX_REFUSAL_CHARS)


def encode_arguments(arguments: Any) -> Optional[str]:
    """A call's arguments as the text a tool span records (``gen_ai.tool.call.arguments``)."""
    if arguments is None:
        return None
    if isinstance(arguments, str):
        return arguments
    if isinstance(arguments, (bytes, bytearray)):
        return bytes(arguments).decode("utf-8", "replace")
    try:
        return _ENCODER.encode(arguments)
    except (TypeError, ValueError, RecursionError):
        return _as_text(arguments)


def _as_text(value: Any) -> str:
    try:
        return str(value)
    except Exception:  # noqa: BLE001 - a value that cannot say what it is
        return f"<{type(value).__name__}>"


_ENCODER = json.JSONEncoder(ensure_ascii=False, default=_as_text)  # made once: json.dumps(**kw) makes one per call


def _hex_trace(value: Union[str, int]) -> str:
    return format(value, "032x") if isinstance(value, int) else value.lower()


class Guard:
    """Decides pending tool calls from a rules file's ``action: block`` tests.

    Args:
        config: a loaded :class:`Config` or a rules file path (not needed with ``processor``).
        processor: the live :class:`AssertionSpanProcessor` whose episodes the decisions read and
            extend (``processor.guard()`` is the same). Without one, the guard runs its own
            processor, attached to no tracer provider: decisions see only each other.
        fail_open: on an internal error, allow (True) or block (False); default
            ``settings.guard.fail_open`` (True).
        tracer_provider: where :meth:`refusal_span` and :meth:`tool` write spans (default: the
            global tracer provider).
    """

    def __init__(self, config: Union[Config, str, None] = None, *, processor: Any = None,
                 fail_open: Optional[bool] = None, tracer_provider: Any = None) -> None:
        if processor is None:
            if config is None:
                raise TypeError("Guard needs a rules file (config) or a processor")
            from .processor import AssertionSpanProcessor

            processor = AssertionSpanProcessor(config)
        self.processor = processor
        self.config: Config = processor.config
        self.fail_open = self.config.settings.guard_fail_open if fail_open is None else bool(fail_open)
        self.tracer_provider = tracer_provider
        self._action: Dict[str, Tuple[bool, bool]] = {  # test id -> (blocks, would block: shadow)
            t.id: (t.blocks, t.shadow) for t in self.config.tests if t.action == "block"}

    # -- deciding ---------------------------------------------------------------------------------
    def check(self, tool: str, arguments: Any = None, *, call_id: Optional[str] = None,
              agent: Optional[str] = None, trace_id: Union[str, int, None] = None) -> Decision:
        """Decide a pending call of ``tool`` with ``arguments`` (a dict, a JSON text, or None) in
        the episode of ``trace_id`` (default: the current OpenTelemetry span's trace)."""
        try:
            return self._check(str(tool), arguments, call_id, agent, trace_id)
        except Exception as exc:  # noqa: BLE001 - never raise into the application
            return self._failed(str(tool), call_id, exc)

    def _check(self, tool: str, arguments: Any, call_id: Optional[str], agent: Optional[str],
               trace_id: Union[str, int, None]) -> Decision:
        args_raw = encode_arguments(arguments)
        ctx = get_current_span().get_span_context()
        current: Optional[str] = None
        dry = False
        if ctx.is_valid:
            tid = format(ctx.trace_id, "032x")
            if trace_id is None or _hex_trace(trace_id) == tid:
                current = format(ctx.span_id, "016x")
            else:
                tid = _hex_trace(trace_id)
        elif trace_id is not None:
            tid = _hex_trace(trace_id)
        else:
            # No trace: the call's span, if any, will be a trace of its own. Decided as the first call
            # of an empty episode, recorded by nothing but that span (never counted twice).
            tid = format(random.getrandbits(128) or 1, "032x")
            dry = True
        cid = None if call_id is None else str(call_id)
        if current is not None and ctx.is_remote:
            # Decided under the caller's span in another process (an MCP server's tools/call): the
            # episode this opens has its root elsewhere, as the call's span will show.
            self.processor._remote.guarded(ctx.trace_id)

        def decide(engine: Engine) -> Decision:
            found = engine.started_call(tid, current, tool, args_raw, cid) if current is not None else None
            if found is None:
                found = engine.decide_pending(tid, tool, args_raw, cid, current, agent, time.time_ns(), dry)[1]
            return self._decision(tool, cid, found)

        decision: Decision = self.processor._guarded(decide)
        self._count(decision, None)
        return decision

    def _decision(self, tool: str, call_id: Optional[str], found: List[Violation]) -> Decision:
        """Under the engine lock: the decision the violations of a call's start make."""
        blocking: List[Violation] = []
        shadow: List[Violation] = []
        for v in found:
            action = self._action.get(v.test_id)
            if action is None or v.at_close:
                continue
            if action[0] and not v.shadow:
                v.blocked = True  # its span event says `blocked`
                blocking.append(v)
            elif action[1]:
                shadow.append(v)
        chosen = blocking or shadow
        rules = tuple(BlockingRule(v.test_id, v.assertion_type + (f" {v.assertion_name}" if v.assertion_name else ""),
                                   v.message) for v in chosen)
        message = refusal_message(tool, rules, shadow=not blocking) if chosen else ""
        return Decision(tool, call_id, allowed=not blocking, would_block=bool(shadow), rules=rules,
                        message=message, violations=tuple(blocking))

    def _failed(self, tool: str, call_id: Optional[str], exc: BaseException) -> Decision:
        error = _bounded(f"{type(exc).__name__}: {exc}", MAX_RULE_MESSAGE_CHARS)
        allowed = self.fail_open
        message = "" if allowed else _bounded(
            f"spanassert blocked the call of `{tool}`: the guard could not decide it (internal error) and "
            "settings.guard.fail_open is false", MAX_REFUSAL_CHARS)
        decision = Decision(tool, call_id, allowed=allowed, would_block=False, rules=(), message=message, error=error)
        try:
            self.processor.telemetry.internal_error("guard", exc)
            self._count(decision, error)
        except Exception:  # noqa: BLE001 - last line of defence
            pass
        return decision

    def _count(self, d: Decision, error: Optional[str]) -> None:
        kind = DECISION_BLOCKED if d.blocked else (DECISION_WOULD_BLOCK if d.would_block else DECISION_ALLOWED)
        self.processor.telemetry.guard_decision(kind, d.rules[0].test_id if d.rules else None, error is not None)
        if d.would_block and not d.blocked:
            log.warning("spanassert guard (shadow): %s", d.message)

    # -- spans ------------------------------------------------------------------------------------
    def _tracer(self) -> Any:
        from opentelemetry import trace

        from .. import __version__

        provider = self.tracer_provider if self.tracer_provider is not None else trace.get_tracer_provider()
        return provider.get_tracer("spanassert.guard", __version__)

    @staticmethod
    def _span_attributes(tool: str, args_raw: Optional[str], call_id: Optional[str]) -> Dict[str, Any]:
        attrs: Dict[str, Any] = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool}
        if call_id is not None:
            attrs["gen_ai.tool.call.id"] = call_id
        if args_raw is not None:
            attrs["gen_ai.tool.call.arguments"] = args_raw
        return attrs

    @staticmethod
    def _mark(span: Any, decision: Decision) -> None:
        """The decision on the tool's span: an attribute, and one evaluation event per blocking rule
        (the processor does not add the same event again)."""
        span.set_attribute(ATTR_DECISION, DECISION_BLOCKED if decision.blocked else DECISION_ALLOWED)
        sid = format(span.get_span_context().span_id, "016x")
        for v in decision._violations:
            attrs = violation_event_attributes(v)
            if v.span_id and v.span_id.startswith(PENDING_PREFIX):  # decided outside any trace
                attrs[ATTR_SPAN_ID] = sid
                attrs[ATTR_EVAL_EXPLANATION] = v.message.replace(v.span_id, sid)
            span.add_event(EVENT_NAME, attrs)

    def refusal_span(self, tool: str, arguments: Any, decision: Decision, call_id: Optional[str] = None) -> None:
        """Write the ``execute_tool`` span of a refused call, for frameworks that write none: its
        arguments and call id (so that it is matched to the decision and replays the same), the
        decision attribute and one ``gen_ai.evaluation.result`` event (label ``blocked``) per rule."""
        try:
            cid = call_id if call_id is not None else decision.call_id
            attrs = self._span_attributes(tool, encode_arguments(arguments), cid)
            with self._tracer().start_as_current_span(f"execute_tool {tool}", attributes=attrs) as span:
                self._mark(span, decision)
        except Exception as exc:  # noqa: BLE001 -- a guard never raises into the agent (fail_open decides)
            self.processor.telemetry.internal_error("guard_span", exc)

    def tool(self, fn: Optional[F] = None, *, name: Optional[str] = None, on_block: str = "raise") -> Any:
        """Decorate a tool function: each call runs in an ``execute_tool`` span carrying its
        arguments, and is decided before the body runs. Blocked: the body does not run, and
        :class:`ToolBlocked` is raised (``on_block="return"``: the refusal text is returned)."""
        if on_block not in ("raise", "return"):
            raise ValueError(f"on_block must be 'raise' or 'return', not {on_block!r}")
        if fn is None:
            return lambda f: self.tool(f, name=name, on_block=on_block)
        tool_name: str = name or str(getattr(fn, "__name__", "tool"))
        try:
            signature: Optional[inspect.Signature] = inspect.signature(fn)
        except (TypeError, ValueError):
            signature = None

        def arguments(args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
            if signature is not None:
                try:
                    return dict(signature.bind(*args, **kwargs).arguments)
                except TypeError:
                    pass
            return {**{str(i): a for i, a in enumerate(args)}, **kwargs}

        def refused(decision: Decision) -> Any:
            if on_block == "return":
                return decision.message
            raise ToolBlocked(decision)

        if inspect.iscoroutinefunction(fn):
            @functools.wraps(fn)
            async def run_async(*args: Any, **kwargs: Any) -> Any:
                with self._start(tool_name, arguments(args, kwargs)) as decision:
                    if decision.allowed:
                        return await fn(*args, **kwargs)
                return refused(decision)

            return run_async

        @functools.wraps(fn)
        def run(*args: Any, **kwargs: Any) -> Any:
            with self._start(tool_name, arguments(args, kwargs)) as decision:
                if decision.allowed:
                    return fn(*args, **kwargs)
            return refused(decision)

        return run

    def _start(self, tool: str, arguments: Any) -> Any:
        return _ToolSpan(self, tool, arguments)


class _ToolSpan:
    """The decorator's span: opened before the decision (whose start the engine judges), marked
    with it, closed after the body (which runs inside it) or at once when the call is blocked."""

    def __init__(self, guard: Guard, tool: str, arguments: Any) -> None:
        self.guard = guard
        self.tool = tool
        self.arguments = arguments
        self.cm: Any = None
        self.span: Any = None

    def __enter__(self) -> Decision:
        try:
            attrs = self.guard._span_attributes(self.tool, encode_arguments(self.arguments), None)
            self.cm = self.guard._tracer().start_as_current_span(f"execute_tool {self.tool}", attributes=attrs)
            self.span = self.cm.__enter__()
        except Exception as exc:  # noqa: BLE001 - no span: the decision is still made
            self.guard.processor.telemetry.internal_error("guard_span", exc)
            self.cm = None
        decision = self.guard.check(self.tool, self.arguments)
        if self.span is not None:
            try:
                self.guard._mark(self.span, decision)
            except Exception as exc:  # noqa: BLE001 -- a guard never raises into the agent (fail_open decides)
                self.guard.processor.telemetry.internal_error("guard_span", exc)
        return decision

    def __exit__(self, *exc_info: Any) -> None:
        if self.cm is not None:
            self.cm.__exit__(*exc_info)  # the body's exception is recorded on the span as usual


__all__ = ["Guard", "Decision", "ToolBlocked", "BlockingRule", "refusal_message", "encode_arguments"]
