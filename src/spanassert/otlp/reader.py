"""Read exported OTLP trace files of any common shape, detected from their content.

Shapes: OTLP JSON Lines (the file exporter spec, the Collector ``file`` exporter, the Python
``FileSpanExporter``), pretty-printed OTLP JSON documents, one protobuf message per file
(``.binpb``), the Collector's length-prefixed frames (``format: proto``, or ``format: json`` with
``compression: zstd``; each frame optionally zstd-compressed),
and any of these inside whole-file gzip or zstd. JSON Lines and frames are streamed: one line or one
frame in memory at a time.

Problems never raise (unless ``strict``): each becomes an :class:`InputIssue` and reading goes on
with the next line or frame.

This module finds the form and undoes whole-file compression; :mod:`.paths` expands the paths,
:mod:`.json_lines` reads JSON, :mod:`.framed` reads protobuf messages and frames.
"""
from __future__ import annotations

import gzip
import io
import logging
import os
import sys
import zlib
from typing import Any, Callable, Iterator, List, Optional, Sequence, Tuple, Type, Union

from spanassert.core.model import SpanRecord
from spanassert.otlp.formats import BOM, CHUNK, GZIP_MAGIC, WHITESPACE, ZSTD_MAGIC, Item, zstd_module
from spanassert.otlp.framed import read_binpb, read_framed
from spanassert.otlp.issues import ERROR, WARNING, InputIssue, OTLPInputError
from spanassert.otlp.json_lines import read_json
from spanassert.otlp.paths import PathArg, expand
from spanassert.otlp.shard import Shard, ShardBatch

_log = logging.getLogger("spanassert.otlp")

# Read buffer of an input file: JSON Lines exporters write lines of hundreds of KB (a batch of
# spans each), and a line is read a buffer at a time (1 MiB: about half the cost of 8 KB).
FILE_BUFFER = 1 << 20


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
    for batch in read_span_batches(paths, on_issue=on_issue, strict=strict):
        yield from batch


def read_span_batches(
    paths: Union[Sequence[PathArg], PathArg],
    *,
    on_issue: Optional[Callable[[InputIssue], None]] = None,
    strict: bool = False,
    shard: Optional[Shard] = None,
) -> Iterator[List[Any]]:
    """:func:`read_spans` a list at a time: the spans of one line or message, in order (replay
    takes them in without a call per span). ``shard`` (``replay --jobs``): each span of another
    shard is None (see :mod:`spanassert.otlp.shard`; JSON Lines then skip decoding most of them)."""
    report = on_issue if on_issue is not None else _log_issue
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    for target in expand(paths):
        if isinstance(target, InputIssue):
            items: Iterator[Item] = iter((target,))
            name = target.file
        else:
            name, path = target
            items = _read_file(name, path, shard)
        while True:
            try:
                item = next(items)
            except StopIteration:
                break
            except Exception as exc:  # noqa: BLE001 -- a reader bug must not become the caller's traceback
                item = InputIssue(name, None, None, f"could not read the file: {type(exc).__name__}: {exc}", ERROR)
                items = iter(())
            if type(item) is list:
                yield item if shard is None else shard.only(item)
                continue
            if type(item) is ShardBatch:
                yield item
                continue
            assert isinstance(item, InputIssue)
            if strict and item.severity == ERROR:
                raise OTLPInputError(item)
            report(item)


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
    while len(head.lstrip(WHITESPACE)) < 8:
        chunk = read(CHUNK)
        if not chunk:
            break
        head += chunk
    return head


def _read_file(name: str, path: Optional[str], shard: Optional[Shard] = None) -> Iterator[Item]:
    if path is None:
        yield from _read_stream(name, sys.stdin.buffer, None, 0, shard)
        return
    try:
        f = open(path, "rb", buffering=FILE_BUFFER)  # noqa: SIM115 -- opened apart: only opening names the path
    except OSError as exc:
        yield InputIssue(name, None, None, f"cannot open: {exc.strerror or exc}", ERROR)
        return
    with f:
        try:
            size: Optional[int] = os.fstat(f.fileno()).st_size
        except OSError:
            size = None
        yield from _read_stream(name, f, size, 0, shard)


def _read_stream(name: str, stream: Any, size: Optional[int], layer: int,
                 shard: Optional[Shard] = None) -> Iterator[Item]:
    if layer == 0 and _seekable(stream):
        head = stream.read(4096)
        stream.seek(0)
    else:
        head = _read_head(stream)
        stream = io.BufferedReader(_Rewound(head, stream), CHUNK)
        size = None
    if not head:
        yield InputIssue(name, None, None, "empty input: no spans", WARNING)
        return
    if head[:4] == ZSTD_MAGIC or head[:2] == GZIP_MAGIC:
        if layer >= 2:
            yield InputIssue(name, None, None, "compressed more than twice over; not an OTLP export", ERROR)
            return
        yield from _read_compressed(name, stream, head, layer, shard)
        return
    body = head.lstrip(WHITESPACE)
    if body.startswith(BOM):
        body = body[3:].lstrip(WHITESPACE)
    if body[:1] in (b"{", b"["):
        yield from read_json(name, stream, shard)
    elif head[0] != 0x0A and len(head) >= 5 and (head[4] == 0x0A or head[4:8] == ZSTD_MAGIC or head[:4] == b"\0\0\0\0"):
        yield from read_framed(name, stream, size)
    elif head[0] == 0x0A:
        yield from read_binpb(name, stream)
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


def _read_compressed(name: str, stream: Any, head: bytes, layer: int,
                     shard: Optional[Shard] = None) -> Iterator[Item]:
    if head[:4] == ZSTD_MAGIC:
        zstandard, issue = zstd_module(name)
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
        yield from _read_stream(name, inner, None, layer + 1, shard)
    except EOFError:
        yield InputIssue(name, None, None, f"{what} data ends early (file still being written?)", WARNING)
    except errors as exc:
        yield InputIssue(name, None, None, f"{what} data is corrupt: {exc}", ERROR)

