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

from typing import Any, Callable, Container, Mapping, Optional, Sequence, Tuple, Union

from opentelemetry.trace import SpanContext, StatusCode

EMPTY: Mapping[str, Any] = {}
UNSET = StatusCode.UNSET
ERROR = StatusCode.ERROR


def context(span: Any) -> SpanContext:
    try:
        return span._context  # type: ignore[no-any-return]  # the private field, untyped
    except AttributeError:
        return span.get_span_context()  # type: ignore[no-any-return]  # span is Any: an SDK span or a look-alike


def name(span: Any) -> str:
    try:
        return span._name  # type: ignore[no-any-return]  # the private field, untyped
    except AttributeError:
        return span.name  # type: ignore[no-any-return]  # span is Any: an SDK span or a look-alike


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


def parent(span: Any) -> Optional[SpanContext]:
    try:
        return span._parent  # type: ignore[no-any-return]  # the private field, untyped
    except AttributeError:
        return span.parent  # type: ignore[no-any-return]  # span is Any: an SDK span or a look-alike


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


def plain_local(span: Any, traces: Container[int], spans: Container[int],
                plain: Callable[[str, Mapping[str, Any]], bool]) -> Union[bool, Tuple[int, int, Optional[int]]]:
    """The processor's fast path, for most spans of most applications: a span whose parent is in
    this process (or that has none) and that ``plain`` calls no GenAI span.

    - True: such a span of a trace not in ``traces``, whose own id is not in ``spans``;
    - (trace id, span id, parent span id or None): such a span of a trace in ``traces``, or whose id
      is in ``spans``;
    - False: any other span, or one that cannot be read cheaply (without the private fields): the
      caller then reads it in full (:func:`head`).

    No property is called, and a tuple is built only for a span of a followed trace: this runs twice
    for every span (see docs/performance.md, "Plain spans outside any episode")."""
    try:
        c = span._context
        p = span._parent
        if (type(c) is SpanContext and (p is None or (type(p) is SpanContext and not p[2]))
                and plain(span._name, span._attributes._dict)):
            if c[0] not in traces and c[1] not in spans:
                return True
            return c[0], c[1], None if p is None else p[1]
    except AttributeError:
        pass
    return False


def timing(span: Any) -> Tuple[Optional[int], Optional[int], int, Sequence[Any]]:
    """An ended span's start and end times, status (as :func:`status_code`) and events in one call."""
    try:
        status = span._status
        code = status._status_code if status is not None else UNSET
        ev = span._events
        return (span._start_time, span._end_time, 0 if code is UNSET else (2 if code is ERROR else 1),
                ev if ev else ())
    except AttributeError:
        return start_time(span), end_time(span), status_code(span), events(span)


def start_time(span: Any) -> Optional[int]:
    try:
        return span._start_time  # type: ignore[no-any-return]  # the private field, untyped
    except AttributeError:
        return span.start_time  # type: ignore[no-any-return]  # span is Any: an SDK span or a look-alike


def dropped(span: Any) -> int:
    """How many attributes and events the SDK dropped from the span and its events' attributes (its
    span limits); 0 for a look-alike span that does not say."""
    try:
        n: int = span._attributes.dropped + span._events.dropped
        for e in span._events:  # an event's own attributes over the limit (its content, for some conventions)
            n += e.dropped_attributes
        return n
    except AttributeError:
        return int(getattr(span, "dropped_attributes", 0) or 0) + int(getattr(span, "dropped_events", 0) or 0)


def plain_dropped(span: Any) -> int:
    """:func:`dropped`'s attribute count alone, for a span :func:`plain_local` answered with a tuple
    (an SDK span: its fields were read). A plain span's markers are attributes; its events are not read."""
    return span._attributes.dropped  # type: ignore[no-any-return]  # BoundedAttributes.dropped, untyped


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


def end_time(span: Any) -> Optional[int]:
    try:
        return span._end_time  # type: ignore[no-any-return]  # the private field, untyped
    except AttributeError:
        return span.end_time  # type: ignore[no-any-return]  # span is Any: an SDK span or a look-alike


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

__all__ = ["EMPTY", "PRIVATE_FIELDS", "attributes", "context", "end_time", "events", "head", "instrumentation_info",
           "name", "parent", "resource_attributes", "start_time", "status_code", "timing",
           "plain_local"]
