"""One escaping rule for text from spans wherever it is printed or logged.

Span data is hostile: a tool name holding a newline or an ANSI escape could forge a line of output
("spanassert: violation [critical] ...") or rewrite a terminal. Before text from spans reaches a
terminal, a log line or a plain-text report, :func:`escape_control` replaces every control
character (C0, DEL, C1), the Unicode line and paragraph separators, and the bidirectional-text
controls with a visible escape (``\\n``, ``\\x1b``, ``\\u2028``); everything else is kept as is.
Structured outputs (JSON, JUnit XML, SARIF, OTLP attributes) carry the exact value instead, escaped
by their own encoders; JSON printed on a terminal also goes through :func:`escape_json_text`.
"""
from __future__ import annotations

from typing import Dict, Final

_NAMED: Final = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _table() -> Dict[int, str]:
    table: Dict[int, str] = {}
    for cp in list(range(0x20)) + list(range(0x7F, 0xA0)):
        ch = chr(cp)
        table[cp] = _NAMED.get(ch, f"\\x{cp:02x}")
    for cp in (0x200E, 0x200F, 0x2028, 0x2029, *range(0x202A, 0x202F), *range(0x2066, 0x206A)):
        table[cp] = f"\\u{cp:04x}"
    return table


_TABLE: Final = _table()


def escape_control(text: str) -> str:
    """``text`` with control characters made visible, so that it stays on one line and cannot
    move the cursor or colour a terminal (``"a\\nb"`` -> ``"a\\\\nb"``)."""
    if text.isascii() and text.isprintable():
        return text  # the common case: nothing to escape
    return text.translate(_TABLE)


# JSON printed on a terminal (``--format json``): json.dumps(ensure_ascii=False) escapes C0 controls
# but writes DEL, C1 (U+009B is an 8-bit CSI to some terminals), the line separators and the bidi
# controls raw. As \u escapes the document parses to the same values.
_JSON_TABLE: Dict[int, str] = {cp: f"\\u{cp:04x}" for cp in _TABLE if cp >= 0x7F}


def escape_json_text(text: str) -> str:
    """JSON text (as ``json.dumps(..., ensure_ascii=False)`` writes it) with the characters that
    :func:`escape_control` makes visible and JSON leaves raw written as ``\\uXXXX`` escapes: the same
    document once parsed, and nothing in it that reorders or rewrites a terminal."""
    return text.translate(_JSON_TABLE)


__all__ = ["escape_control", "escape_json_text"]
