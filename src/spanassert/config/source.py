"""Reading a rules file into plain values that remember where they were written.

The file is composed with PyYAML's SafeLoader *node* API (never constructed as a whole), so every
key and value keeps its 1-based line and column, repeated keys are seen (PyYAML's constructor
silently keeps the last one), and hostile input is refused before it costs anything: a size bound
before parsing, a nesting bound while composing, and bounds on aliases and on the nodes they expand
to (a "billion laughs" file composes to a few nodes but constructs to billions).

Reading and composing are here; :mod:`.yaml_values` turns the composed nodes into values with
positions, :mod:`.keypath` names a place in the file.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict, List, NoReturn, Optional, Tuple

import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.nodes import Node
from yaml.resolver import Resolver

from ..core.model import Diagnostic
from . import codes
from .keypath import KeyPath, Position, format_path, parse_field_path
from .yaml_values import MAX_ALIAS_NODES, MAX_ALIASES, MAX_DEPTH, Refused, ValueBuilder, mark_pos

MAX_CONFIG_BYTES = 1 << 20


class SourceProblem(Exception):
    """The input cannot be turned into a document at all; ``diagnostics`` says why and where."""

    def __init__(self, diagnostics: List[Diagnostic]) -> None:
        super().__init__(diagnostics[0].message if diagnostics else "unreadable rules file")
        self.diagnostics = diagnostics


class Source:
    """The text of a rules file and where it came from."""

    __slots__ = ("text", "file", "base_dir")

    def __init__(self, text: str, file: Optional[str], base_dir: str) -> None:
        self.text = text
        self.file = file  # None for YAML passed as text
        self.base_dir = base_dir  # relative paths inside the file resolve against this


class Document:
    """The composed file: ``value`` holds plain dicts/lists/scalars; positions are looked up by key
    path (a tuple of keys and list indexes)."""

    __slots__ = ("value", "file", "base_dir", "problems", "_value_at", "_key_at")

    def __init__(self, value: Any, file: Optional[str], base_dir: str,
                 value_at: Dict[KeyPath, Tuple[int, int]], key_at: Dict[KeyPath, Tuple[int, int]],
                 problems: Optional[List[Diagnostic]] = None) -> None:
        self.value = value
        self.file = file
        self.base_dir = base_dir
        # Problems found while composing that still leave a usable value (a repeated key keeps its
        # first value), so the rest of the file can be checked and every problem reported at once.
        self.problems: List[Diagnostic] = problems or []
        self._value_at = value_at
        self._key_at = key_at

    def position(self, path: KeyPath, *, key: bool = False) -> Position:
        """Line/column of the value at ``path`` (of its key when ``key``); for a path that does not
        exist (a missing key, a default) the nearest enclosing value that does."""
        if key and path in self._key_at:
            return self._key_at[path]
        p = tuple(path)
        while True:
            if p in self._value_at:
                return self._value_at[p]
            if not p:
                return (None, None)
            p = p[:-1]


# -- reading ------------------------------------------------------------------------------------
def read_source(path_or_text: Any) -> Source:
    """A ``str``/``PathLike`` naming a file is read as a file; a ``str`` with a newline is YAML text;
    ``bytes`` are YAML content. Raises :class:`SourceProblem`."""
    if isinstance(path_or_text, (bytes, bytearray)):
        text = _decode(bytes(path_or_text), None)
        return Source(text, None, os.getcwd())
    if isinstance(path_or_text, str) and "\n" in path_or_text:
        check_text_size(path_or_text)
        _check_text_encodable(path_or_text)
        return Source(path_or_text, None, os.getcwd())
    if not isinstance(path_or_text, (str, os.PathLike)):
        raise SourceProblem([Diagnostic(
            codes.E_PATH_NOT_FOUND,
            f"expected a path or YAML text, got {type(path_or_text).__name__}",
            hint="pass the path of the rules file, or its YAML text (text must contain a newline)",
        )])
    return _read_file(Path(os.fspath(path_or_text)))


def _read_file(path: Path) -> Source:
    label = str(path)
    try:
        is_file = path.is_file()
    except (OSError, ValueError):
        is_file = False
    if not is_file:
        what = "is a directory, not a rules file" if _is_dir(path) else "does not exist"
        raise SourceProblem([Diagnostic(
            codes.E_PATH_NOT_FOUND, f"rules file `{label}` {what}", file=label,
            hint="check the path (relative paths are taken from the current directory); "
                 "YAML passed as text must contain a newline",
        )])
    try:
        size = path.stat().st_size
        if size > MAX_CONFIG_BYTES:
            raise SourceProblem([_too_large(size, label)])
        with path.open("rb") as fh:
            data = fh.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise SourceProblem([Diagnostic(
            codes.E_PATH_UNREADABLE, f"cannot read rules file `{label}`: {exc.strerror or exc}", file=label,
            hint="check the file's permissions",
        )]) from None
    if len(data) > MAX_CONFIG_BYTES:
        raise SourceProblem([_too_large(len(data), label)])
    text = _decode(data, label)
    return Source(text, label, str(path.resolve().parent))


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except (OSError, ValueError):
        return False


def _too_large(size: int, label: Optional[str]) -> Diagnostic:
    return Diagnostic(
        codes.E_CFG_TOO_LARGE,
        f"rules file is {size} bytes; the limit is {MAX_CONFIG_BYTES} bytes (1 MiB)" if size <= 10 * MAX_CONFIG_BYTES
        else f"rules file is larger than the limit of {MAX_CONFIG_BYTES} bytes (1 MiB)",
        file=label,
        hint="split the rules into several files, or move large JSON Schemas to `schema_file`s",
    )


def check_text_size(text: str) -> None:
    if len(text) * 4 <= MAX_CONFIG_BYTES:
        return
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_CONFIG_BYTES:
        raise SourceProblem([_too_large(size, None)])


def _check_text_encodable(text: str) -> None:
    # Text from surrogateescape decoding carries lone surrogates, which no YAML parser accepts.
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        before = text[: exc.start]
        line = before.count("\n") + 1
        column = exc.start - (before.rfind("\n") + 1) + 1
        raise SourceProblem([Diagnostic(
            codes.E_CFG_ENCODING,
            f"rules text is not valid Unicode: lone surrogate U+{ord(text[exc.start]):04X} at character {exc.start}",
            line=line, column=column,
            hint="pass the rules as UTF-8 bytes or text without surrogates (undo a surrogateescape decoding)",
        )]) from None


def _decode(data: bytes, label: Optional[str]) -> str:
    if len(data) > MAX_CONFIG_BYTES:
        raise SourceProblem([_too_large(len(data), label)])
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        before = data[: exc.start]
        line = before.count(b"\n") + 1
        column = exc.start - (before.rfind(b"\n") + 1) + 1
        raise SourceProblem([Diagnostic(
            codes.E_CFG_ENCODING,
            f"rules file is not valid UTF-8: byte 0x{data[exc.start]:02x} at byte offset {exc.start} ({exc.reason})",
            file=label, line=line, column=column,
            hint="save the file as UTF-8",
        )]) from None


# -- composing ----------------------------------------------------------------------------------
class _Bounds:
    """Composer hooks that count aliases and bound nesting. PyYAML's composer recurses once per
    nesting level, so the bound also keeps a hostile file from exhausting the stack."""

    alias_count = 0
    depth = 0

    def compose_node(self, parent: Optional[Node], index: Any) -> Optional[Node]:
        loader: Any = self
        if loader.check_event(yaml.AliasEvent):
            self.alias_count += 1
            if self.alias_count > MAX_ALIASES:
                self._refuse(codes.E_CFG_ALIAS,
                             f"more than {MAX_ALIASES} YAML aliases; refused as a possible alias bomb",
                             "write the repeated parts out, or use fewer `*alias` references")
            return Composer.compose_node(loader, parent, index)
        if loader.check_event(yaml.MappingStartEvent, yaml.SequenceStartEvent):
            self.depth += 1
            try:
                if self.depth > MAX_DEPTH:
                    self._refuse(codes.E_CFG_TOO_DEEP, f"nesting deeper than {MAX_DEPTH} levels",
                                 "flatten the structure; a rules file never needs this depth")
                return Composer.compose_node(loader, parent, index)
            finally:
                self.depth -= 1
        return Composer.compose_node(loader, parent, index)

    def _refuse(self, code: str, message: str, hint: str) -> NoReturn:
        """Refuses the file at the node about to be composed (each bound has its own code and words)."""
        loader: Any = self
        raise Refused(code, message, loader.peek_event().start_mark, hint)


class _PythonLoader(_Bounds, yaml.SafeLoader):
    pass


_LOADERS: List[Any] = [_PythonLoader]

if getattr(yaml, "__with_libyaml__", False):  # pragma: no branch - depends on how PyYAML was built
    from yaml.cyaml import CParser  # type: ignore[attr-defined]  # types-PyYAML's cyaml stub lists no CParser

    class _LibyamlLoader(_Bounds, CParser, Composer, SafeConstructor, Resolver):
        """libyaml's C scanner/parser for speed (a 1 MiB file parses in seconds, not minutes), with
        the Python composer above so that the bounds, positions and duplicate checks are the same."""

        def __init__(self, stream: str) -> None:
            CParser.__init__(self, stream)
            Composer.__init__(self)
            SafeConstructor.__init__(self)
            Resolver.__init__(self)

        get_single_node = Composer.get_single_node
        get_node = Composer.get_node
        check_node = Composer.check_node

    _LOADERS.insert(0, _LibyamlLoader)


def _line_col_of_index(text: str, index: int) -> Tuple[int, int]:
    before = text[:index]
    return before.count("\n") + 1, index - (before.rfind("\n") + 1) + 1


def parse_document(source: Source) -> Document:
    """Compose ``source`` into a :class:`Document`. Raises :class:`SourceProblem` when the text is not
    a usable YAML document; lesser problems (repeated keys, unsupported tags) go to ``problems``."""
    file = source.file
    loader: Any = None
    try:
        loader = _LOADERS[0](source.text)  # the reader checks for forbidden characters right here
        node = loader.get_single_node()
    except Refused as r:
        line, col = mark_pos(r.mark)
        raise SourceProblem([Diagnostic(r.code, r.message, file=file, line=line, column=col, hint=r.hint)]) from None
    except yaml.reader.ReaderError as exc:
        line, col = _line_col_of_index(source.text, exc.position)
        raise SourceProblem([Diagnostic(
            codes.E_CFG_PARSE,
            f"character U+{exc.character:04X} is not allowed in YAML" if isinstance(exc.character, int)
            else f"unreadable character: {exc.reason}",
            file=file, line=line, column=col,
            hint="remove the control character (write it as an escape such as \"\\x07\" inside a quoted string)",
        )]) from None
    except yaml.MarkedYAMLError as exc:
        line, col = mark_pos(exc.problem_mark or exc.context_mark)
        if "maximum nesting depth" in (exc.problem or ""):  # libyaml's own bound, met while scanning ahead
            raise SourceProblem([Diagnostic(codes.E_CFG_TOO_DEEP, f"nesting deeper than {MAX_DEPTH} levels",
                                            file=file, line=line, column=col,
                                            hint="flatten the structure; a rules file never needs this depth")]
                          ) from None
        parts = [p for p in (exc.context, exc.problem) if p]
        raw = "; ".join(parts) or "invalid YAML"
        plain = _plain_yaml_error(exc)
        raise SourceProblem([Diagnostic(
            codes.E_CFG_PARSE, f"YAML syntax error: {plain} (parser: {raw})" if plain else f"YAML syntax error: {raw}",
            file=file, line=line, column=col, hint=_parse_hint(exc),
        )]) from None
    except yaml.YAMLError as exc:
        raise SourceProblem([Diagnostic(codes.E_CFG_PARSE, f"YAML syntax error: {exc}", file=file)]) from None
    except RecursionError:
        raise SourceProblem([Diagnostic(codes.E_CFG_TOO_DEEP, f"nesting deeper than {MAX_DEPTH} levels",
                                        file=file)]) from None
    finally:
        if loader is not None:
            loader.dispose()
    if node is None:
        return Document(None, file, source.base_dir, {}, {})
    builder = ValueBuilder(file)
    try:
        value = builder.build(node, ())
    except Refused as r:
        line, col = mark_pos(r.mark)
        raise SourceProblem([Diagnostic(r.code, r.message, file=file, line=line, column=col, hint=r.hint)]) from None
    return Document(value, file, source.base_dir, builder.value_at, builder.key_at, builder.problems)


def _plain_yaml_error(exc: yaml.MarkedYAMLError) -> Optional[str]:
    """What the parser expected, in words a newcomer can act on (None when there is nothing
    better to say than the parser's own text)."""
    problem = (exc.problem or "").lower()
    context = (exc.context or "").lower()
    at, start = exc.problem_mark, exc.context_mark
    if at is None:
        return None
    line, col = at.line + 1, at.column + 1
    if start is not None and "expected '-' indicator" in problem and "block collection" in context:
        c = start.column + 1
        return (f"line {line} is indented to column {col}, but the list that starts at line {start.line + 1} has "
                f"its items (`- `) at column {c}: a line in that list either starts a new item (`- ` at column "
                f"{c}) or continues the item above, indented to column {c + 2}")
    if start is not None and "expected key" in problem and "block mapping" in context:
        c = start.column + 1
        return (f"line {line} is indented to column {col}, which lines up with nothing above it: the keys of "
                f"the block that starts at line {start.line + 1} are at column {c}; indent this line to column "
                f"{c} to add a key there, or to the column of an outer block's keys or list items")
    if "mapping values are not allowed" in problem:
        return (f"line {line} has a `key: value` where a plain value was expected: either this line is "
                "indented deeper than the keys beside it, or a value containing `: ` needs quotes")
    if "could not find expected ':'" in problem:
        return (f"a line near line {line} was expected to be `key: value` and has no `:` (or a value running "
                "over several lines needs quotes)")
    if "found character '\\t'" in problem or "\t" in problem:
        return f"line {line} is indented with a tab; YAML indents with spaces only"
    return None


def _parse_hint(exc: yaml.MarkedYAMLError) -> str:
    problem = (exc.problem or "").lower()
    if "tab" in problem or "\\t" in problem:
        return "indent with spaces, not tabs"
    if "undefined alias" in problem:
        return "define the anchor (`&name`) before using `*name`"
    if "mapping values are not allowed" in problem:
        return "quote the value if it contains `: `, or fix the indentation of this line"
    if "single document" in problem:
        return "a rules file holds one YAML document; remove the extra `---`"
    return "fix the YAML syntax at this position (check indentation, quotes and brackets)"


# Names that import from here as before: key paths (keypath.py) and the bounds (yaml_values.py).
__all__ = ["MAX_CONFIG_BYTES", "MAX_DEPTH", "MAX_ALIASES", "MAX_ALIAS_NODES", "KeyPath", "Position", "SourceProblem",
           "Source", "Document", "read_source", "parse_document", "format_path", "parse_field_path"]
