"""Assertion types, one module per family. The registries import a type's module when the type is
first used (see :mod:`.registry`); ``ASSERTION_TYPES.values()`` imports them all."""
from __future__ import annotations

from .base import Assertion, BuildContext, Field
from .registry import ASSERTION_TYPES, EXPECTED_TYPES, register, register_expected

__all__ = ["ASSERTION_TYPES", "EXPECTED_TYPES", "Assertion", "BuildContext", "Field", "register", "register_expected"]
