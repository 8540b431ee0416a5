"""Assertion types, one module per family. Importing this package registers them all."""
from __future__ import annotations

from . import (  # noqa: F401 - imported for their registrations
    allowlist,
    budgets,
    call_checks,
    ending,
    expected,
    flow,
    loops,
    rules,
    sensitive,
    sequence,
    steps,
    tool_calls,
    tool_result,
    unit,
)
from .base import ASSERTION_TYPES, EXPECTED_TYPES, Assertion, BuildContext, Field

__all__ = ["ASSERTION_TYPES", "EXPECTED_TYPES", "Assertion", "BuildContext", "Field"]
