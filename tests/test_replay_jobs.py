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


@pytest.mark.parametrize("how", ["raises", "dies"])
def test_a_worker_that_fails_or_dies_fails_the_run_and_leaves_no_process_behind(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    """Workers are forked directly and send their results through a pipe: a worker's exception
    reaches the caller with the worker's traceback, a worker that ends without writing its results
    is named as such (never a report without its shard), and no worker is left running."""
    import os

    from spanassert.replay import parallel

    text, settle = make_input(5)
    path = tmp_path / "in.jsonl"
    path.write_text(text)
    real = parallel._run_shard
    parent = os.getpid()

    def run_shard(shard: int, pack: bool) -> Any:
        if shard == 2 and os.getpid() != parent:
            if how == "dies":
                os._exit(3)
            raise ValueError("shard two broke")
        return real(shard, pack)

    monkeypatch.setattr(parallel, "_run_shard", run_shard)
    with pytest.raises(parallel.WorkerFailed) as caught:
        replay_paths_jobs([load_config(RULES)], [path], 3, settle_spans=settle)
    if how == "raises":
        assert "shard two broke" in str(caught.value) and "ValueError" in str(caught.value)
    else:
        assert "ended without its results" in str(caught.value)
    with pytest.raises(ChildProcessError):
        os.waitpid(-1, os.WNOHANG)  # every worker was reaped
    monkeypatch.setattr(parallel, "_run_shard", real)
    one, three = _reports(tmp_path, text, settle)  # and the next run is whole
    assert one == three


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
    # Equal results travel as one tuple (pickle writes it once), and come back as records of their own.
    twins = [EpisodeResult(key=f"k{i}", trace_id=None, root_span_id=None, root_name=None, agent=None, service=None,
                           close_reason=CloseReason.ROOT_ENDED, results=[results[1], results[1]], call_count=0,
                           step_count=0, unreadable_calls=0) for i in range(2)]
    packed = parallel._pack_episodes(twins)
    assert len({id(t) for _, rs in packed for t in rs}) == 1
    back = parallel._unpack_episodes(pickle.loads(pickle.dumps(packed)))
    assert len({id(r) for ep in back for r in ep.results}) == 4
    for a, b in zip(twins, back):
        same(a, b)


# -- the shard route: a process decodes only its own spans of a JSON Lines line ----------------------
#
# The claim (src/spanassert/otlp/json_typed.py, records_for_shard): when no shard's reader set
# `diverged` on a file, each shard's batches are exactly the batches of the whole decode with None
# for other shards' spans (same lengths, same None places, equal records), and the input issues are
# the same; when one did, `replay --jobs` runs again with each line decoded whole. Inputs below mix
# clean lines with lines in odd or hostile shapes, in every span of any shard.

def _odd(span: Dict[str, Any], rng: random.Random, warp: bool) -> Any:
    """One span made odd in one of many ways (some still decode alike, some are refused). ``warp``:
    also start times that read as valid but far off (5, "1_000": the 1970s)."""
    s = dict(span)
    if not isinstance(s.get("traceId"), str):
        return s  # make_input's bad span stays as it is
    kind = rng.randrange(16)
    if kind == 0:
        s["traceId"] = s["traceId"].upper()
    elif kind == 1:
        s = {"spanId": s.pop("spanId"), **s}  # traceId not first
    elif kind == 2:
        s["attributes"] = s["attributes"] + [{"key": "two", "value": {"stringValue": "a", "intValue": "1"}}]
    elif kind == 3:
        s["attributes"] = s["attributes"] + [{"key": "none"}]
    elif kind == 4:
        s["attributes"] = s["attributes"] + [{"key": "n", "value": {"intValue": rng.choice(["12", "x", "1_0", 7])}}]
    elif kind == 5:
        s["spanId"] = rng.choice(["zz", "0" * 16, s["spanId"].upper(), ""])
    elif kind == 6:
        s["parentSpanId"] = rng.choice(["0" * 16, "abc", "A" * 16, ""])
    elif kind == 7:
        s["startTimeUnixNano"] = rng.choice(["abc", 5, "1_000", " 7"] if warp else ["abc", "-"])
    elif kind == 8:
        s["unknownField"] = 1
    elif kind == 9:
        return 7  # not an object
    elif kind == 10:
        s["events"] = [{"name": "e", "timeUnixNano": rng.choice(["5", "x"]),
                        "attributes": [{"key": "k", "value": {"boolValue": True}}]}]
    elif kind == 11:
        s["attributes"] = s["attributes"] + [{"key": "l", "value": {"kvlistValue": {"values": [
            {"key": "a", "value": rng.choice([{"doubleValue": 1.5}, {"arrayValue": {}}, {}])}]}}}]
    elif kind == 12:
        s["traceId"] = "0" * 32
    elif kind == 13:
        s["name"] = 5  # wrong type
    elif kind == 14:
        s["status"] = {"code": 2, "message": "boom"}
    else:
        s["traceId"] = s["traceId"][:-1]  # 31 digits
    return s


_TWIN_TRACE = '{"traceId":"%s","traceId":"%s",'


def make_odd_input(seed: int, warp: bool = True) -> str:
    """make_input's traces, in compact JSON (as the Collector writes it) or not, with odd spans."""
    rng = random.Random(seed)
    text, _ = make_input(seed)
    out = []
    for line in text.splitlines():
        try:
            doc = json.loads(line)
            spans = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
        except (ValueError, KeyError, TypeError):
            out.append(line)
            continue
        if rng.random() < 0.3:
            i = rng.randrange(len(spans))
            spans[i] = _odd(spans[i], rng, warp)
        if rng.random() < 0.1 and "resource" in doc["resourceSpans"][0]:
            doc["resourceSpans"][0]["resource"]["attributes"].append(rng.choice([{"key": "r", "value": {}},
                                                                                 {"key": "r"}]))
        compact = rng.random() < 0.8
        s = json.dumps(doc, separators=(",", ":") if compact else None)
        if compact and rng.random() < 0.05:  # a second traceId key in one span: the first bytes lie
            m = re.search(r'\{"traceId":"([0-9a-f]{32})",', s)
            if m:
                s = s.replace(m.group(0), _TWIN_TRACE % (m.group(1), f"{rng.getrandbits(128):032x}"), 1)
        out.append(s)
    return "\n".join(out) + "\n"


def _fields(r: Any) -> Any:
    if r is None:
        return None
    return (r.trace_id, r.span_id, r.parent_span_id, r.name, r.kind, r.start_ns, r.end_ns, r.attributes,
            r.status_code, r.status_message, [(e.name, e.timestamp, e.attributes) for e in r.events], r.resource,
            r.scope, r.source)


def test_a_shard_reads_its_spans_as_the_whole_decode_does_unless_it_says_otherwise(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from spanassert.otlp.reader import read_span_batches
    from spanassert.otlp.shard import Shard, ShardBatch

    monkeypatch.setenv("SPANASSERT_TYPED_JSON", "always")
    routed = diverged = odd_agreed = 0
    for seed in range(150):
        path = tmp_path / f"in{seed}.jsonl"
        path.write_text(make_odd_input(seed))
        whole_issues: List[Any] = []
        whole = list(read_span_batches([path], on_issue=whole_issues.append))
        shards = []
        for i in range(3):
            share = Shard(i, 3)
            issues: List[Any] = []
            got = list(read_span_batches([path], on_issue=issues.append, shard=share))
            shards.append((share, got, issues))
        if any(share.diverged for share, _, _ in shards):
            diverged += 1
            continue
        for share, got, issues in shards:
            want = [Shard(share.index, 3).only(b) for b in whole]
            assert [[_fields(r) for r in b] for b in got] == [[_fields(r) for r in b] for b in want]
            assert [i.format() for i in issues] == [i.format() for i in whole_issues]
            routed += sum(type(b) is ShardBatch for b in got)
        odd_agreed += bool(whole_issues)
    # Not vacuous: lines were taken by the route, files made a shard diverge, and files with input
    # issues (odd lines taken the usual way by every process) still agreed.
    assert routed > 100 and diverged > 10 and odd_agreed > 5, (routed, diverged, odd_agreed)


def test_a_shard_takes_the_route_from_the_first_line_of_a_small_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One process reads the first MiB of JSON Lines the careful way (msgspec's import is not paid
    for a small file); a shard does not: read the careful way, each process would decode every span
    of those lines, where its share is a third or a half of them (the parent imports the typed
    decoder before forking). So the property above (no SPANASSERT_TYPED_JSON) runs through the route."""
    from spanassert.otlp.reader import read_span_batches
    from spanassert.otlp.shard import Shard, ShardBatch

    monkeypatch.delenv("SPANASSERT_TYPED_JSON", raising=False)
    path = tmp_path / "in.jsonl"
    path.write_text(make_input(3)[0])
    assert path.stat().st_size < 1 << 20
    kinds = {type(b) for i in range(3) for b in read_span_batches([path], shard=Shard(i, 3))}
    assert kinds == {ShardBatch}, kinds
    assert {type(b) for b in read_span_batches([path])} == {list}  # one process: the careful way


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(st.integers(0, 2**32))
def test_jobs_3_on_odd_lines_through_the_shard_route_gives_the_report_of_one_process(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    monkeypatch.setenv("SPANASSERT_TYPED_JSON", "always")
    _, settle = make_input(seed)
    # Without far-off start times: an episode whose span times lie far behind the other traces'
    # (a root read as starting in 1970) can be closed on its idle timeout by the span-time clock
    # the other traces move, all of them in one process, only its shard's with --jobs (a limit of
    # --jobs from before the shard route: seed 52404 differs at main too; docs/performance.md).
    one, three = _reports(tmp_path, make_odd_input(seed, warp=False), settle)
    assert one == three
