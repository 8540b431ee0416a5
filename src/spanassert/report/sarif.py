"""SARIF 2.1.0, for code-scanning dashboards: one run, one rule per test id, one result per
violation (at its span), plus one per inconclusive verdict.

Levels follow the test's severity (critical/error → error, warning → warning, info → note).
Inconclusive verdicts are ``kind: "open"`` results (the tool could not decide; SARIF then requires
level ``none``), or failures with ``--fail-on-inconclusive``. Shadow-mode violations carry an
external suppression, as they never fail the run. Locations: a logical location
``trace/<trace_id>/span/<span_id>`` always, and the input file and line where known.

Results are ordered (level, then input order) and cut at ``max_results`` so that the same input
always gives the same file; ``run.properties`` says how many were left out.
"""
from __future__ import annotations

import os
import re
from typing import Any, Dict, List, Optional, Tuple

from ..core.model import Verdict
from ..core.report import Report

SARIF_VERSION = "2.1.0"
SARIF_SCHEMA_URI = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
DEFAULT_MAX_RESULTS = 25_000
INFORMATION_URI = "https://github.com/spanassert/spanassert"

LEVELS = {"critical": "error", "error": "error", "warning": "warning", "info": "note"}
_LEVEL_RANK = {"error": 0, "warning": 1, "note": 2, "none": 3}
_SOURCE = re.compile(r"^(?P<file>.+):(?P<line>[0-9]+)$")


def _level(severity: str) -> str:
    return LEVELS.get(severity, "error")


def _artifact_uri(path: str) -> str:
    # Relative paths stay relative (resolved against the checkout by viewers); absolute become file: URIs.
    if os.path.isabs(path):
        from pathlib import Path

        return Path(path).as_uri()
    return path.replace(os.sep, "/")


def _locations(trace_id: Optional[str], span_id: Optional[str], source: Optional[str]) -> List[Dict[str, Any]]:
    name = f"trace/{trace_id or 'unknown'}" + (f"/span/{span_id}" if span_id else "")
    loc: Dict[str, Any] = {
        "logicalLocations": [{"fullyQualifiedName": name, "name": span_id or trace_id or "unknown",
                              "kind": "object"}],
    }
    if source and not source.startswith("<"):
        m = _SOURCE.match(source)
        physical: Dict[str, Any] = {"artifactLocation": {"uri": _artifact_uri(m.group("file") if m else source)}}
        if m:
            physical["region"] = {"startLine": int(m.group("line"))}
        loc["physicalLocation"] = physical
    return [loc]


def _rules(report: Report) -> Tuple[List[Dict[str, Any]], Dict[str, int]]:
    rules: List[Dict[str, Any]] = []
    index: Dict[str, int] = {}
    for t in report.config.tests:
        if not t.trace_assertions or t.id in index:
            continue
        severity = str(getattr(t.severity, "value", t.severity))
        types = [a.type_name for a in t.trace_assertions]
        index[t.id] = len(rules)
        rules.append({
            "id": t.id,
            "name": t.id,
            "shortDescription": {"text": f"test `{t.id}`: {', '.join(types)}"},
            "defaultConfiguration": {"level": _level(severity)},
            "properties": {"assertion_types": types, "severity": severity, "mode": t.mode,
                           "tags": list(t.tags)},
        })
    return rules, index


def render_sarif(report: Report, *, fail_on_inconclusive: bool = False,
                 max_results: int = DEFAULT_MAX_RESULTS) -> Dict[str, Any]:
    """The SARIF log as a JSON-ready dict."""
    from .. import __version__

    rules, rule_index = _rules(report)
    sources = report.sources or {}
    ranked: List[Tuple[Tuple[int, int], Dict[str, Any]]] = []

    def add(order: int, test_id: str, level: str, text: str, trace_id: Optional[str], span_id: Optional[str],
            shadow: bool, props: Dict[str, Any], kind: str = "fail") -> None:
        result: Dict[str, Any] = {"ruleId": test_id, "kind": kind, "level": level, "message": {"text": text},
                                  "locations": _locations(trace_id, span_id,
                                                          sources.get((trace_id or "", span_id or ""))),
                                  "properties": props}
        if test_id in rule_index:
            result["ruleIndex"] = rule_index[test_id]
        if shadow:
            result["suppressions"] = [{"kind": "external",
                                       "justification": f"test `{test_id}` runs in shadow mode: reported, never "
                                                        "failing the run"}]
        ranked.append(((_LEVEL_RANK[level], order), result))

    for i, v in enumerate(report.violations):
        add(i, v.test_id, _level(v.severity), v.message, v.trace_id, v.span_id, v.shadow,
            {"assertion_type": v.assertion_type, "assertion_index": v.assertion_index, "episode_key": v.episode_key,
             "tool": v.tool, "call_index": v.call_index, "late": v.late, "verdict": "failed"})
    base = len(report.violations)
    n = 0
    for ep in report.episodes:
        for r in ep.results:
            if r.verdict is not Verdict.INCONCLUSIVE:
                continue
            level, kind = (_level(r.severity), "fail") if fail_on_inconclusive else ("none", "open")
            add(base + n, r.test_id, level, f"inconclusive: {r.message}", ep.trace_id, r.span_id or ep.root_span_id,
                r.shadow, {"assertion_type": r.assertion_type, "assertion_index": r.index, "episode_key": ep.key,
                           "verdict": "inconclusive"}, kind)
            n += 1
    base += n
    for i, miss in enumerate(report.near_misses()):
        # Where the rule is written: the fix is in the rules file, not in the spans.
        result: Dict[str, Any] = {"ruleId": miss.test_id, "kind": "review", "level": "none",
                                  "message": {"text": f"near miss: {miss.describe()}"},
                                  "properties": {"assertion_type": miss.assertion_type,
                                                 "assertion_index": miss.index, "near_miss": miss.to_dict()}}
        if report.config.source:
            physical: Dict[str, Any] = {"artifactLocation": {"uri": _artifact_uri(report.config.source)}}
            if miss.position and miss.position[0]:
                physical["region"] = {"startLine": miss.position[0]}
            result["locations"] = [{"physicalLocation": physical}]
        if miss.test_id in rule_index:
            result["ruleIndex"] = rule_index[miss.test_id]
        ranked.append(((_LEVEL_RANK["none"], base + i), result))
    ranked.sort(key=lambda x: x[0])
    total = len(ranked)
    kept = [r for _, r in ranked[: max(0, max_results)]]
    run: Dict[str, Any] = {
        "tool": {"driver": {"name": "spanassert", "version": __version__, "semanticVersion": __version__,
                            "informationUri": INFORMATION_URI, "rules": rules}},
        "results": kept,
        "properties": {"totalResults": total, "omittedResults": total - len(kept),
                       "truncated": total > len(kept), "maxResults": max_results},
    }
    if report.config.source:
        run["automationDetails"] = {"id": f"spanassert/replay/{os.path.basename(report.config.source)}/"}
    return {"$schema": SARIF_SCHEMA_URI, "version": SARIF_VERSION, "runs": [run]}
