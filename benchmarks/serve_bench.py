"""`spanassert serve` intake over OTLP/HTTP protobuf vs replaying the same spans from a file."""
from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from typing import Dict, List

from spanassert import load_config
from spanassert.replay import replay

from common import med, rules_yaml
from data import agent_spans, write_files


def _start(rules: str) -> "tuple[subprocess.Popen, str]":
    proc = subprocess.Popen(
        [sys.executable, "-m", "spanassert.cli", "serve", "--config", rules, "--quiet",
         "--grpc-endpoint", "127.0.0.1:0", "--http-endpoint", "127.0.0.1:0", "--settle", "0.5", "--rootless-wait", "1",
         "--queue-size", "1000000"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    deadline = time.time() + 60
    http_addr = None
    while time.time() < deadline and http_addr is None:
        line = proc.stdout.readline()
        if "OTLP/HTTP listening on" in line:
            http_addr = line.rsplit(" ", 1)[1].strip()
    if http_addr is None:
        proc.kill()
        raise RuntimeError("spanassert serve did not start")
    return proc, http_addr


def _health(addr: str) -> Dict:
    host, port = addr.rsplit(":", 1)
    c = http.client.HTTPConnection(host, int(port), timeout=10)
    c.request("GET", "/health")
    return json.loads(c.getresponse().read())


def _send_all(addr: str, payloads: List[bytes], workers: int = 4) -> None:
    host, port = addr.rsplit(":", 1)

    def worker(chunk: List[bytes]) -> None:
        c = http.client.HTTPConnection(host, int(port), timeout=60)
        for p in chunk:
            while True:
                c.request("POST", "/v1/traces", body=p, headers={"Content-Type": "application/x-protobuf"})
                r = c.getresponse()
                r.read()
                if r.status == 200:
                    break
                time.sleep(0.01)  # 503: the intake queue is full, retry as exporters do

    threads = [threading.Thread(target=worker, args=(payloads[i::workers],)) for i in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def run(episodes: int = 1500) -> List[Dict[str, str]]:
    with tempfile.TemporaryDirectory() as d:
        rules = os.path.join(d, "rules.yaml")
        with open(rules, "w") as f:
            f.write(rules_yaml(20))
        config = load_config(rules)
        ours: List[float] = []
        base: List[float] = []
        for _ in range(3):
            spans = agent_spans(episodes, seed=int(time.time()))  # fresh timestamps: serve ticks on the wall clock
            files = write_files(spans, d)
            n = files["spans"]
            t0 = time.perf_counter()
            rep = replay(config, [files["framed"]])
            base.append(n / (time.perf_counter() - t0))
            assert len(rep.episodes) == episodes
            proc, addr = _start(rules)
            try:
                t0 = time.perf_counter()
                _send_all(addr, files["payloads"])
                while True:
                    h = _health(addr)
                    if h["spans_received"] >= n and h["queue_depth"] == 0 and h["buffered_traces"] == 0 \
                            and h["open_episodes"] == 0:
                        break
                    time.sleep(0.02)
                ours.append(n / (time.perf_counter() - t0))
            finally:
                proc.terminate()
                proc.wait(30)
        ratio = med(ours) / med(base)
        return [{"figure": f"serve intake, OTLP/HTTP protobuf ({n:,} spans, 4 clients)",
                 "ours": f"{med(ours):,.0f} spans/s ({min(ours):,.0f}–{max(ours):,.0f})",
                 "baseline": f"{med(base):,.0f} spans/s replay of the same spans (framed protobuf file)",
                 "ratio": f"{ratio:.3f}", "target": "≥ 0.75", "met": "yes" if ratio >= 0.75 else "NO"}]
