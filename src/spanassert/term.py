"""Terminal output shared by the subcommands: colour on a terminal only, never when the output is
piped or redirected, when ``NO_COLOR`` is set (any value, https://no-color.org) or ``TERM=dumb``;
``FORCE_COLOR`` (non-empty) turns it on anyway. Colour only adds ANSI codes around marks and verdict
words: the text is the same with and without it.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import re
from typing import TextIO

RESET = "\033[0m"
STYLES = {"passed": "\033[32m", "failed": "\033[1;31m", "inconclusive": "\033[33m", "not_applicable": "\033[2m",
          "warning": "\033[33m", "error": "\033[1;31m", "dim": "\033[2m"}

_MARK_STYLE = {"✓": "passed", "✗": "failed", "?": "inconclusive", "\u2013": "not_applicable"}
_LINE_MARK = re.compile("^(\\s*)([✓✗?\u2013])( )", re.M)
_COUNTS = re.compile(r"\b(\d+) (passed|failed|inconclusive)\b")
_DIAG = re.compile(r"\b(error|warning)(?= \[E_)")


def color_enabled(stream: TextIO) -> bool:
    env = os.environ
    if env.get("NO_COLOR"):
        return False
    if env.get("FORCE_COLOR"):
        return True
    if env.get("TERM") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except (ValueError, OSError):
        return False


def paint(text: str) -> str:
    """Colour the marks at line starts, ``N passed/failed/inconclusive`` counts (non-zero), and the
    severity word of diagnostics."""
    text = _LINE_MARK.sub(
        lambda m: f"{m.group(1)}{STYLES[_MARK_STYLE[m.group(2)]]}{m.group(2)}{RESET}{m.group(3)}", text)
    text = _COUNTS.sub(lambda m: m.group(0) if m.group(1) == "0" else f"{STYLES[m.group(2)]}{m.group(0)}{RESET}", text)
    return _DIAG.sub(lambda m: f"{STYLES[m.group(1)]}{m.group(1)}{RESET}", text)


def safe_stream(stream: TextIO) -> TextIO:
    """``stream``, set to replace what its encoding cannot show: a console that cannot show ✓/✗
    must not stop the output."""
    reconfigure = getattr(stream, "reconfigure", None)
    if reconfigure is not None:
        with contextlib.suppress(ValueError, OSError):
            reconfigure(errors="replace")
    return stream


def write(stream: TextIO, text: str) -> None:
    stream.write(paint(text) if color_enabled(stream) else text)


def add_rules_file_options(p: argparse.ArgumentParser) -> None:
    """How a command loads its rules files (``load_config``'s two options), worded once for
    ``validate`` and ``replay``."""
    p.add_argument("--allow-ineffective-assertions", action="store_true",
                   help="keep assertions that cannot fail (reported as warnings) instead of refusing the rules file")
    p.add_argument("--untrusted", action="store_true",
                   help="the rules files' authors are not trusted (e.g. a pull request): import nothing they name "
                        "(settings.embedder is refused) and read no file outside their folders (see SECURITY.md)")


def add_verbose_option(p: argparse.ArgumentParser) -> None:
    """``--verbose/-v`` (every subcommand): spanassert's own debug log on stderr."""
    p.add_argument("--verbose", "-v", action="store_true", help="log spanassert's debug messages to stderr")


# The options below are spelled the same on every command that has them; each command words its own help.
def add_config_option(p: argparse.ArgumentParser, metavar: str, text: str) -> None:
    """``--config/-c``, required: the rules file ``replay`` and ``serve`` judge by."""
    p.add_argument("--config", "-c", required=True, metavar=metavar, help=text)


def add_format_option(p: argparse.ArgumentParser, text: str) -> None:
    """``--format text|json``, text by default (``validate``, ``replay``, ``serve``)."""
    p.add_argument("--format", choices=("text", "json"), default="text", help=text)


def add_quiet_option(p: argparse.ArgumentParser, text: str) -> None:
    """``--quiet/-q`` (``validate``, ``replay``, ``serve``): less on the terminal, never another verdict."""
    p.add_argument("--quiet", "-q", action="store_true", help=text)


# First-generation threshold while replaying or serving (CPython's default is 700): both allocate
# many short-lived containers per span, and most of them are freed by reference counting anyway.
GC_GEN0_THRESHOLD = 50_000


def tune_gc() -> None:
    """In the ``spanassert`` process only (``replay``, ``serve``; never in the library, never when
    ``main`` is called from another program): what is loaded by now (modules, the rules) lives until
    exit, so later collections need not scan it again (``gc.freeze``), and the first generation is
    collected less often. Collection still runs, so cycles are freed; no verdict depends on it."""
    import gc

    gc.freeze()
    gen0, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(max(GC_GEN0_THRESHOLD, gen0), gen1, gen2)
