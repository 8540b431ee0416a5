#!/usr/bin/env python3
"""Lint and type checks over src/ that must find nothing: ruff and mypy --strict (configuration in
pyproject.toml). Every finding is printed with its file and line; there is no baseline, so the
count can never grow. A rule that must not apply somewhere is silenced there with its reason
(`# noqa: CODE -- why`, `# type: ignore[code]  # why`, or a per-file ignore in pyproject.toml); an
ignore without a reason is a finding too.

Exit 0 when both tools find nothing, 1 otherwise, 2 when a tool is missing.
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import List, Tuple

ROOT = Path(__file__).resolve().parent.parent
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


_IGNORE = re.compile(r"#\s*(noqa(?::\s*[A-Z0-9, ]+)?|type:\s*ignore(?:\[[a-z\-, ]+\])?)(?P<rest>.*)$")


def unreasoned_ignores() -> List[Tuple[str, str]]:
    """(file, "line: text") for every `# noqa` / `# type: ignore` over src/ that does not say why: a
    few words after it on its line, or a comment line `# the ignore below: ...` / `# the noqa below:
    ...` just above it."""
    out = []
    for path in sorted((ROOT / "src").rglob("*.py")):
        lines = path.read_text(encoding="utf-8").splitlines()
        for i, line in enumerate(lines):
            m = _IGNORE.search(line)
            if m is None or len(re.sub(r"^[-#:\s]+", "", m.group("rest"))) >= 3:
                continue
            if i and lines[i - 1].strip().startswith(("# the ignore below:", "# the noqa below:")):
                continue
            out.append((str(path.relative_to(ROOT)), f"{i + 1}: no reason given: {line.strip()}"))
    return out


def main() -> int:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    if sys.version_info < (3, 10):
        print("lint: mypy (pinned 2.4.1) needs Python 3.10+; run the lint on a newer Python", file=sys.stderr)
        return 2
    failed = False
    for tool, found in (("ruff", ruff_findings()), ("mypy", mypy_findings()), ("reasons", unreasoned_ignores())):
        for path, text in sorted(found):
            print(f"  {path}:{text}")
        print(f"lint: {tool}: {len(found)} finding(s) over src/")
        failed = failed or bool(found)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
