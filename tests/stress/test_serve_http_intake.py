"""The HTTP intake under hostile framing: chunk sizes that are not plain hex (``-1``, ``0x10``,
`` 5``, ``1_0``), bodies over ``--max-request-bytes`` in any encoding, contradictory or malformed
``Content-Length`` / ``Transfer-Encoding``, bad headers, keep-alive and pipelining. Deterministic
cases first, then a bounded hypothesis fuzz over one loopback server."""
from __future__ import annotations

import json
import re
import socket
import time
from pathlib import Path
from typing import Any, Iterator, List, Optional, Tuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .report import record
from .serve_rig import Serve, episode_body

LIMIT = 4096
OK_BODY = episode_body(0, ["lookup_order"])
assert len(OK_BODY) < LIMIT
STATUS_LINE = re.compile(rb"HTTP/1\.[01] (\d{3}) ")


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


@pytest.fixture(scope="module")
def server(tmp_path_factory: Any) -> Iterator[Serve]:
    s = Serve(tmp_path_factory.mktemp("http-intake"), "--max-request-bytes", str(LIMIT), "--settle", "0.2")
    yield s
    s.kill()


def _host_port(addr: str) -> Tuple[str, int]:
    host, port = addr.rsplit(":", 1)
    return host, int(port)


def exchange(s: Serve, raw: bytes, *, timeout: float = 10.0, half_close: bool = True) -> Tuple[List[int], bool]:
    """Send ``raw`` on one connection, (half-)close it, read until the server closes; returns the
    status codes of the responses read and whether the server closed the connection."""
    c = socket.create_connection(_host_port(s.http), timeout=timeout)
    data = b""
    closed = False
    try:
        try:
            c.sendall(raw)
            if half_close:
                c.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # the server may close a connection it refused before reading everything
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                chunk = c.recv(65536)
            except socket.timeout:
                break
            except OSError:
                closed = True
                break
            if not chunk:
                closed = True
                break
            data += chunk
    finally:
        c.close()
    return [int(m.group(1)) for m in STATUS_LINE.finditer(data) if m.group(1) != b"100"], closed


def request(body: bytes = OK_BODY, *, headers: Optional[List[Tuple[str, str]]] = None, chunked: Optional[List[bytes]] = None,
            path: str = "/v1/traces", method: str = "POST") -> bytes:
    """One raw request. ``chunked``: the chunk-size tokens to send (each followed by that many
    bytes of ``body`` when the token is valid hex, else by the rest of ``body``)."""
    head = [f"{method} {path} HTTP/1.1", "Host: x", "Content-Type: application/json"]
    for k, v in headers or []:
        head.append(f"{k}: {v}")
    if chunked is None:
        if not any(k.lower() in ("content-length", "transfer-encoding") for k, _ in headers or []):
            head.append(f"Content-Length: {len(body)}")
        return ("\r\n".join(head) + "\r\n\r\n").encode() + body
    head.append("Transfer-Encoding: chunked")
    out = ("\r\n".join(head) + "\r\n\r\n").encode()
    rest = body
    for token in chunked:
        out += token + b"\r\n"
        try:
            n = int(token.decode("ascii"), 16) if re.fullmatch(rb"[0-9a-fA-F]+", token) else len(rest)
        except ValueError:
            n = len(rest)
        out += rest[:n] + b"\r\n"
        rest = rest[n:]
    if rest:
        out += f"{len(rest):x}\r\n".encode() + rest + b"\r\n"
    return out + b"0\r\n\r\n"


def test_chunk_sizes_that_are_not_plain_hex_are_refused_and_the_connection_closed(server: Serve) -> None:
    rss0 = _rss_kib(server.proc.pid)
    for token in (b"-1", b"-0", b"0x10", b"+10", b" 10", b"1_0", b"10 ", b"\xd9\xa1", b"", b"g", b"ffffffffffffffffff"):
        statuses, closed = exchange(server, request(chunked=[token]))
        assert statuses and statuses[0] in (400, 413), (token, statuses)
        assert closed, token
    # The attack: a negative size used to make the server read to the end of the stream (which a
    # client can keep open, sending forever). Now it answers as soon as it has read the size line.
    c = socket.create_connection(_host_port(server.http), timeout=10)
    try:
        raw = request(chunked=[b"-1"])
        c.sendall(raw[: raw.index(b"\r\n-1\r\n") + 6] + b"x" * 1000)
        first = c.recv(4096)
    finally:
        c.close()
    assert first.startswith(b"HTTP/1.1 400"), first[:200]
    assert _rss_kib(server.proc.pid) - rss0 < 64 * 1024


def test_bodies_over_the_limit_are_refused_in_every_encoding(server: Serve) -> None:
    big = b"[" * (LIMIT + 1)
    cases = {
        "content-length": request(big),
        "one chunk": request(big, chunked=[f"{len(big):x}".encode()]),
        "many chunks": request(big, chunked=[b"100"] * (len(big) // 256 + 1)),
        "leading zeros": request(big, chunked=[b"0000000000000000" + f"{len(big):x}".encode()]),
    }
    for name, raw in cases.items():
        statuses, closed = exchange(server, raw)
        assert statuses[:1] == [413], (name, statuses)
        assert closed, name


def test_contradictory_or_malformed_framing_is_refused(server: Serve) -> None:
    n = str(len(OK_BODY))
    cases = {
        "content-length and chunked": request(headers=[("Content-Length", n), ("Transfer-Encoding", "chunked")]),
        "two different lengths": request(headers=[("Content-Length", n), ("Content-Length", "5")]),
        "plus sign": request(headers=[("Content-Length", "+" + n)]),
        "underscore": request(headers=[("Content-Length", n[:1] + "_" + n[1:])]),
        "negative": request(headers=[("Content-Length", "-1")]),
        "not a number": request(headers=[("Content-Length", "ten")]),
        "arabic digits": request(headers=[("Content-Length", "\u0661\u0660")]),
        "gzip transfer coding": request(headers=[("Transfer-Encoding", "gzip, chunked")]),
        "chunked twice": request(headers=[("Transfer-Encoding", "chunked, chunked")]),
        "unknown coding": request(headers=[("Transfer-Encoding", "xchunked")]),
    }
    for name, raw in cases.items():
        statuses, closed = exchange(server, raw)
        assert statuses and statuses[0] in (400, 411, 501), (name, statuses)
        assert closed, name


def test_keep_alive_and_pipelining_answer_every_request_in_order(server: Serve) -> None:
    bodies = [episode_body(100 + i, ["lookup_order"]) for i in range(5)]
    raw = b"".join(request(b) for b in bodies[:2]) + request(bodies[2], chunked=[b"10", b"7"]) \
        + request(b"{", headers=[]) + b"".join(request(b) for b in bodies[3:])
    statuses, _ = exchange(server, raw)
    assert statuses == [200, 200, 200, 400, 200, 200]


_TOKENS = st.sampled_from([b"0", b"1", b"a", b"10", b"FF", b"-1", b"0x1", b"+1", b" 1", b"1 ", b"1_0", b"1;ext=1",
                           b"1 ;x", b"fffffffffffff", b"", b"\x00", b"1\n", b"00000001"])
_HEADER = st.sampled_from([
    ("Content-Length", "0"), ("Content-Length", "-1"), ("Content-Length", "99999999999999999999"),
    ("Content-Length", " 12"), ("Content-Length", "1e3"), ("Transfer-Encoding", "chunked"),
    ("Transfer-Encoding", "identity"), ("Transfer-Encoding", "gzip"), ("Content-Encoding", "gzip"),
    ("Content-Encoding", "br"), ("Content-Type", "application/x-protobuf"), ("Content-Type", "text/plain"),
    ("Connection", "close"), ("Connection", "keep-alive"), ("Expect", "100-continue"), ("X-Junk", "a" * 300),
    ("Bad Header", "x"), ("X-Nul", "\x00"), ("Host", ""),
])
_REQUEST = st.one_of(
    st.builds(lambda b, h: request(b, headers=h), st.sampled_from([OK_BODY, b"{", b"", b"[" * 5000]),
              st.lists(_HEADER, max_size=4)),
    st.builds(lambda b, t: request(b, chunked=t), st.sampled_from([OK_BODY, b"x" * 100]),
              st.lists(_TOKENS, min_size=1, max_size=5)),
    st.builds(lambda m, p: request(method=m, path=p), st.sampled_from(["GET", "PUT", "HEAD", "OPTIONS", "BREW", "post"]),
              st.sampled_from(["/v1/traces", "/health", "/", "*", "/v1/traces?x=1", "//" + "a" * 100])),
    st.binary(max_size=300),
)


def test_fuzzed_http_intake_never_errs_never_hangs_and_stays_bounded(server: Serve, sizes: Any) -> None:
    examples = sizes.pick(150, 1500)
    seen: List[int] = []
    t0 = time.monotonic()
    rss0 = _rss_kib(server.proc.pid)

    @settings(max_examples=examples, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(st.lists(_REQUEST, min_size=1, max_size=4), st.booleans())
    def one_connection(requests: List[bytes], half_close: bool) -> None:
        statuses, _ = exchange(server, b"".join(requests), timeout=5.0 if half_close else 0.3,
                               half_close=half_close)
        seen.extend(statuses)
        assert not [c for c in statuses if c >= 500 and c not in (501, 503, 505)], statuses
        assert len(statuses) <= len(requests)

    one_connection()
    seconds = time.monotonic() - t0
    grown = _rss_kib(server.proc.pid) - rss0
    health = server.health()
    tracebacks = server.stderr().count("Traceback")
    record("serve: HTTP intake fuzz (hypothesis)", inputs=examples, exceptions_escaped=tracebacks,
           peak_memory=f"RSS +{grown / 1024:.1f} MiB", memory_bound=f"--max-request-bytes {LIMIT}",
           seconds=seconds, note=f"statuses {dict(sorted((c, seen.count(c)) for c in set(seen)))}")
    assert health["status"] == "ok"
    assert tracebacks == 0, server.stderr()[-2000:]
    assert grown < 64 * 1024
