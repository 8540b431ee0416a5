"""Renderings of a replay :class:`~spanassert.core.report.Report`: the human summary, the versioned JSON
document (``schemas/replay-report.v1.json``), JUnit XML, SARIF 2.1.0, and the verdict diff between
two rules files over the same spans (backtesting).

Every renderer is a plain function of the report; none of them decides a verdict.
"""
from __future__ import annotations

from .baseline import BaselineDiff, EpisodeChange, VerdictChange, baseline_diff
from .document import SCHEMA_ID, load_report_schema, report_document
from .junit import render_junit
from .outcomes import TestOutcome, test_outcomes
from .sarif import DEFAULT_MAX_RESULTS, render_sarif
from .text import render_text

__all__ = [
    "SCHEMA_ID",
    "DEFAULT_MAX_RESULTS",
    "BaselineDiff",
    "EpisodeChange",
    "VerdictChange",
    "TestOutcome",
    "baseline_diff",
    "load_report_schema",
    "render_junit",
    "render_sarif",
    "render_text",
    "report_document",
    "test_outcomes",
]
