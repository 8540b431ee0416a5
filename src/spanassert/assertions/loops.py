"""Loops: ``trace_no_repeat``.

Two ways an agent goes round in circles, both judged incrementally:

- *repeats*: the same tool with the same arguments (compared as values: key order, whitespace,
  escapes, ``1`` / ``1.0`` / ``1e0``, ``0`` / ``-0.0`` and the Unicode normal form of strings do not
  matter; :func:`~.values.equal_value`) more than ``max`` times in the episode, or within any ``window``
  consecutive calls. Judged when a call's arguments are known (its span end), in that order, and
  failed at the call that goes over. State: a 64-bit keyed hash (:func:`~.values.call_key`, an integer)
  and a count per distinct call, at most :data:`MAX_DISTINCT_CALLS` of them (episode-wide) or
  ``window`` of them (windowed); past the cap new calls are not counted, and a pass becomes
  ``inconclusive``.
- *cycles*: a short pattern of tool names (A-B, A-B-C, up to ``cycle_length`` calls, the pattern not
  itself a repetition) repeated back to back more than ``max`` times. Judged on names in the order
  calls end (as repeats are, so that the two never race: the live processor judges starts on the
  agent's thread ahead of queued ends), failing at the end of the call that completes the extra
  repetition. State: the last ``cycle_length`` names and one run length per pattern length.
"""
from __future__ import annotations

import struct
from collections import deque
from typing import Any, Callable, Deque, Dict, Final, List, Optional, Tuple, Union

from ..core.model import CONTENT_OK, EpisodeView, Failure, Outcome, ToolCall
from .base import NEED_ARGUMENTS, Assertion, BuildContext, Field
from .call_checks import NO_FACTS, RareFactsHolder, call_ref, calls_of, fail_first, settled
from .registry import register
from .selectors import tool_fields, tool_selector
from .steps import UNREACHABLE_BOUND, unreachable
from .values import call_key

# Distinct (tool, arguments) pairs remembered per episode when no window is set.
MAX_DISTINCT_CALLS: Final = 4096
MAX_WINDOW: Final = 10_000
MAX_CYCLE_LENGTH: Final = 8
_SMALL: Final = 64  # windows up to this many calls are packed in one bytearray
_DIGEST_SIZE: Final = 8  # bytes of a call_key (a signed 64-bit integer) packed in a small window's ring
_KEY: Final = struct.Struct("<q")
_pack_key: Final = _KEY.pack
_pack_into: Final = _KEY.pack_into


def _ordinal(n: int) -> str:
    if 10 <= n % 100 <= 20:
        return f"{n}th"
    return f"{n}{ {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th') }"


def _primitive(pattern: List[str]) -> bool:
    """Whether ``pattern`` is not a repetition of a shorter pattern (A-B-A-B is, A-B is not)."""
    n = len(pattern)
    return not any(n % d == 0 and pattern == pattern[:d] * (n // d) for d in range(1, n))


class NoRepeatState(RareFactsHolder):
    """Its rare facts (RareFactsHolder): overflow (calls not counted because the cap
    was reached), undecided (calls whose arguments were not recorded or not readable), first_failure."""

    __slots__ = ("counts", "recent", "checked", "names", "runs", "open", "cycled")

    def __init__(self, window: Optional[int], cycle_length: int) -> None:
        small = bool(window) and window <= _SMALL  # type: ignore[operator]  # window is set when small is tested
        # The episode-wide counts, or a large window's; a small window counts in `recent` itself.
        self.counts: Optional[Dict[int, int]] = None if small else {}
        # The digests of the last `window` calls: a small window's packed in one bytearray of
        # `window` 8-byte places, filled in turn (a ring), a large one's in a deque (its first block
        # is about 600 bytes per episode).
        self.recent: Union[bytearray, Deque[int], None] = (
            None if not window else bytearray(window * _DIGEST_SIZE) if small else deque())
        self.checked = 0
        self.names: Tuple[str, ...] = ()  # the last `cycle_length` tool names
        # The run length of each pattern length p (at p - 2); None while all are 0 (made when a name
        # first comes back p calls later).
        self.runs: Optional[List[int]] = None
        self.open = 0
        self.cycled = False  # a cycle was reported (once per episode)
        self.more = None


def _occurrences(packed: bytearray, key: bytes, end: int) -> int:
    """How many of the 8-byte keys packed in ``packed[:end]`` are ``key``."""
    n = 0
    pos = packed.find(key, 0, end)
    while pos != -1:
        if pos % _DIGEST_SIZE:
            pos = packed.find(key, pos + 1, end)  # straddles two digests: not one of them
        else:
            n += 1
            pos = packed.find(key, pos + _DIGEST_SIZE, end)
    return n


class NoRepeatAssertion(Assertion):
    type_name = "trace_no_repeat"
    doc = (
        "Loops. The same tool with the same arguments (equal JSON values: key order, spacing, escapes, `1` or "
        "`1.0`, and the Unicode normal form of strings do not matter) may occur at most `max` times in "
        "the episode, or within any `window` consecutive calls when `window` is given; and no pattern "
        "of 2 to `cycle_length` tool names (A-B-A-B...) may repeat back to back more than `max` times. "
        "A safety rule: both are judged in the order calls end; a repeat fails at the call that goes over, "
        "a cycle at the call that completes the extra repetition. Only hashes are "
        "kept, for at most 4096 distinct calls per episode; past that cap a pass is inconclusive. Also "
        "inconclusive when a call's arguments were not recorded, or when the episode closed before it "
        "finished. A `max` no episode reaches, or a `window` no larger than `max` with cycles off, is "
        "refused (cannot fail)."
    )
    fields = {
        "max": Field({"type": "integer", "minimum": 1}, required=True,
                     doc="Most identical calls allowed, and most back-to-back repetitions of a pattern."),
        "window": Field({"type": "integer", "minimum": 2, "maximum": MAX_WINDOW},
                        doc="Count identical calls only within this many consecutive calls. Default: the whole "
                            "episode."),
        **tool_fields("Only calls of this tool (exact name).", required=False),
        "cycle_length": Field({"type": "integer", "minimum": 0, "maximum": MAX_CYCLE_LENGTH}, default=4,
                              doc="Longest pattern of tool names checked for cycles (0 or 1: no cycle check). Default "
                                  "4."),
    }

    def __init__(self, test_id: str, index: int, values: Dict[str, Any], ctx: BuildContext) -> None:
        super().__init__(test_id, index, values, ctx)
        self.untouched_close_shared = True  # closing it untouched reads only the close (see Assertion)
        self.max: int = values.get("max") or UNREACHABLE_BOUND
        self.window: Optional[int] = values.get("window")
        selector = tool_selector(values, ctx, required=False)
        self.tool: Optional[str] = selector.name_label if selector is not None else None
        cycle = values.get("cycle_length")
        self.cycle_length: int = 4 if cycle is None else int(cycle)
        if self.tool is not None or self.cycle_length < 2:
            self.cycle_length = 0  # one tool name cannot form a pattern of two different calls
        self._periods = tuple(range(2, self.cycle_length + 1))
        self.select_calls(selector)
        self.needs = frozenset((NEED_ARGUMENTS,))
        # What a call is counted by: values.call_key of (tool, arguments). An attribute so that a
        # test can give colliding keys (tests/test_assertions_loops.py); the product never changes it.
        self.key_of: Callable[[str, Any], Optional[int]] = call_key

    def ineffective_reason(self) -> Optional[str]:
        why = unreachable(self.max)
        if why is not None:
            return why
        if self.window is not None and self.window <= self.max and not self.cycle_length:
            return (f"`window: {self.window}` holds at most {self.window} calls, never more than `max: {self.max}` "
                    "identical ones, and cycles are not checked")
        return None

    def new_state(self) -> NoRepeatState:
        return NoRepeatState(self.window, self.cycle_length)

    def on_call_start(self, state: NoRepeatState, call: ToolCall) -> Optional[Failure]:
        state.open += 1
        return None

    # -- cycles, on names -------------------------------------------------------------------------------
    def _cycle(self, state: NoRepeatState, call: ToolCall) -> Optional[Failure]:
        if state.cycled:
            return None  # reported once per episode: nothing more to count
        names = state.names
        runs = state.runs
        name = call.name
        n = len(names)
        if runs is None and name not in names:
            # No run under way and no earlier name to match (the loop below would do nothing but
            # remember the name): the common case, at about half its cost.
            state.names = (*names[1:], name) if n >= self.cycle_length else (*names, name)
            return None
        reached: Optional[List[int]] = None
        for p in self._periods:
            if n >= p and names[-p] == name:
                if runs is None:
                    runs = state.runs = [0] * (self.cycle_length - 1)
                bound = p * self.max
                r = runs[p - 2] + 1
                if r >= bound:
                    r = bound  # no need to count past the bound
                    if reached is None:
                        reached = [p]
                    else:
                        reached.append(p)
                runs[p - 2] = r
            elif runs is not None:
                runs[p - 2] = 0
        names = state.names = (*names[1:], name) if n >= self.cycle_length else (*names, name)
        if reached is None or runs is None:
            return None
        for p in reached:
            pattern = list(names[-p:])
            if not _primitive(pattern):
                continue
            reps = runs[p - 2] // p + 1
            state.cycled = True
            return fail_first(
                state, call,
                f"`{call.name}` called at {call_ref(call)} completes the pattern [{', '.join(pattern)}] "
                f"a {_ordinal(reps)} time in a row; max {self.max} repetition(s)",
            )
        return None

    # -- both, when a call ends ---------------------------------------------------------------------------
    def on_call_end(self, state: NoRepeatState, call: ToolCall) -> Optional[Failure]:
        # Everything is judged at call ends, in the order calls end: every door sees ends in that
        # order (the live processor positions starts on the agent's thread, ahead of queued ends).
        if state.open:
            state.open -= 1
        cycle = self._cycle(state, call) if self.cycle_length else None
        return self._repeat(state, call) or cycle

    def _repeat(self, state: NoRepeatState, call: ToolCall) -> Optional[Failure]:
        if call.arguments_state != CONTENT_OK:
            state.undecided += 1
            return None
        key_of = self.key_of
        # (The product's key_of called directly: a compiled build then skips a generic call.)
        key = call_key(call.name, call.arguments) if key_of is call_key else key_of(call.name, call.arguments)
        if key is None:  # nested too deeply to compare as values
            state.undecided += 1
            return None
        state.checked += 1
        recent = state.recent
        if isinstance(recent, bytearray):
            # The ring's places in use hold the digests of the last min(checked, window) calls.
            at = ((state.checked - 1) % (self.window or 1)) * _DIGEST_SIZE
            digest = _pack_key(key)
            # Not anywhere in the ring before this call takes its place (at any offset: places not
            # yet used, the place it takes, and matches straddling two places included): after it,
            # this call's place is its only occurrence, and one call is never over `max` (at least
            # 1). One unbounded find (not `in`, which first tries the needle as an integer and
            # clears the TypeError) instead of the two bounded finds after the write.
            alone = recent.find(digest) == -1
            _pack_into(recent, at, key)
            if alone:
                return None
            end = state.checked * _DIGEST_SIZE
            if end > len(recent):
                end = len(recent)
            n = _occurrences(recent, digest, end)
        elif recent is not None:
            counts = state.counts
            assert counts is not None
            recent.append(key)
            if len(recent) > (self.window or 0):
                old = recent.popleft()
                left = counts[old] - 1
                if left:
                    counts[old] = left
                else:
                    del counts[old]
            # Stored again under this call's key object: the window and the counts then hold the
            # same objects, as many after 10 calls as after 10,000 (tests/test_assertions_contract.py).
            n = counts.pop(key, 0) + 1
            counts[key] = n
        else:
            counts = state.counts
            assert counts is not None
            seen = counts.get(key, 0)
            if seen > self.max:
                return None  # reported at the call that went over; the count stops there
            if not seen and len(counts) >= MAX_DISTINCT_CALLS:
                state.overflow += 1
                return None
            n = counts[key] = seen + 1
        if n != self.max + 1:
            return None  # under the bound, or already reported at the call that went over
        within = f" within {self.window} consecutive calls" if self.window else ""
        return fail_first(
            state, call,
            f"`{call.name}` called at {call_ref(call)} with the same arguments as {n - 1} earlier call(s){within}; "
            f"max {self.max} identical call(s)",
        )

    def on_close(self, state: NoRepeatState, episode: EpisodeView) -> Outcome:
        subject = calls_of(self.tool)
        facts = state.more or NO_FACTS  # its rare fields, read at once
        if facts.first_failure is not None:
            return Outcome.failed(f"the agent looped: first at {facts.first_failure}")
        if facts.overflow:
            return Outcome.inconclusive(
                f"{facts.overflow} of the {subject} were not compared: more than {MAX_DISTINCT_CALLS} distinct "
                "calls in the episode (the cap on what this rule remembers)"
            )
        if facts.undecided:
            return Outcome.inconclusive(
                f"{facts.undecided} of the {subject} had arguments that were not recorded, could not be parsed or were "
                "nested too deeply to compare, "
                "so whether they repeat an earlier call is unknown"
            )
        if state.open:
            return Outcome.inconclusive(f"{state.open} of the {subject} had not ended when the episode closed")
        return settled(f"no call repeated more than {self.max} time(s) in {state.checked} {subject}", episode)


register(NoRepeatAssertion)


__all__ = ["NoRepeatAssertion", "MAX_DISTINCT_CALLS"]
