"""Read exported OTLP trace files of any common shape, detected from their content.

Shapes: OTLP JSON Lines (the file exporter spec, the Collector ``file`` exporter, the Python
``FileSpanExporter``), pretty-printed OTLP JSON documents, one protobuf message per file
(``.binpb``), the Collector's length-prefixed frames (``format: proto``, or ``format: json`` with
``compression: zstd``; each frame optionally zstd-compressed),
and any of these inside whole-file gzip or zstd. JSON Lines and frames are streamed: one line or one
frame in memory at a time.

Problems never raise (unless ``strict``): each becomes an :class:`InputIssue` and reading goes on
with the next line or frame.
"""
from __future__ import annotations

import gzip
import io
import json
import logging
import os
import re
import stat
import sys
import zlib
from typing import Any, Callable, Iterator, List, Optional, Sequence, Tuple, Type, Union

from spanassert.core.model import SpanRecord
from spanassert.otlp.issues import ERROR, WARNING, InputIssue, OTLPInputError, SpanDecodeError
from spanassert.otlp.json_decode import records_from_json
from spanassert.otlp.proto_decode import records_from_proto

_log = logging.getLogger("spanassert.otlp")

PathArg = Union[str, "os.PathLike[str]"]

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
GZIP_MAGIC = b"\x1f\x8b"
_BOM = b"\xef\xbb\xbf"
_WHITESPACE = b" \t\r\n"
# A frame longer than this is taken as a sign the file is not length-prefixed at all.
MAX_FRAME_BYTES = 1 << 30
_CHUNK = 1 << 16
_GLOB_CHARS = re.compile(r"[*?[]")
STDIN_NAME = "<stdin>"
ZSTD_INSTALL_HINT = "pip install 'spanassert[zstd]'"

# What a file reader yields: the records of one line/message, or an issue.
_Item = Union[List[SpanRecord], InputIssue]


def _log_issue(issue: InputIssue) -> None:
    _log.log(logging.ERROR if issue.severity == ERROR else logging.WARNING, "%s", issue.format())


def read_spans(
    paths: Union[Sequence[PathArg], PathArg],
    *,
    on_issue: Optional[Callable[[InputIssue], None]] = None,
    strict: bool = False,
) -> Iterator[SpanRecord]:
    """Yield every span in ``paths`` (files, directories read recursively in sorted order, glob
    patterns, or ``"-"`` for stdin).

    Each problem is passed to ``on_issue`` (default: logged) and reading continues; with ``strict``
    the first error raises :class:`OTLPInputError` instead. Nothing else is raised.
    """
    report = on_issue if on_issue is not None else _log_issue
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    for target in _expand(paths):
        if isinstance(target, InputIssue):
            items: Iterator[_Item] = iter((target,))
            name = target.file
        else:
            name, path = target
            items = _read_file(name, path)
        while True:
            try:
                item = next(items)
            except StopIteration:
                break
            except Exception as exc:  # noqa: BLE001 -- a reader bug must not become the caller's traceback
                item = InputIssue(name, None, None, f"could not read the file: {type(exc).__name__}: {exc}", ERROR)
                items = iter(())
            if type(item) is list:
                yield from item
                continue
            assert isinstance(item, InputIssue)
            if strict and item.severity == ERROR:
                raise OTLPInputError(item)
            report(item)


# -- which files ------------------------------------------------------------------------------------


def _walk(directory: str) -> List[Union[str, InputIssue]]:
    """The regular files below ``directory`` in sorted order; a FIFO, socket or device found there is
    skipped with a warning (opening a FIFO would wait for a writer forever)."""
    found: List[str] = []
    for root, dirs, files in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        found.extend(os.path.join(root, f) for f in sorted(files) if not f.startswith("."))
    return _regular(found)


def _regular(paths: List[str]) -> List[Union[str, InputIssue]]:
    """``paths`` with each special file (found in a folder or by a glob) replaced by a warning."""
    out: List[Union[str, InputIssue]] = []
    for path in paths:
        special = _special_kind(path)
        out.append(path if special is None else InputIssue(
            path, None, None, f"skipped: a {special}, not a regular file (it is never opened, so a FIFO "
            "cannot block the read); name it on the command line to read it", WARNING))
    return out


def _special_kind(path: str) -> Optional[str]:
    """What kind of special file ``path`` is (following symlinks), or None for a regular file or
    one that cannot be examined (opening it reports why)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISFIFO(mode):
        return "FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "device"
    return "special file"


def _expand(paths: Sequence[PathArg]) -> Iterator[Union[Tuple[str, Optional[str]], InputIssue]]:
    for p in paths:
        if p == "-":
            yield STDIN_NAME, None
            continue
        path = os.fspath(p)
        if os.path.isdir(path):
            files = _walk(path)
            if not files:
                yield InputIssue(path, None, None, "directory holds no files", WARNING)
            for f in files:
                yield f if isinstance(f, InputIssue) else (f, f)
        elif os.path.exists(path):
            yield path, path
        elif _GLOB_CHARS.search(path):
            import glob

            matches = sorted(glob.glob(path, recursive=True))
            if not matches:
                yield InputIssue(path, None, None, "no file matches this pattern", ERROR)
            for m in matches:
                for f in _walk(m) if os.path.isdir(m) else _regular([m]):
                    yield f if isinstance(f, InputIssue) else (f, f)
        else:
            yield InputIssue(path, None, None, "no such file or directory", ERROR)


# -- one file ---------------------------------------------------------------------------------------


class _Rewound(io.RawIOBase):
    """A non-seekable stream with the bytes already read for format detection put back in front."""

    def __init__(self, head: bytes, rest: Any) -> None:
        self._head = head
        self._rest = rest
        self._read = getattr(rest, "read1", rest.read)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self._head:
            n = min(len(buffer), len(self._head))
            buffer[:n] = self._head[:n]
            self._head = self._head[n:]
            return n
        data = self._read(len(buffer))
        n = len(data)
        buffer[:n] = data
        return n


def _read_head(stream: Any) -> bytes:
    """Enough leading bytes to recognise the format, without waiting for a slow pipe to fill up."""
    read = getattr(stream, "read1", stream.read)
    head = b""
    while len(head.lstrip(_WHITESPACE)) < 8:
        chunk = read(_CHUNK)
        if not chunk:
            break
        head += chunk
    return head


def _read_file(name: str, path: Optional[str]) -> Iterator[_Item]:
    if path is None:
        yield from _read_stream(name, sys.stdin.buffer, None, 0)
        return
    try:
        f = open(path, "rb")  # noqa: SIM115 -- opened apart, so that only opening names the path; `with f` below
    except OSError as exc:
        yield InputIssue(name, None, None, f"cannot open: {exc.strerror or exc}", ERROR)
        return
    with f:
        try:
            size: Optional[int] = os.fstat(f.fileno()).st_size
        except OSError:
            size = None
        yield from _read_stream(name, f, size, 0)


def _zstd_module(name: str) -> Tuple[Any, Optional[InputIssue]]:
    try:
        import zstandard
    except ImportError:
        return None, InputIssue(
            name,
            None,
            None,
            f"this input is zstd-compressed and the optional 'zstandard' module is not installed; "
            f"install it with: {ZSTD_INSTALL_HINT}",
            ERROR,
        )
    return zstandard, None


def _read_stream(name: str, stream: Any, size: Optional[int], layer: int) -> Iterator[_Item]:
    if layer == 0 and _seekable(stream):
        head = stream.read(4096)
        stream.seek(0)
    else:
        head = _read_head(stream)
        stream = io.BufferedReader(_Rewound(head, stream), _CHUNK)
        size = None
    if not head:
        yield InputIssue(name, None, None, "empty input: no spans", WARNING)
        return
    if head[:4] == ZSTD_MAGIC or head[:2] == GZIP_MAGIC:
        if layer >= 2:
            yield InputIssue(name, None, None, "compressed more than twice over; not an OTLP export", ERROR)
            return
        yield from _read_compressed(name, stream, head, layer)
        return
    body = head.lstrip(_WHITESPACE)
    if body.startswith(_BOM):
        body = body[3:].lstrip(_WHITESPACE)
    if body[:1] in (b"{", b"["):
        yield from _read_json(name, stream)
    elif head[0] != 0x0A and len(head) >= 5 and (head[4] == 0x0A or head[4:8] == ZSTD_MAGIC or head[:4] == b"\0\0\0\0"):
        yield from _read_framed(name, stream, size)
    elif head[0] == 0x0A:
        yield from _read_binpb(name, stream)
    else:
        yield InputIssue(
            name,
            None,
            0,
            f"not a recognised OTLP trace file (starts with bytes {head[:8].hex(' ')}); expected OTLP JSON "
            "(`{`), a protobuf TracesData message, Collector length-prefixed protobuf, gzip or zstd",
            ERROR,
        )


def _seekable(stream: Any) -> bool:
    try:
        return bool(stream.seekable())
    except (AttributeError, OSError, ValueError):
        return False


def _read_compressed(name: str, stream: Any, head: bytes, layer: int) -> Iterator[_Item]:
    if head[:4] == ZSTD_MAGIC:
        zstandard, issue = _zstd_module(name)
        if issue is not None:
            yield issue
            return
        inner: Any = zstandard.ZstdDecompressor().stream_reader(stream, read_across_frames=True)
        errors: Tuple[Type[BaseException], ...] = (zstandard.ZstdError, OSError)
        what = "zstd"
    else:
        inner = gzip.GzipFile(fileobj=stream, mode="rb")
        errors = (OSError, zlib.error)
        what = "gzip"
    try:
        yield from _read_stream(name, inner, None, layer + 1)
    except EOFError:
        yield InputIssue(name, None, None, f"{what} data ends early (file still being written?)", WARNING)
    except errors as exc:
        yield InputIssue(name, None, None, f"{what} data is corrupt: {exc}", ERROR)


# -- JSON ---------------------------------------------------------------------------------------------


def _json_records(name: str, line: int, obj: Any) -> Iterator[_Item]:
    errors: List[SpanDecodeError] = []
    try:
        records = records_from_json(obj, f"{name}:{line}", errors=errors)
    except SpanDecodeError as exc:
        yield InputIssue(name, line, None, str(exc), ERROR)
        return
    except RecursionError:
        yield InputIssue(name, line, None, "OTLP document is nested too deeply", ERROR)
        return
    if records:
        yield records
    for problem in errors:
        yield InputIssue(name, line, None, str(problem), ERROR)


def _utf8_issue(name: str, line: int, exc: UnicodeDecodeError) -> InputIssue:
    bad = exc.object[exc.start : exc.start + 1].hex()
    return InputIssue(
        name, line, None, f"line is not valid UTF-8: byte 0x{bad} at column {exc.start + 1}", ERROR
    )


def _read_json(name: str, stream: Any) -> Iterator[_Item]:
    """JSON Lines, one OTLP document per line; switches to whole-document mode when the first line
    is the start of a pretty-printed document."""
    loads = json.loads
    typed: Optional[Callable[[bytes, str], Optional[List[SpanRecord]]]] = None
    lineno = 0
    first = True
    mode = os.environ.get("SPANASSERT_TYPED_JSON")  # "never" / "always": the tests compare the two paths
    unread_typed = -1 if mode == "never" else 0 if mode == "always" else _TYPED_AFTER_BYTES
    if unread_typed == 0:
        typed = _typed_decoder()
    for raw in stream:
        lineno += 1
        if unread_typed > 0:
            unread_typed -= len(raw)
            if unread_typed <= 0:
                # A long input: the typed decoder pays for its import (a small file is read sooner without).
                typed = _typed_decoder()
        if typed is not None:
            # The typed fast path: the same records as below for a line in the canonical shape;
            # None for anything else, which then goes the careful way (and keeps its wording).
            recs = typed(raw, f"{name}:{lineno}")
            if recs is not None:
                first = False
                if recs:
                    yield recs
                continue
        # Bytes straight to json.loads: it decodes UTF-8 (with or without BOM) and skips
        # surrounding whitespace itself; blank lines are only checked for once parsing failed.
        try:
            obj = loads(raw)
        except UnicodeDecodeError as exc:
            if not raw.endswith(b"\n"):
                yield _partial_line(name, lineno)
            else:
                yield _utf8_issue(name, lineno, exc)
            first = False
            continue
        except json.JSONDecodeError as exc:
            if not raw.strip():
                continue
            terminated = raw.endswith(b"\n")
            if first and terminated and exc.pos >= len(exc.doc.rstrip()):
                yield from _read_pretty(name, lineno, raw, stream)
                return
            if not terminated:
                yield _partial_line(name, lineno)
            else:
                yield InputIssue(name, lineno, None, f"invalid JSON at column {exc.colno}: {exc.msg}", ERROR)
            first = False
            continue
        except RecursionError:
            yield InputIssue(name, lineno, None, "JSON is nested too deeply", ERROR)
            first = False
            continue
        first = False
        yield from _json_records(name, lineno, obj)


# Bytes of JSON Lines read before the typed decoder is imported (importing msgspec costs about what
# decoding 2,000 spans the careful way does); either path gives the same records.
_TYPED_AFTER_BYTES = 1 << 20


def _typed_decoder() -> Optional[Callable[[bytes, str], Optional[List[SpanRecord]]]]:
    try:
        from spanassert.otlp.json_typed import records_from_line
    except ImportError:  # msgspec missing
        return None
    return records_from_line


def _partial_line(name: str, line: int) -> InputIssue:
    return InputIssue(
        name, line, None, "last line is incomplete (no newline, not valid JSON); file still being written?", WARNING
    )


def _read_pretty(name: str, first_line: int, first_raw: bytes, stream: Any) -> Iterator[_Item]:
    """One or more pretty-printed documents (e.g. ``jq .`` output). These are read whole."""
    data = first_raw + stream.read()
    if data.startswith(_BOM):
        data = data[3:]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = first_line + data.count(b"\n", 0, exc.start)
        yield InputIssue(name, line, None, f"not valid UTF-8: byte 0x{data[exc.start:exc.start + 1].hex()}", ERROR)
        return
    decoder = json.JSONDecoder()
    pos = 0
    line = first_line
    end = len(text)
    while True:
        start = pos
        while pos < end and text[pos] in " \t\r\n":
            pos += 1
        if pos >= end:
            return
        line += text.count("\n", start, pos)
        try:
            obj, stop = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            at_line = first_line + text.count("\n", 0, exc.pos)
            column = exc.pos - text.rfind("\n", 0, exc.pos)
            if exc.pos >= len(text.rstrip()):
                yield InputIssue(
                    name, line, None, "JSON document ends early (file still being written?)", WARNING
                )
                return
            # A broken first line of a JSON Lines file looks like the start of a pretty document:
            # if the next line is a document of its own, go back to reading line by line.
            rest = text[pos:].split("\n")
            if len(rest) > 1 and _is_complete_json(rest[1]):
                yield InputIssue(
                    name,
                    line,
                    None,
                    f"invalid JSON at column {len(rest[0].rstrip()) + 1}: the line ends inside the document",
                    ERROR,
                )
                yield from _read_json_lines_in_memory(name, line + 1, rest[1:])
                return
            yield InputIssue(name, at_line, None, f"invalid JSON at column {column}: {exc.msg}", ERROR)
            return
        except RecursionError:
            yield InputIssue(name, line, None, "JSON is nested too deeply", ERROR)
            return
        yield from _json_records(name, line, obj)
        line += text.count("\n", pos, stop)
        pos = stop


def _is_complete_json(s: str) -> bool:
    s = s.strip()
    if not s.startswith("{"):
        return False
    try:
        json.loads(s)
    except (ValueError, RecursionError):
        return False
    return True


def _read_json_lines_in_memory(name: str, first_line: int, lines: List[str]) -> Iterator[_Item]:
    for i, s in enumerate(lines):
        lineno = first_line + i
        s = s.strip()
        if not s:
            continue
        try:
            obj = json.loads(s)
        except json.JSONDecodeError as exc:
            if i == len(lines) - 1:
                yield _partial_line(name, lineno)
            else:
                yield InputIssue(name, lineno, None, f"invalid JSON at column {exc.colno}: {exc.msg}", ERROR)
            continue
        except RecursionError:
            yield InputIssue(name, lineno, None, "JSON is nested too deeply", ERROR)
            continue
        yield from _json_records(name, lineno, obj)


# -- protobuf -----------------------------------------------------------------------------------------


def _proto_records(name: str, index: int, offset: int, data: bytes) -> Iterator[_Item]:
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
    records = records_from_proto(msg, f"{name}#message {index}", errors=errors)
    if records:
        yield records
    for problem in errors:
        yield InputIssue(name, None, offset, f"message {index}: {problem}", ERROR)


def _read_binpb(name: str, stream: Any) -> Iterator[_Item]:
    yield from _proto_records(name, 1, 0, stream.read())


def _read_exactly(stream: Any, n: int) -> bytes:
    # Read in chunks so a garbage length from a non-seekable stream does not allocate it up front.
    if n <= _CHUNK * 16:
        return stream.read(n)  # type: ignore[no-any-return]  # a file object, untyped
    parts = []
    left = n
    while left:
        chunk = stream.read(min(left, _CHUNK * 16))
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


def _read_framed(name: str, stream: Any, size: Optional[int]) -> Iterator[_Item]:
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
                zstandard, issue = _zstd_module(name)
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
        if payload.lstrip(_WHITESPACE)[:1] == b"{":
            # `format: json` with `compression: zstd`: each frame holds one OTLP JSON document.
            yield from _frame_json_records(name, index, offset, payload)
        else:
            yield from _proto_records(name, index, offset, payload)
        offset += 4 + n


def _frame_json_records(name: str, index: int, offset: int, payload: bytes) -> Iterator[_Item]:
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
