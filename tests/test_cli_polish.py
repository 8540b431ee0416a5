"""The CLI as a new user meets it, each item through a subprocess: --version; the same spelling of
shared options on every subcommand; colour on a terminal only (a real pty), never when piped or
with NO_COLOR; shell completion scripts that bash, zsh and fish really load and answer from."""
from __future__ import annotations

import os
import pty
import re
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional

import pytest

from replay_episodes import write_episodes

CLI = [sys.executable, "-m", "spanassert.cli"]
ANSI = re.compile(r"\x1b\[[0-9;]*m")

RULES = """\
version: 1
tests:
  - id: no-db-delete
    severity: critical
    assertions:
      - type: trace_must_not_call_tool
        tool: delete_database
"""


def run(*args: str, env: Optional[Dict[str, str]] = None) -> "subprocess.CompletedProcess[str]":
    full = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR", "SPANASSERT_DEBUG")}
    full.update(env or {})
    return subprocess.run(CLI + list(args), capture_output=True, text=True, timeout=120, env=full, check=False)


def run_in_pty(args: List[str], env: Dict[str, str], timeout: float = 60) -> str:
    """Run with stdout and stderr on a real terminal; returns what it wrote."""
    full = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    full.update(env)
    full["TERM"] = "xterm-256color"
    master, slave = pty.openpty()
    proc = subprocess.Popen(CLI + args, stdin=slave, stdout=slave, stderr=slave, env=full, close_fds=True)
    os.close(slave)
    out = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
        elif proc.poll() is not None:
            break
    proc.wait(timeout=10)
    os.close(master)
    return out.decode("utf-8", "replace")


def test_version_prints_the_package_version() -> None:
    from spanassert import __version__

    done = run("--version")
    assert done.returncode == 0
    assert done.stdout.strip() == f"spanassert {__version__}"


@pytest.mark.parametrize("command,expected", [
    ("replay", ["--config", "-c", "--format", "--quiet", "-q", "--verbose", "-v"]),
    ("serve", ["--config", "-c", "--format", "--quiet", "-q", "--verbose", "-v"]),
    ("validate", ["--format", "--quiet", "-q", "--verbose", "-v"]),
    ("init", ["--config", "-c", "--verbose", "-v"]),
])
def test_shared_options_are_spelled_the_same_on_every_subcommand(command: str, expected: List[str]) -> None:
    done = run(command, "--help")
    assert done.returncode == 0, done.stderr
    spelled = set(re.findall(r"(?<![\w-])(--?[a-z][a-z-]*)", done.stdout))
    assert set(expected) <= spelled, sorted(set(expected) - spelled)
    if command == "validate":
        assert "FILE [FILE ...]" in done.stdout  # validate keeps taking files, not --config


def test_init_writes_the_rules_file_named_by_config(tmp_path: Path) -> None:
    target = tmp_path / "rules.yaml"
    done = run("init", "-c", str(target))
    assert done.returncode == 0, done.stderr
    assert run("validate", str(target)).returncode == 0


def test_verbose_logs_spanassert_debug_lines_and_quiet_validate_prints_only_the_summary(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES, encoding="utf-8")
    quiet = run("validate", "-q", str(rules))
    assert quiet.returncode == 0 and quiet.stdout.strip().startswith("valid: 1 file")
    assert len(quiet.stdout.strip().splitlines()) == 1
    assert quiet.stderr == ""
    verbose = run("validate", "-v", str(rules))
    assert verbose.returncode == 0
    assert re.search(r"^spanassert\.validate: DEBUG: .*rules\.yaml: exit 0", verbose.stderr, re.M), verbose.stderr


def test_verbose_replay_says_what_it_read(replay_args: List[str]) -> None:
    plain = run(*replay_args)
    assert "DEBUG" not in plain.stderr
    verbose = run(*replay_args, "--verbose")
    assert verbose.returncode == 1
    assert "spanassert.replay: DEBUG: rules " in verbose.stderr and "1 test(s) selected: no-db-delete" in verbose.stderr
    assert re.search(r"read \d+ span\(s\) from .* 2 episode\(s\), 1 violation\(s\)", verbose.stderr), verbose.stderr


@pytest.fixture()
def replay_args(tmp_path: Path) -> List[str]:
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES, encoding="utf-8")
    traces = tmp_path / "traces.jsonl"
    write_episodes(traces, [[("search", {})], [("delete_database", {})]])
    return ["replay", str(traces), "-c", str(rules)]


def test_colour_on_a_terminal_only(replay_args: List[str]) -> None:
    on_tty = run_in_pty(replay_args, {})
    assert "\x1b[1;31m✗\x1b[0m" in on_tty and "\x1b[32m✓\x1b[0m" in on_tty, on_tty
    assert "\x1b[1;31m1 failed\x1b[0m" in on_tty
    no_color = run_in_pty(replay_args, {"NO_COLOR": "1"})
    assert "✗" in no_color and not ANSI.search(no_color), no_color
    piped = run(*replay_args)
    assert piped.returncode == 1 and "✗" in piped.stdout and not ANSI.search(piped.stdout + piped.stderr)
    # Same words with and without colour.
    assert ANSI.sub("", on_tty).replace("\r\n", "\n").strip() == no_color.replace("\r\n", "\n").strip()


def _script(shell: str) -> str:
    done = run("completion", shell)
    assert done.returncode == 0, done.stderr
    return done.stdout


BASH_CASES = [
    ("spanassert rep", ["replay"]),
    ("spanassert replay --fo", ["--format"]),
    ("spanassert replay x.jsonl --format ", ["json", "text"]),
    ("spanassert completion ", ["bash", "fish", "zsh"]),
    ("spanassert --ver", ["--version"]),
]


def test_bash_completion_completes_subcommands_options_and_choices(tmp_path: Path) -> None:
    script = tmp_path / "spanassert.bash"
    script.write_text(_script("bash"), encoding="utf-8")
    for line, expected in BASH_CASES:
        words = line.split(" ")
        probe = (f"source {script}; COMP_WORDS=({' '.join(repr(w) for w in words)}); "
                 f"COMP_CWORD={len(words) - 1}; _spanassert; printf '%s\\n' \"${{COMPREPLY[@]}}\"")
        done = subprocess.run(["bash", "--norc", "-c", probe], capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, done.stderr
        assert sorted(done.stdout.split()) == expected, (line, done.stdout)


def test_zsh_completion_loads_and_answers() -> None:
    zsh = shutil.which("zsh")
    if not zsh:
        pytest.skip("zsh not installed (.ci/run installs it)")
    probe = ("setopt ksharrays; source /dev/stdin; COMP_WORDS=(spanassert replay x --format ''); COMP_CWORD=4; "
             "_spanassert; print -r -- ${COMPREPLY[*]}; COMP_WORDS=(spanassert rep); COMP_CWORD=1; _spanassert; "
             "print -r -- ${COMPREPLY[*]}")
    done = subprocess.run([zsh, "-f", "-c", probe], input=_script("zsh"), capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    first, second = done.stdout.splitlines()[-2:]
    assert first.split() == ["text", "json"]
    assert "replay" in second.split()  # zsh itself narrows the candidates to the typed prefix


def test_fish_completion_loads_and_answers(tmp_path: Path) -> None:
    fish = shutil.which("fish")
    if not fish:
        pytest.skip("fish not installed (.ci/run installs it)")
    script = tmp_path / "spanassert.fish"
    script.write_text(_script("fish"), encoding="utf-8")

    def complete(line: str) -> List[str]:
        done = subprocess.run([fish, "--no-config", "-c", f"source {script}; complete -C {line!r}"],
                              capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, done.stderr
        return sorted(row.split("\t")[0] for row in done.stdout.splitlines())

    assert complete("spanassert rep") == ["replay"]
    assert complete("spanassert replay x --format ") == ["json", "text"]
    assert "--config" in complete("spanassert serve --con")
