"""Signals during the drain: a second SIGTERM cuts the drain short and still writes what was
decided; reports are written atomically (temp file + rename)."""
from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from test_serve_faults import FAULT_ENV, _health, _rules, _send
from test_serve_receiver import Serve


def test_second_sigterm_during_the_drain_cuts_it_short_and_still_writes_what_was_decided(tmp_path: Path) -> None:
    # One trace takes 60 s to judge (an injected stall), so the drain after SIGTERM would take that long.
    s = Serve(tmp_path, "--settle", "0.1", "--engine-stall-timeout", "0.5", rules=_rules("stall", 60.0),
              env=FAULT_ENV)
    try:
        for n in range(4):
            assert _send(s, n, ["search", "delete_database"] if n % 2 else ["search"]) == 200
        s.wait_for(lambda: s.health()["open_episodes"] == 0 and s.health()["buffered_traces"] == 0)
        assert _send(s, 10, ["search", "explode"]) == 200  # the stalling trace
        s.wait_for(lambda: _health(s)[1]["status"] == "engine_stalled", timeout=10)
        for n in range(20, 25):  # accepted while the engine is stuck: queued, never judged
            assert _send(s, n, ["search"]) == 200
        s.proc.send_signal(signal.SIGTERM)
        time.sleep(1.0)
        assert s.proc.poll() is None  # draining (stuck in the stalled trace)
        t0 = time.monotonic()
        s.proc.send_signal(signal.SIGTERM)
        out, _ = s.proc.communicate(timeout=30)
        took = time.monotonic() - t0
    finally:
        s.kill()
    assert s.proc.returncode == 1, s.stderr()  # not everything accepted was judged
    assert took < 10
    assert "second signal" in s.stderr()
    report = json.loads(s.report_path.read_text())  # complete JSON, or this raises
    decided = {ep["trace_id"]: ep for ep in report["episodes"]}
    assert {f"{n + 1:032x}" for n in range(4)} <= set(decided)
    for n in range(4):
        verdicts = {r["test"]: r["verdict"] for r in decided[f"{n + 1:032x}"]["results"]}
        assert verdicts["no-delete"] == ("failed" if n % 2 else "passed")
    assert report["receiver"]["drain_cut"] is True
    assert report["receiver"]["spans_not_judged"] >= 5 * 2  # the five queued episodes, 2 spans each
    assert "drain cut short" in out.decode()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_write_atomic_leaves_the_old_file_whole_when_the_write_fails(tmp_path: Path, monkeypatch: Any) -> None:
    from spanassert.report.files import write_atomic

    path = tmp_path / "report.json"
    write_atomic(str(path), b'{"old": true}')
    assert path.read_bytes() == b'{"old": true}'
    assert oct(path.stat().st_mode & 0o777) == oct(0o644)

    def fail(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError):
        write_atomic(str(path), b'{"new": ' + b"1" * 100_000 + b"}")
    assert path.read_bytes() == b'{"old": true}'
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]


def test_sigterm_right_after_the_ports_open_is_a_graceful_stop(tmp_path: Path) -> None:
    """The handlers are installed before the ports open: a SIGTERM sent as soon as the addresses
    are printed stops serve gracefully (it used to land on the default handler now and then, on a
    loaded machine: exit -15, no report)."""
    codes = []
    for i in range(5):
        (tmp_path / f"s{i}").mkdir()
        s = Serve(tmp_path / f"s{i}")
        try:
            s.proc.send_signal(signal.SIGTERM)
            s.proc.communicate(timeout=30)
        finally:
            s.kill()
        codes.append(s.proc.returncode)
        assert json.loads(s.report_path.read_text())["episodes"] == []
    assert codes == [0] * 5
