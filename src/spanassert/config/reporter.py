"""Diagnostics of one rules file, collected as the loader walks it: each positioned at its key path
(file, line, column), then deduplicated and put in file order."""
from __future__ import annotations

from typing import Any, List, Optional, Set, Tuple

from ..core.model import Diagnostic
from . import codes
from .keypath import KeyPath, format_path
from .source import Document


def internal_error(exc: BaseException, file: Optional[str]) -> Diagnostic:
    return Diagnostic(codes.E_INTERNAL, f"internal error while loading the rules file: {type(exc).__name__}: {exc}",
                      file=file, hint="this is a bug in spanassert; please report it with the rules file")


def ordered(diagnostics: List[Diagnostic]) -> List[Diagnostic]:
    seen: Set[Tuple[Any, ...]] = set()
    unique: List[Diagnostic] = []
    for d in diagnostics:
        key = (d.code, d.line, d.column, d.path, d.message)
        if key not in seen:
            seen.add(key)
            unique.append(d)
    return sorted(unique, key=lambda d: (d.line is None, d.line or 0, d.column or 0))


class Reporter:
    """Collects positioned diagnostics for one document."""

    def __init__(self, document: Document) -> None:
        self.document = document
        self.diagnostics: List[Diagnostic] = list(document.problems)

    def add(self, code: str, message: str, path: KeyPath, *, hint: Optional[str] = None,
            at_key: bool = False, severity: str = "error") -> None:
        line, column = self.document.position(path, key=at_key)
        self.diagnostics.append(Diagnostic(code, message, severity=severity, file=self.document.file,
                                           line=line, column=column, path=format_path(path), hint=hint))

    def error(self, code: str, message: str, path: KeyPath, *, hint: Optional[str] = None,
              at_key: bool = False) -> None:
        self.add(code, message, path, hint=hint, at_key=at_key)

    def warn(self, code: str, message: str, path: KeyPath, *, hint: Optional[str] = None) -> None:
        self.add(code, message, path, hint=hint, severity="warning")

    @property
    def error_count(self) -> int:
        return sum(1 for d in self.diagnostics if d.severity == "error")
