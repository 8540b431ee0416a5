"""`make bench`'s runner (benchmarks/run.py) as a command: its parts, and a clear refusal of a part it
does not have (before this, an unknown part printed an empty table's traceback)."""
import os
import subprocess
import sys

RUN = os.path.join(os.path.dirname(__file__), os.pardir, "benchmarks", "run.py")


def _run(*args: str) -> "subprocess.CompletedProcess[str]":
    return subprocess.run([sys.executable, RUN, *args], capture_output=True, text=True, timeout=120)


def test_help_lists_every_part() -> None:
    done = _run("--help")
    assert done.returncode == 0, done.stderr
    parts = done.stdout.strip().splitlines()[-1]
    assert parts.split()[1:] == ["live", "engine", "replay", "memory", "config", "serve", "html", "startup",
                                 "mcp", "guard"]


def test_an_unknown_part_is_refused_with_the_parts_named() -> None:
    done = _run("replay", "bogus")
    assert done.returncode == 2
    assert "unknown part 'bogus'" in done.stderr and "replay" in done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
