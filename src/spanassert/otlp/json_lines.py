"""OTLP JSON input: JSON Lines (one document per line, streamed), and pretty-printed documents
(read whole). Each problem becomes an :class:`InputIssue` and reading goes on with the next line."""
from __future__ import annotations

import json
import os
import sys
from functools import partial
from typing import Any, Callable, Iterator, List, Optional

from spanassert.core.model import SpanRecord
from spanassert.otlp import formats
from spanassert.otlp.formats import BOM, Item, number_too_long
from spanassert.otlp.issues import ERROR, WARNING, InputIssue, SpanDecodeError
from spanassert.otlp.json_decode import records_from_json
from spanassert.otlp.shard import Shard


def _json_records(name: str, line: int, obj: Any) -> Iterator[Item]:
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


def read_json(name: str, stream: Any, shard: Optional[Shard] = None) -> Iterator[Item]:
    """JSON Lines, one OTLP document per line; switches to whole-document mode when the first line
    is the start of a pretty-printed document. ``shard`` (``replay --jobs``): lines the typed decoder
    takes are yielded with None for other shards' spans, only this shard's spans decoded (a
    :class:`~spanassert.otlp.shard.ShardBatch`); the reader filters the rest."""
    loads = json.loads
    typed: Optional[Callable[[bytes, str], Optional[List[SpanRecord]]]] = None
    for_shard: Any = None
    usual_left = 8  # lines of another shape before the shard route is given up for this file
    lineno = 0
    first = True
    mode = os.environ.get("SPANASSERT_TYPED_JSON")  # "never" / "always": the tests compare the two paths
    # A shard of ``replay --jobs`` takes the shard route from the first line (every process alike,
    # decided by ``shard`` alone): read the careful way, a line is decoded whole in every process
    # (the parent imported the typed decoder before forking).
    unread_typed = -1 if mode == "never" else 0 if mode == "always" or shard is not None else _TYPED_AFTER_BYTES
    if unread_typed > 0 and _TYPED_MODULE in sys.modules:
        # Its import is paid already (an earlier input in this process): no reason to wait.
        unread_typed = 0
    if unread_typed == 0:
        typed = _typed_decoder()
        for_shard = _shard_decoder(typed, shard)
    # Lines are read at most MAX_RECORD_BYTES at a time (the C readline, no cost per line): a longer
    # line comes back cut, without its newline, and is told apart from a last line only once it fails
    # to parse (below), so the usual line pays nothing for the bound.
    limit = formats.MAX_RECORD_BYTES
    for raw in iter(partial(stream.readline, limit), b""):
        lineno += 1
        if unread_typed > 0:
            unread_typed -= len(raw)
            if unread_typed <= 0:
                # A long input: the typed decoder pays for its import (a small file is read sooner without).
                typed = _typed_decoder()
                for_shard = _shard_decoder(typed, shard)
        if for_shard is not None:
            got = for_shard(raw, f"{name}:{lineno}", shard)
            if got is not None:
                first = False
                if got:
                    yield got
                continue
            usual_left -= 1
            if usual_left <= 0:  # decided from the bytes alone: every process gives it up at the same line
                for_shard = None
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
            if len(raw) >= limit and not raw.endswith(b"\n"):
                yield _too_long(name, lineno, stream, limit)
            elif not raw.endswith(b"\n"):
                yield _partial_line(name, lineno)
            else:
                yield _utf8_issue(name, lineno, exc)
            first = False
            continue
        except json.JSONDecodeError as exc:
            if not raw.strip():
                continue
            terminated = raw.endswith(b"\n")
            if not terminated and len(raw) >= limit:
                yield _too_long(name, lineno, stream, limit)
                first = False
                continue
            if first and terminated and exc.pos >= len(exc.doc.rstrip()):
                yield from _read_pretty(name, lineno, raw, stream)
                return
            if not terminated:
                yield _partial_line(name, lineno)
            else:
                yield _invalid_json(name, lineno, exc.colno, exc.msg)
            first = False
            continue
        except RecursionError:
            yield _too_deep(name, lineno)
            first = False
            continue
        except ValueError:  # after its subclasses above: a number past int()'s digit bound
            yield _number_too_long(name, lineno)
            first = False
            continue
        first = False
        yield from _json_records(name, lineno, obj)


# Bytes of JSON Lines read before the typed decoder is imported (importing msgspec costs about what
# decoding 2,000 spans the careful way does); either path gives the same records.
_TYPED_AFTER_BYTES = 1 << 20
_TYPED_MODULE = "spanassert.otlp.json_typed"


def _typed_decoder() -> Optional[Callable[[bytes, str], Optional[List[SpanRecord]]]]:
    try:
        from spanassert.otlp.json_typed import records_from_line
    except ImportError:  # msgspec missing
        return None
    return records_from_line


def _shard_decoder(typed: Any, shard: Optional[Shard]) -> Any:
    if typed is None or shard is None:
        return None
    from spanassert.otlp.json_typed import records_for_shard

    return records_for_shard


def _invalid_json(name: str, line: int, column: int, why: str) -> InputIssue:
    return InputIssue(name, line, None, f"invalid JSON at column {column}: {why}", ERROR)


def _too_deep(name: str, line: int) -> InputIssue:
    return InputIssue(name, line, None, "JSON is nested too deeply", ERROR)


def _number_too_long(name: str, line: int) -> InputIssue:
    return InputIssue(name, line, None, number_too_long(), ERROR)


def _too_long(name: str, line: int, stream: Any, limit: int) -> InputIssue:
    """The issue for a line longer than ``limit`` bytes, after skipping the rest of it unread."""
    total = limit
    while True:
        rest = stream.readline(1 << 16)
        total += len(rest)
        if not rest or rest.endswith(b"\n"):
            break
    return InputIssue(name, line, None, f"line is {total} bytes long, over the limit of {limit} bytes for one "
                      "OTLP JSON line; skipped without decoding it (split the export into smaller batches)", ERROR)


def _partial_line(name: str, line: int) -> InputIssue:
    return InputIssue(
        name, line, None, "last line is incomplete (no newline, not valid JSON); file still being written?", WARNING
    )


def _read_pretty(name: str, first_line: int, first_raw: bytes, stream: Any) -> Iterator[Item]:
    """One or more pretty-printed documents (e.g. ``jq .`` output). These are read whole, up to
    ``MAX_RECORD_BYTES``."""
    limit = formats.MAX_RECORD_BYTES
    data = first_raw + stream.read(max(0, limit + 1 - len(first_raw)))
    if len(data) > limit:
        yield InputIssue(name, first_line, None, f"OTLP JSON document is over the limit of {limit} bytes read "
                         "whole; not read (write JSON Lines, one request per line, which are read a line at a time)",
                         ERROR)
        return
    if data.startswith(BOM):
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
                yield _invalid_json(name, line, len(rest[0].rstrip()) + 1, "the line ends inside the document")
                yield from _read_json_lines_in_memory(name, line + 1, rest[1:])
                return
            yield _invalid_json(name, at_line, column, exc.msg)
            return
        except RecursionError:
            yield _too_deep(name, line)
            return
        except ValueError:
            yield _number_too_long(name, line)
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


def _read_json_lines_in_memory(name: str, first_line: int, lines: List[str]) -> Iterator[Item]:
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
                yield _invalid_json(name, lineno, exc.colno, exc.msg)
            continue
        except RecursionError:
            yield _too_deep(name, lineno)
            continue
        except ValueError:
            yield _number_too_long(name, lineno)
            continue
        yield from _json_records(name, lineno, obj)
