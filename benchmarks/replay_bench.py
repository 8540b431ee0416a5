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
from typing import Any, Callable, Dict, List

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


def run(episodes: int = 2000) -> List[Dict[str, str]]:
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
        for label, path, base_fn, base_label, fields_fn, fields_label in [
            ("replay throughput, OTLP JSON Lines", files["jsonl"], _json_loads_loop, "json.loads of each line",
             _json_fields_loop, "JSON Lines"),
            ("replay throughput, length-prefixed protobuf", files["framed"], _parse_loop,
             "ParseFromString of each message", _proto_fields_loop, "length-prefixed protobuf"),
        ]:
            def ours() -> float:
                gc.collect()
                t0 = time.perf_counter()
                rep = replay(config, [path])
                dt = time.perf_counter() - t0
                assert len(rep.episodes) == episodes and not rep.failed, "benchmark data must replay cleanly"
                return n / dt

            base = _rate(lambda: base_fn(path), n)
            xs, ys = alternate(ours, base, rounds=5)
            ratio = med(xs) / med(ys)
            rows.append({"figure": f"{label} ({n:,} spans)", "ours": f"{med(xs):,.0f} spans/s ({spread(xs, 1, '{:,.0f}')})",
                         "baseline": f"{med(ys):,.0f} spans/s {base_label}", "ratio": f"{ratio:.3f}",
                         "target": "≥ 0.5", "met": "yes" if ratio >= 0.5 else "NO"})
            fs, bs = alternate(_rate(lambda: fields_fn(path), n), base, rounds=5)
            ratio = med(fs) / med(bs)
            rows.append({"figure": f"floor, {fields_label}: baseline + reading the mapped fields (no engine)",
                         "ours": f"{med(fs):,.0f} spans/s ({spread(fs, 1, '{:,.0f}')})",
                         "baseline": f"{med(bs):,.0f} spans/s {base_label}", "ratio": f"{ratio:.3f}",
                         "target": "for the record", "met": "—"})
    return rows
