"""The engine's sink in ``serve``: telemetry, one stderr line per violation, the report."""
from __future__ import annotations

import json
import sys
import threading
from collections import OrderedDict
from typing import Any, Optional, TextIO, Tuple

from ..core.emit import ATTR_KIND, ATTR_REASON, Telemetry
from ..core.escaping import escape_control
from ..core.model import Verdict
from ..core.report import Report, ReportSink, note_internal_error
from ..core.results import EpisodeResult, Violation

EARLY_MEMORY = 100_000  # (test, assertion, span) keys of violations reported on arrival
REASON_REJECTED = "rejected"  # spanassert.spans.unreadable: a span serve could not decode
OVERFLOW_REQUEST_UNREADABLE = "request_unreadable"  # spanassert.overflows: a request refused as unreadable


class ServeSink(Telemetry):
    """Telemetry (metrics, logs) plus one stderr line per violation, reported once: a violation
    found on arrival (:meth:`early`) is not reported again when the assembled trace confirms it.
    With a report, also collects what replay's report would (verdicts, violations, coverage)."""

    def __init__(self, *, meter_provider: Any, report: Optional[Report], quiet: bool,
                 out: Optional[TextIO] = None, logger_provider: Any = None, json_lines: bool = False) -> None:
        super().__init__(meter_provider=meter_provider, logger_provider=logger_provider)
        self.report_sink = ReportSink(report, None) if report is not None else None
        self.quiet = quiet
        self.json_lines = json_lines  # --format json: one JSON object per violation line
        self.out = out
        self._early: OrderedDict[Tuple[str, int, Optional[str]], None] = OrderedDict()
        self._count_lock = threading.Lock()
        self.violations_reported = 0
        self.episodes_closed = 0
        self.episodes_failed = 0
        self.episodes_inconclusive = 0
        self.episodes_amended = 0
        # Every internal error counted in ``spanassert.internal_errors`` (the receiver's own catches,
        # a rule whose on_close raised, a failing log export): what the report's count says.
        self.errors_counted = 0

    @staticmethod
    def _key(v: Violation) -> Tuple[str, int, Optional[str]]:
        return (v.test_id, v.assertion_index, v.span_id)

    def early(self, v: Violation) -> None:
        key = self._key(v)
        if key in self._early:
            return
        self._early[key] = None
        while len(self._early) > EARLY_MEMORY:
            self._early.popitem(last=False)
        self._alert(v)

    def violation(self, v: Violation) -> None:
        if self.report_sink is not None:
            self.report_sink.violation(v)
        key = self._key(v)
        if key in self._early:
            del self._early[key]  # confirmed: already reported on arrival
            return
        self._alert(v)

    def _alert(self, v: Violation) -> None:
        with self._count_lock:
            self.violations_reported += 1
        if not self.quiet and not v.shadow:
            out = self.out or sys.stderr
            text = " ".join(v.message.split())
            if self.json_lines:
                # json.dumps escapes every control character: a span's text cannot end the line.
                line = json.dumps({
                    "event": "violation", "severity": v.severity, "test_id": v.test_id,
                    "assertion_type": v.assertion_type, "assertion_index": v.assertion_index, "tool": v.tool,
                    "message": text, "trace_id": v.trace_id, "span_id": v.span_id, "late": bool(v.late),
                }, sort_keys=True)
            else:
                tool = f" tool={v.tool}" if v.tool else ""
                late = " (late span)" if v.late else ""
                line = escape_control(
                    f"spanassert: violation [{v.severity}] {v.test_id} {v.assertion_type}#{v.assertion_index}"
                    f"{tool}: {text} (trace {v.trace_id}, span {v.span_id}){late}")
            try:
                out.write(line + "\n")
                out.flush()
            except (OSError, ValueError):
                pass
        super().violation(v)

    def tool_called(self, name: str) -> None:
        if self.report_sink is not None:
            self.report_sink.tool_called(name)  # the report's near misses

    def episode_closed(self, result: EpisodeResult) -> None:
        self.episodes_closed += 1
        verdict = result.verdict
        if verdict is Verdict.FAILED:
            self.episodes_failed += 1
        elif verdict is Verdict.INCONCLUSIVE:
            self.episodes_inconclusive += 1
        if self.report_sink is not None:
            self.report_sink.episode_closed(result)
        super().episode_closed(result)

    def episode_amended(self, result: EpisodeResult) -> None:
        self.episodes_amended += 1
        if self.report_sink is not None:
            self.report_sink.episode_amended(result)
        super().episode_amended(result)

    def unreadable(self, reason: str, tool: Optional[str]) -> None:
        if self.report_sink is not None:
            self.report_sink.unreadable(reason, tool)
        super().unreadable(reason, tool)

    def late_span(self) -> None:
        if self.report_sink is not None:
            self.report_sink.late_span()
        super().late_span()

    def input_refused(self, spans: int, requests: int) -> None:
        """Input serve could not read (never sent again by the client): ``spans`` rejected from a
        request it took (partial success), counted in ``spanassert.spans.unreadable`` (reason
        ``rejected``); ``requests`` refused whole (HTTP 400/411/413), in ``spanassert.overflows``
        (kind ``request_unreadable``). Its --report-json then passes nothing (Receiver.input_gaps)."""
        try:
            if spans:
                self.unreadable_spans.add(spans, {ATTR_REASON: REASON_REJECTED})
            if requests:
                self.overflows.add(requests, {ATTR_KIND: OVERFLOW_REQUEST_UNREADABLE})
        except Exception as exc:  # noqa: BLE001 - a metric must not fail a request
            self.internal_error("metrics", exc)

    def internal_error(self, kind: str, exc: BaseException) -> None:
        with self._count_lock:
            self.errors_counted += 1
            if self.report_sink is not None:  # --report-json's summary.internal_errors
                note_internal_error(self.report_sink.report, exc)
        super().internal_error(kind, exc)

    def overflow(self, kind: str) -> None:
        if self.report_sink is not None:
            self.report_sink.overflow(kind)
        super().overflow(kind)

