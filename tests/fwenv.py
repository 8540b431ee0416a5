"""Per-framework Python environments for the guard adapters' tests (issue 17).

Agent frameworks pin versions that conflict with each other and with the test venv (google-adk wants
``opentelemetry-sdk<=1.44``, strands pins ``mcp<2.2``, ...), so each framework's scripted agent runs
as a subprocess in a venv of its own:

- pins: ``.ci/frameworks/<name>.txt``, exact versions (a pip requirements file; it also lists
  spanassert's own runtime dependencies: the package itself is NOT installed, it comes from this
  checkout's ``src/`` on ``PYTHONPATH``, so the venv is not tied to one checkout's path);
- venv: ``~/.cache/spanassert/venvs/<name>-<key>`` (``$SPANASSERT_VENV_CACHE`` overrides the
  folder), ``<key>`` = the first 12 hex digits of sha256 over the pins file and the interpreter's
  ``major.minor`` (a venv is built for one Python). Like the SDK-1.40 venv of ``make test-sdk-oldest``
  and the Collector build, it lives outside the repo and a change of pins makes a new one;
- built once, under a file lock per key: in a temporary folder beside the final one, renamed into
  place when pip has finished (a rename is atomic), so a killed build leaves no half venv that a
  later run would trust.

Tests call :func:`python_for` (the interpreter, or ``pytest.skip`` with the reason: under ``CI=true``
a skip is a failure, tests/conftest.py) and :func:`run` (a script in that venv, with ``src/`` on
``PYTHONPATH``). ``make test`` / ``.ci/run`` build every env first (``python tests/fwenv.py build``),
so no test waits on pip inside its own timeout.

    python tests/fwenv.py list             # name, key, built or not
    python tests/fwenv.py build [NAME...]  # build (all by default), print each key and build time
    python tests/fwenv.py python NAME      # print the interpreter (builds if needed)
"""
from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
PINS_DIR = ROOT / ".ci" / "frameworks"
COMPLETE = ".complete"
# pip against the registry on 2 shared cores: a cold build of the largest framework takes minutes.
BUILD_TIMEOUT_S = float(os.environ.get("SPANASSERT_FWENV_BUILD_TIMEOUT", "1800"))


class FwEnvError(RuntimeError):
    """A framework env could not be built; the message says which, why and where the log is."""


def cache_dir() -> Path:
    return Path(os.environ.get("SPANASSERT_VENV_CACHE") or Path.home() / ".cache" / "spanassert" / "venvs")


def names(pins_dir: Optional[Path] = None) -> List[str]:
    """Every framework with a pins file."""
    return sorted(p.stem for p in (pins_dir or PINS_DIR).glob("*.txt"))


def pins_path(name: str, pins_dir: Optional[Path] = None) -> Path:
    path = (pins_dir or PINS_DIR) / f"{name}.txt"
    if not path.is_file():
        known = ", ".join(names(pins_dir)) or "none"
        raise FwEnvError(f"no pins for framework {name!r}: expected {path} (known: {known})")
    return path


def env_key(name: str, pins_dir: Optional[Path] = None) -> str:
    """``<name>-<sha12>``: sha256 over the pins file's bytes and this interpreter's major.minor."""
    digest = hashlib.sha256(pins_path(name, pins_dir).read_bytes())
    digest.update(f"\npython={sys.version_info[0]}.{sys.version_info[1]}\n".encode())
    return f"{name}-{digest.hexdigest()[:12]}"


def env_dir(name: str, pins_dir: Optional[Path] = None) -> Path:
    return cache_dir() / env_key(name, pins_dir)


def _python_in(venv: Path) -> Path:
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def is_built(name: str, pins_dir: Optional[Path] = None) -> bool:
    venv = env_dir(name, pins_dir)
    return (venv / COMPLETE).is_file() and _python_in(venv).exists()


def _rewrite_paths(venv: Path, old: str, new: str) -> None:
    """A venv records its own path in bin/ (console-script shebangs, activate): point them at the
    final folder after the rename. The interpreter itself finds site-packages relative to itself."""
    for path in (venv / "bin").iterdir():
        if path.is_symlink() or not path.is_file():
            continue
        try:
            data = path.read_bytes()
        except OSError:
            continue
        if old.encode() in data:
            path.write_bytes(data.replace(old.encode(), new.encode()))


def build(name: str, pins_dir: Optional[Path] = None, log: Optional[Path] = None) -> Path:
    """The venv for ``name``, built if missing; returns its folder. Safe to call from several
    processes at once: one builds, the others wait on the lock and find it built."""
    pins = pins_path(name, pins_dir)
    key = env_key(name, pins_dir)
    cache = cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    final = cache / key
    with open(cache / f"{key}.lock", "a+") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        if (final / COMPLETE).is_file() and _python_in(final).exists():
            return final
        shutil.rmtree(final, ignore_errors=True)  # a venv left by an older, non-atomic scheme
        tmp = cache / f".tmp-{key}-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        log = log or cache / f"{key}.build.log"
        started = time.monotonic()
        try:
            with open(log, "w") as out:
                out.write(f"# building {key} from {pins}\n")
                out.flush()
                steps = [
                    # No pip inside (ensurepip costs ~20 s here): this interpreter's pip installs into it.
                    [sys.executable, "-m", "venv", "--without-pip", str(tmp)],
                    [sys.executable, "-m", "pip", "--python", str(_python_in(tmp)), "install", "-q",
                     "--disable-pip-version-check", "-r", str(pins)],
                ]
                for cmd in steps:
                    left = BUILD_TIMEOUT_S - (time.monotonic() - started)
                    try:
                        proc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, timeout=max(left, 1.0))
                    except subprocess.TimeoutExpired as exc:
                        raise FwEnvError(f"building the {name} env ({key}) took over {BUILD_TIMEOUT_S:.0f} s "
                                         f"(SPANASSERT_FWENV_BUILD_TIMEOUT); log: {log}") from exc
                    if proc.returncode != 0:
                        raise FwEnvError(f"building the {name} env ({key}) failed: `{' '.join(cmd[-4:])}` exited "
                                         f"{proc.returncode}; pins: {pins}; log: {log}\n{_tail(log)}")
            _rewrite_paths(tmp, str(tmp), str(final))
            (tmp / COMPLETE).write_text(f"{key}\nbuilt in {time.monotonic() - started:.1f} s\n")
            os.replace(tmp, final)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return final


def _tail(log: Path, lines: int = 15) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def python_for(name: str) -> str:
    """The interpreter of ``name``'s env for a test, or ``pytest.skip`` saying why it cannot be had
    (under CI=true the skip fails the run: .ci/run builds the envs beforehand)."""
    import pytest

    try:
        return str(_python_in(build(name)))
    except FwEnvError as exc:
        pytest.skip(f"framework env {name!r} unavailable: {exc}")
    except OSError as exc:
        pytest.skip(f"framework env {name!r} unavailable: {type(exc).__name__}: {exc}")
    raise AssertionError("unreachable")


def subprocess_env(extra: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """The environment for a script in a framework env: this checkout's src/ first on PYTHONPATH,
    no proxy or API keys that could send a framework to the network."""
    env = {k: v for k, v in os.environ.items()
           if not k.endswith("_API_KEY") and k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env["PYTHONPATH"] = str(SRC)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.update(extra or {})
    return env


def run(name: str, args: Sequence[str], *, env: Optional[Dict[str, str]] = None, timeout: float = 120,
        cwd: Optional[str] = None) -> subprocess.CompletedProcess[str]:
    """Run ``python ARGS`` in ``name``'s env (skips when the env cannot be built)."""
    python = python_for(name)
    return subprocess.run([python, *args], env=subprocess_env(env), cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    cmd = args.pop(0) if args else "list"
    if cmd == "list":
        for name in names():
            print(f"{name}\t{env_key(name)}\t{'built' if is_built(name) else 'not built'}")
        return 0
    if cmd == "build":
        status = 0
        for name in args or names():
            started = time.monotonic()
            was_built = is_built(name)
            try:
                venv = build(name)
            except FwEnvError as exc:
                print(f"fwenv: {exc}", file=sys.stderr)
                status = 1
                continue
            took = "cached" if was_built else f"built in {time.monotonic() - started:.0f} s"
            print(f"fwenv: {name}: {venv} ({took})")
        return status
    if cmd == "python" and len(args) == 1:
        try:
            print(_python_in(build(args[0])))
        except FwEnvError as exc:
            print(f"fwenv: {exc}", file=sys.stderr)
            return 1
        return 0
    print(__doc__.split("\n\n")[-1], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
