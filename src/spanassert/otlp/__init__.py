"""Reading (and, for tests and demos, writing) exported OTLP trace files.

``reader`` finds each input's form (``paths``: which files; ``formats``: the bytes that tell forms
apart), ``json_lines`` reads OTLP JSON (``json_decode`` / ``json_typed`` decode it), ``framed`` reads
protobuf messages and Collector frames (``proto_decode``); ``proto_encode`` and ``writers`` write.

>>> from spanassert.otlp import read_spans
>>> for span in read_spans(["traces.jsonl"]): ...  # doctest: +SKIP
"""
from __future__ import annotations

from spanassert.otlp.issues import InputIssue, OTLPInputError, SpanDecodeError
from spanassert.otlp.json_decode import records_from_json
from spanassert.otlp.proto_decode import records_from_proto
from spanassert.otlp.reader import read_spans

__all__ = [
    "InputIssue",
    "OTLPInputError",
    "SpanDecodeError",
    "read_spans",
    "records_from_json",
    "records_from_proto",
]
