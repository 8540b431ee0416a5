"""The accept queue and descriptors: a sane listen backlog, and no spinning accept loop when the
process runs out of file descriptors (it backs off, then serves again once descriptors are free)."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Any, List

import pytest

from .report import record
from .serve_rig import Serve, episode_body, post


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def _host_port(addr: str) -> tuple:
    host, port = addr.rsplit(":", 1)
    return host, int(port)


def test_http_listen_backlog_is_not_the_stdlib_five(tmp_path: Path) -> None:
    if shutil.which("ss") is None:
        pytest.skip("ss (iproute2) is not installed")
    s = Serve(tmp_path / "serve")
    try:
        port = _host_port(s.http)[1]
        out = subprocess.run(["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True,
                             timeout=10).stdout
    finally:
        s.kill()
    # For a listening socket, ss shows the backlog in the Send-Q column.
    backlog = int(out.split()[2])
    record("serve: listen backlog", inputs=1, note=f"HTTP backlog {backlog} (was 5)")
    assert backlog >= 128, out


@pytest.mark.timeout(300)
def test_out_of_descriptors_the_accept_loop_backs_off_and_recovers(sizes: Any, tmp_path: Path) -> None:
    s = Serve(tmp_path / "serve", env={"SPANASSERT_TEST_NOFILE": "96"})
    held: List[socket.socket] = []
    try:
        for _ in range(160):  # more idle connections than the server has descriptors
            try:
                held.append(socket.create_connection(_host_port(s.http), timeout=5))
            except OSError:
                break
        time.sleep(1.0)  # the server has taken all it can; the rest wait in the backlog
        window = sizes.pick(3.0, 10.0)
        cpu0 = _cpu_seconds(s.proc.pid)
        time.sleep(window)
        busy = (_cpu_seconds(s.proc.pid) - cpu0) / window
        for c in held:
            c.close()
        held.clear()
        time.sleep(1.0)
        deadline = time.monotonic() + 60
        status = -1
        while time.monotonic() < deadline:  # idle handler threads give their descriptors back
            try:
                status = post(s.url, episode_body(1, ["lookup_order"]), timeout=5)[0]
            except OSError:
                status = -1
            if status == 200:
                break
            time.sleep(0.5)
        code, _, _ = s.stop()
    finally:
        for c in held:
            c.close()
        s.kill()
    record("serve: out of file descriptors (limit 96, 160 connections)", inputs=160,
           note=f"server CPU while starved {busy:.1%} of a core; served again: {status == 200}")
    assert busy < 0.08, f"accept loop busy {busy:.1%} of a core while out of descriptors"
    assert status == 200
    assert code == 0


def _threads(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    return 0


def test_idle_connections_beyond_the_bound_are_answered_503_and_take_no_thread(tmp_path: Path) -> None:
    bound, tried = 16, 60
    s = Serve(tmp_path / "serve", "--max-connections", str(bound))
    held: List[socket.socket] = []
    try:
        base = _threads(s.proc.pid)
        for _ in range(tried):  # clients that connect and say nothing
            held.append(socket.create_connection(_host_port(s.http), timeout=5))
        time.sleep(1.0)
        threads = _threads(s.proc.pid)
        busy = 0
        for c in held:
            c.settimeout(0.05)  # a 503 is already there; a served connection just waits
            try:
                busy += c.recv(64).startswith(b"HTTP/1.1 503")
            except OSError:
                pass
        for c in held:
            c.close()
        held.clear()
        time.sleep(0.5)
        status = post(s.url, episode_body(1, ["lookup_order"]), timeout=10)[0]
        code, _, _ = s.stop()
    finally:
        for c in held:
            c.close()
        s.kill()
    record("serve: idle connections beyond --max-connections", inputs=tried,
           note=f"{tried} idle connections, bound {bound}: {threads - base} thread(s) added, {busy} answered 503")
    assert threads - base <= bound + 2
    assert busy == tried - bound
    assert status == 200 and code == 0
