"""The guard core (issue 17): `action: block` tests decided before a tool runs, through the public
surface (`processor.guard()`, `Guard`, `@guard.tool`, `check`, `refusal_span`) with the real SDK, its
in-memory and OTLP JSON Lines exporters and metric reader, and `replay` of the exported file."""
from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from otlp_file_exporter import FileSpanExporter

from spanassert import AssertionSpanProcessor, Decision, Guard, ToolBlocked
from spanassert.config import load_config
from spanassert.core.model import ConfigError
from spanassert.core.results import EpisodeResult
from spanassert.replay import replay

RULES = """\
version: 1
tests:
  - id: no-delete
    action: block
    severity: critical
    assertions:
      - type: trace_must_not_call_tool
        tool: delete_database
  - id: small-refunds
    action: block
    assertions:
      - type: trace_args_valid
        tool: refund
        schema:
          type: object
          properties: {amount: {type: number, maximum: 100}}
  - id: three-searches-at-most
    action: block
    assertions:
      - type: trace_max_tool_calls
        tool: search
        max: 2
  - id: no-email-after-delete
    action: block
    expected:
      type: sequence_valid
      rules:
        - {type: never_after, trigger: close_account, forbidden: send_email}
  - id: alert-only
    assertions:
      - type: trace_must_not_call_tool
        tool: shout
  - id: no-wire-yet
    action: block
    mode: shadow
    assertions:
      - type: trace_must_not_call_tool
        tool: wire_money
"""

AGENT = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "helper"}


class Rig:
    def __init__(self, tmp_path: Path, rules: str = RULES, *, background: bool = False, jsonl: bool = False,
                 **guard_kwargs: Any) -> None:
        path = tmp_path / "rules.yaml"
        path.write_text(rules, encoding="utf-8")
        self.rules_path = str(path)
        self.config = load_config(self.rules_path)
        self.memory = InMemorySpanExporter()
        exporters = [SimpleSpanProcessor(self.memory)]
        self.jsonl = tmp_path / "spans.jsonl"
        if jsonl:
            exporters.append(SimpleSpanProcessor(FileSpanExporter(str(self.jsonl))))
        self.reader = InMemoryMetricReader()
        self.episodes: List[EpisodeResult] = []
        self.processor = AssertionSpanProcessor(
            self.config, export=exporters, meter_provider=MeterProvider(metric_readers=[self.reader]),
            on_episode=self.episodes.append, tick_interval=0, background=background)
        self.provider = TracerProvider()
        self.provider.add_span_processor(self.processor)
        self.tracer = self.provider.get_tracer("agent")
        self.guard = self.processor.guard(tracer_provider=self.provider, **guard_kwargs)

    def tool_span(self, name: str, args: Any, call_id: Optional[str] = None) -> None:
        """The span a framework writes for a call it runs (arguments on the span at its start)."""
        attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name,
                 "gen_ai.tool.call.arguments": json.dumps(args)}
        if call_id is not None:
            attrs["gen_ai.tool.call.id"] = call_id
        with self.tracer.start_as_current_span(f"execute_tool {name}", attributes=attrs):
            pass

    def spans(self, name: str) -> List[ReadableSpan]:
        self.processor.force_flush()
        return [s for s in self.memory.get_finished_spans() if s.name == name]

    def counts(self, metric: str) -> Dict[Tuple[Tuple[str, Any], ...], int]:
        out: Dict[Tuple[Tuple[str, Any], ...], int] = {}
        data = self.reader.get_metrics_data()
        for rm in data.resource_metrics if data else []:
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    if m.name == metric:
                        for p in m.data.data_points:
                            out[tuple(sorted(p.attributes.items()))] = int(p.value)
        return out

    def decisions(self) -> Dict[str, int]:
        out: Dict[str, int] = {}
        for attrs, n in self.counts("spanassert.guard.decisions").items():
            a = dict(attrs)
            key = a["spanassert.guard.decision"] + ("+error" if a["spanassert.guard.error"] else "")
            out[key] = out.get(key, 0) + n
        return out


def _labels(span: ReadableSpan) -> List[Tuple[str, str]]:
    return [(e.attributes["spanassert.test.id"], e.attributes["gen_ai.evaluation.score.label"])
            for e in span.events if e.name == "gen_ai.evaluation.result"]


def test_a_forbidden_call_is_blocked_and_its_body_never_runs(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    ran: List[str] = []

    @rig.guard.tool
    def delete_database(name: str) -> str:
        ran.append(name)
        return "deleted"

    with rig.tracer.start_as_current_span("invoke_agent helper", attributes=AGENT):
        with pytest.raises(ToolBlocked) as blocked:
            delete_database("prod")
    assert ran == []
    d = blocked.value.decision
    assert d.blocked and not d.allowed and d.error is None
    assert [r.test_id for r in d.rules] == ["no-delete"]
    assert str(blocked.value) == d.message
    assert d.message.startswith("spanassert blocked the call of `delete_database`: rule `no-delete`")
    [span] = rig.spans("execute_tool delete_database")
    assert _labels(span) == [("no-delete", "blocked")]  # one event, written once
    assert span.attributes["spanassert.guard.decision"] == "blocked"
    assert json.loads(span.attributes["gen_ai.tool.call.arguments"]) == {"name": "prod"}
    assert rig.decisions() == {"blocked": 1}
    violations = rig.counts("spanassert.violations")
    assert sum(violations.values()) == 1
    [ep] = rig.episodes
    assert ep.call_count == 1
    assert {r.test_id: r.verdict.value for r in ep.results}["no-delete"] == "failed"


def test_on_block_return_gives_the_refusal_to_the_caller(tmp_path: Path) -> None:
    rig = Rig(tmp_path)

    @rig.guard.tool(on_block="return", name="delete_database")
    def drop(name: str) -> str:
        raise AssertionError("must not run")

    with rig.tracer.start_as_current_span("invoke_agent helper", attributes=AGENT):
        answer = drop("prod")
    assert answer.startswith("spanassert blocked the call of `delete_database`")


def test_an_argument_over_its_cap_is_blocked_and_one_under_it_runs(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    ran: List[int] = []
    with rig.tracer.start_as_current_span("invoke_agent helper", attributes=AGENT):
        for i, amount in enumerate((500, 20)):
            d = rig.guard.check("refund", {"amount": amount}, call_id=f"c{i}")
            if d.allowed:
                ran.append(amount)
                rig.tool_span("refund", {"amount": amount}, call_id=f"c{i}")  # the framework's span
            else:
                assert [r.test_id for r in d.rules] == ["small-refunds"]
                assert "maximum" in d.message
                rig.guard.refusal_span("refund", {"amount": amount}, d)
    assert ran == [20]
    spans = rig.spans("execute_tool refund")
    assert [_labels(s) for s in spans] == [[("small-refunds", "blocked")], []]
    [ep] = rig.episodes
    assert ep.call_count == 2
    assert rig.decisions() == {"blocked": 1, "allowed": 1}


def test_the_third_call_over_a_count_cap_is_blocked(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    calls: List[str] = []

    @rig.guard.tool
    def search(q: str) -> str:
        calls.append(q)
        return "found"

    outcomes = []
    with rig.tracer.start_as_current_span("invoke_agent helper", attributes=AGENT):
        for q in ("a", "b", "c", "d", "e"):
            try:
                outcomes.append(search(q))
            except ToolBlocked as exc:
                outcomes.append(exc.decision.rules[0].test_id)
                assert f"is call {3 + len(outcomes) - 3} of calls of `search`; max 2" in exc.decision.message
    # Every call over the cap is refused, not only the first (the rule fails once, and is counted once).
    assert outcomes == ["found", "found"] + ["three-searches-at-most"] * 3
    assert calls == ["a", "b"]
    assert sum(rig.counts("spanassert.violations").values()) == 1
    assert rig.decisions() == {"allowed": 2, "blocked": 3}
    spans = rig.spans("execute_tool search")
    assert [_labels(s) for s in spans] == [[], []] + [[("three-searches-at-most", "blocked")]] * 3
    # Another episode (another trace) starts counting afresh.
    with rig.tracer.start_as_current_span("invoke_agent helper", attributes=AGENT):
        assert search("d") == "found"


def test_the_count_includes_calls_decided_but_not_yet_started(tmp_path: Path) -> None:
    """A framework that asks about parallel calls before running any: the decisions are recorded
    in order, so the third is over the cap though no span has started."""
    rig = Rig(tmp_path)
    with rig.tracer.start_as_current_span("invoke_agent helper", attributes=AGENT):
        ds = [rig.guard.check("search", {"q": q}, call_id=q) for q in "abc"]
        for d, q in zip(ds, "abc"):
            if d.allowed:
                rig.tool_span("search", {"q": q}, call_id=q)
            else:
                rig.guard.refusal_span("search", {"q": q}, d)
    assert [d.allowed for d in ds] == [True, True, False]
    [ep] = rig.episodes
    assert ep.call_count == 3


def test_an_order_rule_blocks_the_call_it_forbids_after_its_trigger(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    with rig.tracer.start_as_current_span("invoke_agent helper", attributes=AGENT):
        assert rig.guard.check("send_email", {"to": "a@b"}).allowed  # before the trigger: fine
        rig.tool_span("send_email", {"to": "a@b"})
        rig.tool_span("close_account", {})  # the framework ran this one without asking
        d = rig.guard.check("send_email", {"to": "a@b"})
        assert d.blocked and [r.test_id for r in d.rules] == ["no-email-after-delete"]
        rig.guard.refusal_span("send_email", {"to": "a@b"}, d)
        again = rig.guard.check("send_email", {"to": "c@d"})  # every later one, not only the first
        assert again.blocked and "forbidden after 'close_account'" in again.message
        rig.guard.refusal_span("send_email", {"to": "c@d"}, again)
        assert rig.guard.check("search", {"q": "x"}).allowed  # the rule forbids only send_email
        rig.tool_span("search", {"q": "x"})
    [ep] = rig.episodes
    assert ep.call_count == 5


def test_alert_tests_never_block(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    with rig.tracer.start_as_current_span("invoke_agent helper", attributes=AGENT):
        d = rig.guard.check("shout", None)
        rig.tool_span("shout", {})
    assert d.allowed and not d.would_block and d.rules == () and d.message == ""
    assert sum(rig.counts("spanassert.violations").values()) == 1  # still alerted, once
    [span] = rig.spans("execute_tool shout")
    assert _labels(span) == [("alert-only", "fail")]


def test_shadow_block_tests_log_what_they_would_block_and_block_nothing(tmp_path: Path, caplog: Any) -> None:
    rig = Rig(tmp_path)
    ran: List[int] = []

    @rig.guard.tool
    def wire_money(amount: int) -> str:
        ran.append(amount)
        return "sent"

    with caplog.at_level(logging.WARNING, logger="spanassert"):
        with rig.tracer.start_as_current_span("invoke_agent helper", attributes=AGENT):
            assert wire_money(10) == "sent"
            d = rig.guard.check("wire_money", {"amount": 5})
            rig.tool_span("wire_money", {"amount": 5})
    assert ran == [10]
    assert d.allowed and d.would_block and [r.test_id for r in d.rules] == ["no-wire-yet"]
    assert d.message.startswith("spanassert would have blocked the call of `wire_money`")
    assert sum("would have blocked the call of `wire_money`" in r.getMessage() for r in caplog.records) == 2
    assert rig.decisions() == {"would_block": 2}
    assert sum(rig.counts("spanassert.shadow_violations").values()) == 2
    assert all(_labels(s) == [] for s in rig.spans("execute_tool wire_money"))  # shadow: no event


@pytest.mark.parametrize("fail_open", [True, False])
def test_an_internal_error_follows_fail_open_and_is_counted(tmp_path: Path, fail_open: bool) -> None:
    rules = RULES.replace("version: 1\n", f"version: 1\nsettings:\n  guard: {{fail_open: {str(fail_open).lower()}}}\n")
    rig = Rig(tmp_path, rules)
    assert rig.guard.fail_open is fail_open

    from faults import install

    install(rig.processor, ("decide_pending",), lambda *a: True)
    with rig.tracer.start_as_current_span("invoke_agent helper", attributes=AGENT):
        d = rig.guard.check("search", {"q": "x"})
    assert d.allowed is fail_open
    assert d.error is not None and "injected" in d.error
    assert (d.message == "") is fail_open
    if not fail_open:
        assert "internal error" in d.message
    assert rig.decisions() == {("allowed+error" if fail_open else "blocked+error"): 1}
    assert rig.counts("spanassert.internal_errors") == {(("spanassert.kind", "guard"),): 1}


def test_a_guard_option_overrides_the_files_fail_open(tmp_path: Path) -> None:
    rig = Rig(tmp_path, fail_open=False)
    assert rig.config.settings.guard_fail_open is True and rig.guard.fail_open is False


def test_the_span_after_a_decision_is_not_counted_twice(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    with rig.tracer.start_as_current_span("invoke_agent helper", attributes=AGENT):
        # Matched by call id, by tool and arguments (spacing and key order aside), and a retry of
        # the same call id gets the same decision without a second record.
        a = rig.guard.check("search", {"q": "a", "n": 1}, call_id="call-1")
        again = rig.guard.check("search", {"q": "a", "n": 1}, call_id="call-1")
        rig.tool_span("search", {"q": "a", "n": 1}, call_id="call-1")
        b = rig.guard.check("search", '{"n": 2, "q": "b"}')
        rig.tool_span("search", {"q": "b", "n": 2})
        c = rig.guard.check("search", {"q": "c"})
        rig.guard.refusal_span("search", {"q": "c"}, c)
    assert (a.allowed, again.allowed, b.allowed, c.allowed) == (True, True, True, False)
    [ep] = rig.episodes
    assert ep.call_count == 3  # three spans, three calls: no decision counted again
    assert sum(rig.counts("spanassert.violations").values()) == 1
    spans = rig.spans("execute_tool search")
    assert [_labels(s) for s in spans] == [[], [], [("three-searches-at-most", "blocked")]]
    cap = [r for r in ep.results if r.test_id == "three-searches-at-most"][0]
    assert cap.verdict.value == "failed" and cap.span_id == format(spans[2].context.span_id, "016x")
    assert "pending" not in cap.message


SCRIPT = (["refund:500", "search", "search", "search", "refund:5"],
          ["delete_database", "search"],
          ["send_email", "close_account", "send_email", "wire_money"])


def _run_script(rig: Rig) -> List[Decision]:
    """Three agent runs through the guard: the decorator for `search`, check() + the framework's
    span (or refusal_span) for the rest."""
    decisions: List[Decision] = []

    def search(q: str) -> str:
        return "ok"

    guarded = rig.guard.tool(search)
    for script in SCRIPT:
        with rig.tracer.start_as_current_span("invoke_agent helper", attributes=AGENT):
            for step in script:
                tool, _, amount = step.partition(":")
                args: Dict[str, Any] = {"amount": int(amount)} if amount else {}
                if tool == "search":
                    try:
                        guarded("q")
                    except ToolBlocked as exc:
                        decisions.append(exc.decision)
                    continue
                d = rig.guard.check(tool, args)
                decisions.append(d)
                if d.allowed:
                    rig.tool_span(tool, args)
                else:
                    rig.guard.refusal_span(tool, args, d)
    return decisions


def test_replay_of_the_exported_file_gives_the_live_verdicts(tmp_path: Path) -> None:
    rig = Rig(tmp_path, jsonl=True, background=True)  # span ends on the worker thread
    _run_script(rig)
    rig.processor.shutdown()
    assert len(rig.episodes) == 3
    live = {ep.key: ep.verdict_signature() for ep in rig.episodes}
    assert any(v == "failed" for sig in live.values() for _, _, v, _ in sig)
    replayed = replay(rig.config, [str(rig.jsonl)])
    assert replayed.issues == []
    assert {ep.key: ep.verdict_signature() for ep in replayed.episodes} == live
    assert [[r.message for r in ep.results] for ep in replayed.episodes] == \
        [[r.message for r in ep.results] for ep in rig.episodes]
    exported = [json.loads(line) for line in rig.jsonl.read_text().splitlines()]
    labels = [a["value"]["stringValue"] for doc in exported for rs in doc["resourceSpans"]
              for ss in rs["scopeSpans"] for s in ss["spans"] for e in s.get("events", [])
              for a in e["attributes"] if a["key"] == "gen_ai.evaluation.score.label"]
    assert labels.count("blocked") == 4  # refund:500, the 3rd search, delete, send_email after close_account
    assert "fail" not in labels


def test_refusal_span_writes_the_tool_span_the_framework_did_not(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    with rig.tracer.start_as_current_span("invoke_agent helper", attributes=AGENT) as agent:
        d = rig.guard.check("delete_database", {"name": "prod"}, call_id="tc-9")
        rig.guard.refusal_span("delete_database", {"name": "prod"}, d)
    [span] = rig.spans("execute_tool delete_database")
    assert span.parent is not None and span.parent.span_id == agent.get_span_context().span_id
    assert span.attributes["gen_ai.operation.name"] == "execute_tool"
    assert span.attributes["gen_ai.tool.call.id"] == "tc-9"
    assert _labels(span) == [("no-delete", "blocked")]
    event = [e for e in span.events if e.name == "gen_ai.evaluation.result"][0]
    assert event.attributes["spanassert.span_id"] == format(span.context.span_id, "016x")
    assert "pending" not in event.attributes["gen_ai.evaluation.explanation"]
    [ep] = rig.episodes
    assert ep.call_count == 1


def test_a_standalone_guard_decides_from_its_own_decisions(tmp_path: Path) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(RULES, encoding="utf-8")
    guard = Guard(str(path))
    provider = TracerProvider()
    with provider.get_tracer("t").start_as_current_span("run"):
        got = [guard.check("search", {"q": q}).allowed for q in "abc"]
    assert got == [True, True, False]
    assert guard.check("delete_database", {}).blocked  # outside any trace: an episode of its own
    assert guard.check("search", {}).allowed


def test_the_guard_never_raises_into_the_application(tmp_path: Path) -> None:
    rig = Rig(tmp_path)

    class Odd:
        def __repr__(self) -> str:
            raise ValueError("no repr")

    with rig.tracer.start_as_current_span("invoke_agent helper", attributes=AGENT):
        hostile = "delete_database"
        assert rig.guard.check(hostile, {"x": Odd()}).blocked  # unserialisable arguments
        assert rig.guard.check("evil\x1b[31m\ntool" * 200, "{not json").allowed
        assert rig.guard.check("refund", b'{"amount": 1000}').blocked
        rig.guard.refusal_span("x", object(), rig.guard.check("x", None))
    # A tool's own exception goes through the decorator unchanged, and its span records it.

    @rig.guard.tool
    def fails() -> None:
        raise KeyError("boom")

    with pytest.raises(KeyError):
        fails()
    [span] = rig.spans("execute_tool fails")
    assert span.status.status_code.name == "ERROR"
    assert rig.counts("spanassert.internal_errors") == {}


def test_refusal_text_is_bounded_and_escaped(tmp_path: Path) -> None:
    rules = RULES + """\
  - id: "evil\\nid"
    action: block
    assertions:
      - type: trace_must_not_call_tool
        tool_pattern: 'x[\\s\\S]*'
"""
    rig = Rig(tmp_path, rules)
    d = rig.guard.check("x" * 5000 + "\x1b[2J\n", None)
    assert d.blocked
    assert len(d.message) <= 1000
    assert "\n" not in d.message and "\x1b" not in d.message
    assert "\\n" in d.message


def test_action_and_fail_open_are_checked_at_load(tmp_path: Path) -> None:
    for bad, where in (("action: blok", "did you mean `block`"),
                       ("action: [block]", "tests[0].action")):
        with pytest.raises(ConfigError) as err:
            load_config(f"version: 1\ntests:\n  - id: a\n    {bad}\n    assertions:\n"
                        "      - {type: trace_must_not_call_tool, tool: x}\n")
        assert where in str(err.value)
    with pytest.raises(ConfigError) as err:
        load_config("version: 1\nsettings: {guard: {fail_opn: false}}\ntests:\n  - id: a\n    assertions:\n"
                    "      - {type: trace_must_not_call_tool, tool: x}\n")
    assert "unknown key `fail_opn` in `settings.guard`" in str(err.value) and "fail_open" in str(err.value)
    with pytest.raises(ConfigError) as err:
        load_config("version: 1\nsettings: {guard: {fail_open: 'no'}}\ntests:\n  - id: a\n    assertions:\n"
                    "      - {type: trace_must_not_call_tool, tool: x}\n")
    assert "settings.guard.fail_open" in str(err.value)
    config = load_config("version: 1\ntests:\n  - id: a\n    assertions:\n"
                         "      - {type: trace_must_not_call_tool, tool: x}\n")
    assert config.tests[0].action == "alert" and config.settings.guard_fail_open is True


def test_decision_is_exported_at_the_top_level() -> None:
    import spanassert

    assert spanassert.Decision is Decision and spanassert.Guard is Guard


def test_replay_baseline_config_shows_the_calls_a_rules_change_would_block(tmp_path: Path) -> None:
    """Traffic recorded under alert-only rules, replayed with the blocking rules against them as
    the baseline: the calls listed as newly blocked are the very calls the live guard refused (or,
    for the shadow test, would have), and the JSON report fits its schema."""
    import jsonschema
    from test_replay_cli import spanassert

    from spanassert.report import load_report_schema

    alert_only = RULES.replace("    action: block\n", "")
    assert "action: block" not in alert_only
    old = tmp_path / "old.yaml"
    old.write_text(alert_only, encoding="utf-8")
    rig = Rig(tmp_path, jsonl=True)
    decisions = _run_script(rig)
    rig.processor.shutdown()
    refused = [d for d in decisions if d.blocked or d.would_block]
    assert len(refused) == 5  # refund:500, the 3rd search, delete_database, send_email, wire_money (shadow)
    spans = {format(s.context.span_id, "016x"): s for s in rig.memory.get_finished_spans()}

    proc = spanassert("--config", rig.rules_path, "--baseline-config", str(old), "--format", "json", str(rig.jsonl))
    doc = json.loads(proc.stdout)
    jsonschema.validate(doc, load_report_schema())
    wb = doc["baseline_diff"]["would_block"]
    assert (wb["baseline"], wb["current"], wb["added"], wb["removed"]) == (0, 5, 5, 0)
    assert sorted((spans[c["span_id"]].attributes["gen_ai.tool.name"], c["test"]) for c in wb["added_calls"]) == \
        sorted((d.tool, d.rules[0].test_id) for d in refused)
    assert all(spans[c["span_id"]].attributes["spanassert.guard.decision"] == "blocked"
               for c in wb["added_calls"] if c["test"] != "no-wire-yet")

    text = spanassert("--config", rig.rules_path, "--baseline-config", str(old), str(rig.jsonl)).stdout
    assert "Would block (action: block): 5 calls (baseline 0); newly blocked 5, no longer blocked 0" in text
    swapped = json.loads(spanassert("--config", str(old), "--baseline-config", rig.rules_path, "--format", "json",
                                    str(rig.jsonl)).stdout)["baseline_diff"]["would_block"]
    assert (swapped["baseline"], swapped["current"], swapped["removed"]) == (5, 0, 5)
    plain = json.loads(spanassert("--config", str(old), "--baseline-config", str(old), "--format", "json",
                                  str(rig.jsonl)).stdout)["baseline_diff"]
    assert "would_block" not in plain  # no test blocks under either file


def test_a_block_test_that_cannot_block_is_warned_about_at_load() -> None:
    config = load_config("version: 1\ntests:\n  - id: answer-ok\n    action: block\n    expected:\n"
                         "      type: must_contain\n      must_contain: ok\n"
                         "  - id: fine\n    action: block\n    assertions:\n"
                         "      - {type: trace_must_not_call_tool, tool: x}\n")
    [d] = [d for d in config.diagnostics if d.code == "W_CFG_BLOCK_NEVER"]
    assert (d.severity, d.path, d.line) == ("warning", "tests[0].action", 4)
    assert "`answer-ok` has `action: block`, but none of its checks (must_contain)" in d.message


def test_concurrent_agents_get_the_decisions_of_their_own_episodes(tmp_path: Path) -> None:
    import threading

    rig = Rig(tmp_path, background=True)
    got: Dict[int, List[bool]] = {}

    def agent(n: int) -> None:
        with rig.tracer.start_as_current_span("invoke_agent helper", attributes=AGENT):
            mine = []
            for i in range(5):
                d = rig.guard.check("search", {"q": f"{n}-{i}"}, call_id=f"{n}-{i}")
                mine.append(d.allowed)
                if d.allowed:
                    rig.tool_span("search", {"q": f"{n}-{i}"}, call_id=f"{n}-{i}")
                else:
                    rig.guard.refusal_span("search", {"q": f"{n}-{i}"}, d)
            got[n] = mine

    threads = [threading.Thread(target=agent, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    rig.processor.force_flush()
    assert got == {n: [True, True, False, False, False] for n in range(6)}
    assert sorted(ep.call_count for ep in rig.episodes) == [5] * 6  # each call recorded once
    assert rig.decisions() == {"allowed": 12, "blocked": 18}
    assert rig.counts("spanassert.internal_errors") == {}


def test_a_spent_token_budget_blocks_the_calls_after_it(tmp_path: Path) -> None:
    rules = """\
version: 1
tests:
  - id: token-budget
    action: block
    assertions:
      - type: trace_max_tokens
        max: 100
"""
    rig = Rig(tmp_path, rules)
    with rig.tracer.start_as_current_span("invoke_agent helper", attributes=AGENT):
        assert rig.guard.check("search", {"q": "a"}).allowed
        rig.tool_span("search", {"q": "a"})
        with rig.tracer.start_as_current_span("chat m", attributes={
                "gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 120, "gen_ai.usage.output_tokens": 30}):
            pass
        d = rig.guard.check("search", {"q": "b"})
        assert d.blocked and "already used 150 total tokens; max 100" in d.message
        rig.guard.refusal_span("search", {"q": "b"}, d)
    assert sum(rig.counts("spanassert.violations").values()) == 1  # the budget failed once
    assert [_labels(s) for s in rig.spans("execute_tool search")] == [[], [("token-budget", "blocked")]]


def test_a_decision_outside_any_trace_is_recorded_once_by_the_span_that_follows(tmp_path: Path) -> None:
    """No current span: the decision is the first call of an empty episode and records nothing; the
    refusal span (a trace of its own) records the call once, and replays to the same verdict."""
    rig = Rig(tmp_path, jsonl=True)
    d = rig.guard.check("delete_database", {"name": "prod"}, call_id="c1")
    assert d.blocked and [r.test_id for r in d.rules] == ["no-delete"]
    rig.guard.refusal_span("delete_database", {"name": "prod"}, d)
    assert rig.guard.check("search", {"q": "a"}).allowed  # nothing was counted for it either
    rig.processor.shutdown()
    assert len(rig.episodes) == 1 and rig.episodes[0].call_count == 1
    assert sum(rig.counts("spanassert.violations").values()) == 1
    [span] = rig.spans("execute_tool delete_database")
    event = [e for e in span.events if e.name == "gen_ai.evaluation.result"]
    assert [e.attributes["gen_ai.evaluation.score.label"] for e in event] == ["blocked"]
    sid = format(span.context.span_id, "016x")
    assert event[0].attributes["spanassert.span_id"] == sid
    assert "pending" not in event[0].attributes["gen_ai.evaluation.explanation"]
    replayed = replay(rig.config, [str(rig.jsonl)])
    assert [ep.verdict_signature() for ep in replayed.episodes] == [ep.verdict_signature() for ep in rig.episodes]


def test_arguments_given_inside_a_tool_span_that_recorded_none_are_judged_now(tmp_path: Path) -> None:
    """A framework that opens its tool span with no arguments and writes them at its end (Google ADK)
    asks inside that span: the argument rules judge the guard's arguments now, the end does not
    report the same rule again, and replay agrees."""
    rig = Rig(tmp_path, jsonl=True)
    ran: List[int] = []
    with rig.tracer.start_as_current_span("invoke_agent helper", attributes=AGENT):
        for i, amount in enumerate((500, 20)):
            with rig.tracer.start_as_current_span("execute_tool refund",
                                                  attributes={"gen_ai.operation.name": "execute_tool"}) as span:
                d = rig.guard.check("refund", {"amount": amount}, call_id=f"c{i}")
                if d.allowed:
                    ran.append(amount)
                span.set_attribute("gen_ai.tool.name", "refund")
                span.set_attribute("gen_ai.tool.call.id", f"c{i}")
                span.set_attribute("gen_ai.tool.call.arguments", json.dumps({"amount": amount}))
    assert ran == [20]
    assert d.allowed
    rig.processor.shutdown()
    assert sum(rig.counts("spanassert.violations").values()) == 1
    spans = rig.spans("execute_tool refund")
    assert [_labels(s) for s in spans] == [[("small-refunds", "blocked")], []]
    [ep] = rig.episodes
    assert ep.call_count == 2
    replayed = replay(rig.config, [str(rig.jsonl)])
    assert [e.verdict_signature() for e in replayed.episodes] == [ep.verdict_signature()]
