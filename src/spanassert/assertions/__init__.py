"""Assertion types, one module per family. The registries import a type's module when the type is
first used (see ``base._Registry``); ``ASSERTION_TYPES.values()`` imports them all."""
from __future__ import annotations

from .base import ASSERTION_TYPES, EXPECTED_TYPES, Assertion, BuildContext, Field

__all__ = ["ASSERTION_TYPES", "EXPECTED_TYPES", "Assertion", "BuildContext", "Field"]
