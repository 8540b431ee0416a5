"""`make demo`: one agent, checked live and replayed offline, with the same verdicts.

1. Runs the scripted support agent (examples/support_agent.py) with an ``AssertionSpanProcessor``
   in its tracer provider: each violation is printed the moment it happens (tool, rule, reason).
2. The same processor forwards every span to the real OTLP JSON Lines file exporter.
3. Runs ``spanassert replay`` (the CLI, in a subprocess) on that file with the same rules.
4. Prints both sets of verdicts and whether they are the same.

    python examples/demo.py [--out DIR]
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Tuple

HERE = Path(__file__).resolve().parent
RULES = HERE / "rules.yaml"
sys.path.insert(0, str(HERE))

from spanassert.otlp.writers import file_span_exporter  # noqa: E402 - OTel's FileSpanExporter where installed
from opentelemetry.sdk.resources import Resource  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import BatchSpanProcessor  # noqa: E402

from spanassert import AssertionSpanProcessor, EpisodeResult, Violation, load_config  # noqa: E402
from support_agent import SCENARIOS, SupportAgent  # noqa: E402

# episode (trace id) -> sorted (test, assertion index, verdict, span id)
Verdicts = Dict[str, List[Tuple[str, int, str, str]]]


def replay_command() -> List[str]:
    """The installed ``spanassert`` CLI next to this interpreter, else the same entry via -m."""
    script = Path(sys.executable).parent / ("spanassert.exe" if os.name == "nt" else "spanassert")
    if script.exists():
        return [str(script)]
    found = shutil.which("spanassert")
    return [found] if found else [sys.executable, "-m", "spanassert.cli"]


def run_live(out_file: Path) -> Tuple[Verdicts, Dict[str, str], int]:
    """Run every scenario with live checking; returns the verdicts by trace id, the scenario name
    of each trace, and the number of violations reported."""
    config = load_config(RULES)
    episodes: List[EpisodeResult] = []
    violations: List[Violation] = []

    def on_violation(v: Violation) -> None:
        violations.append(v)
        print(f"    ✗ VIOLATION [{v.severity}] tool `{v.tool or '-'}` broke rule `{v.test_id}` "
              f"({v.assertion_type}): {v.message}", flush=True)

    processor = AssertionSpanProcessor(
        config,
        export=BatchSpanProcessor(file_span_exporter(str(out_file))),
        on_violation=on_violation,
        on_episode=episodes.append,
    )
    provider = TracerProvider(resource=Resource.create({"service.name": "support-agent"}))
    provider.add_span_processor(processor)
    agent = SupportAgent(provider, narrate=lambda line: print(line, flush=True))
    trace_names: Dict[str, str] = {}
    for scenario in SCENARIOS:
        print(f"\n● {scenario.name}: {scenario.prompt!r}", flush=True)
        before = len(episodes)
        agent.run(scenario)
        # Evaluation runs on a worker thread (the default with an export): wait until it has
        # judged this scenario's spans, so its violations print under its own heading and the
        # episode it closed is named after it (not after whichever scenario runs next).
        processor.force_flush()
        print(f"  ↳ {scenario.answer}", flush=True)
        for ep in episodes[before:]:
            trace_names.setdefault(ep.trace_id or ep.key, scenario.name)
    provider.shutdown()  # flushes the exporter: the file is complete
    live = {ep.trace_id or ep.key: [(t, i, v, s) for t, i, v, s in ep.verdict_signature()] for ep in episodes}
    return live, trace_names, len(violations)


def run_replay(out_file: Path) -> Tuple[Verdicts, int, str]:
    """``spanassert replay`` on the file: its verdicts (from the JSON report), exit code, text output."""
    base = replay_command() + ["replay", str(out_file), "--config", str(RULES)]
    text = subprocess.run(base + ["--quiet"], capture_output=True, text=True, timeout=60)
    js = subprocess.run(base + ["--format", "json"], capture_output=True, text=True, timeout=60)
    if js.returncode not in (0, 1):
        sys.stderr.write(js.stdout + js.stderr)
        raise SystemExit(f"spanassert replay failed with exit code {js.returncode}")
    doc = json.loads(js.stdout)
    replayed: Verdicts = {}
    for ep in doc["episodes"]:
        replayed[ep["trace_id"] or ep["key"]] = sorted(
            (r["test"], r["index"], r["verdict"], r["span_id"] or "") for r in ep["results"])
    return replayed, js.returncode, text.stdout


def table(verdicts: Verdicts, names: Dict[str, str]) -> str:
    lines = []
    for trace_id in sorted(verdicts, key=lambda t: list(names).index(t) if t in names else len(names)):
        rows = verdicts[trace_id]
        counts: Dict[str, int] = {}
        for _, _, verdict, _ in rows:
            counts[verdict] = counts.get(verdict, 0) + 1
        failed = sorted({t for t, _, v, _ in rows if v == "failed"})
        summary = ", ".join(f"{n} {v}" for v, n in sorted(counts.items()))
        lines.append(f"  {names.get(trace_id, trace_id[:8]):<22} {summary}"
                     + (f"   failed: {', '.join(failed)}" if failed else ""))
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description="spanassert demo: live checking, then offline replay")
    parser.add_argument("--out", type=Path, help="directory for the exported traces (default: a temporary one)")
    args = parser.parse_args()
    started = time.monotonic()
    # Violations are printed by on_violation below; keep the library's log records (which a real
    # deployment ships through its logging setup) from repeating them on stderr.
    logging.getLogger("spanassert").addHandler(logging.NullHandler())
    out_dir = args.out or Path(tempfile.mkdtemp(prefix="spanassert-demo-"))
    out_dir.mkdir(parents=True, exist_ok=True)
    out_file = out_dir / "traces.jsonl"
    if out_file.exists():
        out_file.unlink()  # the exporter appends

    print(f"1. Live: the support agent runs {len(SCENARIOS)} scenarios; rules: {os.path.relpath(RULES)}")
    live, names, n_violations = run_live(out_file)
    n_lines = sum(1 for _ in out_file.open(encoding="utf-8"))
    print(f"\n   {n_violations} violations reported live; spans exported to {out_file} "
          f"(OTLP JSON Lines: {n_lines} export batch{'es' if n_lines != 1 else ''})")

    print("\n2. Replay: " + " ".join(["spanassert", "replay", str(out_file), "--config", os.path.relpath(RULES),
                                      "--quiet"]))
    replayed, exit_code, text = run_replay(out_file)
    print("   " + text.rstrip().replace("\n", "\n   "))
    print(f"   (exit code {exit_code})")

    print("\n3. Verdicts per episode (test, assertion, verdict, offending span)")
    print(" live:")
    print(table(live, names))
    print(" replayed:")
    print(table(replayed, names))
    same = live == replayed and len(live) == len(SCENARIOS)
    print(f"\nsame verdicts live and replayed: {'yes' if same else 'NO'}")
    print(f"(demo took {time.monotonic() - started:.1f}s)")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
