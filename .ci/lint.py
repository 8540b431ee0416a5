#!/usr/bin/env python3
"""Lint and type checks that cannot regress: ruff and mypy --strict over src/ (configuration in
pyproject.toml), compared per file with the findings recorded in .ci/lint-baseline.json.

A file may have fewer findings than its baseline, never more; a file not in the baseline must have
none. When you fix findings, run `.ci/lint.py --update` so the baseline follows them down. The goal
is an empty baseline (then every file is clean).

Exit 0 when no file grew, 1 otherwise (its findings are printed), 2 when a tool is missing.
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Dict, List, Tuple

ROOT = Path(__file__).resolve().parent.parent
BASELINE = ROOT / ".ci" / "lint-baseline.json"
_MYPY_LINE = re.compile(r"^(?P<file>[^:\n]+\.py):(?P<line>\d+): error: (?P<message>.*)$")


def _tool(name: str) -> List[str]:
    beside = Path(sys.executable).parent / name
    if beside.exists():
        return [str(beside)]
    found = shutil.which(name)
    if found is None:
        print(f"lint: `{name}` is not installed; `make venv` installs it (test extra)", file=sys.stderr)
        sys.exit(2)
    return [found]


def ruff_findings() -> List[Tuple[str, str]]:
    """(file, "line: CODE message") for every ruff finding over src/."""
    proc = subprocess.run([*_tool("ruff"), "check", "src", "--output-format", "json", "--quiet"],
                          cwd=ROOT, capture_output=True, text=True)
    if proc.returncode not in (0, 1):
        print(proc.stderr, file=sys.stderr)
        sys.exit(2)
    out = []
    for f in json.loads(proc.stdout or "[]"):
        path = str(Path(f["filename"]).resolve().relative_to(ROOT))
        out.append((path, f"{f['location']['row']}: {f['code']} {f['message']}"))
    return out


def mypy_findings() -> List[Tuple[str, str]]:
    """(file, "line: message") for every mypy --strict error over src/."""
    proc = subprocess.run([*_tool("mypy"), "--no-error-summary", "--no-pretty"], cwd=ROOT,
                          capture_output=True, text=True)
    if proc.returncode not in (0, 1):
        print(proc.stdout, proc.stderr, file=sys.stderr)
        sys.exit(2)
    out = []
    for line in proc.stdout.splitlines():
        m = _MYPY_LINE.match(line)
        if m:
            out.append((m.group("file"), f"{m.group('line')}: {m.group('message')}"))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--update", action="store_true", help="write the current counts as the baseline")
    args = parser.parse_args()

    if sys.version_info < (3, 10):
        print("lint: mypy (pinned 2.4.1) needs Python 3.10+; run the lint on a newer Python", file=sys.stderr)
        return 2
    current: Dict[str, List[Tuple[str, str]]] = {"ruff": ruff_findings(), "mypy": mypy_findings()}
    counts = {tool: dict(sorted(Counter(f for f, _ in found).items())) for tool, found in current.items()}
    if args.update:
        BASELINE.write_text(json.dumps(counts, indent=2) + "\n", encoding="utf-8")
        print(f"lint: baseline written: ruff {sum(counts['ruff'].values())}, mypy {sum(counts['mypy'].values())}")
        return 0

    baseline = json.loads(BASELINE.read_text(encoding="utf-8")) if BASELINE.exists() else {}
    grew = False
    for tool, found in current.items():
        allowed = baseline.get(tool, {})
        for path, n in counts[tool].items():
            if n > allowed.get(path, 0):
                grew = True
                print(f"lint: {tool}: {path} has {n} finding(s), baseline {allowed.get(path, 0)}:")
                for p, text in found:
                    if p == path:
                        print(f"  {path}:{text}")
        total, before = sum(counts[tool].values()), sum(allowed.values())
        print(f"lint: {tool}: {total} finding(s) over src/ (baseline {before})")
        if total < before and not grew:
            print(f"lint: {tool}: fewer than the baseline; run `.ci/lint.py --update` to lock the gain in")
    return 1 if grew else 0


if __name__ == "__main__":
    sys.exit(main())
