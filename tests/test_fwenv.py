"""tests/fwenv.py: per-framework venvs keyed by their pins, built once under a lock, atomically."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import fwenv


@pytest.fixture()
def sandbox(tmp_path, monkeypatch):
    pins = tmp_path / "pins"
    pins.mkdir()
    cache = tmp_path / "cache"
    monkeypatch.setenv("SPANASSERT_VENV_CACHE", str(cache))
    return pins, cache


def test_every_pins_file_is_exact_and_brings_spanassert_runtime_dependencies():
    assert fwenv.names(), "no .ci/frameworks/*.txt"
    for name in fwenv.names():
        lines = [ln.split("#")[0].strip() for ln in fwenv.pins_path(name).read_text().splitlines()]
        reqs = [ln for ln in lines if ln]
        loose = [r for r in reqs if not re.fullmatch(r"[A-Za-z0-9_.\-\[\],]+==[A-Za-z0-9_.+\-]+", r)]
        assert not loose, f"{name}: pins must be exact (NAME==VERSION): {loose}"
        pinned = {re.split(r"[\[=]", r)[0].lower().replace("_", "-") for r in reqs}
        for dep in ("opentelemetry-sdk", "opentelemetry-exporter-otlp", "pyyaml", "jsonschema"):
            assert dep in pinned, f"{name}: spanassert needs {dep} (src/ is on PYTHONPATH, not installed)"
        assert "spanassert" not in pinned


def test_key_follows_the_pins_and_the_python(sandbox):
    pins, cache = sandbox
    (pins / "fw.txt").write_text("pyyaml==6.0.3\n")
    key = fwenv.env_key("fw", pins)
    assert re.fullmatch(r"fw-[0-9a-f]{12}", key)
    assert fwenv.env_key("fw", pins) == key
    assert fwenv.env_dir("fw", pins) == cache / key
    (pins / "fw.txt").write_text("pyyaml==6.0.2\n")
    assert fwenv.env_key("fw", pins) != key


def test_unknown_framework_names_the_missing_pins_file(sandbox):
    pins, _ = sandbox
    with pytest.raises(fwenv.FwEnvError, match=r"no pins for framework 'nope': expected .*nope\.txt"):
        fwenv.build("nope", pins)


def test_failed_build_leaves_nothing_behind_and_says_where_the_log_is(sandbox):
    pins, cache = sandbox
    (pins / "bad.txt").write_text("./no-such-project-dir\n")
    for _ in range(2):  # the lock is released: a second try fails the same way instead of hanging
        with pytest.raises(fwenv.FwEnvError, match=r"building the bad env \(bad-[0-9a-f]{12}\) failed.*log: "):
            fwenv.build("bad", pins)
    assert not fwenv.is_built("bad", pins)
    leftovers = [p.name for p in cache.iterdir() if not p.name.endswith((".lock", ".build.log"))]
    assert leftovers == []


def test_concurrent_builds_build_once_and_the_env_runs_src(sandbox):
    pins, cache = sandbox
    (pins / "tiny.txt").write_text("# nothing to install: the venv alone\n")
    script = textwrap.dedent(f"""
        import sys; sys.path.insert(0, {str(Path(fwenv.__file__).parent)!r})
        import fwenv
        from pathlib import Path
        print(fwenv.build("tiny", Path({str(pins)!r})))
    """)
    procs = [subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=dict(os.environ)) for _ in range(3)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    built = {out.strip() for out, _ in outs}
    assert built == {str(cache / fwenv.env_key("tiny", pins))}
    log = (cache / f"{fwenv.env_key('tiny', pins)}.build.log").read_text()
    assert log.count("# building") == 1, log
    assert not [p for p in cache.iterdir() if p.name.startswith(".tmp-")]
    python = fwenv._python_in(cache / fwenv.env_key("tiny", pins))
    # spanassert comes from this checkout's src/, not from an install tied to a path
    code = "import importlib.util, sys; print(importlib.util.find_spec('spanassert').origin); print(sys.prefix)"
    out = subprocess.run([str(python), "-c", code], env=fwenv.subprocess_env(), capture_output=True, text=True,
                         timeout=60)
    origin, prefix = out.stdout.split()
    assert origin == str(fwenv.SRC / "spanassert" / "__init__.py"), out
    assert prefix == str(cache / fwenv.env_key("tiny", pins)), out
