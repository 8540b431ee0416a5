"""A venv with spanassert compiled by mypyc (and its test extra), cached outside the repository.

    python build_support/compiled_venv.py          # builds it if needed; prints its directory last
    python build_support/compiled_venv.py --path   # its directory, without building

The venv lives in ~/.cache/spanassert/venvs/compiled-<python>-<key>, the key a hash of what the build
compiles and installs (src/, setup.py, pyproject.toml, MANIFEST.in, build_support/) with the
interpreter's version and the mypy pin: an edited source gets a new venv, so it never runs a compiled
module older than its source. The build runs on a copy of the tree in a temporary directory (nothing is written into the
checkout, no compiled module into src/), with SPANASSERT_COMPILE=1 (a failed compile is an error), and
is checked afterwards: every module of compiled_modules.MODULES must import as a compiled module.
A file lock lets parallel runs share one build; the oldest compiled venvs beyond the last four go,
except one in use: whoever runs a venv holds a shared lock on <venv>.inuse (`flock -s`, as `make
test-compiled` and `make bench` do), and a venv whose lock is held is kept (a build in another
worktree once removed the venv under a 25-minute test run).
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import List

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "build_support"))

import compiled_modules as sb  # noqa: E402

CACHE = Path(os.environ.get("SPANASSERT_CACHE", Path.home() / ".cache" / "spanassert")) / "venvs"
# What the build reads: hashed for the key (README.md and LICENSE are copied, not hashed: the package's
# description and licence text change no module).
KEYED = ["src", "setup.py", "pyproject.toml", "MANIFEST.in", "build_support"]
TREE = [*KEYED, "README.md", "LICENSE"]
KEEP = 4


def _files() -> List[Path]:
    out: List[Path] = []
    for name in KEYED:
        p = ROOT / name
        if p.is_file():
            out.append(p)
        elif p.is_dir():
            out += [f for f in p.rglob("*") if f.is_file() and "__pycache__" not in f.parts
                    and f.suffix not in (".pyc", ".so", ".pyd") and ".egg-info" not in str(f)]
    return sorted(out)


def key() -> str:
    h = hashlib.sha256()
    h.update(f"{sys.version}|{platform.machine()}|{sb.MYPY}\n".encode())
    for f in _files():
        h.update(str(f.relative_to(ROOT)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:12]


def venv_dir() -> Path:
    return CACHE / f"compiled-py{sys.version_info[0]}{sys.version_info[1]}-{key()}"


def _python(venv: Path) -> Path:
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


CHECK = """
import importlib, importlib.machinery, json, sys
mods = json.loads(sys.argv[1])
ext = tuple(importlib.machinery.EXTENSION_SUFFIXES)
pure = [m for m in mods if not importlib.import_module(m).__file__.endswith(ext)]
print(json.dumps(pure))
"""


def build(venv: Path) -> None:
    t0 = time.time()
    shutil.rmtree(venv, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = str(_python(venv))
    pip = [py, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, "--upgrade", "pip"], check=True)
    subprocess.run([*pip, "setuptools>=77"], check=True)
    # What the compile needs installed (--no-build-isolation): the backend's own list.
    reqs = subprocess.run([py, "-c", "import spanassert_build as b; print('\\n'.join(b.compile_requirements()))"],
                          check=True, capture_output=True, text=True, cwd=ROOT,
                          env=dict(os.environ, PYTHONPATH=str(ROOT / "build_support"))).stdout.split()
    subprocess.run(pip + reqs, check=True)
    with tempfile.TemporaryDirectory(prefix="spanassert-compile-") as tmp:
        for name in TREE:
            p = ROOT / name
            if p.is_dir():
                shutil.copytree(p, Path(tmp) / name, ignore=shutil.ignore_patterns(
                    "__pycache__", "*.pyc", "*.so", "*.pyd", "*.egg-info"))
            elif p.exists():
                shutil.copy2(p, Path(tmp) / name)
        if not venv.name.endswith("-" + key()):
            # Named when the run started, copied after it waited for the lock (another build) and for
            # pip: a source edited meanwhile would be compiled into a venv whose name says otherwise.
            raise SystemExit("compiled_venv: the sources changed while the build waited; run it again")
        env = dict(os.environ, SPANASSERT_COMPILE="1")
        env.pop("SPANASSERT_PURE", None)
        subprocess.run([*pip, "--no-build-isolation", f"{tmp}[test]"], check=True, env=env, cwd=tmp)
    modules = [m[: -len(".py")].replace("/", ".").replace(".__init__", "") for m in sb.MODULES]
    out = subprocess.run([py, "-c", CHECK, json.dumps(modules)], capture_output=True, text=True,
                         cwd=tempfile.gettempdir())
    if out.returncode != 0:
        raise SystemExit(f"compiled_venv: the compiled modules do not import:\n{out.stderr}")
    pure = json.loads(out.stdout)
    if pure:
        raise SystemExit(f"compiled_venv: these modules were not compiled: {', '.join(pure)}")
    (venv / "build.json").write_text(json.dumps({"key": venv.name, "modules": modules, "mypy": sb.MYPY,
                                                 "seconds": round(time.time() - t0)}, indent=1))
    (venv / ".complete").touch()


def _prune() -> None:
    done = sorted((p for p in CACHE.glob("compiled-*") if (p / ".complete").exists()),
                  key=lambda p: (p / ".complete").stat().st_mtime, reverse=True)
    for old in done[KEEP:]:
        with open(old.with_name(old.name + ".inuse"), "w") as inuse:
            try:
                fcntl.flock(inuse, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # a test run or a benchmark is using it: kept until a later build
            shutil.rmtree(old, ignore_errors=True)
            os.unlink(inuse.name)


def main() -> int:
    venv = venv_dir()
    if "--path" in sys.argv[1:]:
        print(venv)
        return 0
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / ".compiled.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (venv / ".complete").exists():
            print(f"compiled_venv: {venv} (cached)", file=sys.stderr)
        else:
            print(f"compiled_venv: building {venv} ({len(sb.MODULES)} modules; a few minutes)", file=sys.stderr)
            try:
                build(venv)
            except BaseException:  # kept for a look as <venv>.failed (the next failure replaces it)
                failed = venv.with_name(venv.name + ".failed")
                shutil.rmtree(failed, ignore_errors=True)
                if venv.exists():
                    venv.rename(failed)
                raise
            _prune()
    print(venv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
