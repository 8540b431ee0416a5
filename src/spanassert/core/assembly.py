"""From finished spans back to the live order of events — shared by replay and serve.

A file or an OTLP request delivers spans after they ended, in any order. To give the verdicts the
live processor gives, a trace's spans are turned back into the sequence of span starts and span
ends the processor saw (ordered by time; a call's position is its start, ties broken by span id)
and fed to the same :class:`~spanassert.core.engine.Engine`.

:class:`TraceBuffer` holds the spans of traces still arriving, bounded in memory: a trace is
released when its local root has arrived and enough later input has been seen (``settle_spans``
spans read since, for files; ``settle_seconds``, for the receiver), when the buffer is over its
bound (oldest first), or at the end of input.
"""
from __future__ import annotations

import time
from collections import OrderedDict
from operator import attrgetter, le
from typing import Any, Callable, Dict, Iterable, List, Optional, Set, Tuple

from ..mapping import ROLE_OTHER
from .engine import Engine, SpanOutcome
from .episode import OVERFLOW_DROPPED_NO_EPISODE, parents_not_in_input
from .model import CloseReason, SpanRecord
from .native import mypyc_attr
from .spans import INCOMPLETE_SOURCE_DROPPED


def _depths(records: List[SpanRecord]) -> Dict[str, int]:
    by_id = {r.span_id: r for r in records}
    depth: Dict[str, int] = {}
    for r in records:
        chain: List[SpanRecord] = []
        cur: Optional[SpanRecord] = r
        while cur is not None and cur.span_id not in depth and len(chain) < 10_000:
            chain.append(cur)
            cur = by_id.get(cur.parent_span_id) if cur.parent_span_id else None
            if cur is not None and cur in chain:
                break  # a parent cycle in hostile input: stop climbing
        base = depth.get(cur.span_id, -1) if cur is not None else -1
        for i, s in enumerate(reversed(chain)):
            depth[s.span_id] = base + 1 + i
    return depth


_UNKNOWN = float("-inf")  # a lower bound below any clock: check
_start_of = attrgetter("start_ns")
_end_of = attrgetter("end_ns")


def _service(r: SpanRecord) -> Optional[str]:
    v = r.resource.get("service.name") if r.resource else None
    return v if isinstance(v, str) else None


def _live_sequence(records: List[SpanRecord], with_roots: bool = True) -> Tuple[List[int], List[bool]]:
    """The live order of ``records`` as event indices (``i < n``: span ``i`` starts; ``i >= n``:
    span ``i - n`` ends), and per span whether it is a local root (empty unless ``with_roots``)."""
    n = len(records)
    roots: List[bool] = []
    if with_roots:
        get = {r.span_id: r for r in records}.get
        append = roots.append
        for r in records:
            parent = get(r.parent_span_id) if r.parent_span_id else None
            # A span is a local root when its parent is not in this process: absent, or another
            # service. Spans decoded from one resource block share its dict, so most pairs need no lookup.
            append(parent is None or (parent.resource is not r.resource and _service(parent) != _service(r)))
    starts = list(map(_start_of, records))
    ends = list(map(_end_of, records))
    if len(set(starts)) == n and len(set(ends)) == n and all(map(le, starts, ends)):
        # No two spans start, nor two end, at the same instant (the usual case with nanosecond
        # clocks): time and phase alone decide, and 2 * time + phase is a unique sort key.
        keys: List[Any] = [2 * t for t in starts]
        keys += [2 * t + 1 for t in ends]
    else:
        depth = _depths(records)
        keys = [(t, 0, depth.get(r.span_id, 0), r.span_id) for r, t in zip(records, starts)]
        keys += [(e if e >= s else s, 1, -depth.get(r.span_id, 0), r.span_id)
                 for r, s, e in zip(records, starts, ends)]
    # A stable sort: spans repeated in the input (same id) keep their input order.
    return sorted(range(2 * n), key=keys.__getitem__), roots


def live_order(records: List[SpanRecord]) -> List[Tuple[int, SpanRecord, bool]]:
    """The (phase, span, is_local_root) sequence the live processor would have seen: phase 0 is a
    start, 1 an end. Starts before ends at the same instant; parents start before children and end
    after them; remaining ties by span id."""
    order, roots = _live_sequence(records)
    n = len(records)
    return [(0, records[i], roots[i]) if i < n else (1, records[i - n], roots[i - n]) for i in order]


# Not a native class in the compiled build (a native class cannot subclass list): a Python class there too.
@mypyc_attr(native_class=False)
# the ignore below: a list of SpanRecord; a parameterised base would add a Generic layer
class TraceSpans(list):  # type: ignore[type-arg]
    """The spans of one trace as the buffer releases them; ``dropped`` counts the spans of the
    trace that the per-trace cap kept out. ``seen``: the clock when its last span arrived;
    ``pushed``: released because the buffer was over its bound (see :func:`release_order`)."""

    __slots__ = ("dropped", "cap", "seen", "pushed")

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.dropped = 0
        self.cap = 0
        self.seen = 0.0
        self.pushed = False


def release_order(trace: List[SpanRecord], clock: float) -> Tuple[float, int, float, float]:
    """Where ``trace``, released by a :class:`TraceBuffer` at ``clock`` (``inf``: drained at the
    end), stands in the order the buffer releases traces: by clock; at one clock, those pushed
    out by the bound first (oldest activity first), then the due ones by their first start, then
    by activity. Two buffers fed the same span stream, each holding only some of its traces
    (``replay --jobs``: one per process), release each trace at the same clock, so sorting by this
    key interleaves what they released in the order one buffer would have."""
    seen = getattr(trace, "seen", 0.0)
    if getattr(trace, "pushed", False):
        return (clock, 0, seen, 0.0)
    return (clock, 1, min(r.start_ns for r in trace) if trace else 0, seen)


def evidence_gaps(records: List[SpanRecord]) -> Tuple[bool, List[str], Set[str]]:
    """What an assembled trace is missing: whether its root (a span with no parent) is in it, why
    its evidence is incomplete otherwise (spans whose parent is not in it, spans over the cap),
    and the parents not in it."""
    ids = {r.span_id for r in records}
    root_seen = False
    orphans = 0
    lossy = False
    outside: Set[str] = set()
    for r in records:
        p = r.parent_span_id
        if p is None:
            root_seen = True
        elif p not in ids:
            orphans += 1
            outside.add(p)
        if r.dropped:
            lossy = True
    gaps: List[str] = []
    if not root_seen:
        from .engine import INCOMPLETE_ROOT_NOT_SEEN

        gaps.append(INCOMPLETE_ROOT_NOT_SEEN)
    elif orphans:
        gaps.append(parents_not_in_input(orphans))
    dropped = getattr(records, "dropped", 0)
    if dropped:
        gaps.append(f"{dropped} span(s) over the cap of {getattr(records, 'cap', 0)} spans per trace were dropped")
    if lossy:
        gaps.append(INCOMPLETE_SOURCE_DROPPED)
    return root_seen, gaps, outside


def lost_markers_unseen(engine: Engine, records: List[SpanRecord], gaps: List[str]) -> bool:
    """After :func:`feed_trace` (``gaps``: what it returned): whether this trace's spans say the SDK
    dropped some of their attributes or events (span limits) while no span of it is recognised and
    no episode of it is known. The markers that would have opened one may be what was dropped: an
    agent run no rule saw. The door counts it (``OVERFLOW_DROPPED_NO_EPISODE``) and its report then
    makes every `passed` `inconclusive` (:meth:`Report.mark_input_gaps`), as for unreadable input."""
    if not gaps or INCOMPLETE_SOURCE_DROPPED not in gaps:
        return False
    tid = records[0].trace_id
    if tid in engine.by_trace or tid in engine.recent:
        return False  # its episode is marked incomplete (feed_trace, begin_trace)
    role = engine.mapper.role
    return all(role(r.name, r.attributes) == ROLE_OTHER for r in records)


def feed_trace(engine: Engine, records: List[SpanRecord],
               on_outcome: Optional[Callable[[SpanRecord, SpanOutcome], None]] = None) -> List[str]:
    """Feed one trace's spans to ``engine`` in live order (ticking idle timeouts on span time).

    Every call of the trace is judged in one episode: only the trace's root (a span with no
    parent) ends it, and when the root is not among ``records`` the episode is incomplete ("root not
    seen") and ends after the last span (see :func:`evidence_gaps`). Returns why the trace's
    evidence is incomplete (:func:`evidence_gaps`), empty when nothing is missing."""
    if not records:
        return []
    order, _ = _live_sequence(records, with_roots=False)  # feed_trace takes a root as a span with no parent
    n = len(records)
    root_seen, gaps, outside = evidence_gaps(records)
    trace_id = records[0].trace_id
    engine.track_span_ids = True
    if gaps:
        if getattr(records, "dropped", 0):
            from .engine import OVERFLOW_TRACE_SPANS

            engine.sink.overflow(OVERFLOW_TRACE_SPANS)
        engine.begin_trace(trace_id, gaps, root_seen, outside)
    for i in order:
        if i < n:
            r = records[i]
            t = r.start_ns
            if t >= engine.idle_deadline:
                engine.tick(t)
            # Positional (role None: start_span reads it): a compiled engine takes keywords on a slower path.
            # Called on the engine, not through a bound method held in a local: compiled, that is a direct
            # native call (no boxing of the arguments, no argument parsing).
            engine.start_span(r.trace_id, r.span_id, r.parent_span_id, r.name, r.attributes, t, r.resource, None,
                              r.parent_span_id is None)
        else:
            i -= n
            r = records[i]
            t = r.end_ns
            if t >= engine.idle_deadline:
                engine.tick(t)
            out = engine.end_span(r.trace_id, r.span_id, r.parent_span_id, r.name, r.attributes, r.start_ns, t,
                                  r.status_code, r.events, r.parent_span_id is None, r.resource)
            if out is not None and on_outcome is not None:
                on_outcome(r, out)
    if not root_seen:
        engine.end_trace(trace_id)
    return gaps


def judge_trace(engine: Engine, records: List[SpanRecord], door: str,
                on_outcome: Optional[Callable[[SpanRecord, SpanOutcome], None]] = None) -> None:
    """Judge one assembled trace as every door that assembles traces does (replay, serve):
    :func:`feed_trace`, then a trace that lost its markers and opened no episode is counted
    (``OVERFLOW_DROPPED_NO_EPISODE``: the report passes nothing then). An exception while judging
    it is contained to it: counted (``engine.sink.internal_error("<door>_trace", exc)``) and its
    episode closed ``internal_error`` (:meth:`Engine.abandon`: failures found stand, every other
    rule is inconclusive); the door goes on with the other traces."""
    try:
        gaps = feed_trace(engine, records, on_outcome)
        if lost_markers_unseen(engine, records, gaps):
            engine.sink.overflow(OVERFLOW_DROPPED_NO_EPISODE)
    except Exception as exc:  # noqa: BLE001 - isolate the failure to this trace
        engine.sink.internal_error(door + "_trace", exc)
        try:
            engine.abandon(records[0].trace_id)
        except Exception as again:  # noqa: BLE001 - counted; the episode is dropped (abandon)
            engine.sink.internal_error(door + "_abandon", again)


def close_all_contained(engine: Engine, reason: CloseReason, door: str) -> None:
    """Decide every open episode (end of input, shutdown); one whose closing raises is counted
    (``"<door>_close"``) and abandoned, and the others are still decided."""
    for _ in range(len(engine.open) + 1):
        try:
            engine.close_all(reason)
            return
        except Exception as exc:  # noqa: BLE001, PERF203 - one failing episode must not stop the others
            engine.sink.internal_error(door + "_close", exc)
            first = next(iter(engine.open.values()), None)
            if first is None:
                return
            try:
                if first.trace_id is not None:
                    engine.abandon(first.trace_id)
            except Exception as again:  # noqa: BLE001 - counted; the episode is dropped below
                engine.sink.internal_error(door + "_abandon", again)
            if first.key in engine.open:  # abandoning did not remove it: give up on it
                del engine.open[first.key]


class _Pending:
    __slots__ = ("records", "root_seen_at", "last_seen_at", "first_seen_at")

    def __init__(self, now: float) -> None:
        self.records: TraceSpans = TraceSpans()
        self.root_seen_at: Optional[float] = None
        self.first_seen_at = now
        self.last_seen_at = now


@mypyc_attr(allow_interpreted_subclasses=True)  # subclassed by code that is not compiled (see core.native)
class TraceBuffer:
    """Spans of traces still arriving, released whole when they look complete (see module doc).

    ``clock`` counts spans read (files) or seconds (receiver); ``settle`` and ``idle`` are in the
    same unit. A trace is released once nothing new arrived for it for ``settle`` after its local
    root came, or for ``idle`` if its root never came (default: ``settle``). Traces are kept in
    order of last activity, so finding the due ones never scans the whole buffer.
    """

    def __init__(self, *, settle: float, idle: Optional[float] = None, max_traces: int = 100_000,
                 max_spans_per_trace: int = 100_000) -> None:
        self.settle = settle
        self.idle = settle if idle is None else max(idle, settle)
        self.max_traces = max(1, max_traces)
        self.max_spans = max(1, max_spans_per_trace)
        self.pending: OrderedDict[str, _Pending] = OrderedDict()
        self.clock = 0.0
        self.overflowed = 0
        # A lower bound on when the least recently active trace was last seen (see due()); only
        # kept while the clock never went back, since then last activity orders the traces.
        self._front_seen_at = _UNKNOWN
        self._monotonic = True

    def _clock_went_back(self) -> None:
        self._monotonic = False
        self._front_seen_at = _UNKNOWN

    def add(self, r: SpanRecord, now: Optional[float] = None) -> List[List[SpanRecord]]:
        """Add one span; returns the traces that are now due (oldest activity first)."""
        return self.add_many((r,), now)

    def add_many(self, records: Iterable[Optional[SpanRecord]], now: Optional[float] = None,
                 clocks: Optional[List[float]] = None) -> List[List[SpanRecord]]:
        """Add spans one after another, as :meth:`add` each (None: as :meth:`skip`); returns every
        trace released on the way, in the order those calls would have returned them, and appends
        to ``clocks`` the clock at which each was released. ``now``: the clock of every one of them
        (a receiver's arrival time); without it each counts one on the clock."""
        out: List[List[SpanRecord]] = []
        pending = self.pending
        settle = self.settle
        max_spans = self.max_spans
        max_traces = self.max_traces
        clock = self.clock
        if now is not None and now < clock:
            self._clock_went_back()
        last_tid: Optional[str] = None
        p: Any = None
        for r in records:
            clock = clock + 1 if now is None else now
            before = len(out)
            if r is not None:
                tid = r.trace_id
                if tid != last_tid:
                    p = pending.get(tid)
                    if p is None:
                        p = pending[tid] = _Pending(clock)
                    else:
                        pending.move_to_end(tid)
                    last_tid = tid
                p.last_seen_at = clock
                recs = p.records
                if len(recs) < max_spans:
                    recs.append(r)
                else:
                    self.overflowed += 1
                    recs.dropped += 1
                    recs.cap = max_spans
                if r.parent_span_id is None:
                    p.root_seen_at = clock
                if len(pending) > max_traces:
                    while len(pending) > max_traces:
                        _, oldest = pending.popitem(last=False)
                        oldest.records.seen = oldest.last_seen_at
                        oldest.records.pushed = True
                        out.append(oldest.records)
                    self.clock = clock
                    out += self.due()
            if len(out) == before:  # nothing pushed out: what is due, if anything can be yet
                if clock - self._front_seen_at < settle:
                    continue
                self.clock = clock
                out += self.due()
                if len(out) == before:
                    continue
            last_tid = None  # the trace may have been released: look it up again
            if clocks is not None:
                clocks += [clock] * (len(out) - before)
        self.clock = clock
        return out

    def skip(self) -> List[List[SpanRecord]]:
        """A span another buffer holds went by (``replay --jobs``): the clock moves on as if it
        had been added, and the traces now due are returned, as :meth:`add` would."""
        return self.add_many((None,))

    def due(self, now: Optional[float] = None) -> List[List[SpanRecord]]:
        if now is not None:
            if now < self.clock:
                self._clock_went_back()
            self.clock = now
        out: List[List[SpanRecord]] = []
        pending = self.pending
        if not pending:
            return out
        # Cheap common case: the least recently active trace is not due, so none is. Nor is any
        # before that one has been quiet for ``settle``: whichever trace is first later was seen
        # no earlier (activity moves traces to the back), so add() can skip this until then.
        first = next(iter(pending.values()))
        if self.clock - first.last_seen_at < self.settle:
            if self._monotonic:
                self._front_seen_at = first.last_seen_at
            return out
        self._front_seen_at = _UNKNOWN
        released: List[str] = []  # not a copy of every pending id: only the prefix that is due
        for tid, p in pending.items():
            quiet = self.clock - p.last_seen_at
            if quiet < self.settle:
                break  # everything after this one is more recent
            if p.root_seen_at is not None or quiet >= self.idle:
                released.append(tid)
        for tid in released:
            p = pending.pop(tid)
            p.records.seen = p.last_seen_at
            out.append(p.records)
        if len(out) > 1:
            # Traces released together go in the order they started: the turns of a conversation
            # (one episode over several traces) then reach the engine in the order they happened.
            out.sort(key=lambda recs: min(r.start_ns for r in recs))
        return out

    def next_due(self) -> Optional[float]:
        """A lower bound on the clock at which a held trace is due: the least recently active
        trace's last activity plus ``settle`` (None when nothing is held). Traces behind it were
        active no earlier, so none is due sooner."""
        for p in self.pending.values():
            return p.last_seen_at + self.settle
        return None

    def release(self, trace_id: str) -> Optional[List[SpanRecord]]:
        """Take one trace out now, whatever its state (a receiver's per-trace bound), or None."""
        p = self.pending.pop(trace_id, None)
        return p.records if p is not None else None

    def drain(self) -> List[List[SpanRecord]]:
        """Everything still held, in the order the traces started (end of input, shutdown)."""
        out: List[List[SpanRecord]] = []
        for p in self.pending.values():
            p.records.seen = p.last_seen_at
            out.append(p.records)
        self.pending.clear()
        out.sort(key=lambda recs: min(r.start_ns for r in recs))
        return out


def monotonic() -> float:
    return time.monotonic()
