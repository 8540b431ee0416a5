"""TraceBuffer.add_many (replay takes a line's spans in one call, with None for another shard's
under --jobs) releases the same traces, in the same order and at the same clocks, with the same
state after, as adding (or skipping) the spans one at a time did (the per-span buffer before
batching is kept here as the reference)."""
from __future__ import annotations

from collections import OrderedDict
from typing import Any, List, Optional, Tuple

from hypothesis import given, settings
from hypothesis import strategies as st

from spanassert.core.assembly import TraceBuffer, _Pending
from spanassert.core.model import SpanRecord


class ReferenceBuffer(TraceBuffer):
    """TraceBuffer.add as it was, one span per call (the oracle)."""

    def add(self, r: SpanRecord, now: Optional[float] = None) -> List[List[SpanRecord]]:
        if now is None:
            clock = self.clock + 1
        else:
            clock = now
            if clock < self.clock:
                self._clock_went_back()
        self.clock = clock
        pending = self.pending
        tid = r.trace_id
        p = pending.get(tid)
        if p is None:
            p = pending[tid] = _Pending(clock)
        else:
            pending.move_to_end(tid)
            p.last_seen_at = clock
        if len(p.records) < self.max_spans:
            p.records.append(r)
        else:
            self.overflowed += 1
            p.records.dropped += 1
            p.records.cap = self.max_spans
        if r.parent_span_id is None:
            p.root_seen_at = clock
        if len(pending) > self.max_traces:
            ready: List[List[SpanRecord]] = []
            while len(pending) > self.max_traces:
                _, oldest = pending.popitem(last=False)
                oldest.records.seen = oldest.last_seen_at
                oldest.records.pushed = True
                ready.append(oldest.records)
            return ready + self.due()
        if clock - self._front_seen_at < self.settle:
            return []
        return self.due()

    def skip(self) -> List[List[SpanRecord]]:
        self.clock += 1
        if self.clock - self._front_seen_at < self.settle:
            return []
        return self.due()


def _state(buf: TraceBuffer) -> Any:
    return (buf.clock, buf.overflowed, buf._front_seen_at, buf._monotonic,
            [(tid, [r.span_id for r in p.records], p.root_seen_at, p.last_seen_at, p.first_seen_at)
             for tid, p in buf.pending.items()])


def _released(traces: List[List[SpanRecord]]) -> Any:
    return [([r.span_id for r in t], getattr(t, "seen", None), getattr(t, "pushed", None),
             getattr(t, "dropped", None)) for t in traces]


# (trace, is a root, another shard's: replay --jobs passes None for it)
SPANS = st.lists(st.tuples(st.integers(0, 5), st.booleans(), st.booleans()), min_size=1, max_size=60)


@settings(max_examples=300, deadline=None)
@given(SPANS, st.integers(0, 8), st.integers(1, 4), st.integers(1, 5), st.integers(1, 9),
       st.one_of(st.none(), st.lists(st.floats(0, 20, allow_nan=False), min_size=1, max_size=12)))
def test_adding_a_batch_is_adding_each_span(spans: List[Tuple[int, bool]], settle: int, max_traces: int,
                                            max_spans: int, chunk: int, times: Optional[List[float]]) -> None:
    records: List[Optional[SpanRecord]] = [
        SpanRecord(trace_id=f"{t:032x}", span_id=f"{i + 1:016x}", parent_span_id=None if root else "ab" * 8)
        for i, (t, root, _) in enumerate(spans)]
    kw = {"settle": settle, "idle": settle + (settle % 3), "max_traces": max_traces, "max_spans_per_trace": max_spans}
    ref, new = ReferenceBuffer(**kw), TraceBuffer(**kw)
    assert isinstance(new.pending, OrderedDict)
    for k in range(0, len(records), chunk):
        batch = records[k:k + chunk]
        now = None if times is None else times[(k // chunk) % len(times)]  # a receiver: one arrival time
        if times is None:  # replay --jobs: some spans are another shard's
            batch = [None if other else r for r, (_, _, other) in zip(batch, spans[k:k + chunk])]
        expected: List[List[SpanRecord]] = []
        expected_clocks: List[float] = []
        for r in batch:
            got = ref.add(r, now) if r is not None else ref.skip()
            expected += got
            expected_clocks += [ref.clock] * len(got)
        clocks: List[float] = [-1.0]  # appended to
        assert _released(new.add_many(batch, now, clocks)) == _released(expected)
        assert clocks == [-1.0] + expected_clocks
        assert _state(new) == _state(ref)
    assert _released(new.drain()) == _released(ref.drain())
