"""Replay throughput against the cheapest possible reading of the same bytes.

For the record, each format also gets a floor row: the baseline loop plus only *reading*, in
Python, the span fields the mapping needs (ids, name, times, status, every attribute key and
value), with no conversion, no assembly and no engine. No pure-Python replay can beat it: where
its ratio is below the target, no optimization of ours can meet the target."""
from __future__ import annotations

import gc
import json
import struct
import tempfile
import time
from typing import Any, Callable, Dict, List, Optional

from opentelemetry.proto.trace.v1.trace_pb2 import TracesData

from spanassert import load_config
from spanassert.replay import replay

from common import alternate, compile_bytecode, med, paired_ratio, rules_yaml, spread
from data import agent_spans, write_files


def _json_loads_loop(path: str) -> None:
    with open(path, "rb") as f:
        for line in f:
            json.loads(line)


def _parse_loop(path: str) -> None:
    with open(path, "rb") as f:
        data = f.read()
    pos = 0
    while pos < len(data):
        (n,) = struct.unpack_from(">I", data, pos)
        TracesData().ParseFromString(data[pos + 4:pos + 4 + n])
        pos += 4 + n


def _json_fields_loop(path: str) -> None:
    with open(path, "rb") as f:
        for line in f:
            for rs in json.loads(line)["resourceSpans"]:
                for ss in rs["scopeSpans"]:
                    for s in ss["spans"]:
                        s["traceId"], s["spanId"], s.get("parentSpanId"), s["name"]
                        s["startTimeUnixNano"], s["endTimeUnixNano"]
                        status = s.get("status")
                        if status:
                            status.get("code"), status.get("message")
                        for kv in s.get("attributes", ()):
                            kv["key"], kv["value"].get("stringValue")


def _proto_fields_loop(path: str) -> None:
    with open(path, "rb") as f:
        data = f.read()
    pos = 0
    while pos < len(data):
        (n,) = struct.unpack_from(">I", data, pos)
        msg = TracesData()
        msg.ParseFromString(data[pos + 4:pos + 4 + n])
        pos += 4 + n
        for rs in msg.resource_spans:
            for ss in rs.scope_spans:
                for s in ss.spans:
                    s.trace_id, s.span_id, s.parent_span_id, s.name
                    s.start_time_unix_nano, s.end_time_unix_nano
                    status = s.status
                    status.code, status.message
                    for kv in s.attributes:
                        kv.key, kv.value.string_value


def _rate(fn: Callable[[], Any], n: int) -> Callable[[], float]:
    def rate() -> float:
        gc.collect()
        t0 = time.perf_counter()
        fn()
        return n / (time.perf_counter() - t0)
    return rate


def run(episodes: int = 2000, rounds: int = 5) -> List[Dict[str, str]]:
    config = load_config(rules_yaml(20))
    spans = agent_spans(episodes)
    rows = []
    with tempfile.TemporaryDirectory() as d:
        files = write_files(spans, d)
        # The generator's SDK span objects (about 460,000 live objects at 2,000 episodes) would
        # otherwise stay alive through every timed run, and each full GC pass during replay would
        # scan them: a cost of this harness, not of replay (a CLI run holds none of them).
        del spans
        n = files["spans"]

        def ours(path: str) -> Callable[[], float]:
            def rate() -> float:
                gc.collect()
                t0 = time.perf_counter()
                rep = replay(config, [path])
                dt = time.perf_counter() - t0
                assert len(rep.episodes) == episodes and not rep.failed, "benchmark data must replay cleanly"
                return n / dt
            return rate

        # One set of alternating rounds for the four: each round runs them back to back, in an
        # order that rotates, so that the paired ratios compare runs under one machine state.
        fns = [ours(files["jsonl"]), ours(files["framed"]), _rate(lambda: _json_loads_loop(files["jsonl"]), n),
               _rate(lambda: _parse_loop(files["framed"]), n)]
        got: List[List[float]] = [[] for _ in fns]
        for r in range(rounds):
            for k in range(len(fns)):
                i = (k + r) % len(fns)
                got[i].append(fns[i]())
        rj, rp, lj, pp = got

        def rate_row(figure: str, xs: List[float], ys: List[float], base_label: str, target: Optional[float]) -> None:
            ratio = paired_ratio(xs, ys)
            rows.append({"figure": figure, "ours": f"{med(xs):,.0f} spans/s ({spread(xs, 1, '{:,.0f}')})",
                         "baseline": f"{med(ys):,.0f} spans/s ({spread(ys, 1, '{:,.0f}')}) {base_label}",
                         "ratio": f"{ratio:.3f}", "target": f"≥ {target}" if target else "for the record",
                         "met": ("yes" if ratio >= target else "NO") if target else "—"})

        rate_row(f"replay throughput, OTLP JSON Lines ({n:,} spans)", rj, lj, "json.loads of each line", 0.5)
        rate_row(f"replay throughput, length-prefixed protobuf ({n:,} spans)", rp, rj,
                 "replay of the same spans as JSON Lines", 1.2)
        rate_row("for the record: replay, length-prefixed protobuf", rp, pp, "ParseFromString of each message", None)
        for fields_fn, path, base_fn, base_label, label in [
                (_json_fields_loop, files["jsonl"], _json_loads_loop, "json.loads of each line", "JSON Lines"),
                (_proto_fields_loop, files["framed"], _parse_loop, "ParseFromString of each message",
                 "length-prefixed protobuf")]:
            fs, bs = alternate(_rate(lambda f=fields_fn, p=path: f(p), n), _rate(lambda f=base_fn, p=path: f(p), n),
                               rounds=rounds)
            rate_row(f"floor, {label}: baseline + reading the mapped fields (no engine)", fs, bs, base_label, None)
        rows.append(_jobs_row(d, 4000 if episodes >= 1000 else episodes, 3))
    return rows


def _jobs_row(directory: str, episodes: int, rounds: int = 5) -> Dict[str, str]:
    """`spanassert replay --jobs 2` vs one process, whole CLI runs (wall), on trace-keyed episodes.
    Two processes can only run side by side on an idle machine: the load average is printed."""
    import os
    import subprocess
    import sys

    from common import rules_yaml as _rules

    rules = os.path.join(directory, "rules.yaml")
    with open(rules, "w") as f:
        f.write(_rules(20))
    big = os.path.join(directory, "jobs.jsonl")
    with open(big, "w") as f:  # more spans than the rows above, so that start-up weighs less
        spans = agent_spans(episodes, seed=23)
        tmp = write_files(spans, os.path.join(directory, "jobs"))
        del spans
        with open(tmp["jsonl"]) as src:
            f.write(src.read())
    n = tmp["spans"]
    compile_bytecode()  # both runs start as an installed copy does, from bytecode
    cli = [sys.executable, "-c", "import sys; from spanassert.cli import main; sys.exit(main())",
           "replay", "--config", rules, "--quiet", big]

    def wall(jobs: int) -> Callable[[], float]:
        def run() -> float:
            t0 = time.perf_counter()
            p = subprocess.run(cli + ["--jobs", str(jobs)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            dt = time.perf_counter() - t0
            assert p.returncode == 0, p.stderr.decode(errors="replace")[-2000:]
            return n / dt
        return run

    # The rows before this one kept a core busy: wait (at most a minute) for the machine's own load
    # to fall under 1 before two processes run side by side. Idle means the load before the run:
    # the run's two processes raise the load to about 2 themselves, so the load after is printed
    # for the record only.
    waited = 0
    while os.getloadavg()[0] >= 1 and waited < 60:
        time.sleep(2)
        waited += 2
    load0 = os.getloadavg()[0]
    xs, ys = alternate(wall(2), wall(1), rounds=rounds)
    load1 = os.getloadavg()[0]
    ratio = paired_ratio(xs, ys)
    idle = load0 < 1
    return {"figure": f"`replay --jobs 2`, CLI wall ({n:,} spans, trace-keyed); load average {load0:.2f} before "
                      f"(after a {waited} s wait for it), {load1:.2f} after (the run's own two processes)",
            "ours": f"{med(xs):,.0f} spans/s ({spread(xs, 1, '{:,.0f}')})",
            "baseline": f"{med(ys):,.0f} spans/s ({spread(ys, 1, '{:,.0f}')}) `replay` in one process",
            "ratio": f"{ratio:.3f}", "target": "≥ 1.6 (load < 1)",
            "met": ("yes" if ratio >= 1.6 else "NO") if idle else f"n/a (load {load0:.1f} before)"}
