"""Every read of the OpenTelemetry SDK's private span fields, in one place, each with a public-API
fallback.

The live processor runs for every span the application creates, so it reads the SDK span's own
fields: ``span._attributes`` is the mapping itself where ``span.attributes`` builds a read-only
proxy, ``span._status._status_code`` skips an enum lookup, ``span._events`` skips a copy (measured
10 ns vs 356 ns for one read). A span that lacks a field (another SDK version that renamed it, a
wrapper, a span class of another SDK) is read through the public API instead, so a renamed field
costs speed, never correctness. ``tests/test_live_sdk.py`` runs the processor on spans that have
only the public API, and checks that no other module under ``live/`` reads a private span field;
``make test-sdk-oldest`` runs the live tests against the oldest supported SDK.
"""
from __future__ import annotations

from operator import attrgetter
from typing import Any, Callable, Container, Dict, Mapping, Optional, Sequence, Set, Tuple

from opentelemetry.trace import SpanContext, StatusCode

EMPTY: Mapping[str, Any] = {}
MAX_NAMES = 4096  # span names fast_callbacks remembers as plain
UNSET = StatusCode.UNSET
ERROR = StatusCode.ERROR


def context(span: Any) -> SpanContext:
    try:
        return span._context  # type: ignore[no-any-return]  # the private field, untyped
    except AttributeError:
        return span.get_span_context()  # type: ignore[no-any-return]  # span is Any: an SDK span or a look-alike



def _field(private: str, public: str) -> Callable[[Any], Any]:
    """A reader of one span field: the SDK's private slot, else the public property of the same
    value (a wrapper or another SDK's span). ``attrgetter`` keeps the read in C: about 50 ns more
    per call than the field written out, on paths that cost tens of microseconds."""
    get_private, get_public = attrgetter(private), attrgetter(public)

    def read(span: Any) -> Any:
        try:
            return get_private(span)
        except AttributeError:
            return get_public(span)
    return read


name: Callable[[Any], str] = _field("_name", "name")
parent: Callable[[Any], Optional[SpanContext]] = _field("_parent", "parent")
start_time: Callable[[Any], Optional[int]] = _field("_start_time", "start_time")
end_time: Callable[[Any], Optional[int]] = _field("_end_time", "end_time")


def attributes(span: Any) -> Mapping[str, Any]:
    """The span's attribute mapping (never None; read-only by convention): the plain dict behind
    the SDK's ``BoundedAttributes`` where there is one (its ``get`` and ``values`` are the mapping
    ABC's, which raise and catch a KeyError per absent key and read values one by one)."""
    try:
        a = span._attributes
    except AttributeError:
        a = span.attributes
    if a is None:
        return EMPTY
    try:
        d = a._dict
    except AttributeError:
        return a  # type: ignore[no-any-return]  # a is Any: a mapping of another kind
    return d if type(d) is dict else a



def head(span: Any) -> Tuple[int, int, Mapping[str, Any], str, Optional[int], bool]:
    """What the processor reads of every span, at its start and at its end, in one call: (trace id,
    span id, attributes, name, parent span id or None, whether the parent is remote). The ids are
    read from the SDK's ``SpanContext`` as the tuple it is: its ``trace_id``/``span_id``/``is_remote``
    properties are Python functions, one call each (see docs/performance.md, "Live overhead")."""
    try:
        a = span._attributes._dict
        c = span._context
        p = span._parent
        if type(a) is dict and type(c) is SpanContext:
            if p is None:
                return c[0], c[1], a, span._name, None, False
            if type(p) is SpanContext:
                return c[0], c[1], a, span._name, p[1], p[2]
    except AttributeError:
        pass
    ctx = context(span)
    up = parent(span)
    return (ctx.trace_id, ctx.span_id, attributes(span), name(span), None if up is None else up.span_id,
            False if up is None else bool(up.is_remote))


def fast_callbacks(slow_start: Callable[[Any, Any, Any], None], slow_end: Callable[[Any, Any], None],
                   traces: Container[int], links: Dict[int, int], queued: Mapping[Any, int], background: bool,
                   exports: Sequence[Any],
                   plain: Callable[[str, Mapping[str, Any]], bool], markers: Sequence[str],
                   failed: Callable[[str, BaseException], None], max_links: int,
                   ) -> Tuple[Callable[..., None], Callable[[Any], None]]:
    """The processor's ``on_start`` and ``on_end`` (installed on the instance, so the SDK calls them
    directly), for most spans of most applications: a span whose parent is in this process (or
    that has none) and that the conventions' test ``plain`` calls no GenAI span.

    - ``on_start``: such a span of a trace not in ``traces`` is nothing to the processor; such a
      child span of a followed trace leaves its parent link in ``links`` (span id -> parent span
      id, cleared past ``max_links``: spans that never ended), for a GenAI span that may start
      below it.
    - ``on_end``: such a span is handed on to ``exports`` (each one's error passed to ``failed``)
      when its trace is not followed and its id is not in ``links``, or when its id is in
      ``links`` (the link is dropped) and no end of its trace is ``queued`` for the worker
      (``background``): the export keeps end order. A span of which the SDK dropped attributes or
      events (span limits) goes the full way, which marks its episode incomplete (or leaves a note
      for the one that opens for its trace later).
    - Any other span, and one that cannot be read cheaply (no private fields: another SDK
      version, a wrapper) or whose reading raised, goes to ``slow_start(span, parent_context,
      None)`` / ``slow_end(span, None)``, the processor's full path, which reads it through
      :func:`head`; a span with a marker key whose fields were read here goes with what
      :func:`head` would return (``slow_start(span, parent_context, head)``, ``slow_end(span,
      head)``): the full path then reads nothing again, and knows the span is no plain one.

    ``plain(name, attributes)`` is asked once per span name (``plain(name, {})``, its name test;
    plain names are remembered, at most ``MAX_NAMES``), and the attributes are tested here for
    the five ``markers`` (``plain``'s own attribute test, unrolled). Every check is inline, with
    no other call and no tuple built, and no property is called: this runs twice for every span
    the application makes (see docs/performance.md, "Plain spans outside any episode"). The
    callbacks hold the containers, not the processor: they are built again when those are (after
    ``os.fork``)."""
    sc = SpanContext
    k1, k2, k3, k4, k5 = markers  # five today; a sixth fails here, at the processor's construction
    names: Set[str] = set()

    def plain_name(name: str) -> bool:
        if not plain(name, EMPTY):
            return False
        if len(names) >= MAX_NAMES:
            names.clear()  # so many names (ids in them): learned again
        names.add(name)
        return True

    def on_start(span: Any, parent_context: Any = None) -> None:
        known: Any = None
        try:
            c = span._context
            p = span._parent
            if type(c) is sc and (p is None or (type(p) is sc and not p[2])):
                a = span._attributes._dict
                name = span._name
                # The markers first: a GenAI span that has one is settled without its name test.
                if not (k1 in a or k2 in a or k3 in a or k4 in a or k5 in a):
                    if name in names or plain_name(name):
                        if c[0] not in traces:
                            return
                        if p is not None:
                            if len(links) >= max_links:
                                links.clear()  # spans that never ended; children below them lose their agent
                            links[c[1]] = p[1]
                            return
                elif type(a) is dict:
                    known = (c[0], c[1], a, name, None if p is None else p[1], False)  # as head(span)
        except Exception:  # noqa: BLE001 -- the full path reads the span again and counts what it raises
            known = None
        slow_start(span, parent_context, known)

    def on_end(span: Any) -> None:
        done = False
        known: Any = None
        try:
            c = span._context
            p = span._parent
            if type(c) is sc and (p is None or (type(p) is sc and not p[2])):
                at = span._attributes
                a = at._dict
                name = span._name
                if k1 in a or k2 in a or k3 in a or k4 in a or k5 in a:
                    if type(a) is dict:
                        known = (c[0], c[1], a, name, None if p is None else p[1], False)  # as head(span)
                elif name in names or plain_name(name):
                    sid = c[1]
                    # Of a span whose SDK dropped attributes, events or an event's attributes (span
                    # limits, as :func:`dropped` counts them: a plain span
                    # may be a GenAI span whose markers were evicted), the full path drops the link
                    # and marks its episode incomplete, or leaves a note for the episode that opens
                    # for its trace later (replay and serve read both counts of the exported span).
                    ev = span._events
                    if at.dropped or ev.dropped or (ev._dq and any(e.dropped_attributes for e in ev._dq)):
                        pass
                    elif links.pop(sid, None) is not None:  # its link (a parent span id, never None)
                        done = not (background and queued.get(c[0]))
                    else:
                        done = c[0] not in traces
        except Exception:  # noqa: BLE001 -- the full path reads the span again and counts what it raises
            done = False
            known = None
        if not done:
            slow_end(span, known)
            return
        for x in exports:
            try:
                x.on_end(span)
            except Exception as exc:  # noqa: BLE001, PERF203 -- a failing exporter must not stop the others
                failed("export", exc)

    return on_start, on_end


def timing(span: Any) -> Tuple[Optional[int], Optional[int], int, Sequence[Any]]:
    """An ended span's start and end times, status (as :func:`status_code`) and events in one call."""
    try:
        status = span._status
        code = status._status_code if status is not None else UNSET
        ev = span._events
        return (span._start_time, span._end_time, 0 if code is UNSET else (2 if code is ERROR else 1),
                ev if getattr(ev, "_dq", ev) else ())  # the BoundedList's deque: no __len__ call
    except AttributeError:
        return start_time(span), end_time(span), status_code(span), events(span)



def ended(span: Any) -> Tuple[Optional[int], Optional[int], int, Sequence[Any], int]:
    """:func:`timing` and :func:`dropped` of an ended span in one call (every span end the engine
    judges reads both)."""
    try:
        status = span._status
        code = status._status_code if status is not None else UNSET
        ev = span._events
        dq = ev._dq  # the BoundedList's deque: no __len__ call, and no copy to iterate
        n: int = span._attributes.dropped + ev.dropped
        if dq:
            for e in dq:
                n += e.dropped_attributes
        return (span._start_time, span._end_time, 0 if code is UNSET else (2 if code is ERROR else 1),
                ev if dq else (), n)
    except AttributeError:
        return (*timing(span), dropped(span))


def started(span: Any) -> Tuple[Optional[int], Mapping[str, Any]]:
    """:func:`start_time` and :func:`resource_attributes` of a starting span in one call."""
    try:
        a = span._resource._attributes
        return span._start_time, EMPTY if a is None else a
    except AttributeError:
        return start_time(span), resource_attributes(span)


def dropped(span: Any) -> int:
    """How many attributes and events the SDK dropped from the span and its events' attributes (its
    span limits); 0 for a look-alike span that does not say."""
    try:
        ev = span._events
        n: int = span._attributes.dropped + ev.dropped
        # An event's own attributes over the limit (its content, for some conventions). The SDK's
        # BoundedList copies its deque under its lock to iterate: its deque is read directly, and
        # only when there are events (most spans have none).
        dq = getattr(ev, "_dq", ev)
        if dq:
            for e in dq:
                n += e.dropped_attributes
        return n
    except AttributeError:
        return int(getattr(span, "dropped_attributes", 0) or 0) + int(getattr(span, "dropped_events", 0) or 0)


def value_limit(span: Any) -> Optional[int]:
    """The SDK's attribute value length limit for this span (``OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT``,
    ``SpanLimits.max_attribute_length``); None when unlimited or not an SDK span."""
    try:
        limit = span._limits.max_attribute_length
    except AttributeError:
        return None
    return limit if type(limit) is int and limit > 0 else None


def values_at_limit(span: Any, limit: int) -> bool:
    """Whether a text value of the span or of its events is as long as ``limit``: the SDK cut it
    to that length, or it was exactly that long (it cannot be told apart)."""
    groups = [attributes(span)]
    groups.extend(e.attributes for e in (span.events or ()) if e.attributes)
    for attrs in groups:
        for v in attrs.values():
            if type(v) is str:
                if len(v) >= limit:
                    return True
            elif type(v) is tuple and any(type(x) is str and len(x) >= limit for x in v):
                return True
    return False



def status_code(span: Any) -> int:
    """The span's status as the OTLP number: 0 unset, 1 ok, 2 error."""
    try:
        status = span._status
        code = status._status_code if status is not None else UNSET
    except AttributeError:
        status = span.status
        code = status.status_code if status is not None else UNSET
    return 0 if code is UNSET else (2 if code is ERROR else 1)


def events(span: Any) -> Sequence[Any]:
    try:
        ev = span._events
    except AttributeError:
        ev = span.events
    return ev if ev else ()


def resource_attributes(span: Any) -> Mapping[str, Any]:
    try:
        resource = span._resource
    except AttributeError:
        resource = getattr(span, "resource", None)
    if resource is None:
        return EMPTY
    try:
        a = resource._attributes
    except AttributeError:
        a = resource.attributes
    return EMPTY if a is None else a


def instrumentation_info(span: Any) -> Any:
    """The deprecated ``InstrumentationInfo`` a ``ReadableSpan`` copy is built with (None when the
    span does not keep one; ``instrumentation_scope`` is the public successor)."""
    return getattr(span, "_instrumentation_info", None)


PRIVATE_FIELDS = frozenset({"_context", "_name", "_attributes", "_dict", "_parent", "_start_time", "_end_time",
                            "_status", "_status_code", "_events", "_resource", "_instrumentation_info"})

__all__ = ["EMPTY", "MAX_NAMES", "PRIVATE_FIELDS", "attributes", "context", "end_time", "ended", "events",
           "fast_callbacks", "head", "instrumentation_info", "name", "parent", "resource_attributes", "start_time",
           "started", "status_code", "timing"]
