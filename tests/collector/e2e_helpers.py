"""Parts of the end-to-end scale-out tests: `spanassert serve` subprocesses, an agent process that
exports GenAI episodes with the real OTel SDK, and the comparisons between reports.

Every process here has a bounded start and stop; ``kill()`` is safe to call at any time, so
fixtures can always clean up, also after a failed assertion.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Set, Tuple

SPANASSERT_CLI = [sys.executable, "-m", "spanassert.cli"]

SERVE_START_TIMEOUT = 30.0
SERVE_STOP_TIMEOUT = 30.0
AGENT_TIMEOUT = 60.0
REPLAY_TIMEOUT = 60.0


def _clean_env(extra: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """The parent's environment without settings that would redirect our processes' telemetry."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "SPANASSERT_"))}
    env.update(extra or {})
    return env


# -- spanassert serve ------------------------------------------------------------------------------


class ServeProcess:
    """One ``spanassert serve`` on free loopback ports, with its ``--report-json`` in ``workdir``.
    Starting returns at once (start several side by side); call :meth:`wait_ready` before use."""

    def __init__(self, workdir: Path, rules: Path, *extra: str, env: Optional[Dict[str, str]] = None) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.workdir = workdir
        self.report_path = workdir / "report.json"
        self.stderr_path = workdir / "serve.stderr"
        self.grpc = ""  # host:port, as printed by serve
        self.http = ""
        self._stdout: List[str] = []
        self._addresses = threading.Event()
        self._stderr = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen(
            SPANASSERT_CLI + ["serve", "--config", str(rules), "--grpc-endpoint", "127.0.0.1:0",
                              "--http-endpoint", "127.0.0.1:0", "--report-json", str(self.report_path), *extra],
            stdout=subprocess.PIPE, stderr=self._stderr, env=_clean_env(env), cwd=str(workdir),
        )
        # A reader thread, so waiting for the addresses has a deadline even if serve prints nothing.
        self._reader = threading.Thread(target=self._read_stdout, daemon=True)
        self._reader.start()

    def wait_ready(self, timeout: float = SERVE_START_TIMEOUT) -> None:
        """Until serve printed both listening addresses (it binds before printing)."""
        if not self._addresses.wait(timeout) or not (self.grpc and self.http):
            self.kill()
            raise AssertionError(f"spanassert serve printed no listening addresses within {timeout:.0f}s "
                                 f"(exit {self.proc.returncode}):\n{self.stderr()}")

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            line = raw.decode("utf-8", "replace")
            self._stdout.append(line)
            if "OTLP/gRPC listening on " in line:
                self.grpc = line.rsplit(" ", 1)[1].strip()
            elif "OTLP/HTTP listening on " in line:
                self.http = line.rsplit(" ", 1)[1].strip()
            if self.grpc and self.http:
                self._addresses.set()
        self._addresses.set()  # exited: stop waiting

    def stdout(self) -> str:
        return "".join(self._stdout)

    def stderr(self) -> str:
        try:
            return self.stderr_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    def health(self) -> Dict[str, Any]:
        with urllib.request.urlopen(f"http://{self.http}/health", timeout=5) as resp:
            return dict(json.loads(resp.read()))

    def stop(self, timeout: float = SERVE_STOP_TIMEOUT) -> Dict[str, Any]:
        """SIGTERM (serve decides every open episode and writes its report); returns the report."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"spanassert serve ignored SIGTERM for {timeout:.0f}s:\n{self.stderr()}") from None
        self._reader.join(timeout=5)
        self._stderr.close()
        assert code == 0, f"spanassert serve exited with {code}:\n{self.stderr()}"
        assert self.report_path.exists(), f"spanassert serve wrote no --report-json:\n{self.stderr()}"
        return dict(json.loads(self.report_path.read_text(encoding="utf-8")))

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        if not self._stderr.closed:
            self._stderr.close()


def wait_until_idle(instances: Iterable[ServeProcess], spans: int, timeout: float) -> None:
    """Wait until the instances together accepted ``spans`` spans and hold no open episode or
    buffered trace: attribute-keyed episodes have then closed on their idle timeout (decidable),
    not at shutdown (liveness rules inconclusive)."""
    instances = list(instances)
    deadline = time.monotonic() + timeout
    while True:
        health = [s.health() for s in instances]
        received = sum(h["spans_received"] for h in health)
        if received >= spans and all(h["open_episodes"] == 0 and h["buffered_traces"] == 0 for h in health):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"serve instances not idle after {timeout:.0f}s "
                                 f"({received} of {spans} spans received): {health}")
        time.sleep(0.2)


# -- the agent process -----------------------------------------------------------------------------

# Tools per episode, by pattern. Together they give every rule below a pass and a failure.
EPISODE_PATTERNS: List[List[str]] = [
    ["search", "book"],  # everything passes
    ["search", "delete_database", "book"],  # forbidden tool
    ["book", "search"],  # booked before searching: sequence fails
    ["book"],  # no search: must_call and sequence fail at close
    ["search", "lookup_price", "book"],  # another tool in between: allowed
]

RULES = """\
version: 1
suite: scale-out
tests:
  - id: never-delete
    severity: critical
    assertions:
      - type: trace_must_not_call_tool
        tool: delete_database
  - id: search-is-required
    assertions:
      - type: trace_must_call_tool
        tool: search
  - id: search-before-book
    assertions:
      - type: trace_tool_sequence
        sequence: [search, book]
        allow_other_tools: true
"""

# Conversation episodes: a few turns (traces) each; which turn calls which tools decides the
# conversation's verdicts, so no single trace holds the whole story.
CONVERSATION_TURNS: List[List[List[str]]] = [
    [["search"], [], ["book"]],  # search in turn 1, book in turn 3: passes
    [["book"], ["search"], []],  # book before search, across traces: sequence fails
    [[], ["lookup_price"], ["book"]],  # never searched: must_call fails
    [["search"], ["delete_database"], ["book"]],  # forbidden tool in the middle turn
]



def conversation_rules(idle_seconds: float) -> str:
    """The same rules, with episodes keyed on the conversation instead of the trace."""
    episodes = f"episodes:\n  key: gen_ai.conversation.id\n  idle_timeout: {idle_seconds:g}s\n"
    return RULES.replace("tests:\n", episodes + "tests:\n", 1)

AGENT_SCRIPT = r'''
"""A stand-in GenAI agent: emits agent episodes through the OTel SDK's OTLP/gRPC exporter and
writes every span to an OTLP JSON Lines file as well (the ground truth)."""
import json
import sys
import time

from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import (BatchSpanProcessor, SimpleSpanProcessor, SpanExporter,
                                            SpanExportResult)

plan = json.loads(sys.argv[1])


class Counting(SpanExporter):
    """Counts what the OTLP exporter really delivered: a lost batch must fail the run, not shrink it."""

    def __init__(self, inner):
        self.inner, self.ok, self.failed = inner, 0, 0

    def export(self, spans):
        result = self.inner.export(spans)
        if result is SpanExportResult.SUCCESS:
            self.ok += len(spans)
        else:
            self.failed += len(spans)
        return result

    def shutdown(self):
        self.inner.shutdown()

    def force_flush(self, timeout_millis=30000):
        return self.inner.force_flush(timeout_millis)


otlp = Counting(OTLPSpanExporter(endpoint=plan["endpoint"], insecure=True, timeout=10))
provider = TracerProvider(resource=Resource.create({"service.name": "scale-out-agent"}))
# Small, frequent batches whose size divides no episode cycle: many traces reach the Collector
# split over two requests, each routed on its own.
provider.add_span_processor(BatchSpanProcessor(otlp, schedule_delay_millis=50, max_export_batch_size=7))
from spanassert.otlp.writers import file_span_exporter  # OTel's FileSpanExporter where installed

provider.add_span_processor(SimpleSpanProcessor(file_span_exporter(plan["ground_truth"])))
tracer = provider.get_tracer("scale-out-agent")
spans = 0


def turn(tools, n, conversation=None):
    """One trace: an invoke_agent root and one execute_tool span per tool."""
    global spans
    common = {"gen_ai.conversation.id": conversation} if conversation else {}
    with tracer.start_as_current_span("invoke_agent planner", attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "planner", **common}) as root:
        for i, tool in enumerate(tools):
            with tracer.start_as_current_span(f"execute_tool {tool}", attributes={
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool,
                    "gen_ai.tool.call.arguments": json.dumps({"episode": n, "step": i}), **common}):
                spans += 1
        spans += 1
        return format(root.get_span_context().trace_id, "032x")


traces = []
if plan["mode"] == "episodes":
    patterns = plan["patterns"]
    for n in range(plan["count"]):
        traces.append(turn(patterns[n % len(patterns)], n))
        time.sleep(0.005)  # spread the episodes over several export batches
else:
    conversations = plan["conversations"]
    # Turn by turn across conversations, as concurrent users would interleave; a user's next
    # turn comes a while after the previous answer (plan["turn_gap"] seconds).
    for t in range(max(len(c) for c in conversations)):
        if t:
            provider.force_flush(10000)
            time.sleep(plan["turn_gap"])
        for c, turns in enumerate(conversations):
            if t < len(turns):
                traces.append(turn(turns[t], c, conversation=f"conv-{c}"))

flushed = provider.force_flush(30000)
provider.shutdown()
print(json.dumps({"spans": spans, "traces": traces, "delivered": otlp.ok, "failed": otlp.failed,
                  "flushed": flushed}))
sys.exit(0 if flushed and otlp.failed == 0 and otlp.ok == spans else 3)
'''


def run_agent(workdir: Path, endpoint: str, ground_truth: Path, plan: Dict[str, Any],
              timeout: float = AGENT_TIMEOUT) -> Dict[str, Any]:
    """Run the agent script as its own process; returns its summary (spans, trace ids)."""
    script = workdir / "agent.py"
    script.write_text(AGENT_SCRIPT, encoding="utf-8")
    full_plan = dict(plan, endpoint=endpoint, ground_truth=str(ground_truth))
    done = subprocess.run([sys.executable, str(script), json.dumps(full_plan)], capture_output=True, text=True,
                          timeout=timeout, env=_clean_env(), cwd=str(workdir), check=False)
    assert done.returncode == 0, f"agent exited with {done.returncode}:\n{done.stdout}\n{done.stderr}"
    summary = dict(json.loads(done.stdout.strip().splitlines()[-1]))
    assert ground_truth.exists(), "the agent wrote no ground-truth file"
    return summary


# -- comparing reports ------------------------------------------------------------------------------

ResultRow = Tuple[str, str, int, str]  # (episode key, test id, assertion index, verdict)


def verdict_rows(report: Dict[str, Any]) -> Set[ResultRow]:
    """Every assertion verdict of a report (replay's or serve's ``to_dict`` form)."""
    return {(ep["key"], r["test"], r["index"], r["verdict"]) for ep in report["episodes"] for r in ep["results"]}


def violation_rows(report: Dict[str, Any]) -> Set[Tuple[str, str, int, Optional[str]]]:
    return {(v["episode_key"], v["test_id"], v["assertion_index"], v["span_id"]) for v in report["violations"]}


def episode_keys(report: Dict[str, Any]) -> List[str]:
    return [ep["key"] for ep in report["episodes"]]


def decided_counts(reports: Iterable[Dict[str, Any]]) -> Counter:
    """How many times each episode key was decided, over all reports."""
    return Counter(k for rep in reports for k in episode_keys(rep))


def spans_per_key(paths: List[Path], key: Optional[str] = None) -> Dict[str, int]:
    """Spans per episode in OTLP files: by trace, or by the span attribute ``key``."""
    from spanassert.otlp import read_spans

    counts: Counter = Counter()
    for r in read_spans([str(p) for p in paths]):
        counts[r.trace_id if key is None else str(r.attributes.get(key))] += 1
    return dict(counts)


def replay_cli_json(rules: Path, paths: List[Path], timeout: float = REPLAY_TIMEOUT) -> Dict[str, Any]:
    """``spanassert replay --format json`` as a subprocess; exit 0 (all pass) or 1 (failures)."""
    done = subprocess.run(SPANASSERT_CLI + ["replay", "--config", str(rules), "--format", "json",
                                            *[str(p) for p in paths]],
                          capture_output=True, text=True, timeout=timeout, env=_clean_env(), check=False)
    assert done.returncode in (0, 1), f"spanassert replay exited with {done.returncode}:\n{done.stderr}"
    return dict(json.loads(done.stdout))
