"""Problems found while reading OTLP input, reported as data rather than raised."""
from __future__ import annotations

from typing import NamedTuple, Optional

from ..core.escaping import escape_control

ERROR = "error"
WARNING = "warning"


class InputIssue(NamedTuple):
    """One problem in an input file: where it is (``line`` for JSON, byte ``offset`` for protobuf
    frames) and what is wrong. ``severity`` is ``"error"`` (data was skipped) or ``"warning"``
    (nothing was lost that a finished file would hold, e.g. a partial last line)."""

    file: str
    line: Optional[int]
    offset: Optional[int]
    reason: str
    severity: str = ERROR

    def format(self) -> str:
        where = self.file
        if self.line is not None:
            where += f":{self.line}"
        elif self.offset is not None:
            where += f" (byte {self.offset})"
        # One line, whatever the input held (a reason can quote text from the file).
        return escape_control(f"{where}: {self.severity}: {self.reason}")

    def __str__(self) -> str:
        return self.format()


class OTLPInputError(Exception):
    """Raised by ``read_spans(..., strict=True)`` at the first error issue."""

    def __init__(self, issue: InputIssue) -> None:
        self.issue = issue
        super().__init__(issue.format())


class SpanDecodeError(ValueError):
    """A decoded OTLP document (or one span in it) that cannot become a ``SpanRecord``.

    ``path`` locates the offending element in the document, e.g.
    ``resourceSpans[0].scopeSpans[1].spans[3].traceId``.
    """

    def __init__(self, reason: str, path: str = "") -> None:
        self.reason = reason
        self.path = path
        super().__init__(f"{reason} (at {path})" if path else reason)


def repeated_key(key: str, path: str) -> SpanDecodeError:
    """An attribute list that gives a key twice with different values. The SDK never exports a key
    twice; which value a producer that does meant is unknown (readers differ: spanassert would keep
    the last, a Collector policy reads the first), so the element is refused as unreadable input:
    `gen_ai.tool.name` `delete_database` then `search` must not read as a search."""
    shown = repr(key)
    if len(shown) > 40:
        shown = shown[:39] + "…"
    return SpanDecodeError(f"attribute {shown} is given twice with different values", path)
