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

from typing import Any, Mapping, Optional, Sequence, Tuple

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
    """The span's attribute mapping (never None; read-only by convention)."""
    try:
        a = span._attributes
    except AttributeError:
        a = span.attributes
    return EMPTY if a is None else a


def parent(span: Any) -> Optional[SpanContext]:
    try:
        return span._parent  # type: ignore[no-any-return]  # the private field, untyped
    except AttributeError:
        return span.parent  # type: ignore[no-any-return]  # span is Any: an SDK span or a look-alike


def fields(span: Any) -> Tuple[SpanContext, Mapping[str, Any], str, Optional[SpanContext]]:
    """The span's context, attributes, name and parent in one call (what the processor reads of
    every span, at its start and at its end)."""
    try:
        a = span._attributes
        return span._context, EMPTY if a is None else a, span._name, span._parent
    except AttributeError:
        return context(span), attributes(span), name(span), parent(span)


def start_time(span: Any) -> Optional[int]:
    try:
        return span._start_time  # type: ignore[no-any-return]  # the private field, untyped
    except AttributeError:
        return span.start_time  # type: ignore[no-any-return]  # span is Any: an SDK span or a look-alike


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


PRIVATE_FIELDS = frozenset({"_context", "_name", "_attributes", "_parent", "_start_time", "_end_time", "_status",
                            "_status_code", "_events", "_resource", "_instrumentation_info"})

__all__ = ["EMPTY", "PRIVATE_FIELDS", "attributes", "context", "end_time", "events", "fields", "instrumentation_info",
           "name", "parent", "resource_attributes", "start_time", "status_code"]
