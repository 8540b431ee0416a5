"""Replay throughput against the cheapest possible reading of the same bytes."""
from __future__ import annotations

import gc
import json
import struct
import tempfile
import time
from typing import Any, Dict, List

from opentelemetry.proto.trace.v1.trace_pb2 import TracesData

from spanassert import load_config
from spanassert.replay import replay

from common import alternate, med, rules_yaml, spread
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


def run(episodes: int = 2000) -> List[Dict[str, str]]:
    config = load_config(rules_yaml(20))
    spans = agent_spans(episodes)
    rows = []
    with tempfile.TemporaryDirectory() as d:
        files = write_files(spans, d)
        n = files["spans"]
        for label, path, base_fn, base_label in [
            ("replay throughput, OTLP JSON Lines", files["jsonl"], _json_loads_loop, "json.loads of each line"),
            ("replay throughput, length-prefixed protobuf", files["framed"], _parse_loop,
             "ParseFromString of each message"),
        ]:
            def ours() -> float:
                gc.collect()
                t0 = time.perf_counter()
                rep = replay(config, [path])
                dt = time.perf_counter() - t0
                assert len(rep.episodes) == episodes and not rep.failed, "benchmark data must replay cleanly"
                return n / dt

            def base() -> float:
                gc.collect()
                t0 = time.perf_counter()
                base_fn(path)
                return n / (time.perf_counter() - t0)

            xs, ys = alternate(ours, base, rounds=5)
            ratio = med(xs) / med(ys)
            rows.append({"figure": f"{label} ({n:,} spans)", "ours": f"{med(xs):,.0f} spans/s ({spread(xs, 1, '{:,.0f}')})",
                         "baseline": f"{med(ys):,.0f} spans/s {base_label}", "ratio": f"{ratio:.3f}",
                         "target": "≥ 0.5", "met": "yes" if ratio >= 0.5 else "NO"})
    return rows
