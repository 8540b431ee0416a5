"""Composed YAML nodes -> plain values (dicts, lists, JSON scalars) that remember their positions.

Repeated keys are reported (the first value kept), merge keys (``<<``) are expanded, tags a rules
file has no use for are refused, and what aliases expand to is bounded (a "billion laughs" file
composes to a few nodes but would construct to billions).
"""
from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Set, Tuple

import yaml
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from ..core.model import Diagnostic
from . import codes
from .keypath import KeyPath, format_path

MAX_DEPTH = 64
MAX_ALIASES = 100
MAX_ALIAS_NODES = 10_000

_TAG = "tag:yaml.org,2002:"
_MERGE_TAG = _TAG + "merge"
# Tags whose scalars become JSON values; timestamps stay text (a rules file has no date type).
_SCALAR_AS_TEXT = {_TAG + "str", _TAG + "timestamp", _TAG + "value"}
_COLLECTION_TAGS = {_TAG + "map", _TAG + "omap", _TAG + "pairs", _TAG + "set", _TAG + "seq"}
# Numbers that YAML 1.1 (PyYAML, this loader) and YAML 1.2 (Assay's serde_yaml, most editors' schemas)
# read as different values, silently: base 60 (`1:30` is 90 here, the text "1:30" there) and a leading
# zero (`010` is 8 here, 10 there). A rules file shared between the two must not mean two things.
_SEXAGESIMAL = re.compile(r"[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?")
_LEADING_ZERO_OCTAL = re.compile(r"[-+]?0[0-7_]*[1-7][0-7_]*")
# Plain text in YAML 1.1 that YAML 1.2's core schema reads as a number: an exponent without a dot or
# a sign (`1e3`), `0o17`, a leading zero with an 8 or 9 (`09`).
_YAML12_NUMBER = re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|0o[0-7]+|0x[0-9a-fA-F]+")


_INF = float("inf")


def _brief(text: str) -> str:
    return text if len(text) <= 40 else f"{text[:20]}…{text[-8:]}"


class Refused(Exception):
    def __init__(self, code: str, message: str, mark: Any, hint: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.mark = mark
        self.hint = hint


def mark_pos(mark: Any) -> Tuple[Optional[int], Optional[int]]:
    if mark is None:
        return (None, None)
    return (mark.line + 1, mark.column + 1)


class ValueBuilder:
    """Turns composed nodes into plain values, recording positions and duplicate keys."""

    def __init__(self, file: Optional[str]) -> None:
        self.file = file
        self.value_at: Dict[KeyPath, Tuple[int, int]] = {}
        self.key_at: Dict[KeyPath, Tuple[int, int]] = {}
        self.problems: List[Diagnostic] = []
        self._seen: Set[int] = set()
        self._alias_nodes = 0
        self._scalars = SafeConstructor()

    def _record(self, path: KeyPath, node: Node) -> None:
        line, col = mark_pos(node.start_mark)
        if line is not None and col is not None:
            self.value_at[path] = (line, col)

    def build(self, node: Node, path: KeyPath, via_alias: bool = False) -> Any:
        # A node met a second time is an alias use: what it expands to is counted, and bounded.
        if id(node) in self._seen:
            via_alias = True
        self._seen.add(id(node))
        if via_alias:
            self._alias_nodes += 1
            if self._alias_nodes > MAX_ALIAS_NODES:
                raise Refused(
                    codes.E_CFG_ALIAS,
                    f"YAML aliases expand to more than {MAX_ALIAS_NODES} nodes; refused as a possible alias bomb",
                    node.start_mark,
                    "write the repeated parts out, or reduce nested `*alias` references",
                )
        if len(path) > MAX_DEPTH:
            # Only reachable through aliases (a recursive anchor); composing already bounds the rest.
            raise Refused(codes.E_CFG_TOO_DEEP, f"nesting deeper than {MAX_DEPTH} levels (through aliases)",
                           node.start_mark, "remove the recursive alias")
        self._record(path, node)
        if isinstance(node, ScalarNode):
            return self._scalar(node)
        if isinstance(node, SequenceNode):
            self._check_collection_tag(node)
            return [self.build(item, (*path, i), via_alias) for i, item in enumerate(node.value)]
        if isinstance(node, MappingNode):
            self._check_collection_tag(node)
            return self._mapping(node, path, via_alias)
        return None  # pragma: no cover - PyYAML has no other node kind

    def _check_collection_tag(self, node: Node) -> None:
        if node.tag not in _COLLECTION_TAGS:
            self._unsupported_tag(node)

    def _unsupported_tag(self, node: Node) -> None:
        line, col = mark_pos(node.start_mark)
        self.problems.append(Diagnostic(
            codes.E_CFG_PARSE, f"YAML tag `{node.tag}` is not supported in a rules file",
            file=self.file, line=line, column=col,
            hint="remove the tag; a rules file holds plain mappings, lists, strings, numbers, booleans and nulls",
        ))

    def _scalar(self, node: ScalarNode) -> Any:
        tag = node.tag
        if tag in _SCALAR_AS_TEXT:
            if tag == _TAG + "str" and not node.style and _YAML12_NUMBER.fullmatch(node.value):
                return self._text_or_number(node)
            return node.value
        if (tag == _TAG + "int" or tag == _TAG + "float") and self._two_readings(node):
            # Reported; the YAML 1.1 reading stands in, so no second error follows from the same value.
            return self._scalars.construct_yaml_float(node) if tag == _TAG + "float" else \
                self._scalars.construct_yaml_int(node)
        try:
            if tag == _TAG + "null":
                return None
            if tag == _TAG + "bool":
                value = self._scalars.construct_yaml_bool(node)
                if not node.style and node.value.lower() not in ("true", "false"):
                    self._yes_no(node, value)  # reported; the YAML 1.1 reading stands in
                return value
            if tag == _TAG + "int":
                return self._scalars.construct_yaml_int(node)
            if tag == _TAG + "float":
                return self._scalars.construct_yaml_float(node)
        except (ValueError, TypeError, yaml.YAMLError):
            line, col = mark_pos(node.start_mark)
            text = node.value if len(node.value) <= 40 else f"{node.value[:20]}…{node.value[-8:]}"
            if tag == _TAG + "int" and len(node.value) > 1000:
                # Python refuses to read integers of more than 4300 digits (a denial-of-service bound).
                message = f"`{text}` is an integer of {len(node.value)} characters, too large to read"
                hint = "write a smaller number (no count, size or duration in a rules file needs 1000 digits)"
            else:
                message = f"`{text}` is not a valid {tag[len(_TAG):]}"
                hint = "quote it to make it a string"
            self.problems.append(Diagnostic(codes.E_CFG_PARSE, message, file=self.file, line=line, column=col,
                                            hint=hint))
            return node.value
        self._unsupported_tag(node)
        return node.value

    def _two_readings(self, node: ScalarNode) -> bool:
        """Report a plain number that YAML 1.1 and YAML 1.2 read as different values (True when reported)."""
        text = node.value
        if node.style or len(text) > 40:
            return False  # quoted: a string in both (an explicit `!!int` tag is refused as a tag elsewhere)
        if _SEXAGESIMAL.fullmatch(text):
            read = self._scalars.construct_yaml_float(node) if "." in text else self._scalars.construct_yaml_int(node)
            message = (f"`{text}` is a base-60 number in YAML 1.1 (read here as {read!r}) but the text "
                       f"\"{text}\" in YAML 1.2")
            hint = f"write the number itself (`{read!r}`), or quote it (`\"{text}\"`) if it is text"
        elif _LEADING_ZERO_OCTAL.fullmatch(text):
            read = self._scalars.construct_yaml_int(node)
            decimal = int(text.replace("_", ""), 10)
            if read == decimal:
                return False  # `07`: the same number either way
            message = (f"`{text}` has a leading zero: YAML 1.1 reads it as octal ({read}) and YAML 1.2 as "
                       f"decimal ({decimal})")
            hint = f"write `{decimal}` or `{read}` without the leading zero, or quote it if it is text"
        else:
            return False
        line, col = mark_pos(node.start_mark)
        self.problems.append(Diagnostic(codes.E_CFG_PARSE, message, file=self.file, line=line, column=col,
                                        hint=hint))
        return True

    def _yes_no(self, node: ScalarNode, value: bool) -> None:
        """Report ``yes``/``no``/``on``/``off``: booleans in YAML 1.1, text in YAML 1.2 (``country: no``
        would match false here, never the text "no")."""
        word = "true" if value else "false"
        line, col = mark_pos(node.start_mark)
        self.problems.append(Diagnostic(
            codes.E_CFG_PARSE, f"`{node.value}` is the boolean {word} in YAML 1.1 but the text \"{node.value}\" in "
            "YAML 1.2", file=self.file, line=line, column=col,
            hint=f"write `{word}` for the boolean, or quote it (`\"{node.value}\"`) for the text"))

    def _text_or_number(self, node: ScalarNode) -> Any:
        """Report plain text that YAML 1.2 reads as a number (``1e3``: text here, 1000.0 there); the
        number stands in (no second error follows from the same value), or the text if too long."""
        text = node.value
        shown = _brief(text)
        value: Any = text
        if len(text) > 40:
            number = "a number"
            fix = "write the number as YAML 1.1 reads one"
        else:
            base = 8 if text.startswith("0o") else 16 if text.startswith("0x") else 10
            decimal_int = base == 10 and "." not in text and "e" not in text.lower()
            value = int(text, base) if base != 10 or decimal_int else float(text)
            written = (".inf" if value > 0 else "-.inf") if value in (_INF, -_INF) else repr(value)
            number = f"the number {written}"
            fix = f"write the number as YAML 1.1 reads one (`{written}`)"
        line, col = mark_pos(node.start_mark)
        self.problems.append(Diagnostic(
            codes.E_CFG_PARSE, f"`{shown}` is text in YAML 1.1 (read here as the string \"{shown}\") but {number} in "
            "YAML 1.2", file=self.file, line=line, column=col,
            hint=f"{fix}, or quote it (`\"{shown}\"`) if it is text"))
        return value

    def _key_text(self, key_node: Node, path: KeyPath) -> Optional[str]:
        if isinstance(key_node, ScalarNode):
            # The key as written: `on:`/`yes:`/`1:` stay the text the user typed.
            return str(key_node.value)
        line, col = mark_pos(key_node.start_mark)
        self.problems.append(Diagnostic(
            codes.E_CFG_TYPE, "a mapping key must be a plain scalar, not a list or mapping",
            file=self.file, line=line, column=col, path=format_path(path), hint="use a string key",
        ))
        return None

    def _mapping(self, node: MappingNode, path: KeyPath, via_alias: bool) -> Dict[str, Any]:
        out: Dict[str, Any] = {}
        first_at: Dict[str, Tuple[Optional[int], Optional[int]]] = {}
        merges: List[Tuple[Node, Node]] = []
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                merges.append((key_node, value_node))
                continue
            key = self._key_text(key_node, path)
            if key is None:
                continue
            kline, kcol = mark_pos(key_node.start_mark)
            if key in first_at:
                line0 = first_at[key][0]
                self.problems.append(Diagnostic(
                    codes.E_CFG_DUPLICATE_KEY,
                    f"duplicate key `{key}` (first given at line {line0})",
                    file=self.file, line=kline, column=kcol, path=format_path((*path, key)),
                    hint="keep one of the two; YAML parsers differ on which one wins",
                ))
                continue
            first_at[key] = (kline, kcol)
            below = (*path, key)
            if kline is not None and kcol is not None:
                self.key_at[below] = (kline, kcol)
            out[key] = self.build(value_node, below, via_alias)
        # `<<: *base` merges: keys written here win over merged ones; earlier sources win over later.
        for _key_node, value_node in merges:
            sources = value_node.value if isinstance(value_node, SequenceNode) else [value_node]
            for src in sources:
                if not isinstance(src, MappingNode):
                    line, col = mark_pos(src.start_mark)
                    self.problems.append(Diagnostic(
                        codes.E_CFG_TYPE, "`<<` must merge a mapping (or a list of mappings)",
                        file=self.file, line=line, column=col, path=format_path(path),
                        hint="point `<<` at an anchored mapping, e.g. `<<: *defaults`",
                    ))
                    continue
                merged = self._mapping_for_merge(src, path)
                for k, v in merged.items():
                    if k not in out:
                        out[k] = v
        return out

    def _mapping_for_merge(self, src: MappingNode, path: KeyPath) -> Dict[str, Any]:
        # Positions recorded for merged keys point at the anchored mapping; explicit keys keep theirs.
        saved_values = dict(self.value_at)
        saved_keys = dict(self.key_at)
        merged = self.build(src, path, True)
        for table, saved in ((self.value_at, saved_values), (self.key_at, saved_keys)):
            for k, v in saved.items():
                table[k] = v
        return merged if isinstance(merged, dict) else {}


class _Dumper(yaml.SafeDumper):
    """PyYAML's safe dumper, quoting also the strings this loader refuses plain (``1e3``, ``09``,
    ``0o17``: text in YAML 1.1, numbers in YAML 1.2; PyYAML quotes only what YAML 1.1 would misread)."""


def _represent_str(dumper: _Dumper, data: str) -> Any:
    if _YAML12_NUMBER.fullmatch(data):
        return dumper.represent_scalar(_TAG + "str", data, style="'")
    return dumper.represent_str(data)


_Dumper.add_representer(str, _represent_str)


def safe_dump(data: Any, **options: Any) -> str:
    """``yaml.safe_dump`` whose output this loader reads back as the same values (drafted and
    migrated rules files, the rules ``check()`` builds)."""
    text: str = yaml.dump(data, Dumper=_Dumper, **options)
    return text
