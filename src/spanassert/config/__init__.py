"""Loading and validating rules files: :func:`load_config` and the JSON Schema export.

``source`` reads and composes the YAML (``yaml_values``: nodes -> values with positions;
``keypath``: a place in the file), ``loader`` walks the sections, ``build`` builds each check from
its entry, ``fields`` checks a typed mapping, ``reporter`` collects the diagnostics, ``schema`` holds
the tables and the JSON Schema export, ``model`` the loaded records, ``migrate`` the v0 -> V1 command.
"""
from __future__ import annotations

from ..core.model import ConfigError, Diagnostic
from .loader import load_config, load_to_run
from .model import (
    Config,
    EpisodeSettings,
    MappingRule,
    Match,
    Settings,
    TestCase,
    UnitFormFailure,
    require_runnable,
    unit_result_line,
)
from .schema import build_schema

__all__ = [
    "load_config",
    "load_to_run",
    "ConfigError",
    "Diagnostic",
    "Config",
    "TestCase",
    "Settings",
    "EpisodeSettings",
    "Match",
    "MappingRule",
    "build_schema",
    "require_runnable",
    "UnitFormFailure",
    "unit_result_line",
]
