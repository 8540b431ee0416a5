"""The episode lifecycle: opening an episode (one per trace, or per conversation key across traces),
bounds on open episodes, reopening a closed trace episode that goes on, closing by idleness or at
the end, the notes an assembled trace (replay, serve) brings about its missing parts, and the span
ids an episode remembers.

A mixin of :class:`~spanassert.core.engine.Engine` (the engine's state is set in its ``__init__``).
"""
from __future__ import annotations

from typing import Any, Dict, Final, Iterable, List, Mapping, Optional, Sequence, Set, Tuple, cast

from ..mapping import ROLE_AGENT, Mapper, name_text
from .episode import (
    INCOMPLETE_JUDGING_FAILED,
    INCOMPLETE_OPENING_NOT_JUDGED,
    INCOMPLETE_ROOT_NOT_SEEN,
    MAX_PENDING_MARKS,
    MAX_SEEN_IDS,
    OVERFLOW_EPISODE_EVICTED,
    OVERFLOW_PENDING_MARKS,
    PARENTS_NOT_IN_INPUT_SUFFIX,
    Episode,
    parents_not_in_input,
)
from .model import NO_IDS, CloseReason
from .plan import Plans
from .results import EpisodeResult
from .spans import INCOMPLETE_SOURCE_DROPPED
from .verdicts import Verdicts

FAR_FUTURE: Final = 1 << 127


class EpisodeLifecycle(Verdicts):
    """Opening, reopening and closing episodes (see the module docstring)."""

    mapper: Mapper
    plans: Plans
    key_attr: str
    idle_ns: int
    max_open: int
    now_ns: int
    idle_deadline: int
    _trace_seq: Dict[str, int]
    _notes: Dict[str, Tuple[List[str], bool]]
    _marks_lost: bool

    def tick(self, now_ns: Optional[int] = None) -> List[EpisodeResult]:
        """Close episodes idle for longer than ``idle_timeout``. ``now_ns`` defaults to the latest
        span time seen (replay) — the processor passes the wall clock."""
        if now_ns is None:
            now_ns = self.now_ns
        closed: List[EpisodeResult] = []
        while self.open:
            ep = next(iter(self.open.values()))
            if ep.last_ns + self.idle_ns > now_ns:
                self.idle_deadline = ep.last_ns + self.idle_ns
                break
            closed.append(self._close(ep, CloseReason.IDLE))
            ep.marks = None
        else:
            self.idle_deadline = FAR_FUTURE
        return closed

    def close_all(self, reason: CloseReason) -> List[EpisodeResult]:
        """Decide every open episode now (force_flush, shutdown, end of input)."""
        out = []
        for ep in list(self.open.values()):
            out.append(self._close(ep, reason))
            ep.marks = None
        return out

    def abandon(self, trace_id: str) -> Optional[EpisodeResult]:
        """Close the episode of ``trace_id`` after an error inside spanassert while judging it
        (``CloseReason.INTERNAL_ERROR``): failures found so far stand, every other rule is
        inconclusive, since the rest of its evidence was never judged. None when no episode of
        that trace is open. If closing raises too, the episode is dropped (the caller counts it)."""
        self._notes.pop(trace_id, None)
        ep = self.by_trace.get(trace_id)
        if ep is None or ep.closed:
            return None
        try:
            return self._close(ep, CloseReason.INTERNAL_ERROR)
        except Exception:
            if not ep.closed:
                self._forget(ep)
            ep.marks = None
            raise

    def judging_failed(self, trace_id: str) -> None:
        """An error inside spanassert while judging a span of ``trace_id`` (live: the processor
        caught it, so that span's start or end was not taken in): the evidence of its open episode
        is incomplete from then on. A rule the lost span could have broken then ends `inconclusive`
        at close, never `passed`; failures found stand. A closed episode of the trace is amended;
        with no episode of the trace yet, the one that opens for it starts incomplete."""
        if self._evidence_lost(trace_id, INCOMPLETE_JUDGING_FAILED):
            return
        # No episode of the trace yet: the lost span may be the one that would have opened it (its
        # agent and attributes select the rules by `match`). A pending mark: the episode that
        # opens for this trace starts incomplete. Bounded: past MAX_PENDING_MARKS traces whose
        # episode never opened, the oldest mark is forgotten, counted, and every episode that
        # opens from then on is marked instead (never a pass that a forgotten mark would stop).
        notes = self._notes
        note = notes.get(trace_id)
        if note is not None:
            if INCOMPLETE_OPENING_NOT_JUDGED not in note[0]:
                note[0].append(INCOMPLETE_OPENING_NOT_JUDGED)
            return
        if len(notes) >= MAX_PENDING_MARKS:
            self._forget_oldest_note()
        notes[trace_id] = ([INCOMPLETE_OPENING_NOT_JUDGED], True)

    def _forget_oldest_note(self) -> None:
        """Make room among the notes: the oldest goes. When it was a pending mark (a span that could
        not be judged before its trace's episode opened), that is counted and every episode that
        opens from then on is marked instead; a note of what an assembled trace (or a lossy plain
        span) missed is forgotten, as the notes' bound says (its trace was fed long before)."""
        notes = self._notes
        oldest = notes.pop(next(iter(notes)))
        if INCOMPLETE_OPENING_NOT_JUDGED in oldest[0]:
            self._marks_lost = True
            self.sink.overflow(OVERFLOW_PENDING_MARKS)

    def source_dropped(self, trace_id: str, reason: str = INCOMPLETE_SOURCE_DROPPED) -> bool:
        """Live: a span of ``trace_id`` says its SDK dropped some of its attributes or events (span
        limits): its episode's evidence is incomplete, as replay and serve say of the same span.
        ``reason``: INCOMPLETE_VALUE_AT_LIMIT for a value the SDK may have cut to its length limit.
        With no episode of the trace yet (a plain span that may have lost a GenAI span's markers,
        ended before any span of its trace opened one), a bounded note: the episode that opens for
        the trace starts incomplete, as replay and serve mark the whole assembled trace. True when
        that note is the trace's first (the processor counts such traces: no episode may ever open
        for them, their markers being what was lost)."""
        if self._evidence_lost(trace_id, reason):
            return False
        first = trace_id not in self._notes
        self._note(trace_id, ([reason], True))
        return first

    def _evidence_lost(self, trace_id: str, reason: str) -> bool:
        """Mark the open episode of ``trace_id`` incomplete for ``reason``; or its closed one (a late
        span: the verdicts given were decided without that evidence), amended. False if neither."""
        ep = self.by_trace.get(trace_id)
        if ep is not None and not ep.closed:
            self._mark_incomplete(ep, [reason], True)
            return True
        old = self.recent.get(trace_id)
        if old is not None:
            if reason not in (old.incomplete or ()):
                self._mark_incomplete(old, [reason], True)
                self._amend(old)
            return True
        return False

    # -- assembled traces (replay, serve) ------------------------------------------------------------
    def begin_trace(self, trace_id: str, incomplete: Sequence[str] = (), root_seen: bool = True,
                    outside_parents: Iterable[str] = ()) -> None:
        """Before the spans of one assembled trace are fed: what is missing from it. ``incomplete``
        lists why the evidence is incomplete (its episode's rules that the missing part could have
        broken end `inconclusive`, never `passed`); ``root_seen=False`` means no span of the trace
        closes its episode: :meth:`end_trace` does, after its last span. ``outside_parents``: parents
        of these spans that are not among them (for a later part of a trace, they may be spans of
        its earlier part)."""
        if not incomplete and root_seen:
            return
        ep = self.by_trace.get(trace_id)
        if ep is not None:
            self._mark_incomplete(ep, incomplete, root_seen)
        elif self.by_trace_key and trace_id in self.recent and incomplete:
            # More of a trace whose episode closed, itself cut (spans over the cap, parents
            # missing): the closed episode's evidence is incomplete; its verdicts are amended.
            old = self.recent[trace_id]
            reasons = [r for r in incomplete if r != INCOMPLETE_ROOT_NOT_SEEN]
            seen = old.seen
            missing = sum(1 for p in outside_parents if seen is None or p not in seen)
            if missing:
                reasons.append(parents_not_in_input(missing))
            if reasons:
                self._mark_incomplete(old, reasons, True)
                self._amend(old)
            self._note(trace_id, (list(incomplete), root_seen))
        else:
            self._note(trace_id, (list(incomplete), root_seen))

    def _note(self, trace_id: str, note: Tuple[List[str], bool]) -> None:
        """Keep what is missing from an assembled trace until its episode opens (with what an earlier
        part of it that opened none missed). A trace whose spans
        open no episode (no GenAI span in it) leaves its note here: bounded like the traces' sequence
        counters (the oldest note goes; its trace was fed long before)."""
        notes = self._notes
        earlier = notes.pop(trace_id, None)
        if earlier is not None:  # an earlier part of the trace opened no episode: what it missed stays
            note = (earlier[0] + [r for r in note[0] if r not in earlier[0]], note[1])
        notes[trace_id] = note
        if len(notes) > self.max_open + self.late_window + 1024:
            self._forget_oldest_note()

    def end_trace(self, trace_id: str) -> Optional[EpisodeResult]:
        """After the last span of an assembled trace: close its episode if no span could
        (its root was not in the input)."""
        self._notes.pop(trace_id, None)
        ep = self.by_trace.get(trace_id)
        if ep is None or not ep.hold or not self.by_trace_key:
            return None
        result = self._close(ep, CloseReason.ROOT_NOT_SEEN)
        ep.marks = None
        return result

    # -- live: spans with a parent in another process -----------------------------------------------
    def parents_elsewhere(self, trace_id: str, count: int) -> None:
        """Live: ``count`` spans of this trace in this process so far have a remote parent. An
        episode whose trace's root is here (it did not open under such a span: see
        :meth:`Sink.root_elsewhere`) is incomplete as replay says of this process's spans:
        "N span(s) whose parent is not in the input". One whose root is elsewhere already says
        "root not seen", as replay does (no count)."""
        ep = self.by_trace.get(trace_id)
        if ep is None or ep.hold or count <= 0:
            return
        view = ep
        if view.incomplete is None:
            view.incomplete = []
        view.incomplete[:] = [r for r in view.incomplete if not r.endswith(PARENTS_NOT_IN_INPUT_SUFFIX)]
        view.incomplete.append(parents_not_in_input(count))

    def _apply_notes(self, ep: Episode, trace_id: str) -> None:
        note = self._notes.pop(trace_id, None)
        if note is not None:
            self._mark_incomplete(ep, note[0], note[1])
        if self._marks_lost:
            self._mark_incomplete(ep, [INCOMPLETE_OPENING_NOT_JUDGED], True)


    # -- episodes ---------------------------------------------------------------------------------
    def _new_trace_key(self, trace_id: str) -> str:
        n = self._trace_seq.get(trace_id, 0)
        self._trace_seq[trace_id] = n + 1
        if len(self._trace_seq) > self.max_open + self.late_window + 1024:
            # Bounded: forget the oldest sequence counters (their traces are long closed).
            for k in list(self._trace_seq)[: len(self._trace_seq) // 2]:
                del self._trace_seq[k]
        return trace_id if n == 0 else f"{trace_id}#{n + 1}"

    def _conversation_episode(self, trace_id: str, attributes: Mapping[str, Any], now_ns: int,
                              resource: Optional[Mapping[str, Any]], role: int, span_id: str,
                              name: str) -> Optional[Episode]:
        conv = self.mapper.conversation_key(attributes, self.key_attr)
        if conv is None:
            return None
        ep = self.open.get(conv)
        if ep is None:
            ep = self._open(conv, trace_id, now_ns, attributes, resource, role, span_id, name)
        else:
            self.by_trace[trace_id] = ep
            self.sink.trace_tracked(trace_id)
            if self.sink.root_elsewhere(trace_id):
                self._mark_incomplete(ep, (), False)
            if self._notes or self._marks_lost:
                self._apply_notes(ep, trace_id)
        if ep.traces is None:
            ep.traces = set()
        ep.traces.add(trace_id)
        return ep

    def _open(self, key: str, trace_id: str, now_ns: int, attributes: Mapping[str, Any],
              resource: Optional[Mapping[str, Any]], role: int, span_id: str, name: str) -> Episode:
        self._make_room()
        agent_read, agent = self.mapper.agent_name_read(name, attributes) if role == ROLE_AGENT else (True, None)
        service_read, service = True, None
        if resource is not None:
            sv = resource.get("service.name")
            if type(sv) is str:
                service = sv
            else:  # not text (a list, a number): `match: {service}` cannot be decided; UTF-8 bytes are text
                service_read, service = name_text(sv)
        plan = self.plans.select(agent, service, attributes, resource, agent_read, service_read)
        ep = Episode(key, trace_id, plan, now_ns)
        if now_ns + self.idle_ns < self.idle_deadline:
            self.idle_deadline = now_ns + self.idle_ns
        ep.service = service
        if role == ROLE_AGENT:
            ep.root_is_agent = True
            ep.root_span_id = span_id
            ep.root_name = name
        self.open[key] = ep
        self.by_trace[trace_id] = ep
        self.sink.trace_tracked(trace_id)
        self.sink.episode_opened()
        if self.sink.root_elsewhere(trace_id):
            self._mark_incomplete(ep, (), False)
        if self._notes or self._marks_lost:
            self._apply_notes(ep, trace_id)
        return ep

    def _reopen(self, ep: Episode) -> Episode:
        """A closed trace episode goes on (another local root of its trace started). Its rule
        states are still there; verdicts decided only at close are decided again at the next close,
        whose result goes out as an amendment."""
        trace_id = ep.trace_id
        assert trace_id is not None  # an episode's, set when it opens (Optional on a view only)
        self._make_room()
        self.recent.pop(trace_id, None)
        ep.closed = False
        ep.reopened = True
        if ep.at_close and ep.failed:
            for i in ep.at_close:  # decided at close: decided again at the next close
                ep.failed.pop(i, None)
        self.open[ep.key] = ep
        self.by_trace[trace_id] = ep
        self.sink.trace_tracked(trace_id)
        if self._notes or self._marks_lost:
            self._apply_notes(ep, trace_id)
        return ep

    def _make_room(self) -> None:
        """Bounded memory: evict (close) the least recently active episodes until one more fits."""
        while len(self.open) >= self.max_open:
            oldest = next(iter(self.open.values()))
            self.sink.overflow(OVERFLOW_EPISODE_EVICTED)
            self._close(oldest, CloseReason.EVICTED)
            oldest.marks = None

    @staticmethod
    def _seen(ep: Episode, span_id: str) -> None:
        more = ep.more  # ep.seen (a property over it), read directly: once per span of an assembled trace
        seen = NO_IDS if more is None else more.seen
        if seen is NO_IDS:
            ep.seen = {span_id}  # made at the first id: most episodes are never fed as assembled traces
        elif seen is not None:
            if len(seen) < MAX_SEEN_IDS:
                # A set once past NO_IDS. Quoted: Set[str] at run time is a typing-cache call per span.
                cast("Set[str]", seen).add(span_id)
            else:
                ep.seen = None  # too many to remember: a later part's parents count as unknown

    @staticmethod
    def _absorb(ep: Episode, span_id: str) -> None:
        if ep.absorbed is None:
            ep.absorbed = set()
        ep.absorbed.add(span_id)
