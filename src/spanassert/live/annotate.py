"""Where violations go on spans.

With a wrapped exporter, the ended offending span goes on as a copy carrying one
``gen_ai.evaluation.result`` event per violation (:func:`annotated_copy`). Without one there is
nothing to hand a copy to, so events go on spans that are still open (:class:`LiveRoots`): the
offending span itself when the violation is found at its start, else the episode's root.
"""
from __future__ import annotations

import time
from typing import Any, Dict, Iterable, List, Optional, Set

from opentelemetry.sdk.trace import Event, ReadableSpan, Span
from opentelemetry.sdk.util import BoundedList

from ..core.emit import (
    ATTR_ASSERTION_INDEX,
    ATTR_ASSERTION_TYPE,
    ATTR_EVAL_EXPLANATION,
    ATTR_EVAL_LABEL,
    ATTR_EVAL_NAME,
    ATTR_SEVERITY,
    ATTR_TEST_ID,
    ATTR_VERDICT,
    EVENT_NAME,
    violation_event_attributes,
)
from ..core.results import AssertionResult, EpisodeResult, Violation
from . import sdk


def annotated_copy(span: ReadableSpan, violations: List[Violation]) -> ReadableSpan:
    """A copy of the ended ``span`` with one evaluation event per violation appended."""
    when = sdk.end_time(span) or time.time_ns()
    added = [Event(EVENT_NAME, violation_event_attributes(v), when) for v in violations]
    attributes: Any = sdk.attributes(span)
    events: Any = tuple(span.events) + tuple(added)
    links: Any = span.links
    if sdk.dropped(span) or getattr(span, "dropped_links", 0):
        # What the SDK's span limits dropped goes on with the copy (droppedAttributesCount, ... in
        # the export): a reader of the exported span must still see that it is not all there.
        attributes = getattr(span, "_attributes", attributes)
        events = BoundedList.from_seq(None, events)
        events.dropped = span.dropped_events
        links = getattr(span, "_links", links)
    return ReadableSpan(
        name=span.name,
        context=span.get_span_context(),
        parent=span.parent,
        resource=span.resource,
        attributes=attributes,
        events=events,
        links=links,
        kind=span.kind,
        status=span.status,
        start_time=span.start_time,
        end_time=span.end_time,
        instrumentation_info=sdk.instrumentation_info(span),
        instrumentation_scope=span.instrumentation_scope,
    )


def not_yet_on(span: ReadableSpan, violations: List[Violation]) -> List[Violation]:
    """The violations whose evaluation event (same test and assertion) the span does not carry yet."""
    have = {(e.attributes.get(ATTR_TEST_ID), e.attributes.get(ATTR_ASSERTION_INDEX))
            for e in span.events if e.name == EVENT_NAME and e.attributes}
    return [v for v in violations if (v.test_id, v.assertion_index) not in have]


def failed_result_event_attributes(res: AssertionResult) -> Dict[str, Any]:
    """The evaluation event for a rule that failed when its episode closed (on the root)."""
    return {
        ATTR_EVAL_NAME: res.test_id,
        ATTR_EVAL_LABEL: "fail",
        ATTR_EVAL_EXPLANATION: res.message,
        ATTR_TEST_ID: res.test_id,
        ATTR_ASSERTION_TYPE: res.assertion_type,
        ATTR_SEVERITY: res.severity,
        ATTR_VERDICT: "failed",
    }


class LiveRoots:
    """Without a wrapped exporter: the open spans violations can still be written on (episode roots
    and local trace roots, by span id), and the violations already written on their own span."""

    __slots__ = ("spans", "written")

    def __init__(self) -> None:
        self.spans: Dict[int, Span] = {}
        self.written: Set[int] = set()

    def add(self, span_id: int, span: Span) -> None:
        self.spans[span_id] = span

    def discard(self, span_id: int) -> None:
        self.spans.pop(span_id, None)

    def write_at_start(self, span: Span, violations: Iterable[Violation]) -> None:
        """Violations found as ``span`` started: the offending span is still open."""
        for v in violations:
            if not v.shadow:
                span.add_event(EVENT_NAME, violation_event_attributes(v))
                self.written.add(id(v))

    def write_after_end(self, span: ReadableSpan, violations: List[Violation], root_span_id: Optional[str]) -> None:
        """Violations found as ``span`` ended: on the episode's root (``root_span_id``) if it is
        still open, else on the trace's open local root (log records carry them in every case)."""
        events = [v for v in violations if not v.shadow and id(v) not in self.written]
        for v in violations:
            self.written.discard(id(v))
        if not events:
            return
        target: Optional[Span] = self.spans.get(int(root_span_id, 16)) if root_span_id else None
        if target is None:
            ctx = span.get_span_context()
            tid = ctx.trace_id if ctx is not None else None  # a finished SDK span always has one
            for s in list(self.spans.values()):
                if s.get_span_context().trace_id == tid and (s.parent is None or s.parent.is_remote):
                    target = s
                    break
        if target is None or not target.is_recording():
            return
        for v in events:
            target.add_event(EVENT_NAME, violation_event_attributes(v))

    def write_closed(self, results: List[EpisodeResult]) -> None:
        """Rules that failed as their episode closed: on the root, if it is still open."""
        for r in results:
            if r.root_span_id:
                target = self.spans.get(int(r.root_span_id, 16))
                if target is not None and target.is_recording():
                    for res in r.results:
                        if res.verdict.value == "failed" and not res.shadow:
                            target.add_event(EVENT_NAME, failed_result_event_attributes(res))
