"""JUnit XML in the widely used Jenkins/Ant form: ``<testsuites>`` → one ``<testsuite>`` per test
id → one ``<testcase>`` per (episode, test).

A test's verdict on an episode is the worst of its assertions'. failed → ``<failure>``;
not_applicable → ``<skipped>``; inconclusive → ``<error type="inconclusive">`` with
``fail_on_inconclusive``, else ``<skipped message="inconclusive: …">``. A shadow-mode test never
fails the run, so its failures are ``<skipped message="shadow mode: failed: …">``. Internal errors
(the report's ``internal_errors``) add a suite "spanassert internal errors" with one
``<error type="internal_error">``.
"""
from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Dict, List

from ..core.model import Verdict
from ..core.report import Report
from .outcomes import TestOutcome, test_outcomes

SUITES_NAME = "spanassert replay"
# XML 1.0 forbids most control characters even when escaped; span data can hold anything.
_XML_BAD = dict.fromkeys(c for c in range(0x20) if c not in (0x09, 0x0A, 0x0D))


def _clean(text: str) -> str:
    return text.translate(_XML_BAD)


def _first_line(messages: List[str], limit: int = 500) -> str:
    text = "; ".join(messages)
    return text if len(text) <= limit else text[: limit - 1] + "…"


class _Suite:
    __slots__ = ("element", "tests", "failures", "errors", "skipped")

    def __init__(self, element: ET.Element) -> None:
        self.element = element
        self.tests = self.failures = self.errors = self.skipped = 0


def _testcase(suite: _Suite, test_id: str, name: str, outcome: TestOutcome, fail_on_inconclusive: bool) -> None:
    case = ET.SubElement(suite.element, "testcase",
                         {"name": _clean(name), "classname": _clean(f"spanassert.{test_id}"), "time": "0"})
    suite.tests += 1
    v = outcome.verdict
    detail = _clean(outcome.detail())
    if v is Verdict.FAILED and not outcome.shadow:
        el = ET.SubElement(case, "failure", {"message": _clean(_first_line(outcome.messages(v))),
                                             "type": outcome.results[0].severity})
        el.text = detail
        suite.failures += 1
    elif v is Verdict.FAILED:
        message = _clean("shadow mode: failed: " + _first_line(outcome.messages(v)))
        el = ET.SubElement(case, "skipped", {"message": message})
        el.text = detail
        suite.skipped += 1
    elif v is Verdict.INCONCLUSIVE and fail_on_inconclusive:
        el = ET.SubElement(case, "error", {"message": _clean(_first_line(outcome.messages(v))), "type": "inconclusive"})
        el.text = detail
        suite.errors += 1
    elif v is Verdict.INCONCLUSIVE:
        el = ET.SubElement(case, "skipped", {"message": _clean("inconclusive: " + _first_line(outcome.messages(v)))})
        el.text = detail
        suite.skipped += 1
    elif v is Verdict.NOT_APPLICABLE:
        el = ET.SubElement(case, "skipped", {"message": _clean("not applicable: " + _first_line(outcome.messages(v)))})
        el.text = detail
        suite.skipped += 1
    else:
        out = ET.SubElement(case, "system-out")
        out.text = detail


def render_junit(report: Report, *, fail_on_inconclusive: bool = False) -> bytes:
    """The JUnit XML document (UTF-8, with declaration)."""
    root = ET.Element("testsuites", {"name": SUITES_NAME})
    suites: Dict[str, _Suite] = {}
    # Suites in rules-file order, so a test that never ran still appears (empty).
    for t in report.config.tests:
        if not t.trace_assertions:
            continue
        el = ET.SubElement(root, "testsuite", {"name": _clean(t.id)})
        props = ET.SubElement(el, "properties")
        ET.SubElement(props, "property", {"name": "severity", "value": str(getattr(t.severity, "value", t.severity))})
        ET.SubElement(props, "property", {"name": "mode", "value": t.mode})
        ET.SubElement(props, "property", {"name": "assertion_types",
                                          "value": ",".join(a.type_name for a in t.trace_assertions)})
        if report.config.source:
            ET.SubElement(props, "property", {"name": "config", "value": _clean(report.config.source)})
        suites[t.id] = _Suite(el)
    for miss in report.near_misses():
        suite = suites.get(miss.test_id)
        if suite is not None:
            found = suite.element.find("properties")
            if found is not None:
                ET.SubElement(found, "property", {"name": "near_miss", "value": _clean(miss.describe())})
    for ep in report.episodes:
        root_name = f" {ep.root_name}" if ep.root_name else ""
        name = f"episode {ep.key}{root_name}"
        if ep.trace_id and ep.trace_id != ep.key:
            name += f" (trace {ep.trace_id})"
        for outcome in test_outcomes(ep):
            suite = suites.get(outcome.test_id)
            if suite is None:  # a test the config no longer lists cannot happen; keep it visible anyway
                element = ET.SubElement(root, "testsuite", {"name": _clean(outcome.test_id)})
                suite = suites[outcome.test_id] = _Suite(element)
            _testcase(suite, outcome.test_id, name, outcome, fail_on_inconclusive)
    if report.internal_errors:
        # Not a rule's verdict: the run itself is in error (what the errors kept from being judged
        # is inconclusive above), so CI shows it whatever --fail-on-inconclusive says.
        el = ET.SubElement(root, "testsuite", {"name": "spanassert internal errors"})
        suite = suites["\0internal errors"] = _Suite(el)
        case = ET.SubElement(el, "testcase", {"name": "judging the input", "classname": "spanassert", "time": "0"})
        ET.SubElement(case, "error", {"type": "internal_error", "message": _clean(_first_line(
            [f"{report.internal_errors} internal error(s) while judging; the first: {report.internal_error_first}"]))})
        suite.tests += 1
        suite.errors += 1
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for s in suites.values():
        s.element.set("tests", str(s.tests))
        s.element.set("failures", str(s.failures))
        s.element.set("errors", str(s.errors))
        s.element.set("skipped", str(s.skipped))
        s.element.set("time", "0")
        totals["tests"] += s.tests
        totals["failures"] += s.failures
        totals["errors"] += s.errors
        totals["skipped"] += s.skipped
    for k, v in totals.items():
        root.set(k, str(v))
    root.set("time", "0")
    ET.indent(root)
    document: bytes = ET.tostring(root, encoding="utf-8", xml_declaration=True)
    return document + b"\n"
