"""Finished spans as files and the OTLP receiver deliver them, decoded from OTLP.

Nothing here knows the OpenTelemetry SDK: the readers and the receiver build these records, and
the engine reads them like the SDK's spans.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Final, Mapping, Optional, Sequence

from .records import SLOTS


class SpanEvent:
    """A span event as files and the receiver deliver it (same duck type as the SDK's ``Event``)."""

    __slots__ = ("name", "timestamp", "attributes")

    def __init__(self, name: str, timestamp: int = 0, attributes: Optional[Mapping[str, Any]] = None) -> None:
        self.name = name
        self.timestamp = timestamp
        self.attributes: Mapping[str, Any] = attributes or {}

    def __repr__(self) -> str:
        return f"SpanEvent({self.name!r})"


# The events of a span that has none, shared by every such decoded span (read-only: nothing appends
# to a record's events). Replay holds many records at once; an empty list each is one more object
# per span for the garbage collector to scan.
NO_EVENTS: Final[Sequence[SpanEvent]] = ()  # an empty tuple: read-only and shared

# Why an episode's evidence is incomplete when a span of it says its source dropped attributes or
# events (the SDK's OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT evicts the *oldest* attribute: a tool span's name
# and arguments, a model step's operation). The same words live, in replay and in serve.
INCOMPLETE_SOURCE_DROPPED: Final = "attributes or events of a span were dropped at the source (span limits)"
# Live only (a file does not say the limit): a text value as long as the SDK's attribute value length
# limit (OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT), which it cuts values to without saying so.
INCOMPLETE_VALUE_AT_LIMIT: Final = "a span's attribute value reached the SDK's length limit (it may have been cut)"


def dropped_count(*counts: Any) -> int:
    """OTLP dropped counts as one number. Hostile input: a count that is not a non-negative integer
    (text, a negative, a float, a list) is taken as one dropped item, never as none."""
    n = 0
    for c in counts:
        if c is None or (c == 0 and type(c) is int):
            continue
        if type(c) is int and c > 0:
            n += c
        elif type(c) is str and c.isdecimal() and len(c) < 20:
            n += int(c)
        else:
            n += 1
    return n


# A data class (its fields, its __init__ by hand) under ``dataclass`` itself, not ``record``: see
# records.SLOTS. A compiled build makes it a native class, so that the decoders' stores and every read in
# assembly, the engine's replay path and serve are slot accesses, not generic attribute lookups.
@dataclass(eq=False, **SLOTS)
class SpanRecord:
    """A finished span decoded from OTLP (a file line, a protobuf message, a receiver request).

    Ids are lowercase hex (trace 32 chars, span 16); ``parent_span_id`` is None for a root.
    ``kind`` and ``status_code`` use OTLP numbering (kind 1=INTERNAL … 5=CONSUMER; status 0 UNSET,
    1 OK, 2 ERROR). Attribute values are decoded AnyValues: str, bool, int, float, bytes, list
    (arrayValue) or dict (kvlistValue). ``source`` says where it came from ("file.jsonl:12").
    Fields as keywords; compared by identity.
    """

    trace_id: str
    span_id: str
    parent_span_id: Optional[str] = None
    name: str = ""
    kind: int = 1
    start_ns: int = 0
    end_ns: int = 0
    attributes: Dict[str, Any] = field(default_factory=dict)
    status_code: int = 0
    status_message: str = ""
    # A list, or a decoder's shared NO_EVENTS tuple: declared as what it is (a compiled build checks
    # declared types at run time), read-only for everyone who reads it.
    events: Sequence[SpanEvent] = field(default_factory=list)
    resource: Dict[str, Any] = field(default_factory=dict)
    scope: str = ""
    source: Optional[str] = None
    # Attributes and events the source dropped (OTLP droppedAttributesCount + droppedEventsCount: an
    # SDK's span limits). Non-zero: what the span says is not all it recorded (see SOURCE_DROPPED).
    dropped: int = 0

    # Every parameter has a default: a compiled class's __new__ runs __init__ (the decoders make a
    # record with SpanRecord.__new__ and fill its slots: see json_decode._fast_span).
    def __init__(self, *, trace_id: str = "", span_id: str = "", parent_span_id: Optional[str] = None,
                 name: str = "", kind: int = 1, start_ns: int = 0, end_ns: int = 0,
                 attributes: Optional[Dict[str, Any]] = None, status_code: int = 0, status_message: str = "",
                 events: Optional[Sequence[SpanEvent]] = None,
                 resource: Optional[Dict[str, Any]] = None, scope: str = "", source: Optional[str] = None,
                 dropped: int = 0) -> None:
        self.trace_id = trace_id
        self.span_id = span_id
        # Decoders give an empty parent id for a root, and None for an absent map or list.
        self.parent_span_id = parent_span_id or None
        self.name = name
        self.kind = kind
        self.start_ns = start_ns
        self.end_ns = end_ns
        self.attributes = {} if attributes is None else attributes
        self.status_code = status_code
        self.status_message = status_message
        self.events = events if events else []
        self.resource = {} if resource is None else resource
        self.scope = scope
        self.source = source
        self.dropped = dropped

    def __repr__(self) -> str:
        return f"SpanRecord({self.name!r}, trace={self.trace_id[:8]}…, span={self.span_id})"
