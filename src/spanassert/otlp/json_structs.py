"""The OTLP/JSON shapes that :mod:`.json_typed` decodes a line into with ``msgspec`` (the canonical
shape only: camelCase keys, unknown keys refused; see that module). Declarations only, kept apart from
the decoding so that the decoding can be compiled (build_support/spanassert_build.py) while these stay
Python classes: msgspec builds its decoders from them, and a compiled module's generic classes cannot
be subscripted (``_Traces[_Span]``)."""
from __future__ import annotations

from typing import Generic, List, TypeVar, Union

from msgspec import UNSET, Raw, Struct, UnsetType

_Int = Union[int, str, UnsetType]


class _AnyValue(Struct, forbid_unknown_fields=True, gc=False):
    stringValue: Union[str, UnsetType] = UNSET
    intValue: _Int = UNSET
    boolValue: Union[bool, UnsetType] = UNSET
    doubleValue: Union[float, str, UnsetType] = UNSET
    arrayValue: Union[Raw, UnsetType] = UNSET
    kvlistValue: Union[Raw, UnsetType] = UNSET
    bytesValue: Union[Raw, UnsetType] = UNSET
    stringValueStrindex: Union[Raw, UnsetType] = UNSET


class _KeyValue(Struct, forbid_unknown_fields=True, gc=False):
    key: str
    value: Union[_AnyValue, UnsetType] = UNSET


class _Event(Struct, forbid_unknown_fields=True, gc=False):
    timeUnixNano: _Int = UNSET
    name: Union[str, UnsetType] = UNSET
    attributes: Union[List[_KeyValue], UnsetType] = UNSET
    droppedAttributesCount: Union[Raw, UnsetType] = UNSET


class _Status(Struct, forbid_unknown_fields=True, gc=False):
    code: Union[int, UnsetType] = UNSET
    message: Union[str, UnsetType] = UNSET


class _Span(Struct, forbid_unknown_fields=True, gc=False):
    traceId: str
    spanId: str
    parentSpanId: Union[str, UnsetType] = UNSET
    name: Union[str, UnsetType] = UNSET
    kind: Union[int, UnsetType] = UNSET
    startTimeUnixNano: _Int = UNSET
    endTimeUnixNano: _Int = UNSET
    attributes: Union[List[_KeyValue], UnsetType] = UNSET
    events: Union[List[_Event], UnsetType] = UNSET
    status: Union[_Status, UnsetType] = UNSET
    traceState: Union[Raw, UnsetType] = UNSET
    flags: Union[Raw, UnsetType] = UNSET
    links: Union[Raw, UnsetType] = UNSET
    droppedAttributesCount: Union[Raw, UnsetType] = UNSET
    droppedEventsCount: Union[Raw, UnsetType] = UNSET
    droppedLinksCount: Union[Raw, UnsetType] = UNSET


class _Scope(Struct, forbid_unknown_fields=True, gc=False):
    name: Union[str, UnsetType] = UNSET
    version: Union[Raw, UnsetType] = UNSET
    attributes: Union[Raw, UnsetType] = UNSET
    droppedAttributesCount: Union[Raw, UnsetType] = UNSET


# A span's type is a parameter: _Span (decoded), or Raw (its JSON, for replay --jobs below).
S = TypeVar("S")


class _ScopeSpans(Struct, Generic[S], forbid_unknown_fields=True, gc=False):
    scope: Union[_Scope, UnsetType] = UNSET
    spans: Union[List[S], UnsetType] = UNSET
    schemaUrl: Union[Raw, UnsetType] = UNSET


class _Resource(Struct, forbid_unknown_fields=True, gc=False):
    attributes: Union[List[_KeyValue], UnsetType] = UNSET
    droppedAttributesCount: Union[Raw, UnsetType] = UNSET
    entityRefs: Union[Raw, UnsetType] = UNSET


class _ResourceSpans(Struct, Generic[S], forbid_unknown_fields=True, gc=False):
    resource: Union[_Resource, UnsetType] = UNSET
    scopeSpans: Union[List[_ScopeSpans[S]], UnsetType] = UNSET
    schemaUrl: Union[Raw, UnsetType] = UNSET


class _Traces(Struct, Generic[S], forbid_unknown_fields=True, gc=False):
    resourceSpans: List[_ResourceSpans[S]]
