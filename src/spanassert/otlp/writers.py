"""Write SDK spans as OTLP files, in the shapes real exporters produce.

Used by tests, the demo and the benchmarks. Every writer starts from the SDK's own protobuf encoder
(``encode_spans``), so what we read back is what an OTLP exporter would have sent.
"""
from __future__ import annotations

import base64
import io
import json
import os
import struct
from typing import IO, Any, Dict, Iterable, Iterator, Union

from google.protobuf.json_format import MessageToDict
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan

PathOrFile = Union[str, "os.PathLike[str]", IO[Any]]

_ID_FIELDS = ("traceId", "spanId", "parentSpanId")


def _hex_ids(obj: Any) -> None:
    """protobuf's JSON printer writes ids as base64; OTLP JSON wants hex."""
    if isinstance(obj, dict):
        for key, value in obj.items():
            if key in _ID_FIELDS and isinstance(value, str):
                obj[key] = base64.b64decode(value).hex()
            else:
                _hex_ids(value)
    elif isinstance(obj, list):
        for item in obj:
            _hex_ids(item)


def encode_request_json(req: Any) -> Dict[str, Any]:
    """An ``ExportTraceServiceRequest`` (or ``TracesData``) as an OTLP JSON object: camelCase keys,
    hex ids, integer enums, int64 as decimal strings, defaults omitted."""
    obj: Dict[str, Any] = MessageToDict(req, use_integers_for_enums=True, preserving_proto_field_name=False)
    _hex_ids(obj)
    obj.setdefault("resourceSpans", [])
    return obj


def _open_for(path_or_file: PathOrFile, mode: str) -> tuple[IO[Any], bool]:
    if isinstance(path_or_file, (str, os.PathLike)):
        return open(path_or_file, mode), True
    return path_or_file, False


def write_jsonl(spans: Iterable[ReadableSpan], path_or_file: PathOrFile) -> None:
    """Append one line (one ``ExportTraceServiceRequest``) holding ``spans``, as the OTLP file
    exporter does per batch. A path is opened in append mode; a file object may be text or binary."""
    line = json.dumps(encode_request_json(encode_spans(list(spans))), separators=(",", ":")) + "\n"
    f, owned = _open_for(path_or_file, "a")
    try:
        if isinstance(f, io.TextIOBase):
            f.write(line)
        else:
            f.write(line.encode("utf-8"))
        f.flush()
    finally:
        if owned:
            f.close()


def _zstd_compressor() -> Any:
    try:
        import zstandard
    except ImportError:
        raise RuntimeError("zstd output needs the 'zstandard' module: pip install 'spanassert[zstd]'") from None
    return zstandard.ZstdCompressor()


def frame_messages(payloads: Iterable[bytes], zstd: bool = False) -> Iterator[bytes]:
    """The Collector ``file`` exporter's framing: a 4-byte big-endian length, then the payload
    (each payload compressed on its own with ``compression: zstd``)."""
    compressor = _zstd_compressor() if zstd else None
    for payload in payloads:
        if compressor is not None:
            payload = compressor.compress(payload)
        yield struct.pack(">I", len(payload)) + payload


def write_proto_framed(
    spans_batches: Iterable[Iterable[ReadableSpan]], path: PathOrFile, zstd: bool = False
) -> None:
    """One length-prefixed ``ExportTraceServiceRequest`` per batch, as the Collector ``file``
    exporter writes with ``format: proto`` (and ``compression: zstd`` when ``zstd``)."""
    payloads = (encode_spans(list(batch)).SerializeToString() for batch in spans_batches)
    f, owned = _open_for(path, "wb")
    try:
        for frame in frame_messages(payloads, zstd):
            f.write(frame)
        f.flush()
    finally:
        if owned:
            f.close()


def write_binpb(spans: Iterable[ReadableSpan], path: PathOrFile) -> None:
    """One serialized ``ExportTraceServiceRequest`` holding ``spans`` (a ``.binpb`` file)."""
    data = encode_spans(list(spans)).SerializeToString()
    f, owned = _open_for(path, "wb")
    try:
        f.write(data)
        f.flush()
    finally:
        if owned:
            f.close()


class JsonLinesSpanExporter:
    """A ``SpanExporter`` writing OTLP JSON Lines (one line per export batch), like the
    ``opentelemetry-exporter-otlp-json-file`` package's ``FileSpanExporter``. That package needs
    Python 3.10+; this one is what the examples fall back to on Python 3.9."""

    def __init__(self, path: Union[str, os.PathLike[str], None] = None) -> None:
        import sys
        import threading

        self.path: PathOrFile = path if path is not None else sys.stdout  # no path: stdout, as OTel's
        self._lock = threading.Lock()

    def export(self, spans: Any) -> Any:
        from opentelemetry.sdk.trace.export import SpanExportResult

        if not spans:
            return SpanExportResult.SUCCESS
        try:
            with self._lock:
                write_jsonl(spans, self.path)
        except OSError:
            return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def file_span_exporter(path: Union[str, os.PathLike[str], None] = None) -> Any:
    """The OpenTelemetry OTLP JSON file exporter when installed (the ``file`` extra, Python 3.10+),
    else :class:`JsonLinesSpanExporter`: both write the same OTLP JSON Lines."""
    try:
        from opentelemetry.exporter.otlp.json.file import FileSpanExporter
    except ImportError:
        return JsonLinesSpanExporter(path)
    return FileSpanExporter(path) if path is not None else FileSpanExporter()
