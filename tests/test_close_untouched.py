"""The close of an episode decides a rule that nothing reached (its state never made) once per plan
and close reason, when the rule declares that closing it untouched reads only the close
(``Assertion.untouched_close_shared``), and reuses that outcome for every such episode.

- The declaration is true: every documented rule that makes it reads nothing of the episode but
  ``decidable``, ``incomplete`` and ``close_reason`` when closed on a fresh state, changes neither
  the state nor the episode, and decides the same whatever else the episode holds.
- The results are those of closing a fresh state every time: random episodes (tool calls of
  selected and other tools, model steps, late spans, every close reason, incomplete evidence)
  give the same violations and episode results, byte for byte, with the sharing on and off.
"""
from __future__ import annotations

import functools
import json
import random
from typing import Any, Dict, Iterator, List, Mapping, Optional, Set, Tuple

import pytest
from native import ran_pure
from test_assertions_declared import _documented_configs_fresh as _documented_configs

from spanassert.assertions import Assertion
from spanassert.config import load_config
from spanassert.core.engine import Engine, Sink
from spanassert.core.episode import NO_STATE
from spanassert.core.model import CloseReason, EpisodeView

ALLOWED = {"decidable", "incomplete", "close_reason"}


@functools.lru_cache(maxsize=None)
def _spy_view() -> Any:
    """An episode view type that records which of its fields a rule reads. Made when a spy test
    runs, on the pure modules (native.ran_pure): a compiled rule reads a native view's fields
    without asking Python, and a native EpisodeView has no __slots__ to list them."""
    fields = (set(EpisodeView.__slots__) | {n for n in vars(EpisodeView) if not n.startswith("_")}) - {"more_type", "more"}

    class _SpyView(EpisodeView):
        __slots__ = ("_read",)

        def __init__(self, **values: Any) -> None:
            object.__setattr__(self, "_read", set())
            EpisodeView.__init__(self)
            for k, v in values.items():
                setattr(self, k, v)
            object.__getattribute__(self, "_read").clear()

        def __getattribute__(self, name: str) -> Any:
            if not name.startswith("_") and name in fields:
                object.__getattribute__(self, "_read").add(name)
            return object.__getattribute__(self, name)

    return _SpyView


def _slots(obj: Any) -> Any:
    """A comparable picture of a rule state (its slots, its dict, or the value itself)."""
    if isinstance(obj, (list, tuple, set, frozenset, dict, str, int, float, type(None))):
        return repr(obj)
    names: List[str] = []
    for cls in type(obj).__mro__:
        names.extend(getattr(cls, "__slots__", ()))
    picture = {n: repr(getattr(obj, n, None)) for n in names}
    picture.update({k: repr(v) for k, v in getattr(obj, "__dict__", {}).items()})
    return picture


def _views(decidable: bool, reason: CloseReason, incomplete: Optional[List[str]]) -> List[Any]:
    """Views that agree on the close and differ in everything else."""
    plain = dict(decidable=decidable, close_reason=reason, incomplete=incomplete)
    spy = _spy_view()
    return [
        spy(**plain),
        spy(**plain, key="k", trace_id="ab" * 16, root_span_id="cd" * 8, root_name="invoke_agent x",
                 agent="x", service="svc", call_count=7, step_count=3, start_ns=1, end_ns=10**13,
                 final_output="AKIAIOSFODNN7EXAMPLE me@example.com", final_output_state="ok",
                 late_calls=2, unreadable_calls=1, results_truncated=1, calls_dropped=1),
    ]


def _declared() -> List[Tuple[str, Assertion]]:
    out = []
    for block, config in _documented_configs():
        for t in config.tests:
            for a in t.trace_assertions:
                out.append((f"{block.doc.name}:{block.line}:{a.type_name}", a))
    return out


def test_every_rule_that_declares_it_closes_untouched_on_the_close_alone(request: Any) -> None:
    if ran_pure(request):
        return  # watches Python-level reads (see _spy_view)
    declared: Set[str] = set()
    checked = 0
    for where, a in _declared():
        if not a.untouched_close_shared:
            continue
        declared.add(a.type_name)
        for reason in CloseReason:
            for decidable in (True, False):
                for incomplete in (None, [], ["root not seen"]):
                    outcomes = []
                    for view in _views(decidable, reason, incomplete):
                        fresh = a.new_state()
                        before = _slots(fresh)
                        o = a.on_close(fresh, view)
                        read = object.__getattribute__(view, "_read")
                        assert read <= ALLOWED, f"{where}: an untouched close read {sorted(read - ALLOWED)}"
                        assert _slots(fresh) == before, f"{where}: closing a fresh state changed it"
                        outcomes.append((o.verdict, o.message, o.span_id))
                        checked += 1
                    assert outcomes[0] == outcomes[1], f"{where}: the outcome depends on more than the close"
    # The rules the bench and most files use declare it (a lost declaration is a lost fast path).
    assert {"trace_must_call_tool", "trace_must_not_call_tool", "trace_max_tool_calls", "trace_max_tokens",
            "trace_max_cost", "trace_final_tool", "trace_tool_sequence", "trace_args_valid", "trace_tool_status",
            "trace_only_tools", "trace_no_repeat", "trace_no_flow", "trace_no_sensitive_data"} <= declared, declared
    assert checked > 100


def test_the_check_sees_a_rule_that_reads_more_than_the_close(request: Any) -> None:
    if ran_pure(request):
        return
    config = load_config("version: 1\ntests:\n  - id: t\n    assertions:\n"
                         "      - {type: trace_max_steps, max: 2}\n      - {type: trace_max_duration, max: 1s}\n"
                         "      - {type: trace_no_sensitive_data, detectors: [secrets], in: [output]}\n")
    for a in config.tests[0].trace_assertions:
        assert not a.untouched_close_shared, a.type_name  # each reads the episode: steps, span time, output
        view = _views(True, CloseReason.ROOT_ENDED, None)[1]
        a.on_close(a.new_state(), view)
        assert object.__getattribute__(view, "_read") - ALLOWED, a.type_name


# -- the same results with the sharing on and off -------------------------------------------------------
RULES = """\
version: 1
episodes: {max_open: 3, late_window: 4}
tests:
  - id: must
    assertions:
      - {type: trace_must_call_tool, tool: lookup}
      - {type: trace_must_call_tool, tool: refund, min_calls: 2}
  - id: must-not
    assertions:
      - {type: trace_must_not_call_tool, tool: delete}
      - {type: trace_must_not_call_tool, tool: send_email, args_match: {to: "@evil\\\\.com$"}}
  - id: caps
    assertions:
      - {type: trace_max_tool_calls, tool: refund, max: 2}
      - {type: trace_max_tokens, max: 50}
      - {type: trace_max_cost, max: 0.001, default_price: {input: 5, output: 20}}
      - {type: trace_max_steps, max: 3}
      - {type: trace_max_duration, max: 5s}
  - id: order
    assertions:
      - {type: trace_tool_sequence, sequence: [lookup, refund], allow_other_tools: true}
      - {type: trace_final_tool, tool: reply}
      - {type: trace_only_tools, tools: [lookup, refund, reply, search]}
  - id: content
    assertions:
      - {type: trace_args_valid, tool: refund, schema: {type: object, properties: {amount: {maximum: 100}}}}
      - {type: trace_tool_status, tool: search}
      - {type: trace_no_repeat, max: 1, window: 4}
      - {type: trace_no_flow, from: {tool: lookup}, to: {tool: send_email}, min_length: 4}
      - {type: trace_no_sensitive_data, detectors: [secrets, email]}
      - {type: trace_no_sensitive_data, detectors: [email], in: [output]}
  - id: scoped
    match: {agent: billing}
    assertions:
      - {type: trace_must_call_tool, tool: refund}
"""

TOOLS = ["lookup", "refund", "reply", "search", "delete", "send_email", "other"]


class _Recording(Sink):
    def __init__(self) -> None:
        self.out: List[Any] = []

    def violation(self, violation: Any) -> None:
        self.out.append(("violation", json.dumps(violation.to_dict(), sort_keys=True)))

    def episode_closed(self, result: Any) -> None:
        self.out.append(("closed", json.dumps(result.to_dict(), sort_keys=True), repr(result)))

    def episode_amended(self, result: Any) -> None:
        self.out.append(("amended", json.dumps(result.to_dict(), sort_keys=True), repr(result)))


def _script(rng: random.Random) -> List[Tuple[Any, ...]]:
    """Operations on an engine: episodes of random calls and steps, some cut, some closed late."""
    ops: List[Tuple[Any, ...]] = []
    t = 1_000
    for e in range(rng.randint(4, 9)):
        tid = f"{e + 1:032x}"
        root = f"{(e + 1) * 1000:016x}"
        agent = rng.choice(["support", "billing"])
        kind = rng.random()
        if kind < 0.15:
            ops.append(("begin", tid, ["2 span(s) whose parent is not in the input"]))
        ops.append(("start", tid, root, None, f"invoke_agent {agent}",
                    {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent}, t))
        for i in range(rng.choice([0, 0, 1, 2, 4, 6])):
            sid = f"{(e + 1) * 1000 + i + 1:016x}"
            t += rng.randint(1, 10**9)
            if rng.random() < 0.25:
                a: Dict[str, Any] = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o",
                                     "gen_ai.usage.input_tokens": rng.randint(1, 30),
                                     "gen_ai.usage.output_tokens": rng.randint(1, 30)}
                ops.append(("start", tid, sid, root, "chat gpt-4o", a, t))
                ops.append(("end", tid, sid, root, "chat gpt-4o", a, t, t + 5, 0))
                continue
            tool = rng.choice(TOOLS)
            args = rng.choice(['{"amount": 5}', '{"amount": 500}', '{"to": "x@evil.com"}', '{"q": "ORD-12345"}',
                               "not json", None])
            a = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool}
            if args is not None:
                a["gen_ai.tool.call.arguments"] = args
            if rng.random() < 0.5:
                a["gen_ai.tool.call.result"] = rng.choice(['{"id": "ORD-12345"}', '"ok"'])
            ops.append(("start", tid, sid, root, f"execute_tool {tool}", a, t))
            if rng.random() < 0.9:
                ops.append(("end", tid, sid, root, f"execute_tool {tool}", a, t, t + 7, rng.choice([0, 0, 2])))
        t += 10
        end = rng.random()
        out = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent}
        if rng.random() < 0.3:
            out["gen_ai.output.messages"] = json.dumps([{"role": "assistant", "parts": [
                {"type": "text", "content": rng.choice(["done", "mail me@example.com"])}]}])
        if end < 0.6:
            ops.append(("end", tid, root, None, f"invoke_agent {agent}", out, 1_000, t, 0, True))
            if rng.random() < 0.3:  # a late call after the root ended
                sid = f"{(e + 1) * 1000 + 999:016x}"
                tool = rng.choice(TOOLS)
                a = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool}
                ops.append(("end", tid, sid, root, f"execute_tool {tool}", a, t + 1, t + 2, 0))
        elif end < 0.75:
            ops.append(("tick", t + 10**12))
        elif end < 0.85:
            ops.append(("end_trace", tid))
    ops.append(("close_all", rng.choice([CloseReason.FLUSH, CloseReason.SHUTDOWN, CloseReason.END_OF_INPUT])))
    return ops


def _run(ops: List[Tuple[Any, ...]], shared: bool) -> List[Any]:
    config = load_config(RULES)
    if not shared:
        for t in config.tests:
            for a in t.trace_assertions:
                a.untouched_close_shared = False
    sink = _Recording()
    engine = Engine(config, sink)
    for op in ops:
        kind = op[0]
        if kind == "start":
            engine.start_span(*op[1:])
        elif kind == "end":
            tid, sid, parent, name, attrs, start, end, status = op[1:9]
            local_root = op[9] if len(op) > 9 else False
            engine.end_span(tid, sid, parent, name, attrs, start, end, status, is_local_root=local_root)
        elif kind == "begin":
            engine.begin_trace(op[1], op[2])
        elif kind == "tick":
            engine.tick(op[1])
        elif kind == "end_trace":
            engine.end_trace(op[1])
        else:
            engine.close_all(op[1])
    # The sharing leaves the states of untouched rules unmade (nothing else tells them apart).
    for ep in list(engine.recent.values()):
        assert len(ep.states) == len(ep.plan.slots)
    return sink.out


@pytest.mark.parametrize("seed", range(60))
def test_results_are_those_of_closing_a_fresh_state_every_time(seed: int) -> None:
    ops = _script(random.Random(seed))
    with_sharing = _run(ops, shared=True)
    assert with_sharing == _run(ops, shared=False)
    assert any(o[0] == "closed" for o in with_sharing)


def test_an_untouched_rule_keeps_no_state_after_the_close_and_a_late_call_makes_it() -> None:
    config = load_config(RULES)
    engine = Engine(config, _Recording())
    tid, root = "ab" * 16, "00000000000000aa"
    agent = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"}
    engine.start_span(tid, root, None, "invoke_agent support", agent, 1)
    ep = engine.by_trace[tid]
    outcome = engine.end_span(tid, root, None, "invoke_agent support", agent, 1, 5, is_local_root=True)
    assert outcome is not None and outcome.episode is not None
    shared = [s.index for s in ep.plan.slots if s.assertion.untouched_close_shared]
    assert shared and all(ep.states[i] is NO_STATE for i in shared)
    verdicts = {(r.test_id, r.index): r.verdict.value for r in outcome.episode.results}
    assert verdicts[("must", 0)] == "failed" and verdicts[("must-not", 0)] == "passed"
    # A late call of a forbidden tool reaches the closed episode: the rule's state is made then.
    a = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "delete"}
    late = engine.end_span(tid, "00000000000000bb", root, "execute_tool delete", a, 6, 7)
    assert late is not None and "must-not" in [v.test_id for v in late.violations]
    i = next(s.index for s in ep.plan.slots if s.test.id == "must-not" and s.assertion.index == 0)
    assert ep.states[i] is not NO_STATE


def test_an_episode_result_filled_in_order_is_the_keyword_built_one() -> None:
    from dataclasses import fields

    from spanassert.core.results import EpisodeResult, assertion_result, episode_result
    from spanassert.core.model import Verdict

    results = [assertion_result("t", "trace_must_call_tool", 0, None, Verdict.PASSED, "m", None, "error", False)]
    incomplete = ["root not seen"]
    values: Dict[str, Any] = dict(key="k", trace_id="t", root_span_id="r", root_name="invoke_agent a", agent="a",
                                  service="s", close_reason=CloseReason.IDLE, results=results, call_count=3,
                                  step_count=4, unreadable_calls=1, late=True, incomplete=incomplete, amendment=True)
    assert [f.name for f in fields(EpisodeResult)] == list(values), "episode_result() must fill every field"
    fast = episode_result(*values.values())
    slow = EpisodeResult(**values)
    assert type(fast) is EpisodeResult and fast.to_dict() == slow.to_dict() and repr(fast) == repr(slow)
    assert fast.incomplete == incomplete and fast.incomplete is not incomplete  # a copy, as __post_init__ makes
    assert episode_result(*{**values, "incomplete": None}.values()).incomplete == []


def test_every_rule_that_reads_the_final_output_declares_it(request: Any) -> None:
    """The engine reads the final output off the root's span only for a plan with a rule that
    declares NEED_FINAL_OUTPUT: a rule reading it (or its embeddings) without saying so would see
    none."""
    if ran_pure(request):
        return
    from spanassert.assertions.base import NEED_FINAL_OUTPUT

    readers = set()
    scans_output = load_config("version: 1\ntests:\n  - id: t\n    assertions: "
                               "[{type: trace_no_sensitive_data, detectors: [email], in: [output]}]\n")
    for where, a in _declared() + [("inline", scans_output.tests[0].trace_assertions[0])]:
        for reason in (CloseReason.ROOT_ENDED, CloseReason.IDLE):
            view = _views(True, reason, None)[1]
            a.on_close(a.new_state(), view)
            read = object.__getattribute__(view, "_read")
            if read & {"final_output", "final_output_state", "embeddings"}:
                readers.add(a.type_name)
                assert NEED_FINAL_OUTPUT in a.needs, f"{where} reads the final output without declaring it"
    assert {"trace_no_sensitive_data", "must_contain"} <= readers, readers


class _ReadKeys(Mapping[str, Any]):
    """A span's attributes that record which keys the engine asks for (a Mapping: the engine's
    mapper reads it through Python in either build)."""

    def __init__(self, values: Dict[str, Any]) -> None:
        self._values = values
        self.read: Set[str] = set()

    def __getitem__(self, key: str) -> Any:
        self.read.add(key)
        return self._values[key]

    def get(self, key: str, default: Any = None) -> Any:
        self.read.add(key)
        return self._values.get(key, default)

    def __contains__(self, key: object) -> bool:
        self.read.add(str(key))
        return key in self._values

    def __iter__(self) -> Iterator[str]:
        self.read.add("<every key>")
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)


def test_the_final_output_is_read_off_the_root_only_when_a_rule_needs_it() -> None:
    for rules, wanted in (("[{type: trace_must_call_tool, tool: x}]", False),
                          ("[{type: trace_no_sensitive_data, detectors: [email], in: [output]}]", True)):
        config = load_config(f"version: 1\ntests:\n  - id: t\n    assertions: {rules}\n")
        sink = _Recording()
        engine = Engine(config, sink)
        tid, root = "ab" * 16, "00000000000000aa"
        values = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "a",
                  "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [
                      {"type": "text", "content": "mail me@example.com"}]}])}
        engine.start_span(tid, root, None, "invoke_agent a", _ReadKeys(values), 1)
        at_end = _ReadKeys(values)
        engine.end_span(tid, root, None, "invoke_agent a", at_end, 1, 5, is_local_root=True)
        assert ("gen_ai.output.messages" in at_end.read) is wanted, sorted(at_end.read)
        assert "<every key>" not in at_end.read or wanted, sorted(at_end.read)
        if wanted:
            assert "email" in sink.out[-1][1] and '"failed"' in sink.out[-1][1]


def test_the_worst_verdict_is_the_highest_ranked_one() -> None:
    from spanassert.core.model import VERDICT_RANK, Verdict, worst

    rng = random.Random(5)
    for _ in range(3000):
        verdicts = [rng.choice(list(Verdict)) for _ in range(rng.randint(0, 25))]
        naive = max(verdicts, key=VERDICT_RANK.__getitem__) if verdicts else Verdict.NOT_APPLICABLE
        assert worst(verdicts) is naive, verdicts
