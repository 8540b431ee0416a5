"""The human summary of a replay, for a terminal or a CI log.

Layout: one block per episode (trace id, key, root span name) with a line per assertion
(✓ passed, ✗ failed, ? inconclusive, - not applicable) carrying the assertion's own message; a
coverage table per rule, so a rule that never applied cannot pass for green; near misses (a rule's
tool name that matched no call while a call's name differs only by case or separators); input issues with
file:line; span counts; and a closing line that is exactly ``N passed, N failed, N inconclusive``.
"""
from __future__ import annotations

from typing import Dict, List, Optional

from ..core.escaping import escape_control
from ..core.model import Verdict
from ..core.report import Report
from ..core.results import EpisodeResult
from .baseline import MAX_LISTED_CALLS, BaselineDiff

MARKS = {
    Verdict.PASSED: "✓",
    Verdict.FAILED: "✗",
    Verdict.INCONCLUSIVE: "?",
    Verdict.NOT_APPLICABLE: "–",  # noqa: RUF001 -- the en dash is the mark printed for "not applicable"
}


def short_id(hex_id: Optional[str], n: int = 8) -> str:
    if not hex_id:
        return "-"
    return hex_id[:n] + "…" if len(hex_id) > n else hex_id


def closing_line(report: Report) -> str:
    c = report.counts()
    return f"{c['passed']} passed, {c['failed']} failed, {c['inconclusive']} inconclusive"


def _episode_header(ep: EpisodeResult) -> str:
    root = f'"{ep.root_name}"' if ep.root_name else "(no root span)"
    head = f"trace {short_id(ep.trace_id)}  key {ep.key}  root {root}"
    if ep.close_reason.value != "root_ended":
        head += f"  [closed: {ep.close_reason.value}]"
    if ep.incomplete:
        head += f"  [incomplete: {'; '.join(ep.incomplete)}]"
    if ep.amendment:
        head += "  [amended after close]"
    return head


def _rule_label(test_id: str, assertion_type: str, index: int, several: bool) -> str:
    return f"{test_id} {assertion_type}" + (f" #{index}" if several else "")


def _episode_lines(ep: EpisodeResult, only_problems: bool) -> List[str]:
    per_test: Dict[str, int] = {}
    for r in ep.results:
        per_test[r.test_id] = per_test.get(r.test_id, 0) + 1
    lines = []
    for r in ep.results:
        if only_problems and r.verdict not in (Verdict.FAILED, Verdict.INCONCLUSIVE):
            continue
        label = _rule_label(r.test_id, r.assertion_type, r.index, per_test[r.test_id] > 1)
        shadow = " (shadow)" if r.shadow else ""
        text = f"  {MARKS[r.verdict]} {label}{shadow}: {r.verdict.value}"
        if r.message:
            text += f" — {r.message}"
        lines.append(text)
    if not lines:
        return []
    return [_episode_header(ep), *lines]


def _coverage_lines(report: Report) -> List[str]:
    rows = list(report.coverage.values())
    if not rows:
        return ["Coverage: the rules file has no trace assertions"]
    per_test: Dict[str, int] = {}
    for c in rows:
        per_test[c.test_id] = per_test.get(c.test_id, 0) + 1
    labels = [_rule_label(c.test_id, c.assertion_type, c.index, per_test[c.test_id] > 1) for c in rows]
    width = max(len("rule"), *(len(x) for x in labels))
    n = len(report.episodes)
    out = [f"Coverage over {n} episode{'s' if n != 1 else ''}:",
           f"  {'rule':<{width}}  {'passed':>6}  {'failed':>6}  {'inconclusive':>12}  {'not applicable':>14}"]
    for label, c in zip(labels, rows):
        k = c.counts
        line = (f"  {label:<{width}}  {k['passed']:>6}  {k['failed']:>6}  {k['inconclusive']:>12}  "
                f"{k['not_applicable']:>14}")
        if k["passed"] + k["failed"] + k["inconclusive"] == 0:
            line += "  NEVER APPLIED"
        out.append(line)
    return out


def _baseline_lines(diff: BaselineDiff) -> List[str]:
    n = len(diff.changed)
    out = [f"Baseline: {n} of {diff.episodes_compared} episode{'s' if diff.episodes_compared != 1 else ''} "
           f"changed verdict ({diff.baseline_config or 'baseline'} → {diff.config or 'current rules'})"]
    for e in diff.changed:
        root = f'"{e.root_span_name}"' if e.root_span_name else "(no root span)"
        out.append(f"  trace {short_id(e.trace_id)}  key {e.key}  root {root}")
        out.extend(f"    {c.test_id}: {c.old} → {c.new}" for c in e.changes)
    wb = diff.would_block
    if wb is not None:
        out.append(f"Would block (action: block): {wb.current} call{'s' if wb.current != 1 else ''} "
                   f"(baseline {wb.baseline}); newly blocked {len(wb.added)}, no longer blocked {len(wb.removed)}")
        for sign, calls in (("+", wb.added), ("-", wb.removed)):
            for trace_id, span_id, tool, test in calls[:MAX_LISTED_CALLS]:
                out.append(f"  {sign} trace {short_id(trace_id)}  span {span_id or '-'}  "
                           f"{tool or '?'}  by {test}")  # escaped with every line below
            if len(calls) > MAX_LISTED_CALLS:
                out.append(f"  {sign} … {len(calls) - MAX_LISTED_CALLS} more")
    return out


def render_text(report: Report, *, quiet: bool = False, baseline: Optional[BaselineDiff] = None) -> str:
    """The summary as text ending in a newline. ``quiet`` lists only failed and inconclusive
    results and drops the coverage table; issues, counts and the closing line stay."""
    out: List[str] = []
    for ep in report.episodes:
        block = _episode_lines(ep, only_problems=quiet)
        if block:
            out.extend(block)
    if not report.episodes:
        out.append("No episodes found in the input (no agent or tool spans were recognised).")
    if not quiet:
        out.append("")
        out.extend(_coverage_lines(report))
    near = report.near_misses()
    if near:
        out.append("")
        out.append("Near misses (a rule's tool name matched no call; a call's name differs only by case or "
                   "separators):")
        out.extend(f"  {m.test_id} {m.assertion_type}: {m.describe()}" for m in near)
    unmatched = report.unmatched_inputs()
    if unmatched:
        out.append("")
        out.append("Inputs naming no episode (the tests were still judged on every episode; `match:` selects):")
        out.extend(f"  {u['test']}: input.prompt {u['prompt']!r} names no episode in the input: "
                   f"{u['reason']}" for u in unmatched)
    if baseline is not None:
        out.append("")
        out.extend(_baseline_lines(baseline))
    if report.issues:
        errors = len(report.input_errors)
        warnings = len(report.issues) - errors
        out.append("")
        out.append(f"Input issues: {errors} error{'s' if errors != 1 else ''}, "
                   f"{warnings} warning{'s' if warnings != 1 else ''}")
        out.extend(f"  {i.format() if hasattr(i, 'format') else i}" for i in report.issues)
    out.append("")
    counts = report.counts()
    shadow_failed = sum(1 for ep in report.episodes for r in ep.results if r.shadow and r.verdict is Verdict.FAILED)
    facts = [f"{report.spans_read} spans read", f"{len(report.episodes)} episodes",
             f"{report.unreadable_spans} unreadable tool spans", f"{report.late_spans} late spans",
             f"{counts['not_applicable']} not applicable"]
    incomplete = sum(1 for ep in report.episodes if ep.incomplete)
    if incomplete:
        facts.append(f"{incomplete} episode{'s' if incomplete != 1 else ''} with incomplete evidence")
    if report.amended:
        facts.append(f"{report.amended} episode result{'s' if report.amended != 1 else ''} amended by late spans")
    if report.internal_errors:
        facts.append(f"{report.internal_errors} internal error{'s' if report.internal_errors != 1 else ''} "
                     "(what each kept from being judged is inconclusive)")
    if shadow_failed:
        facts.append(f"{shadow_failed} failed in shadow mode (not failing the run)")
    for kind, k in sorted(report.overflows.items()):
        facts.append(f"overflow {kind}: {k}")
    out.append("; ".join(facts))
    out.append(closing_line(report))
    # Trace keys, root names, messages and issues carry text from spans: one line each, escaped.
    return "\n".join(map(escape_control, out)) + "\n"
