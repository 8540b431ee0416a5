"""Regexes that can take exponential time: nested or overlapping quantifiers (``(a+)+``, ``(.*)*``,
``(a|a)*``), found by walking the parse tree ``re`` builds. A rules file gets a warning
(``W_CFG_REGEX_BACKTRACKING``) at the regex's position, since a crafted argument of a few dozen
characters could stall the agent while it is matched."""
from __future__ import annotations

from typing import Any, List, Optional

W_CFG_REGEX_BACKTRACKING = "W_CFG_REGEX_BACKTRACKING"

try:  # the parser behind `re`: public as sre_parse until 3.11, private (re._parser) after
    from re import _parser as _sre_parse  # type: ignore[attr-defined]  # private since Python 3.11
except ImportError:  # pragma: no cover - Python < 3.11
    import sre_parse as _sre_parse

_REPEATS = ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT")
_WILD = "wild"


def backtracking_risk(pattern: str, flags: int = 0) -> Optional[str]:
    """Why ``pattern`` may backtrack exponentially, or None. A heuristic over the parsed pattern:
    an unbounded quantifier over something that holds another unbounded quantifier (``(a+)+``,
    ``(.*)*``), or over alternatives that can match the same text (``(a|a)*``)."""
    try:
        parsed = _sre_parse.parse(pattern, flags)
    except Exception:  # noqa: BLE001 - compile() already judged the pattern; this is advisory
        return None
    return _risk_in(list(parsed), False)


def _unbounded(op_name: str, av: Any) -> bool:
    return op_name in _REPEATS and av[1] == _sre_parse.MAXREPEAT


def _risk_in(items: List[Any], under_repeat: bool) -> Optional[str]:
    for op, av in items:
        name = getattr(op, "name", str(op))
        if name in _REPEATS:
            sub = list(av[2])
            if _unbounded(name, av) and name != "POSSESSIVE_REPEAT":
                if under_repeat:
                    return "nested quantifiers"
                if _ambiguous_branch(sub):
                    return "a quantified alternation whose branches overlap"
                found = _risk_in(sub, True)
            else:
                found = _risk_in(sub, under_repeat)
        elif name == "SUBPATTERN":
            found = _risk_in(list(av[-1]), under_repeat)
        elif name == "BRANCH":
            found = None
            for alt in av[1]:
                found = found or _risk_in(list(alt), under_repeat)
        elif name in ("ASSERT", "ASSERT_NOT"):
            found = _risk_in(list(av[1]), under_repeat)
        else:
            found = None
        if found:
            return found
    return None


def _first(items: List[Any]) -> Any:
    """What the first character of ``items`` can be: a set of code points, _WILD, or None (empty)."""
    for op, av in items:
        name = getattr(op, "name", str(op))
        if name == "LITERAL":
            return {av}
        if name == "SUBPATTERN":
            return _first(list(av[-1]))
        if name == "IN":
            points = set()
            for iop, iav in av:
                iname = getattr(iop, "name", str(iop))
                if iname == "LITERAL":
                    points.add(iav)
                elif iname == "RANGE" and iav[1] - iav[0] < 512:
                    points.update(range(iav[0], iav[1] + 1))
                else:
                    return _WILD
            return points
        if name == "AT":
            continue
        return _WILD
    return None


def _ambiguous_branch(items: List[Any]) -> bool:
    for op, av in items:
        name = getattr(op, "name", str(op))
        if name == "SUBPATTERN":
            if _ambiguous_branch(list(av[-1])):
                return True
        elif name == "BRANCH":
            firsts = [_first(list(alt)) for alt in av[1]]
            for i, a in enumerate(firsts):
                for b in firsts[i + 1:]:
                    if a is None or b is None:
                        if a is None and b is None:
                            return True  # two empty alternatives: `(a|a)*` after prefix factoring
                    elif a is _WILD or b is _WILD or a & b:
                        return True
    return False
