"""`spanassert serve` under load with hostile clients: disconnects mid-request, stalled clients,
oversized and malformed requests (HTTP and gRPC), intake overflow, and SIGTERM during all of it."""
from __future__ import annotations

import json
import random
import socket
import struct
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Set

import grpc
import pytest
from google.rpc import status_pb2

from .report import record
from .serve_rig import Serve, episode_body, post

EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


def _host_port(addr: str) -> tuple:
    host, port = addr.rsplit(":", 1)
    return host, int(port)


def _cut_connection(addr: str, declared: int, sent: int, reset: bool) -> None:
    """A client that declares a body and disappears part-way through it."""
    s = socket.create_connection(_host_port(addr), timeout=5)
    try:
        s.sendall(f"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  f"Content-Length: {declared}\r\n\r\n".encode() + b"{" * sent)
        if reset:  # RST instead of FIN
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    finally:
        s.close()


def _reason(status: int, headers: Dict[str, str], body: bytes) -> str:
    if "json" in headers.get("Content-Type", ""):
        return str(json.loads(body).get("message", ""))
    return status_pb2.Status.FromString(body).message


@pytest.mark.timeout(600)
def test_disconnects_stalls_bad_requests_and_sigterm_under_load_lose_no_accepted_episode(
        sizes: Any, tmp_path: Path) -> None:
    duration = sizes.pick(3.0, 30.0)
    s = Serve(tmp_path / "serve", "--max-request-bytes", "65536", "--settle", "0.3")
    stop = threading.Event()
    lock = threading.Lock()
    accepted: Set[str] = set()
    accepted_spans = [0]
    valid_other: List[int] = []
    hostile_answers: Dict[int, int] = {}
    unclear: List[str] = []  # a hostile request answered without a reason, or with a 5xx
    counts = {"hostile": 0, "valid": 0, "grpc": 0}
    stalled: List[socket.socket] = []
    try:
        def valid_sender(w: int) -> None:
            i = 0
            while not stop.is_set():
                n = w * 100_000 + i
                tools = ["lookup_order", "refund"] if n % 4 else ["lookup_order", "delete_database", "refund"]
                try:
                    status = post(s.url, episode_body(n, tools))[0]
                except OSError:
                    status = -1
                with lock:
                    counts["valid"] += 1
                    if status == 200:
                        accepted.add(f"{n + 1:032x}")
                        accepted_spans[0] += len(tools) + 1
                    else:
                        valid_other.append(status)
                i += 1

        def hostile_http(w: int) -> None:
            rng = random.Random(w)
            good = episode_body(10_000_000 + w, ["lookup_order"]).decode()
            while not stop.is_set():
                kind = rng.randrange(5)
                try:
                    if kind == 0:
                        _cut_connection(s.http, 50_000, rng.randrange(0, 2000), reset=rng.random() < 0.5)
                        answer = None
                    elif kind == 1:
                        answer = post(s.url, b"[" * 200_000)  # over --max-request-bytes
                    elif kind == 2:  # a valid request cut short: never valid JSON
                        answer = post(s.url, good[:rng.randrange(1, len(good) - 1)].encode())
                    elif kind == 3:
                        answer = post(s.url, bytes(rng.randrange(256) for _ in range(300)), "application/x-protobuf")
                    else:
                        answer = post(s.url, b'{"resourceSpans":' + b"[" * 100_00 + b"]" * 100_00 + b"}")
                except OSError:
                    answer = None  # the server may close a connection it refused early
                with lock:
                    counts["hostile"] += 1
                    if answer is not None:
                        status, headers, body = answer
                        hostile_answers[status] = hostile_answers.get(status, 0) + 1
                        if (status >= 500 and status != 503) or (status != 200 and not _reason(status, headers, body)):
                            unclear.append(f"{status}: {body[:200]!r}")

        def hostile_grpc() -> None:
            rng = random.Random(7)
            with grpc.insecure_channel(s.grpc) as channel:
                export = channel.unary_unary(EXPORT)
                while not stop.is_set():
                    payload = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 400)))
                    timeout = 0.0005 if rng.random() < 0.3 else 10  # cancelled mid-call by the client
                    try:
                        export(payload, timeout=timeout)
                        code = grpc.StatusCode.OK
                        details = ""
                    except grpc.RpcError as err:
                        code, details = err.code(), err.details() or ""
                    with lock:
                        counts["grpc"] += 1
                        if code not in (grpc.StatusCode.OK, grpc.StatusCode.DEADLINE_EXCEEDED,
                                        grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED):
                            if code is not grpc.StatusCode.INVALID_ARGUMENT or not details:
                                unclear.append(f"gRPC {code}: {details}")

        for _ in range(8):  # clients that send half a header and then wait
            c = socket.create_connection(_host_port(s.http), timeout=5)
            c.sendall(b"POST /v1/traces HTTP/1.1\r\nContent-Le")
            stalled.append(c)
        threads = ([threading.Thread(target=valid_sender, args=(w,)) for w in range(3)]
                   + [threading.Thread(target=hostile_http, args=(w,)) for w in range(3)]
                   + [threading.Thread(target=hostile_grpc)])
        t0 = time.monotonic()
        for t in threads:
            t.start()
        healthy = True
        while time.monotonic() - t0 < duration:
            time.sleep(0.5)
            healthy = healthy and s.health()["status"] == "ok"
        code, stop_seconds, text = s.stop()  # SIGTERM while every client is still sending
        stop.set()
        for t in threads:
            t.join(30)
    finally:
        stop.set()
        for c in stalled:
            c.close()
        s.kill()
    tracebacks = s.stderr().count("Traceback")
    report = json.loads(text)  # complete JSON, or this raises
    decided = {ep["trace_id"]: ep for ep in report["episodes"]}
    undecided = accepted - set(decided)
    failed_delete = sum(1 for t in accepted if any(
        r["test"] == "no-delete" and r["verdict"] == "failed" for r in decided.get(t, {}).get("results", [])))
    record("serve: disconnects/stalls/bad requests + SIGTERM", inputs=counts["valid"] + counts["hostile"] + counts["grpc"],
           exceptions_escaped=len(unclear) + tracebacks,
           spans_lost=abs(accepted_spans[0] - report["receiver"]["spans_accepted"]),
           note=f"{len(accepted)} episodes accepted ({len(undecided)} undecided), hostile answers {dict(sorted(hostile_answers.items()))}, "
                f"{counts['grpc']} gRPC; exit {code} {stop_seconds:.1f}s after SIGTERM")
    assert code == 0, s.stderr()[-2000:]
    assert healthy
    assert unclear == [] and tracebacks == 0, (unclear[:5], s.stderr()[-2000:])
    assert accepted and undecided == set()
    assert report["receiver"]["spans_accepted"] == accepted_spans[0]  # no half-read request counted
    assert all(decided[t]["close_reason"] == "root_ended" for t in accepted)
    assert failed_delete == sum(1 for t in accepted if (int(t, 16) - 1) % 4 == 0)
    # 200 only for random protobuf bytes that happen to parse (with no usable span); 503 once stopping.
    assert set(hostile_answers) <= {200, 400, 413, 503}
    assert stop_seconds < 15


@pytest.mark.timeout(600)
def test_intake_overflow_answers_503_keeps_the_queue_bounded_and_retries_get_through(
        sizes: Any, tmp_path: Path) -> None:
    queue = 50
    senders = 4
    per_sender = sizes.pick(40, 400)
    pause = tmp_path / "pause"
    pause.write_text("")
    s = Serve(tmp_path / "serve", "--queue-size", str(queue), "--settle", "0.2",
              env={"SPANASSERT_TEST_PAUSE_FILE": str(pause)})
    lock = threading.Lock()
    answers: Dict[int, int] = {}
    retry_after_missing = [0]
    accepted: Set[str] = set()
    depth_seen: List[int] = []
    try:
        def sender(w: int) -> None:
            for i in range(per_sender):
                n = w * 10_000 + i
                body = episode_body(n, ["lookup_order", "refund"])  # 3 spans
                for _attempt in range(200):  # retry as OTLP exporters do
                    status, headers, _ = post(s.url, body)
                    with lock:
                        answers[status] = answers.get(status, 0) + 1
                        if status == 503 and headers.get("Retry-After") is None:
                            retry_after_missing[0] += 1
                    if status == 200:
                        with lock:
                            accepted.add(f"{n + 1:032x}")
                        break
                    if status != 503:
                        break
                    time.sleep(0.02)

        threads = [threading.Thread(target=sender, args=(w,)) for w in range(senders)]
        for t in threads:
            t.start()
        for _ in range(10):  # while paused: the queue fills up to its bound and no further
            time.sleep(0.1)
            depth_seen.append(s.health()["queue_depth"])
        pause.unlink()
        while any(t.is_alive() for t in threads):
            depth_seen.append(s.health()["queue_depth"])
            time.sleep(0.05)
        for t in threads:
            t.join()
        code, _, text = s.stop()
    finally:
        s.kill()
    report = json.loads(text)
    decided = {ep["trace_id"] for ep in report["episodes"]}
    tried = senders * per_sender
    record("serve: intake overflow (queue 50 spans)", inputs=sum(answers.values()),
           spans_lost=3 * (len(accepted - decided) + (tried - len(accepted))),  # 3 spans per episode
           peak_memory=f"queue depth max {max(depth_seen)}", memory_bound=f"--queue-size {queue}",
           note=f"answers {dict(sorted(answers.items()))}; {report['receiver']['spans_refused']} spans refused")
    assert code == 0
    assert max(depth_seen) <= queue
    assert answers.get(503, 0) > 0 and retry_after_missing[0] == 0
    assert set(answers) <= {200, 503}
    assert len(accepted) == tried and accepted <= decided
    assert report["receiver"]["spans_refused"] == 3 * answers[503]
