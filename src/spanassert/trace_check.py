"""``check()``: rules or understudy-style expectations judged over a :class:`~spanassert.trace.Trace`.

Rules (a :class:`Config`, a rules-file path, YAML text) run through the live engine, over the
trace's spans, so a test sees the verdicts production would give. Expectations (a dict, or
understudy's ``Expectations`` object) become rules where they are about tool calls; the agent and
resolution keys are judged over the whole trace, never passed on evidence that a span not seen
could overturn.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Tuple

from .core.model import SpanRecord, Verdict
from .core.records import record
from .mapping import ROLE_AGENT

if TYPE_CHECKING:
    from .trace import Trace


@record
class CheckItem:
    label: str
    verdict: Verdict
    detail: str
    episode: str
    shadow: bool = False  # a rule in `mode: shadow`: shown, never fails the check

    @property
    def passed(self) -> bool:
        return self.verdict is Verdict.PASSED

    def __repr__(self) -> str:
        return f"CheckItem({self.label!r}, {self.verdict.value})"




class CheckResult:
    """What :func:`check` found. ``passed`` only when every enforced check passed: an inconclusive
    check is not a pass, and neither is a check that never applied. Checks of rules in shadow mode
    are listed but never decide ``passed``. ``incomplete`` lists, per episode key, why its
    evidence was incomplete (e.g. "root not seen")."""

    def __init__(self, items: List[CheckItem], episodes: int,
                 incomplete: Optional[Dict[str, List[str]]] = None,
                 metrics: Optional[Dict[str, CheckMetric]] = None) -> None:
        self.items = items
        self.episodes = episodes
        self.incomplete: Dict[str, List[str]] = dict(incomplete or {})
        # The understudy metrics asked for (`metrics:` in the expectations), by name.
        self.metrics: Dict[str, CheckMetric] = dict(metrics or {})

    @property
    def checks(self) -> List[CheckItem]:
        """understudy's name for :attr:`items`."""
        return self.items

    @property
    def failed_checks(self) -> List[CheckItem]:
        """understudy's name for :attr:`failed`."""
        return self.failed

    def metric(self, name: str) -> Optional[CheckMetric]:
        """A requested metric by name, or None (as understudy's ``CheckResult.metric``)."""
        return self.metrics.get(name)

    @property
    def passed(self) -> bool:
        enforced = [i for i in self.items if not i.shadow]
        return bool(self.items) and all(i.verdict is Verdict.PASSED for i in enforced)

    @property
    def failed(self) -> List[CheckItem]:
        return [i for i in self.items if i.verdict is not Verdict.PASSED and not i.shadow]

    def summary(self) -> str:
        from .report.text import MARKS  # the marks replay prints

        if not self.items:
            return "✗ no episode found: no agent or tool span was recorded"
        lines = [f"{MARKS[i.verdict]} {i.label}{' (shadow)' if i.shadow else ''}: {i.detail or i.verdict.value}"
                 for i in self.items]
        for key, why in self.incomplete.items():
            lines.append(f"! episode {key}: incomplete evidence ({'; '.join(why)})")
        return "\n".join(lines)

    def __bool__(self) -> bool:
        return self.passed

    def __repr__(self) -> str:
        return f"CheckResult(passed={self.passed}, {len(self.items)} checks)"


_MODES = {"exact", "prefix", "contains", "subset"}

# understudy 0.6.0's `Expectations` keys (understudy/models.py), in its order.
EXPECTATION_KEYS = ("required_tools", "forbidden_tools", "required_agents", "forbidden_agents",
                    "required_agent_tools", "expected_resolution", "metrics", "expected_trajectory",
                    "trajectory_match_mode")

# `expected_resolution` values spans can decide. understudy's runner ends a run `completed` when it
# finished on its own (not at the turn limit, not interrupted); spanassert's `Trace.terminal_state`
# is `completed` when every root span ended without error.
_RESOLUTIONS = {"completed"}
_RESOLUTION_REFUSED = {
    "max_turns_reached": "understudy sets it when its simulated conversation hit `max_turns`; spans carry no "
                         "turns and no turn limit",
    "agent_ended": "understudy's adapters set it when the agent escalated or hung up; spans carry no such signal",
    "interrupted": "understudy's adapters set it when a turn ended with tool calls still pending (waiting for a "
                   "human); spans record no pending state",
}

# understudy's built-in metrics (understudy/metrics/builtins.py). `efficiency` is informational there
# (it judges nothing): accepted, with only what spans carry (see _metric_of).
_METRICS_ACCEPTED = {"trajectory_match", "resolution_match", "tool_trajectory", "efficiency"}
_EFFICIENCY_MISSING = ("turn_count, avg_turn_latency_ms and the token totals are not given: spans carry no "
                       "conversation turns (token and time budgets: the trace_max_tokens and trace_max_duration "
                       "assertions in a rules file)")


class CheckMetric:
    """One requested understudy metric (``CheckResult.metrics[name]``), shaped like understudy's
    ``MetricResult``: ``passed`` is True or False for a metric that judges, None for an informational
    one (and, unlike understudy, for a judged one that was inconclusive or had nothing to judge)."""

    __slots__ = ("name", "passed", "value", "detail")

    def __init__(self, name: str, passed: Optional[bool] = None, value: Optional[Dict[str, Any]] = None,
                 detail: str = "") -> None:
        self.name = name
        self.passed = passed
        self.value = value
        self.detail = detail

    def __repr__(self) -> str:
        if self.passed is not None:
            return f"CheckMetric({self.name}: {'passed' if self.passed else 'failed'})"
        return f"CheckMetric({self.name}: {self.value})"


class _Plan:
    """understudy expectations, read: the engine's rules (a config, or None), the checks judged over
    the whole trace (agents, resolution) and the metrics to report."""

    def __init__(self) -> None:
        self.config: Any = None
        self.required_agents: List[str] = []
        self.forbidden_agents: List[str] = []
        self.required_agent_tools: List[Tuple[str, str]] = []
        self.resolution: Optional[str] = None
        self.metrics: List[str] = []


def _as_dict(expectations: Any) -> Dict[str, Any]:
    if isinstance(expectations, Mapping):
        return dict(expectations)
    dump = getattr(expectations, "model_dump", None)  # understudy's `Expectations` (a pydantic model)
    if callable(dump):
        data = dump()
        if isinstance(data, Mapping):
            return dict(data)
    raise TypeError(f"expectations must be a dict of understudy's keys or an `Expectations`, not "
                    f"{type(expectations).__name__}")


def _names(expectations: Mapping[str, Any], key: str) -> List[str]:
    value = expectations.get(key)
    if value is None:
        return []
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"`{key}` must be a list of names; got {value!r:.80}")
    return list(value)


def plan_expectations(expectations: Any) -> _Plan:
    """Read understudy 0.6.0 expectations (a dict of its keys, or its ``Expectations`` model). Raises
    ValueError naming the key and why for what spans cannot check, and for expectations that check
    nothing (understudy passes those)."""
    from .config import load_config
    from .config.yaml_values import safe_dump

    data = _as_dict(expectations)
    unknown = set(data) - set(EXPECTATION_KEYS)
    if unknown:
        raise ValueError(f"unknown expectation key(s) {sorted(unknown)}; understudy's keys are "
                         f"{list(EXPECTATION_KEYS)}")
    plan = _Plan()
    tests: List[Dict[str, Any]] = [
        {"id": f"{key}: {tool}", "assertions": [{"type": kind, "tool": tool}]}
        for key, kind in (("required_tools", "trace_must_call_tool"), ("forbidden_tools", "trace_must_not_call_tool"))
        for tool in _names(data, key)
    ]
    mode = data.get("trajectory_match_mode") or "exact"
    if data.get("expected_trajectory") is not None:
        if mode not in _MODES:
            raise ValueError(f"trajectory_match_mode {mode!r} is not one of {sorted(_MODES)} (understudy scores an "
                             "unknown mode 0; spanassert refuses it)")
        tests.append({"id": f"trajectory ({mode})", "assertions": [
            {"type": "trace_trajectory", "expected": _names(data, "expected_trajectory"), "mode": mode}]})
    plan.required_agents = _names(data, "required_agents")
    plan.forbidden_agents = _names(data, "forbidden_agents")
    agent_tools = data.get("required_agent_tools") or {}
    if not isinstance(agent_tools, Mapping):
        raise ValueError(f"`required_agent_tools` must map agent -> list of tools; got {agent_tools!r:.80}")
    for agent in agent_tools:
        if not isinstance(agent, str):
            raise ValueError(f"`required_agent_tools` keys must be agent names; got {agent!r:.80}")
        plan.required_agent_tools.extend((agent, t) for t in _names(agent_tools, agent))
    resolution = data.get("expected_resolution")
    if resolution:  # understudy checks it only when set and non-empty
        if resolution not in _RESOLUTIONS:
            why = _RESOLUTION_REFUSED.get(str(resolution)) or (
                "it is not a state understudy's runner sets (completed, max_turns_reached, agent_ended, "
                "interrupted) but one an application sets itself, which spans do not carry")
            raise ValueError(f"expected_resolution {resolution!r} cannot be checked from spans: {why}. Only "
                             "`completed` can (every root span ended without error: Trace.terminal_state)")
        plan.resolution = str(resolution)
    plan.metrics = _names(data, "metrics")
    for name in plan.metrics:
        if name not in _METRICS_ACCEPTED:
            raise ValueError(f"unknown metric {name!r}: spanassert computes {sorted(_METRICS_ACCEPTED)} (understudy "
                             "returns an unjudged result for a name it does not know, and custom metrics registered "
                             "with understudy's MetricRegistry run on its own Trace)")
    if tests:
        plan.config = load_config(safe_dump({"version": 1, "tests": tests}, sort_keys=False))
    if not (tests or plan.required_agents or plan.forbidden_agents or plan.required_agent_tools or plan.resolution):
        raise ValueError("expectations check nothing: give required_tools, forbidden_tools, required_agents, "
                         "forbidden_agents, required_agent_tools, expected_resolution or expected_trajectory "
                         "(understudy passes expectations that check nothing)")
    return plan


def expectations_config(expectations: Mapping[str, Any]) -> Any:
    """The rules config for the tool keys of understudy expectations (``required_tools``,
    ``forbidden_tools``, ``expected_trajectory``); None when only the other keys are given."""
    return plan_expectations(expectations).config


def _gaps(trace: Trace) -> List[str]:
    """Why the trace's evidence is incomplete (per trace id: root not seen, parents missing)."""
    from .core.assembly import evidence_gaps

    by_trace: Dict[str, List[SpanRecord]] = {}
    for r in trace.records:
        by_trace.setdefault(r.trace_id, []).append(r)
    if not by_trace:
        return ["no span was recorded"]
    out: List[str] = []
    for tid, recs in by_trace.items():
        out.extend(f"trace {tid}: {g}" if len(by_trace) > 1 else g for g in evidence_gaps(recs)[1])
    return out


def _judge_whole_trace(trace: Trace, plan: _Plan) -> List[CheckItem]:
    """The expectations judged over the whole trace (agents, resolution), never a pass that a span not
    seen could break: a missing agent or call is inconclusive when the evidence is incomplete, and so
    is any agent check when no agent span was recorded at all (the instrumentation may not record
    agents)."""
    gaps = _gaps(trace)
    tids = sorted({r.trace_id for r in trace.records})
    key = tids[0] if len(tids) == 1 else f"{len(tids)} traces"
    agents_seen = any(trace.mapper.role(r.name, r.attributes) == ROLE_AGENT for r in trace.records)
    unknown = ("; ".join(gaps) if gaps else
               "" if agents_seen else "no agent span was recorded (does this instrumentation record agents?)")
    invoked = set(trace.agents_invoked())
    items: List[CheckItem] = []

    def item(label: str, verdict: Verdict, detail: str) -> None:
        items.append(CheckItem(label=label, verdict=verdict, detail=detail, episode=key))

    def seen_or_not(label: str, what: str, seen: bool, wanted: bool, seen_text: str, unseen_text: str) -> None:
        """``what`` was ``seen`` or not; ``wanted`` says whether seeing it is the pass. Not seen is
        decided only on complete evidence."""
        if seen:
            item(label, Verdict.PASSED if wanted else Verdict.FAILED, f"{what} {seen_text}")
        elif unknown:
            item(label, Verdict.INCONCLUSIVE, f"{what} not {seen_text.split(' ')[0].lower()} so far, but {unknown}")
        else:
            item(label, Verdict.FAILED if wanted else Verdict.PASSED, f"{what} {unseen_text}")

    for agent in plan.required_agents:
        seen_or_not(f"required_agents: {agent}", agent, agent in invoked, True, "invoked", "NOT invoked")
    for agent in plan.forbidden_agents:
        seen_or_not(f"forbidden_agents: {agent}", agent, agent in invoked, False, "INVOKED (violation)",
                    "not invoked")
    for agent, tool in plan.required_agent_tools:
        seen_or_not(f"required_agent_tools: {agent}.{tool}", f"{agent}.{tool}", trace.agent_called(agent, tool), True,
                    "called", "NOT called")
    if plan.resolution is not None:
        actual = trace.terminal_state
        detail = f"expected={plan.resolution}, actual={actual}"
        if gaps:
            item("expected_resolution", Verdict.INCONCLUSIVE, f"{detail}, but {'; '.join(gaps)}")
        else:
            item("expected_resolution", Verdict.PASSED if actual == plan.resolution else Verdict.FAILED, detail)
    return items


def _metric_of(name: str, items: List[CheckItem], trace: Trace) -> CheckMetric:
    if name == "efficiency":
        return CheckMetric(name, value={"agent_time_ms": round(trace.duration * 1000)}, detail=_EFFICIENCY_MISSING)
    if name == "tool_trajectory":
        seq = trace.call_sequence()
        return CheckMetric(name, value={"sequence": seq, "unique_tools": sorted(set(seq)),
                                        "total_calls": len(trace.tool_calls)})
    prefix, missing = (("trajectory (", "No expected trajectory specified") if name == "trajectory_match"
                       else ("expected_resolution", "No expected resolution specified"))
    judged = [i for i in items if i.label.startswith(prefix)]
    if not judged:
        return CheckMetric(name, detail=missing)
    worst = judged[0]
    for i in judged:
        if i.verdict is Verdict.FAILED or (i.verdict is not Verdict.PASSED and worst.verdict is Verdict.PASSED):
            worst = i
    passed = {Verdict.PASSED: True, Verdict.FAILED: False}.get(worst.verdict)
    return CheckMetric(name, passed=passed, detail=worst.detail or worst.verdict.value)


def check(trace: Trace, rules_or_expectations: Any) -> CheckResult:
    """Run rules (a :class:`Config`, a rules-file path, YAML text) or understudy-style expectations
    (a dict) over ``trace`` with the live engine."""
    from .config.model import Config
    from .replay.driver import replay_records

    plan: Optional[_Plan] = None
    if isinstance(rules_or_expectations, Config):
        config = rules_or_expectations
    elif isinstance(rules_or_expectations, Mapping) or hasattr(rules_or_expectations, "model_dump"):
        plan = plan_expectations(rules_or_expectations)
        config = plan.config
    else:
        from .config import load_config

        config = load_config(rules_or_expectations)
    items: List[CheckItem] = []
    incomplete: Dict[str, List[str]] = {}
    episodes = 0
    if config is not None:
        report = replay_records(config, trace.records, settle_spans=len(trace.records) + 1)
        for ep in report.episodes:
            for r in ep.results:
                label = r.test_id if r.name is None else f"{r.test_id} / {r.name}"
                items.append(CheckItem(label=label, verdict=r.verdict, detail=r.message, episode=ep.key,
                                       shadow=r.shadow))
        incomplete = {ep.key: list(ep.incomplete) for ep in report.episodes if ep.incomplete}
        episodes = len(report.episodes)
        if report.internal_errors:
            # What the error kept from being judged may be a whole trace (no episode opened): no pass.
            items.append(CheckItem(label="spanassert internal error", verdict=Verdict.INCONCLUSIVE,
                                   detail=f"{report.internal_errors} internal error(s) while judging (the first: "
                                          f"{report.internal_error_first}); what each kept from being judged is "
                                          "inconclusive", episode=""))
    if plan is None:
        return CheckResult(items, episodes, incomplete)
    items.extend(_judge_whole_trace(trace, plan))
    if config is None:
        episodes = len({r.trace_id for r in trace.records})
    metrics = {name: _metric_of(name, items, trace) for name in plan.metrics}
    return CheckResult(items, episodes, incomplete, metrics)
