"""Reelier's one-line result assertions, parsed once at load into small predicate objects.

The forms (the first that matches a line wins; any other line is a load error, never a no-op):

- ``status ==|!= ok|error|<int>``: ``ok``/``error`` compare the span status (unset counts as ok); an
  integer compares a numeric top-level ``status_code`` (else ``status``) of the JSON result.
- ``body contains "<text>"`` / ``body not contains "<text>"``: the result as text. The text is a
  JSON string literal on one line.
- ``json.<path> is array|set|number|string|boolean|null``: ``set`` means present and not null.
- ``json.<path> matches /<regex>/``: the value must be a string the regex is found in.
- ``json.<path> length >|<|>=|<= <int>``: the length of an array or string.
- ``json.<path> ==|!=|>|<|>=|<= <json scalar>``: strict equality (no coercion between types);
  ordering compares numbers only.

``<path>`` is dot-separated; a numeric segment indexes an array; a missing path is *undefined*.
Every ``json.*`` form fails on a result that is not JSON. Binds (``name = json.x``) are refused:
spanassert checks what was recorded and carries no variables between calls.

Each check answers HELD, FAILED or UNDECIDED (the data it reads was not recorded).
"""
from __future__ import annotations

import json
import operator
import re
from typing import Any, Callable, Final, List, Optional, Pattern, Sequence, Tuple

from ..core.model import CONTENT_MISSING, CONTENT_UNPARSABLE, ToolCall
from ..otlp.json_decode import json_kind
from .base import BuildContext
from .call_checks import UNKNOWN_STATUS, call_errored, status_unknown
from .selectors import MAX_MATCH_CHARS

HELD: Final = "held"
FAILED: Final = "failed"
UNDECIDED: Final = "undecided"

# Result shapes, computed once per call.
RESULT_MISSING: Final = "missing"
RESULT_UNPARSABLE: Final = "unparsable"
RESULT_TEXT: Final = "text"  # recorded, not JSON
RESULT_JSON: Final = "json"

GRAMMAR_ERROR: Final = "E_CFG_RESULT_GRAMMAR"
FORMS: Final = (
    "status ==|!= ok|error|<int>; "
    'body contains "<text>"; body not contains "<text>"; '
    "json.<path> is array|set|number|string|boolean|null; "
    "json.<path> matches /<regex>/; "
    "json.<path> length >|<|>=|<= <int>; "
    "json.<path> ==|!=|>|<|>=|<= <json scalar>"
)

Show = Callable[[Any], str]
Check = Tuple[str, str]  # (HELD|FAILED|UNDECIDED, what was observed)


class _Undefined:
    """What a path that leads nowhere resolves to (distinct from a JSON null)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "undefined"


UNDEFINED: Final[Any] = _Undefined()


class ResultGrammarError(ValueError):
    def __init__(self, reason: str, code: str = GRAMMAR_ERROR) -> None:
        super().__init__(reason)
        self.reason = reason
        self.code = code


class ResultView:
    """One call's result as the checks read it: its shape, parsed value and text."""

    __slots__ = ("shape", "value", "text")

    def __init__(self, shape: str, value: Any, text: Optional[str]) -> None:
        self.shape = shape
        self.value = value
        self.text = text

    @classmethod
    def of(cls, call: ToolCall) -> ResultView:
        state = call.result_state
        text = call.result_text
        if state == CONTENT_MISSING:
            return cls(RESULT_MISSING, UNDEFINED, None)
        if state == CONTENT_UNPARSABLE:
            # Looked like JSON and did not parse: most often a truncated recording, so the checks
            # cannot tell what the tool returned.
            return cls(RESULT_UNPARSABLE, UNDEFINED, text)
        value = call.result
        # decode_content hands back a non-JSON string unchanged; a JSON string literal never equals
        # its own text (the quotes), so equality with the raw text means "not JSON".
        if isinstance(value, str) and value == text:
            return cls(RESULT_TEXT, UNDEFINED, text)
        return cls(RESULT_JSON, value, text)


def kind_of(value: Any) -> str:
    return "undefined" if value is UNDEFINED else json_kind(value)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def strict_equal(a: Any, b: Any) -> bool:
    """Equality without coercion: 1 == 1.0, but 1 != true and "1" != 1."""
    if _is_number(a) and _is_number(b):
        return bool(a == b)
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if a is UNDEFINED or b is UNDEFINED:
        return a is b
    return type(a) is type(b) and bool(a == b)


def resolve(value: Any, segments: Sequence[str]) -> Any:
    for seg in segments:
        if isinstance(value, dict):
            value = value.get(seg, UNDEFINED)
        elif isinstance(value, list) and seg.isdigit():
            i = int(seg)
            value = value[i] if i < len(value) else UNDEFINED
        else:
            return UNDEFINED
        if value is UNDEFINED:
            return UNDEFINED
    return value


_ORDER: Final = {">": operator.gt, "<": operator.lt, ">=": operator.ge, "<=": operator.le}


class ResultCheck:
    """One parsed line."""

    __slots__ = ("line",)

    def __init__(self, line: str) -> None:
        self.line = line

    def check(self, call: ToolCall, view: ResultView, show: Show) -> Check:
        raise NotImplementedError

    @property
    def reads_status(self) -> bool:
        return False


class StatusCheck(ResultCheck):
    __slots__ = ("op", "want")

    def __init__(self, line: str, op: str, want: Any) -> None:
        super().__init__(line)
        self.op = op
        self.want = want  # "ok", "error" or an int

    @property
    def reads_status(self) -> bool:
        return isinstance(self.want, str)

    def check(self, call: ToolCall, view: ResultView, show: Show) -> Check:
        if isinstance(self.want, str):
            if status_unknown(call):
                return UNDECIDED, UNKNOWN_STATUS
            got = "error" if call_errored(call) else "ok"
            same = got == self.want
            return (HELD if same == (self.op == "==") else FAILED), f"got {got}"
        code: Any = UNDEFINED
        key = "status_code"
        if view.shape == RESULT_JSON and isinstance(view.value, dict):
            for key in ("status_code", "status"):
                if _is_number(view.value.get(key)):
                    code = view.value[key]
                    break
        if code is UNDEFINED:
            return UNDECIDED, "no numeric `status_code` or `status` in the result"
        same = strict_equal(code, self.want)
        return (HELD if same == (self.op == "==") else FAILED), f"got {key} {show(code)}"


class BodyContains(ResultCheck):
    __slots__ = ("text", "negate")

    def __init__(self, line: str, text: str, negate: bool) -> None:
        super().__init__(line)
        self.text = text
        self.negate = negate

    def check(self, call: ToolCall, view: ResultView, show: Show) -> Check:
        if view.text is None:
            return UNDECIDED, "result not recorded"
        found = self.text in view.text
        if found != self.negate:
            return HELD, ""
        return FAILED, ("text found in the result" if found else "text not found in the result")


class _JsonCheck(ResultCheck):
    __slots__ = ("path",)

    def __init__(self, line: str, path: Tuple[str, ...]) -> None:
        super().__init__(line)
        self.path = path

    def check(self, call: ToolCall, view: ResultView, show: Show) -> Check:
        if view.shape == RESULT_MISSING:
            return UNDECIDED, "result not recorded"
        if view.shape == RESULT_UNPARSABLE:
            return UNDECIDED, "result could not be parsed (truncated?)"
        if view.shape != RESULT_JSON:
            return FAILED, "the result is not JSON"
        return self.judge(resolve(view.value, self.path), show)

    def judge(self, value: Any, show: Show) -> Check:
        raise NotImplementedError


class JsonIs(_JsonCheck):
    __slots__ = ("kind",)

    def __init__(self, line: str, path: Tuple[str, ...], kind: str) -> None:
        super().__init__(line, path)
        self.kind = kind

    def judge(self, value: Any, show: Show) -> Check:
        ok = value is not UNDEFINED and value is not None if self.kind == "set" else kind_of(value) == self.kind
        return (HELD if ok else FAILED), f"got {kind_of(value)}"


class JsonMatches(_JsonCheck):
    __slots__ = ("regex",)

    def __init__(self, line: str, path: Tuple[str, ...], regex: Pattern[str]) -> None:
        super().__init__(line, path)
        self.regex = regex

    def judge(self, value: Any, show: Show) -> Check:
        if not isinstance(value, str):
            return FAILED, f"got {kind_of(value)}, not a string"
        if len(value) > MAX_MATCH_CHARS:  # matching a cut text would be a guess
            return UNDECIDED, f"a string of {len(value)} characters, over the {MAX_MATCH_CHARS} that are matched"
        if self.regex.search(value) is not None:
            return HELD, ""
        return FAILED, f"got {show(value)}"


class JsonLength(_JsonCheck):
    __slots__ = ("op", "bound")

    def __init__(self, line: str, path: Tuple[str, ...], op: str, bound: int) -> None:
        super().__init__(line, path)
        self.op = op
        self.bound = bound

    def judge(self, value: Any, show: Show) -> Check:
        if not isinstance(value, (list, str)):
            return FAILED, f"got {kind_of(value)}, which has no length"
        n = len(value)
        return (HELD if _ORDER[self.op](n, self.bound) else FAILED), f"got length {n}"


class JsonCompare(_JsonCheck):
    __slots__ = ("op", "literal")

    def __init__(self, line: str, path: Tuple[str, ...], op: str, literal: Any) -> None:
        super().__init__(line, path)
        self.op = op
        self.literal = literal

    def judge(self, value: Any, show: Show) -> Check:
        got = "got undefined" if value is UNDEFINED else f"got {show(value)}"
        if self.op in ("==", "!="):
            same = strict_equal(value, self.literal)
            return (HELD if same == (self.op == "==") else FAILED), got
        if not (_is_number(value) and _is_number(self.literal)):
            return FAILED, f"got {kind_of(value)}; ordering compares numbers only"
        return (HELD if _ORDER[self.op](value, self.literal) else FAILED), got


# -- parsing ---------------------------------------------------------------------------------------

_PATH: Final = r"json((?:\.[^.\s=!<>]+)+)"
_STATUS_RE: Final = re.compile(r"^status\s*(==|!=)\s*(ok|error|\d+)$")
_BODY_RE: Final = re.compile(r"^body\s+(not\s+)?contains\s+(\".*\")$")
_IS_RE: Final = re.compile(r"^" + _PATH + r"\s+is\s+(array|set|number|string|boolean|null)$")
_MATCHES_RE: Final = re.compile(r"^" + _PATH + r"\s+matches\s+/(.*)/$")
_LENGTH_RE: Final = re.compile(r"^" + _PATH + r"\s+length\s*(>=|<=|>|<)\s*(\d+)$")
_COMPARE_RE: Final = re.compile(r"^" + _PATH + r"\s*(==|!=|>=|<=|>|<)\s*(.+)$")
_BIND_RE: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\s*=(?!=)\s*(json\b|body\s+match\b)")


def _segments(path: str) -> Tuple[str, ...]:
    return tuple(path[1:].split("."))


def parse_result_line(line: str) -> ResultCheck:
    """Parse one assertion line; raises :class:`ResultGrammarError` saying why it is not one."""
    if not isinstance(line, str):
        raise ResultGrammarError(f"{line!r} is not a string")
    if "\n" in line or "\r" in line:
        raise ResultGrammarError("an assertion must be a single line")
    text = line.strip()
    if _BIND_RE.match(text):
        raise ResultGrammarError(
            "binds (`name = json.<path>`, `name = body match /re/`) are not supported: spanassert checks "
            "recorded results and carries no values between calls"
        )
    m = _STATUS_RE.match(text)
    if m:
        want: Any = m.group(2)
        if want.isdigit():
            want = int(want)
        return StatusCheck(line, m.group(1), want)
    m = _BODY_RE.match(text)
    if m:
        try:
            needle = json.loads(m.group(2))
        except ValueError:
            needle = None
        if not isinstance(needle, str):
            raise ResultGrammarError('the text after `contains` must be one JSON string, e.g. "done" (escape " as \\")')
        return BodyContains(line, needle, bool(m.group(1)))
    m = _IS_RE.match(text)
    if m:
        return JsonIs(line, _segments(m.group(1)), m.group(2))
    m = _MATCHES_RE.match(text)
    if m:
        try:
            regex = re.compile(m.group(2))
        except re.error as exc:
            raise ResultGrammarError(f"invalid regex /{m.group(2)}/: {exc}", code="E_CFG_REGEX") from None
        return JsonMatches(line, _segments(m.group(1)), regex)
    m = _LENGTH_RE.match(text)
    if m:
        return JsonLength(line, _segments(m.group(1)), m.group(2), int(m.group(3)))
    m = _COMPARE_RE.match(text)
    if m:
        raw = m.group(3).strip()
        try:
            literal = json.loads(raw)
        except ValueError:
            raise ResultGrammarError(
                f"`{raw}` is not a JSON scalar (quote strings: \"{raw}\"; numbers, true, false, null bare)"
            ) from None
        if isinstance(literal, (dict, list)):
            raise ResultGrammarError(f"`{raw}` is not a scalar: compare with a string, number, boolean or null")
        return JsonCompare(line, _segments(m.group(1)), m.group(2), literal)
    raise ResultGrammarError("this line is not in the result grammar")


def compile_result_checks(lines: Sequence[Any], ctx: BuildContext, field: str) -> List[ResultCheck]:
    """Parse every line, reporting each bad one (with its position and the accepted forms)."""
    checks: List[ResultCheck] = []
    for i, line in enumerate(lines):
        try:
            check = parse_result_line(line)
        except ResultGrammarError as exc:
            ctx.error(exc.code, f"`{line}`: {exc.reason}", field=f"{field}[{i}]", hint=f"write one of: {FORMS}")
            continue
        checks.append(check)
        if isinstance(check, JsonMatches):  # the same load-time warning as every other rule regex
            ctx.warn_regex_risk(check.regex.pattern, field=f"{field}[{i}]")
    return checks


__all__ = [
    "HELD",
    "FAILED",
    "UNDECIDED",
    "FORMS",
    "GRAMMAR_ERROR",
    "UNDEFINED",
    "ResultCheck",
    "ResultView",
    "ResultGrammarError",
    "StatusCheck",
    "BodyContains",
    "JsonIs",
    "JsonMatches",
    "JsonLength",
    "JsonCompare",
    "parse_result_line",
    "compile_result_checks",
    "resolve",
    "strict_equal",
]
