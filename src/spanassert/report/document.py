"""The JSON replay report: ``Report.to_dict()`` plus what a CI consumer needs to act on it.

The shape is versioned by ``schema`` and described, field by field, in
``spanassert/schemas/replay-report.v1.json`` (JSON Schema draft 2020-12). Adding an optional
property keeps ``v1``; removing or changing the meaning of one needs ``v2``.
"""
from __future__ import annotations

import json
from typing import Any, Dict, Optional

from ..core.model import Verdict
from ..core.report import REPORT_SCHEMA, Report
from .baseline import BaselineDiff

SCHEMA_ID = REPORT_SCHEMA
SCHEMA_RESOURCE = "schemas/replay-report.v1.json"


def load_report_schema() -> Dict[str, Any]:
    """The JSON Schema of :func:`report_document`'s output, as shipped in the package."""
    from importlib import resources

    text = resources.files("spanassert").joinpath(SCHEMA_RESOURCE).read_text(encoding="utf-8")
    schema: Dict[str, Any] = json.loads(text)
    return schema


def report_document(
    report: Report,
    *,
    exit_code: int,
    fail_on_inconclusive: bool = False,
    skip_invalid: bool = False,
    allow_empty: bool = False,
    baseline: Optional[BaselineDiff] = None,
) -> Dict[str, Any]:
    """The ``spanassert.replay.v1`` document for ``report`` (see the schema file)."""
    from .. import __version__

    doc = report.to_dict()
    summary = doc["summary"]
    summary["shadow_failed"] = sum(
        1 for ep in report.episodes for r in ep.results if r.shadow and r.verdict is Verdict.FAILED
    )
    summary["input_warnings"] = len(report.issues) - len(report.input_errors)
    for c in doc["coverage"]:
        c["applied"] = c["passed"] + c["failed"] + c["inconclusive"]
        c["never_applied"] = c["applied"] == 0
    sources = report.sources or {}
    for v in doc["violations"]:
        v["source"] = sources.get((v["trace_id"], v["span_id"])) if v.get("span_id") else None
    out: Dict[str, Any] = {
        "schema": doc.pop("schema"),
        "tool": {"name": "spanassert", "version": __version__},
        "config": doc.pop("config"),
        "exit_code": exit_code,
        "options": {"fail_on_inconclusive": fail_on_inconclusive, "skip_invalid": skip_invalid,
                    "allow_empty": allow_empty},
    }
    out.update(doc)
    if baseline is not None:
        out["baseline_diff"] = baseline.to_dict()
    return out
