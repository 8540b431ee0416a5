"""The one duration grammar of rules files: a number of seconds, or a number with a unit.

Used by assertions (``trace_tool_duration``'s ``max``) and settings (``episodes.idle_timeout``) alike:
``2.5``, ``"500ms"``, ``"2 s"``, ``"1.5m"``, ``"1h"``, ``"250us"``.
"""
from __future__ import annotations

import math
import re
from typing import Dict, Final, Union

UNITS: Final[Dict[str, float]] = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_UNIT_ALTERNATION: Final = "|".join(UNITS)
_DURATION_RE: Final = re.compile(rf"^\s*(\d+(?:\.\d+)?)\s*({_UNIT_ALTERNATION})\s*$")
# The same grammar for JSON Schema (``spanassert schema``, editors).
DURATION_PATTERN: Final = rf"^\s*\d+(\.\d+)?\s*({_UNIT_ALTERNATION})\s*$"


def parse_duration(value: Union[int, float, str]) -> float:
    """Seconds from a number of seconds or a string with a unit. Raises ValueError naming the
    accepted forms."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a duration; use seconds (2.5) or a string such as \"500ms\"")
    if isinstance(value, (int, float)):
        if value < 0 or math.isnan(value):
            raise ValueError(f"{value!r} is not a duration: it must be a number of seconds >= 0")
        return float(value)
    if isinstance(value, str):
        m = _DURATION_RE.match(value)
        if m is None:
            raise ValueError(
                f"{value!r} is not a duration; write seconds as a number (2.5) or a number with a unit "
                "(ns, us, ms, s, m, h), e.g. \"500ms\", \"2s\", \"1m\""
            )
        return float(m.group(1)) * UNITS[m.group(2)]
    raise ValueError(f"{value!r} is not a duration; use seconds (2.5) or a string such as \"500ms\"")


def format_seconds(seconds: float) -> str:
    if seconds < 1:
        return f"{seconds * 1000:g}ms"
    return f"{seconds:g}s"

