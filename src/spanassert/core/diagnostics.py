"""Problems found in a rules file or an input file, as data: code, position, fix."""
from __future__ import annotations

from typing import Any, Dict, List, Optional

from .escaping import escape_control
from .native import mypyc_attr


class Diagnostic:
    """One problem found in a rules file (or an input file). Errors are data: code, position, fix."""

    __slots__ = ("code", "severity", "message", "file", "line", "column", "path", "hint")

    def __init__(
        self,
        code: str,
        message: str,
        *,
        severity: str = "error",
        file: Optional[str] = None,
        line: Optional[int] = None,
        column: Optional[int] = None,
        path: str = "",
        hint: Optional[str] = None,
    ) -> None:
        self.code = code
        self.severity = severity
        self.message = message
        self.file = file
        self.line = line
        self.column = column
        self.path = path
        self.hint = hint

    def to_dict(self) -> Dict[str, Any]:
        return {
            "code": self.code,
            "severity": self.severity,
            "message": self.message,
            "file": self.file,
            "line": self.line,
            "column": self.column,
            "path": self.path,
            "hint": self.hint,
        }

    def format(self) -> str:
        """One line (and a ``fix:`` line) for a terminal or a log. The message, path and hint
        quote the rules file (a test id, a key, a value; an untrusted pull request's file), so their
        control characters are escaped: a newline or an ANSI escape in a test id cannot forge a line
        of output or rewrite the terminal. :meth:`to_dict` keeps the exact text."""
        where = escape_control(self.file or "<config>")
        if self.line is not None:
            where += f":{self.line}"
            if self.column is not None:
                where += f":{self.column}"
        text = f"{where}: {self.severity} [{self.code}] {escape_control(self.message)}"
        if self.path:
            text += f" (at {escape_control(self.path)})"
        if self.hint:
            text += f"\n    fix: {escape_control(self.hint)}"
        return text

    def __repr__(self) -> str:
        return f"Diagnostic({self.code}, {self.message!r}, line={self.line})"


@mypyc_attr(allow_interpreted_subclasses=True)  # subclassed by code that is not compiled (see core.native)
class ConfigError(Exception):
    """A rules file that cannot be used. ``diagnostics`` lists every problem found, not just the first."""

    def __init__(self, diagnostics: List[Diagnostic]) -> None:
        self.diagnostics = list(diagnostics)
        errors = [d for d in self.diagnostics if d.severity == "error"] or self.diagnostics
        head = errors[0].format() if errors else "invalid configuration"
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        super().__init__(head + more)
