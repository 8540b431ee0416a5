"""Reading recorded values without keeping them: canonical hashes, leaves with their paths, and
argument paths (``customer.email``, ``items.*.id``).

Shared by the rules that compare or scan recorded content (loops, data flow, detectors). Every walk
is bounded (depth and leaf count): past a bound the caller is told, and its rule is inconclusive
rather than passed.
"""
from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from typing import Any, Callable, Dict, Final, Iterable, Iterator, List, Optional, Tuple

from ..core.toolcall import CONTENT_OK, decode_content, repeats_keys

# A walk stops after this many leaves or this depth; the caller learns it was cut.
MAX_LEAVES: Final = 10_000
MAX_DEPTH: Final = 64

PATH_PATTERN: Final = r"^[^.\s]+(\.[^.\s]+)*$"
PATH_SCHEMA: Final = {"type": "string", "pattern": PATH_PATTERN}


def canonical_json(value: Any) -> str:
    """One text per value: keys sorted, no insignificant whitespace, non-ASCII kept."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


_blake2b: Final = hashlib.blake2b


def digest(text: str) -> bytes:
    """A 128-bit hash of ``text``: what rules keep instead of recorded values."""
    return _blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def _canonical_bytes_json(value: Any) -> bytes:
    return b"\0" + canonical_json(value).encode("utf-8", "surrogatepass")


def _non_finite(value: Any) -> bool:
    """Whether ``value`` holds a NaN or an infinity (which msgspec writes as ``null``)."""
    stack = [value]
    while stack:
        node = stack.pop()
        t = type(node)
        if t is float:
            if node != node or node in (_INF, -_INF):
                return True
        elif t is dict:
            stack.extend(node.values())
        elif t is list or t is tuple:
            stack.extend(node)
        elif isinstance(node, float):
            return True  # a float subclass: let json.dumps write it
    return False


_INF: Final = float("inf")
_canonical_fast: Optional[Callable[[Any], bytes]] = None


def _fast_encoder() -> Callable[[Any], bytes]:
    global _canonical_fast
    if _canonical_fast is None:
        import msgspec.json

        _canonical_fast = msgspec.json.Encoder(order="sorted").encode
    return _canonical_fast


def canonical_bytes(value: Any) -> bytes:
    """One byte string per value, equal for JSON values whose :func:`canonical_json` is equal and
    different otherwise: what rules compare and hash instead of recorded values.

    msgspec's encoder with sorted keys writes the canonical JSON of plain JSON data about ten times
    faster than ``json.dumps``. A value it refuses (a lone surrogate, a type JSON has no form for),
    or one with a NaN or an infinity (which it writes as ``null``), takes the ``json.dumps`` form
    instead, marked by a leading NUL byte, which no JSON text starts with. The choice depends on
    the value alone, so equal values always get equal bytes."""
    try:
        out = (_canonical_fast or _fast_encoder())(value)
    except Exception:  # noqa: BLE001 - any value msgspec cannot write takes the json.dumps form
        return _canonical_bytes_json(value)
    if out.find(b"null") != -1 and _non_finite(value):  # find: about half the cost of `in` on bytes
        return _canonical_bytes_json(value)
    return out


def _normal_str(text: str) -> str:
    return text if text.isascii() else unicodedata.normalize("NFC", text)


def equal_value(value: Any) -> Any:
    """``value`` with every number that equals an integer written as that integer (``1.0``,
    ``1e0`` and ``-0.0`` are ``1``, ``1`` and ``0``) and every string and object key in Unicode
    normal form C (``"é"`` composed or decomposed): values a person reads as equal become equal
    Python values, with equal :func:`canonical_bytes`. Key order and the text's spelling
    (whitespace, escapes) are gone with decoding already. Object keys that become equal (the same
    key in two forms in one object) keep both values, under that key, sorted by their canonical
    bytes and marked by a lone surrogate (which a JSON text can carry too: such a value may then
    equal it, which can make ``trace_no_repeat`` fail, never pass). None for a value nested deeper
    than MAX_DEPTH (as :class:`Walk`, the caller is told: whether it equals another is unknown)."""
    try:
        return _equal_value(value, 0)
    except _TooDeep:
        return None


class _TooDeep(Exception):
    pass


_DUPLICATE_MARK: Final = chr(0xDC00)  # a lone surrogate (written so: a compiled module's constants are UTF-8)


def _equal_value(value: Any, depth: int) -> Any:
    t = type(value)
    if t is float:
        if value.is_integer():
            return int(value)
        return value
    if t is str:
        return _normal_str(value)
    if depth >= MAX_DEPTH:
        raise _TooDeep()
    if t is dict or isinstance(value, dict):
        out: Dict[Any, Any] = {}
        merged: Optional[Dict[Any, List[Any]]] = None
        for k, v in value.items():
            nk = _normal_str(k) if type(k) is str else k
            nv = _equal_value(v, depth + 1)
            if nk in out:
                if merged is None:
                    merged = {}
                if nk not in merged:
                    merged[nk] = [out[nk]]
                merged[nk].append(nv)
            else:
                out[nk] = nv
        if merged is not None:
            for nk, vs in merged.items():
                out[nk] = [_DUPLICATE_MARK, sorted(vs, key=canonical_bytes)]
        return out
    if t is list or t is tuple or isinstance(value, (list, tuple)):
        return [_equal_value(v, depth + 1) for v in value]
    return value


def _plain_numbers(value: Any, depth: int) -> bool:
    """Whether every float in ``value`` has a fraction and is finite (an integral one is made an
    integer by :func:`equal_value`; msgspec writes a non-finite one as ``null``) and it nests no
    deeper than MAX_DEPTH; False also for a subclass of a JSON type (:func:`equal_value` decides).
    By types, not by the text: cheaper than one search of the encoded bytes."""
    t = type(value)
    if t is float:
        f: float = value
        return not f.is_integer() and f - f == 0.0  # inf - inf and nan - nan are nan
    if t is dict:
        if depth >= MAX_DEPTH:
            return False
        d: Dict[Any, Any] = value
        for v in d.values():
            tv = type(v)
            if tv is float:  # the float case above, inlined: no call per float leaf
                fv: float = v
                if fv.is_integer() or fv - fv != 0.0:
                    return False
            elif (tv is dict or tv is list or tv is tuple) and not _plain_numbers(v, depth + 1):
                return False
        return True
    if t is list or t is tuple:
        if depth >= MAX_DEPTH:
            return False
        items: Iterable[Any] = value
        for v in items:
            tv = type(v)
            if tv is float:
                fl: float = v
                if fl.is_integer() or fl - fl != 0.0:
                    return False
            elif (tv is dict or tv is list or tv is tuple) and not _plain_numbers(v, depth + 1):
                return False
        return True
    return not isinstance(value, (dict, list, tuple, float))


def call_key(name: str, arguments: Any) -> Optional[int]:
    """What ``trace_no_repeat`` counts a call by: a 64-bit integer, equal for calls of one tool
    (its exact name) whose arguments are equal values (:func:`equal_value`), Python's own hash
    (SipHash, keyed at random per process) of the name and the arguments' canonical bytes. Two
    different calls share a key about once in 2**64 pairs, which can make the rule fail, never
    pass. The arguments are made equal values only when they hold a float with no fraction (or not
    finite) or their canonical bytes a non-ASCII character: most arguments are encoded once, as
    :func:`canonical_bytes` encodes them (its test for a non-finite float is this walk's). None when
    they are nested too deeply to be made equal values."""
    if _plain_numbers(arguments, 0):
        try:
            out = (_canonical_fast or _fast_encoder())(arguments)
        except Exception:  # noqa: BLE001 - as canonical_bytes
            out = _canonical_bytes_json(arguments)
        if out.isascii():
            return hash((name, out))
    value = equal_value(arguments)
    if value is None and arguments is not None:
        return None
    return hash((name, canonical_bytes(value)))


def parse_path(path: Optional[str]) -> Tuple[str, ...]:
    """``a.b.*.c`` -> ("a", "b", "*", "c"); None or "" -> () (the whole value)."""
    if not path:
        return ()
    return tuple(path.split("."))


def show_path(parts: List[Any]) -> str:
    """How a message names a location inside a value: ``$``, ``$.to``, ``$.items[2].id``."""
    out = "$"
    for p in parts:
        if isinstance(p, int):
            out += f"[{p}]"
        elif re.match(r"^[A-Za-z_][A-Za-z0-9_-]*$", p):
            out += f".{p}"
        else:
            out += "[" + json.dumps(p, ensure_ascii=True)[:40] + "]"
    return out


_OPENERS: Final = ("{", "[")


def _may_hold_json(text: str) -> bool:
    head = text[:1]
    return head in _OPENERS or (head.isspace() and text.lstrip()[:1] in _OPENERS)


def json_inside(text: str) -> Any:
    """The object or array a string holds as JSON text (a tool result recorded as JSON inside a JSON
    string, as MCP's text content carries it, or arguments encoded twice), or None. Walks look
    inside it, so what a value carries is seen however many times it was encoded."""
    if not _may_hold_json(text):
        return None
    value, state = decode_content(text)
    return value if state == CONTENT_OK and type(value) in (dict, list) else None


def _selected(value: Any, select: Tuple[str, ...]) -> List[Tuple[List[Any], Any, int]]:
    """The nodes a selecting path (``items.*.id``) leads to, with their paths, deepest first in
    reverse order (a stack to pop)."""
    level: List[Tuple[List[Any], Any, int]] = [([], value, 0)]
    for depth, key in enumerate(select):
        below: List[Tuple[List[Any], Any, int]] = []
        for path, node, _ in level:
            if type(node) is str:
                inner = json_inside(node)
                if inner is not None:
                    node = inner
            if isinstance(node, dict):
                items = list(node.items()) if key == "*" else ([(key, node[key])] if key in node else [])
            elif isinstance(node, list):
                if key == "*":
                    items = list(enumerate(node))
                elif key.isdigit() and int(key) < len(node):
                    items = [(int(key), node[int(key)])]
                else:
                    items = []
            else:
                items = []
            below.extend(([*path, k], v, depth + 1) for k, v in items)
        level = below
    level.reverse()
    return level


class Walk:
    """The leaves of a value (strings, numbers, booleans, nulls) or its objects, with their paths,
    under an optional selecting path; ``cut`` is True afterwards when a bound stopped the walk
    early. A string holding a JSON object or array is a leaf, and its value is walked too (below
    the string's path, one level deeper: :func:`json_inside`); ``cut`` is True too when such a
    string repeats a key with different values (only the last was walked)."""

    __slots__ = ("cut",)

    def __init__(self) -> None:
        self.cut = False

    def leaves(self, value: Any, select: Tuple[str, ...] = ()) -> Iterator[Tuple[List[Any], Any]]:
        # Not folded: a loop of its own, not objects()'s with a flag: it is on the rules' hot path, and
        # one generator for both measured 25-30% slower (session 4).
        count = 0
        stack = _selected(value, select) if select else [([], value, 0)]
        limit = MAX_DEPTH + len(select)
        while stack:
            path, node, depth = stack.pop()
            if isinstance(node, dict):
                if depth >= limit:
                    self.cut = True
                    continue
                for k, v in reversed(list(node.items())):
                    stack.append(([*path, k], v, depth + 1))
                continue
            if isinstance(node, list):
                if depth >= limit:
                    self.cut = True
                    continue
                stack.extend(([*path, i], node[i], depth + 1) for i in range(len(node) - 1, -1, -1))
                continue
            count += 1
            if count > MAX_LEAVES:
                self.cut = True
                return
            yield path, node
            if type(node) is str and (node[:1] in _OPENERS or node[:1].isspace()):
                inner = json_inside(node)
                if inner is not None:
                    if repeats_keys(node, inner):
                        self.cut = True  # a key repeated with another value: not every reading seen
                    stack.append((path, inner, depth + 1))

    def objects(self, value: Any, select: Tuple[str, ...] = ()) -> Iterator[Tuple[List[Any], Dict[Any, Any]]]:
        """The non-empty objects at or below the selection, each before anything below it (so a
        caller that checks an object's keys has checked every key of a path it later shows); at
        most MAX_LEAVES keys in all."""
        keys = 0
        stack = _selected(value, select) if select else [([], value, 0)]
        limit = MAX_DEPTH + len(select)
        while stack:
            path, node, depth = stack.pop()
            if isinstance(node, dict):
                below: Iterable[Tuple[Any, Any]] = reversed(list(node.items()))
                if node:
                    keys += len(node)
                    if depth >= limit or keys > MAX_LEAVES:
                        self.cut = True
                        return
                    yield path, node
            elif isinstance(node, list):
                if depth >= limit:
                    self.cut = True
                    return
                below = zip(range(len(node) - 1, -1, -1), reversed(node))
            elif type(node) is str:
                inner = json_inside(node)
                if inner is not None:
                    if repeats_keys(node, inner):
                        self.cut = True  # a key repeated with another value: not every reading seen
                    stack.append((path, inner, depth + 1))
                continue
            else:
                continue
            stack.extend(([*path, k], v, depth + 1) for k, v in below
                         if isinstance(v, (dict, list)) or (type(v) is str and _may_hold_json(v)))


__all__ = [
    "MAX_LEAVES",
    "MAX_DEPTH",
    "PATH_SCHEMA",
    "Walk",
    "json_inside",
    "canonical_json",
    "call_key",
    "equal_value",
    "canonical_bytes",
    "digest",
    "parse_path",
    "show_path",
]
