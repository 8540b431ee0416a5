"""`spanassert replay --jobs N`: the same verdicts, violations and reports as one process.

The property: on generated inputs (traces of a few agents, spans in any order across lines, traces
cut into pieces that arrive late, missing roots, bad lines, a short settle window so traces are
released at many points), `--jobs 1` and `--jobs 3` give the same JSON report and text report.
Then the CLI itself: the same stdout, exit code and JUnit/SARIF/HTML files; and the refusals."""
from __future__ import annotations

import json
import random
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spanassert import load_config
from spanassert.replay.driver import replay_paths
from spanassert.replay.parallel import replay_paths_jobs, shard_of
from spanassert.report import render_text, report_document

RULES = """\
version: 1
tests:
  - id: no-delete
    severity: critical
    assertions: [{type: trace_must_not_call_tool, tool: delete_database}]
  - id: must-search
    assertions: [{type: trace_must_call_tool, tool: search}]
  - id: cap
    assertions: [{type: trace_max_tool_calls, max: 3}]
  - id: order
    assertions: [{type: trace_tool_sequence, sequence: [search, lookup], allow_other_tools: true}]
  - id: loops
    assertions: [{type: trace_no_repeat, max: 1}]
  - id: ends
    assertions: [{type: trace_final_tool, tool: lookup}]
"""
TOOLS = ["search", "lookup", "delete_database", "refund"]


def _attr(k: str, v: str) -> Dict[str, Any]:
    return {"key": k, "value": {"stringValue": v}}


def _line(spans: List[Dict[str, Any]]) -> str:
    return json.dumps({"resourceSpans": [{"resource": {"attributes": [_attr("service.name", "agent")]},
                                          "scopeSpans": [{"scope": {"name": "t"}, "spans": spans}]}]})


def make_input(seed: int) -> "tuple[str, int]":
    """A generated input (JSON Lines text) and a settle window (spans)."""
    rng = random.Random(seed)
    n_traces = rng.randint(1, 12)
    spans: List[Dict[str, Any]] = []
    t0 = 1_764_500_000_000_000_000
    for e in range(n_traces):
        trace = f"{rng.getrandbits(128) or 1:032x}"
        root = f"{rng.getrandbits(64) or 1:016x}"
        calls = [rng.choice(TOOLS) for _ in range(rng.randint(0, 5))]
        start = t0 + e * 1_000_000_000 + rng.randrange(500_000_000)
        for i, tool in enumerate(calls):
            s = start + (i + 1) * 1_000_000
            spans.append({"traceId": trace, "spanId": f"{rng.getrandbits(64) or 1:016x}", "parentSpanId": root,
                          "name": f"execute_tool {tool}", "kind": 1, "startTimeUnixNano": str(s),
                          "endTimeUnixNano": str(s + 500_000),
                          "attributes": [_attr("gen_ai.operation.name", "execute_tool"), _attr("gen_ai.tool.name", tool),
                                         _attr("gen_ai.tool.call.arguments", json.dumps({"q": rng.randrange(2)}))]})
        if rng.random() < 0.8 or not calls:  # the root may be missing: an incomplete episode
            spans.append({"traceId": trace, "spanId": root, "name": "invoke_agent a", "kind": 1,
                          "startTimeUnixNano": str(start), "endTimeUnixNano": str(start + 100_000_000),
                          "attributes": [_attr("gen_ai.operation.name", "invoke_agent"), _attr("gen_ai.agent.name", "a")]})
    # Mostly in end order (as exporters write), with some spans moved far away (late pieces).
    spans.sort(key=lambda s: int(s["endTimeUnixNano"]))
    for _ in range(rng.randint(0, 4)):
        if len(spans) > 1:
            spans.insert(rng.randrange(len(spans)), spans.pop(rng.randrange(len(spans))))
    lines = []
    i = 0
    while i < len(spans):
        k = rng.randint(1, 4)
        lines.append(_line(spans[i:i + k]))
        i += k
    if rng.random() < 0.2:  # a bad span: an input issue, and every pass becomes inconclusive
        lines.insert(rng.randrange(len(lines) + 1), '{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": 7}]}]}]}')
    return "\n".join(lines) + "\n", rng.randint(1, 8)


def _reports(tmp: Path, text: str, settle: int) -> "tuple[str, str]":
    path = tmp / "in.jsonl"
    path.write_text(text)
    config = load_config(RULES)
    out = []
    for reps in (replay_paths([config], [path], settle_spans=settle),
                 replay_paths_jobs([config], [path], 3, settle_spans=settle)):
        rep = reps[0]
        doc = report_document(rep, exit_code=rep.exit_code(), fail_on_inconclusive=False, skip_invalid=False,
                              allow_empty=False, baseline=None)
        out.append(json.dumps(doc, indent=1) + "\n" + render_text(rep, quiet=False, baseline=None))
    return out[0], out[1]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(st.integers(0, 2**32))
def test_jobs_3_gives_the_report_of_one_process(tmp_path: Path, seed: int) -> None:
    text, settle = make_input(seed)
    one, three = _reports(tmp_path, text, settle)
    assert one == three


def test_the_generated_inputs_reach_every_verdict_and_late_spans(tmp_path: Path) -> None:
    """The property above is only as good as its inputs: a fixed set of them holds failures,
    passes, inconclusive results, late spans, input issues and traces in every shard."""
    seen = {"failed": 0, "passed": 0, "inconclusive": 0, "late": 0, "issues": 0}
    shards = set()
    for seed in range(40):
        text, settle = make_input(seed)
        path = tmp_path / f"in{seed}.jsonl"
        path.write_text(text)
        rep = replay_paths([load_config(RULES)], [path], settle_spans=settle)[0]
        for v, n in rep.counts().items():
            if v in seen:
                seen[v] += n
        seen["late"] += rep.late_spans
        seen["issues"] += len(rep.issues)
        shards.update(shard_of(ep.trace_id, 3) for ep in rep.episodes if ep.trace_id)
    assert all(seen.values()), seen
    assert shards == {0, 1, 2}


ROOT = Path(__file__).resolve().parents[1]


def _cli(*args: str) -> "subprocess.CompletedProcess[str]":
    return subprocess.run([sys.executable, "-m", "spanassert", "replay", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)


def test_the_cli_gives_the_same_output_and_files_with_jobs(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES)
    data = tmp_path / "in.jsonl"
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from data import write_episodes_jsonl
    finally:
        sys.path.pop(0)
    write_episodes_jsonl(str(data), 300, per_line=37)
    runs = []
    for jobs in ("1", "3"):
        d = tmp_path / jobs
        d.mkdir()
        p = _cli("--config", str(rules), str(data), "--jobs", jobs, "--junit", str(d / "r.xml"),
                 "--sarif", str(d / "r.sarif"), "--html", str(d / "r.html"), "--format", "json")
        # The page says when it was written (to the second): the one difference allowed.
        html = re.sub(r'"generated":"[^"]*"', '"generated":""', (d / "r.html").read_text())
        runs.append((p.returncode, p.stdout, p.stderr, (d / "r.xml").read_text(), (d / "r.sarif").read_text(), html))
    assert runs[0][0] == 1  # every 10th episode calls delete_database
    assert runs[0] == runs[1]


def test_conversation_keyed_episodes_and_stdin_are_refused_with_jobs(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES + "episodes:\n  key: gen_ai.conversation.id\n")
    data = ROOT / "examples" / "recorded" / "support-agent.jsonl"
    p = _cli("--config", str(rules), str(data), "--jobs", "2")
    assert p.returncode == 2
    assert "--jobs 2 needs trace-keyed episodes" in p.stderr and "gen_ai.conversation.id" in p.stderr
    assert "Run without --jobs" in p.stderr
    plain = tmp_path / "plain.yaml"
    plain.write_text(RULES)
    p = subprocess.run([sys.executable, "-m", "spanassert", "replay", "--config", str(plain), "-", "--jobs", "2"],
                       cwd=ROOT, input=data.read_text(), capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "stdin (-) can be read only once" in p.stderr
    p = _cli("--config", str(plain), str(data), "--jobs", "0")
    assert p.returncode == 2


def test_a_shards_results_reach_the_parent_field_for_field() -> None:
    """Workers send episode results and violations as tuples of their fields (cheaper to pickle than
    the records): the parent's records equal the worker's in every field, set or at its default."""
    import inspect
    import pickle
    from dataclasses import fields

    from spanassert.core.model import CloseReason, Verdict
    from spanassert.core.results import AssertionResult, EpisodeResult, Violation, assertion_result
    from spanassert.replay import parallel

    assert [f.name for f in fields(AssertionResult)] == list(inspect.signature(assertion_result).parameters)
    results = [assertion_result("t1", "trace_no_repeat", 2, "n", Verdict.FAILED, "m1", "s1", "critical", True),
               assertion_result("t2", "trace_must_call_tool", 0, None, Verdict.PASSED, "m2", None, "error", False)]
    episodes = [EpisodeResult(key="k", trace_id="t", root_span_id="r", root_name="invoke_agent a", agent="a",
                              service="svc", close_reason=CloseReason.END_OF_INPUT, results=results, call_count=3,
                              step_count=1, unreadable_calls=2, late=True, incomplete=["root not seen"],
                              amendment=True),
                EpisodeResult(key="k2", trace_id=None, root_span_id=None, root_name=None, agent=None, service=None,
                              close_reason=CloseReason.ROOT_ENDED, results=[], call_count=0, step_count=0,
                              unreadable_calls=0)]
    violations = [Violation(test_id="t1", assertion_type="trace_no_repeat", assertion_index=2, assertion_name="n",
                            severity="critical", shadow=True, message="m", span_id="s", trace_id="t", episode_key="k",
                            tool="x", call_index=4, late=True, at_close=True, agent="a", blocked=True, at_start=True),
                  Violation(test_id="t2", assertion_type="trace_max_tool_calls", assertion_index=0,
                            assertion_name=None, severity="error", shadow=False, message="m2", span_id=None,
                            trace_id=None, episode_key="k2")]
    eps = parallel._unpack_episodes(pickle.loads(pickle.dumps(parallel._pack_episodes(episodes))))
    vs = parallel._unpack_violations(pickle.loads(pickle.dumps(parallel._pack_violations(violations))))

    def same(a: Any, b: Any) -> None:
        assert type(a) is type(b)
        for f in fields(a):
            x, y = getattr(a, f.name), getattr(b, f.name)
            if f.name == "results":
                assert len(x) == len(y)
                for rx, ry in zip(x, y):
                    same(rx, ry)
            else:
                assert x == y and type(x) is type(y), f.name

    assert len(eps) == 2 and len(vs) == 2
    for a, b in zip(episodes + violations, eps + vs):
        same(a, b)
    assert eps[0].verdict is episodes[0].verdict and eps[0].results[0].verdict is Verdict.FAILED
