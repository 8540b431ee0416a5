"""The live order replay and serve rebuild from finished spans, and the trace buffer's release rule."""
from __future__ import annotations

import random
from typing import Dict, List, Optional, Tuple

from spanassert.core.assembly import TraceBuffer, live_order
from spanassert.core.model import SpanRecord


def _span(span_id: str, parent: Optional[str], start: int, end: int, service: str = "agent",
          resource: Optional[Dict[str, str]] = None) -> SpanRecord:
    return SpanRecord(trace_id="ab" * 16, span_id=span_id, parent_span_id=parent, start_ns=start, end_ns=end,
                      resource=resource if resource is not None else {"service.name": service})


def _reference_order(records: List[SpanRecord]) -> List[Tuple[int, str, bool]]:
    """The ordering rule stated plainly: (time, starts before ends, parents outside-in, span id)."""
    by_id = {r.span_id: r for r in records}

    def depth(r: SpanRecord) -> int:
        d, seen, cur = 0, {r.span_id}, r
        while cur.parent_span_id in by_id and cur.parent_span_id not in seen:
            cur = by_id[cur.parent_span_id]
            seen.add(cur.span_id)
            d += 1
        return d

    def service(r: SpanRecord) -> Optional[str]:
        v = (r.resource or {}).get("service.name")
        return v if isinstance(v, str) else None

    events = []
    for r in records:
        parent = by_id.get(r.parent_span_id) if r.parent_span_id else None
        root = parent is None or service(parent) != service(r)
        events.append(((r.start_ns, 0, depth(r), r.span_id), (0, r.span_id, root)))
        events.append(((max(r.end_ns, r.start_ns), 1, -depth(r), r.span_id), (1, r.span_id, root)))
    return [e for _, e in sorted(events, key=lambda x: x[0])]


def _ids(order: List[Tuple[int, SpanRecord, bool]]) -> List[Tuple[int, str, bool]]:
    return [(phase, r.span_id, root) for phase, r, root in order]


def test_spans_starting_at_the_same_instant_start_parent_first_and_end_child_first() -> None:
    spans = [_span("c" * 16, "b" * 16, 10, 20), _span("b" * 16, "a" * 16, 10, 20), _span("a" * 16, None, 10, 20)]
    assert _ids(live_order(spans)) == [
        (0, "a" * 16, True), (0, "b" * 16, False), (0, "c" * 16, False),
        (1, "c" * 16, False), (1, "b" * 16, False), (1, "a" * 16, True),
    ]


def test_distinct_times_order_by_time_with_a_start_before_an_end_at_the_same_instant() -> None:
    spans = [_span("2" * 16, "1" * 16, 5, 7), _span("1" * 16, None, 1, 9), _span("3" * 16, "1" * 16, 7, 8)]
    assert _ids(live_order(spans)) == [
        (0, "1" * 16, True), (0, "2" * 16, False), (0, "3" * 16, False),
        (1, "2" * 16, False), (1, "3" * 16, False), (1, "1" * 16, True),
    ]


def test_a_child_of_another_service_is_a_local_root_even_with_its_parent_present() -> None:
    spans = [_span("1" * 16, None, 1, 9, "gateway"), _span("2" * 16, "1" * 16, 2, 8, "agent")]
    roots = {(phase, r.span_id): root for phase, r, root in live_order(spans)}
    assert roots[(0, "2" * 16)] is True and roots[(0, "1" * 16)] is True


def test_live_order_follows_the_ordering_rule_on_random_traces_with_and_without_ties() -> None:
    rng = random.Random(5)
    shared = {"service.name": "agent"}
    for _ in range(2000):
        n = rng.randint(1, 10)
        ids = ["%016x" % rng.randint(1, 8 if rng.random() < 0.3 else 10**9) for _ in range(n)]
        spans = []
        for i in range(n):
            start = rng.randint(0, 4) if rng.random() < 0.5 else rng.randint(0, 10**18)
            end = start + rng.randint(-2, 4) if rng.random() < 0.5 else rng.randint(0, 10**18)
            resource = shared if rng.random() < 0.5 else {"service.name": rng.choice(["agent", "tools"])}
            # Parents among the earlier spans (no cycles), or absent from the trace.
            parent = rng.choice([None, "f" * 16] + ids[:i])
            spans.append(_span(ids[i], parent, start, end, resource=resource))
        if len(set(ids)) == n:  # the reference's depth walk assumes unique ids
            assert _ids(live_order(spans)) == _reference_order(spans)


def test_trace_is_released_once_quiet_for_the_settle_window_after_its_root() -> None:
    buf = TraceBuffer(settle=3)
    root = _span("1" * 16, None, 1, 9)
    assert buf.add(root) == []
    other = [SpanRecord(trace_id="cd" * 16, span_id="%016x" % (i + 2), start_ns=i) for i in range(3)]
    assert buf.add(other[0]) == [] and buf.add(other[1]) == []
    assert buf.add(other[2]) == [[root]]


def test_trace_buffer_with_a_clock_going_back_still_releases_what_is_due() -> None:
    buf = TraceBuffer(settle=1.0)
    a = SpanRecord(trace_id="a" * 32, span_id="1" * 16, start_ns=1)
    b = SpanRecord(trace_id="b" * 32, span_id="2" * 16, start_ns=2)
    assert buf.add(a, now=100.0) == []
    assert buf.add(b, now=50.0) == []  # the clock went back: a now looks fresh, b is newest
    assert buf.due(51.5) == []  # a (seen at 100) is first and not quiet, so nothing is checked further
    assert buf.due(101.5) == [[a], [b]]
