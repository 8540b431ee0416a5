"""OTLP protobuf input: one ``TracesData`` message per file (``.binpb``), and the Collector
``file`` exporter's length-prefixed frames (each frame protobuf or JSON, optionally zstd-compressed),
read one frame at a time and bounded by ``MAX_FRAME_BYTES``."""
from __future__ import annotations

import json
from typing import Any, Iterator, List, Optional

from spanassert.otlp import formats
from spanassert.otlp.formats import CHUNK, MAX_FRAME_BYTES, WHITESPACE, ZSTD_MAGIC, Item, number_too_long, zstd_module
from spanassert.otlp.issues import ERROR, WARNING, InputIssue, SpanDecodeError
from spanassert.otlp.json_decode import records_from_json
from spanassert.otlp.proto_decode import records_from_proto
from spanassert.otlp.proto_wire import wire_decoder


def _proto_records(name: str, index: int, offset: int, data: bytes) -> Iterator[Item]:
    source = f"{name}#message {index}"
    fast = wire_decoder()
    if fast is not None:
        # The compiled build's wire decoder: the same records, or None for a message it does not read
        # exactly (then the protobuf runtime and proto_decode below read it, errors and all).
        wired = fast(data, source)
        if wired is not None:
            if wired:
                yield wired
            return
    # protobuf is imported when a protobuf file is read: JSON replay and `spanassert --help` skip it.
    from google.protobuf.message import DecodeError
    from opentelemetry.proto.trace.v1.trace_pb2 import TracesData

    msg = TracesData()
    try:
        msg.ParseFromString(data)
    except (DecodeError, RecursionError, ValueError) as exc:
        yield InputIssue(
            name, None, offset, f"message {index} is not a valid OTLP protobuf message: {exc or 'parse error'}", ERROR
        )
        return
    errors: List[SpanDecodeError] = []
    records = records_from_proto(msg, source, errors=errors)
    if records:
        yield records
    for problem in errors:
        yield InputIssue(name, None, offset, f"message {index}: {problem}", ERROR)


def read_binpb(name: str, stream: Any) -> Iterator[Item]:
    limit = formats.MAX_RECORD_BYTES
    data = stream.read(limit + 1)
    if len(data) > limit:
        yield InputIssue(name, None, 0, f"protobuf message is over the limit of {limit} bytes read whole; not read "
                         "(write length-prefixed frames, which are read one at a time)", ERROR)
        return
    yield from _proto_records(name, 1, 0, data)


def _read_exactly(stream: Any, n: int) -> bytes:
    # Read in chunks so a garbage length from a non-seekable stream does not allocate it up front.
    if n <= CHUNK * 16:
        return stream.read(n)  # type: ignore[no-any-return]  # a file object, untyped
    parts = []
    left = n
    while left:
        chunk = stream.read(min(left, CHUNK * 16))
        if not chunk:
            break
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def _nul_issue(name: str, start: int, end: int, data_frames: int) -> InputIssue:
    if start == 0 and data_frames == 0:
        return InputIssue(name, None, 0, f"the file holds only NUL bytes ({end} bytes), no OTLP data: a "
                          "preallocated, zeroed or crashed export; check the exporter's output path", ERROR)
    return InputIssue(name, None, start, f"the file ends in {end - start} NUL bytes after frame {data_frames} "
                      "(zero padding left by a crash while writing?)", WARNING)


def read_framed(name: str, stream: Any, size: Optional[int]) -> Iterator[Item]:
    """The Collector ``file`` exporter's ``format: proto``: 4-byte big-endian length, then payload."""
    offset = 0
    index = 0
    decompressor: Any = None
    nul_from: Optional[int] = None  # where the current run of NUL bytes (zero-length frames) began
    data_frames = 0
    while True:
        prefix = stream.read(4)
        if nul_from is not None and len(prefix) < 4 and not prefix.strip(b"\0"):
            yield _nul_issue(name, nul_from, offset + len(prefix), data_frames)
            return
        if not prefix:
            return
        index += 1
        if len(prefix) < 4:
            yield InputIssue(
                name, None, offset, f"frame {index} header is cut short: {len(prefix)} of 4 length bytes", ERROR
            )
            return
        n = int.from_bytes(prefix, "big")
        if n == 0:
            # An empty TracesData is legal, but a run of them is what a zeroed or preallocated file
            # reads as: reported once the run ends.
            if nul_from is None:
                nul_from = offset
            offset += 4
            continue
        nul_from = None
        data_frames += 1
        remaining = None if size is None else size - offset - 4
        if (remaining is not None and n > remaining) or n > MAX_FRAME_BYTES:
            available = f"only {remaining} remain in the file" if remaining is not None else "that is implausible"
            yield InputIssue(
                name,
                None,
                offset,
                f"frame {index} length {n} exceeds the file: {available} (truncated file, or not length-prefixed OTLP)",
                ERROR,
            )
            return
        payload = _read_exactly(stream, n)
        if len(payload) < n:
            yield InputIssue(
                name,
                None,
                offset,
                f"frame {index} length {n} exceeds the file: the data ends after {len(payload)} bytes",
                ERROR,
            )
            return
        if payload[:4] == ZSTD_MAGIC:
            if decompressor is None:
                zstandard, issue = zstd_module(name)
                if issue is not None:
                    yield issue
                    return
                decompressor = zstandard.ZstdDecompressor()
                zstd_error = zstandard.ZstdError
            try:
                # Bounded like a plain frame: a small zstd frame must not expand without limit.
                payload = decompressor.decompress(payload, max_output_size=MAX_FRAME_BYTES)
                if len(payload) > MAX_FRAME_BYTES:
                    raise zstd_error(f"decompresses to more than {MAX_FRAME_BYTES} bytes")
            except zstd_error as exc:
                yield InputIssue(name, None, offset, f"frame {index} is not valid zstd data: {exc}", ERROR)
                offset += 4 + n
                continue
            except MemoryError:  # zstandard allocates the size a (corrupt) frame header declares
                yield InputIssue(name, None, offset, f"frame {index} is not valid zstd data: its header declares "
                                 "a size that cannot be allocated", ERROR)
                offset += 4 + n
                continue
        if payload.lstrip(WHITESPACE)[:1] == b"{":
            # `format: json` with `compression: zstd`: each frame holds one OTLP JSON document.
            yield from _frame_json_records(name, index, offset, payload)
        else:
            yield from _proto_records(name, index, offset, payload)
        offset += 4 + n


def _frame_json_records(name: str, index: int, offset: int, payload: bytes) -> Iterator[Item]:
    try:
        obj = json.loads(payload)
    except UnicodeDecodeError as exc:
        yield InputIssue(name, None, offset, f"message {index} (JSON) is not valid UTF-8: byte "
                         f"0x{exc.object[exc.start:exc.start + 1].hex()} at {exc.start}", ERROR)
        return
    except json.JSONDecodeError as exc:
        yield InputIssue(name, None, offset, f"message {index} is not valid JSON at character {exc.pos}: {exc.msg}",
                         ERROR)
        return
    except RecursionError:
        yield InputIssue(name, None, offset, f"message {index}: JSON is nested too deeply", ERROR)
        return
    except ValueError:  # after its subclasses above: a number past int()'s digit bound
        yield InputIssue(name, None, offset, f"message {index}: {number_too_long()}", ERROR)
        return
    errors: List[SpanDecodeError] = []
    try:
        records = records_from_json(obj, f"{name}#message {index}", errors=errors)
    except SpanDecodeError as exc:
        yield InputIssue(name, None, offset, f"message {index}: {exc}", ERROR)
        return
    except RecursionError:
        yield InputIssue(name, None, offset, f"message {index}: OTLP document is nested too deeply", ERROR)
        return
    if records:
        yield records
    for err in errors:
        yield InputIssue(name, None, offset, f"message {index}: {err}", ERROR)
