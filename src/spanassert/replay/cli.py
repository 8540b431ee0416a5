"""``spanassert replay``: re-check exported telemetry against today's rules.

Plugs into :mod:`spanassert.cli` the same way as the other subcommands
(``add_replay_arguments(parser)`` declares the arguments, ``run_replay(args)`` does the work).

Exit codes: 0 no failed verdict, 1 at least one failed verdict (shadow-mode tests never fail the
run; ``--fail-on-inconclusive`` counts inconclusive as failed), 2 a config, input or usage error, or
an input with no span or no episode to judge (``--allow-empty`` lets the verdicts decide then).
Nothing here ends in a traceback: every error is one line saying what, where and how to fix it.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from typing import Any, List, Optional

from ..term import (
    add_config_option,
    add_format_option,
    add_quiet_option,
    add_rules_file_options,
    add_verbose_option,
    safe_stream,
    tune_gc,
)

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_ERROR = 2
EXIT_INTERRUPTED = 130

PROG = "spanassert replay"


_LAST_NS = 2 ** 64 - 1  # the last time an OTLP span can hold (fixed64 ns since the epoch: 2554-07-21)


def _timestamp(text: str) -> int:
    """Unix seconds or ISO 8601 -> ns since the epoch, in the range of an OTLP time (1970 to 2554)."""
    import datetime as _dt

    try:
        seconds = float(text)
    except ValueError:
        seconds = None
    if seconds is not None and seconds == seconds:  # a number (NaN is not one: it is read as a date, and refused)
        ns = seconds * 1e9
        if not 0 <= ns <= _LAST_NS:  # infinity included ('1e400' ended in an OverflowError traceback)
            raise argparse.ArgumentTypeError(f"{text!r} is out of range: Unix seconds from 0 (1970) to "
                                             f"{_LAST_NS // 10 ** 9} (2554), e.g. 1764520800")
        return int(ns)
    try:
        value = _dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected Unix seconds (1764520800) or an ISO 8601 time (2026-11-30T16:40:00Z), got {text!r}") from None
    if value.tzinfo is None:
        value = value.replace(tzinfo=_dt.timezone.utc)
    ns = int(value.timestamp() * 1e9)
    if not 0 <= ns <= _LAST_NS:
        raise argparse.ArgumentTypeError(f"{text!r} is out of range: a time from 1970 to 2554, "
                                         "e.g. 2026-11-30T16:40:00Z")
    return ns


# More processes than this is a typo, not a plan: each one reads the whole input (an unchecked
# `--jobs 99999999999999999999` forked until the machine refused).
MAX_JOBS = 256


def _positive_int(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {n}")
    return n


def _jobs(text: str) -> int:
    n = _positive_int(text)
    if n > MAX_JOBS:
        raise argparse.ArgumentTypeError(f"at most {MAX_JOBS} processes, got {n}; this machine has "
                                         f"{os.cpu_count() or 1} CPU(s): --jobs {os.cpu_count() or 1} is a good start")
    return n


def add_replay_arguments(p: argparse.ArgumentParser) -> None:
    from .driver import DEFAULT_SETTLE_SPANS

    p.description = (
        "Re-check exported telemetry (OTLP JSON Lines, OTLP JSON, protobuf, length-prefixed frames, "
        "gzip/zstd) against a rules file, with the verdicts the live processor gives. "
        "Exit 0 when no verdict failed, 1 when one did, 2 on a config or input error."
    )
    p.add_argument("paths", nargs="+", metavar="PATH",
                   help="input files, directories (read recursively), glob patterns, or - for stdin")
    add_config_option(p, "RULES", "the rules file (YAML)")
    add_format_option(p, "stdout format: text summary (default) or the JSON report (schema spanassert.replay.v1)")
    p.add_argument("--junit", metavar="FILE", help="also write a JUnit XML report to FILE")
    p.add_argument("--sarif", metavar="FILE", help="also write a SARIF 2.1.0 report to FILE")
    p.add_argument("--html", metavar="FILE",
                   help="also write a self-contained HTML report to FILE (rules summary, violations over time, "
                        "per-episode call timelines, filters by rule, agent and verdict; opens without network)")
    p.add_argument("--fail-on-inconclusive", action="store_true",
                   help="count inconclusive verdicts as failures (exit 1)")
    p.add_argument("--skip-invalid", action="store_true",
                   help="report malformed input lines but do not exit 2 because of them")
    p.add_argument("--allow-empty", action="store_true",
                   help="exit by the verdicts even when no span was read or no episode was found "
                        "(by default that is exit 2: a broken export path must not pass)")
    p.add_argument("--strict", action="store_true", help="stop at the first malformed input line (exit 2)")
    p.add_argument("--baseline-config", metavar="OLD_RULES",
                   help="also judge the same spans with OLD_RULES and list the episodes whose verdicts differ; "
                        "the exit code follows --config")
    p.add_argument("--settle-spans", type=_positive_int, default=DEFAULT_SETTLE_SPANS, metavar="N",
                   help=f"spans read after a trace's root before the trace is judged complete "
                        f"(default {DEFAULT_SETTLE_SPANS}); raise it when one trace's spans are far apart in the input")
    p.add_argument("--jobs", "-j", type=_jobs, default=1, metavar="N",
                   help="judge the input in N processes, each taking a share of the traces (every process reads "
                        "all the input); the report is the same as with one. Needs trace-keyed episodes "
                        "(default 1)")
    add_quiet_option(p, "text output lists only failed and inconclusive results; no progress")
    add_rules_file_options(p)
    add_verbose_option(p)
    p.add_argument("--test", action="append", default=[], metavar="ID", dest="tests",
                   help="run only this test of the rules file (repeatable)")
    p.add_argument("--tag", action="append", default=[], metavar="TAG", dest="tags",
                   help="run only the tests carrying this tag (repeatable; with --test, either selects)")
    p.add_argument("--since", type=_timestamp, metavar="TIME",
                   help="report only episodes whose trace has spans at or after TIME "
                        "(Unix seconds, or ISO 8601 such as 2026-11-30T16:40:00Z); verdicts still use all the input")
    p.add_argument("--until", type=_timestamp, metavar="TIME",
                   help="report only episodes whose trace has spans at or before TIME (same forms as --since)")
    p.set_defaults(func=run_replay)


def _select(config: Any, tests: List[str], tags: List[str], option: str) -> Any:
    """The config with only the tests chosen by --test/--tag, or None after printing why not."""
    import copy

    from ..core.suggest import close_names

    if not tests and not tags:
        return config
    known = [t.id for t in config.tests]
    for wanted in tests:
        if wanted not in known:
            near = close_names(wanted, known, n=3)
            hint = f"did you mean {', '.join(repr(n) for n in near)}? " if near else ""
            _error(f"--test {wanted}: no test with that id in {option} {config.source or ''}; {hint}"
                   f"the ids are: {', '.join(known) or '(none)'}")
            return None
    all_tags = sorted({tag for t in config.tests for tag in t.tags})
    for wanted in tags:
        if wanted not in all_tags:
            _error(f"--tag {wanted}: no test carries that tag in {option} {config.source or ''}; "
                   f"the tags are: {', '.join(all_tags) or '(none: add `tags: [...]` to tests)'}")
            return None
    chosen = copy.copy(config)
    chosen.tests = [t for t in config.tests if t.id in tests or any(tag in t.tags for tag in tags)]
    return chosen


def _error(message: str) -> int:
    safe_stream(sys.stderr).write(f"{PROG}: error: {message}\n")
    return EXIT_ERROR


class _Progress:
    """Spans read and episodes decided, redrawn on one stderr line, only for a human watching."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.last = 0.0
        self.drawn = False

    def __call__(self, report: Any) -> None:
        now = time.monotonic()
        if not self.enabled or now - self.last < 0.2:
            return
        self.last = now
        sys.stderr.write(f"\r{PROG}: {report.spans_read} spans read, {len(report.episodes)} episodes decided")
        sys.stderr.flush()
        self.drawn = True

    def clear(self) -> None:
        if self.drawn:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()


def _load(path: str, option: str, allow_ineffective: bool, untrusted: bool = False) -> Any:
    """The config, or None after printing every problem (the caller exits 2)."""
    from ..config import load_config
    from ..core.model import ConfigError

    if not os.path.exists(path):
        _error(f"{option} {path}: no such file; pass the path of a rules file")
        return None
    try:
        return load_config(path, allow_ineffective_assertions=allow_ineffective, untrusted=untrusted)
    except ConfigError as exc:
        err = safe_stream(sys.stderr)
        for d in exc.diagnostics:
            err.write(d.format() + "\n")
        errors = sum(1 for d in exc.diagnostics if d.severity == "error") or 1
        _error(f"{option} {path}: the rules file has {errors} error{'s' if errors != 1 else ''} (listed above); "
               f"fix them (`spanassert validate {path}` checks the file alone)")
        return None


def _refuse_failed_unit_forms(config: Any, path: str, option: str) -> Optional[int]:
    """Exit 1 with ``validate``'s words when the file's own unit-test forms fail; None otherwise."""
    from ..config import UnitFormFailure, require_runnable

    try:
        require_runnable(config)
    except UnitFormFailure as exc:
        err = safe_stream(sys.stderr)
        for line in exc.lines:
            err.write(line + "\n")
        _error(f"{option} {path}: {len(exc.lines)} unit-test form(s) of the rules file failed (listed above), "
               f"so it is not run; fix them (`spanassert validate {path}` runs them alone)")
        return EXIT_FAILED
    return None


def _write(path: str, data: bytes, option: str) -> Optional[int]:
    from ..report.files import write_atomic

    try:
        write_atomic(path, data)
    except OSError as exc:
        return _error(f"{option} {path}: cannot write the report ({exc.strerror or exc}); "
                      "pass a writable path")
    return None


def run_replay(args: argparse.Namespace) -> int:
    try:
        return _run(args)
    except KeyboardInterrupt:
        sys.stderr.write(f"\n{PROG}: interrupted\n")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # stdout closed early (e.g. piped into head): nothing left to say.
        with contextlib.suppress(OSError):
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 -- it is stdout until the process exits
        return EXIT_ERROR
    except Exception as exc:  # a bug must still end in one line, not a traceback
        if os.environ.get("SPANASSERT_DEBUG"):
            raise
        return _error(f"internal error: {type(exc).__name__}: {exc}; please report it with the command line used "
                      "(set SPANASSERT_DEBUG=1 to see the traceback)")


def _run(args: argparse.Namespace) -> int:
    from ..otlp import OTLPInputError
    from ..report import baseline_diff, render_junit, render_sarif, render_text, report_document
    from .driver import replay_paths

    config = _load(args.config, "--config", args.allow_ineffective_assertions, args.untrusted)
    if config is None:
        return EXIT_ERROR
    config = _select(config, args.tests, args.tags, "--config")
    if config is None:
        return EXIT_ERROR
    import logging

    log = logging.getLogger("spanassert.replay")
    log.debug("rules %s: %d test(s) selected: %s", args.config, len(config.tests),
              ", ".join(t.id for t in config.tests))
    if getattr(args, "own_process", False):
        tune_gc()
    configs: List[Any] = [config]
    if args.baseline_config:
        old = _load(args.baseline_config, "--baseline-config", True, args.untrusted)
        if old is None:
            return EXIT_ERROR
        if args.tests or args.tags:
            import copy

            old = copy.copy(old)
            old.tests = [t for t in old.tests if t.id in args.tests or any(tag in t.tags for tag in args.tags)]
        configs.append(old)
    for c, path, option in zip(configs, (args.config, args.baseline_config), ("--config", "--baseline-config")):
        refused = _refuse_failed_unit_forms(c, path, option)
        if refused is not None:
            return refused
    window = None
    if args.since is not None or args.until is not None:
        window = (args.since if args.since is not None else 0,
                  args.until if args.until is not None else _LAST_NS)
        if window[0] > window[1]:
            return _error("--since is after --until; swap them")

    jobs = getattr(args, "jobs", 1)
    if jobs > 1:
        from .parallel import refusal

        why = refusal(configs, args.paths, jobs)
        if why is not None:
            return _error(why)
    err = safe_stream(sys.stderr)
    progress = _Progress(enabled=err.isatty() and not args.quiet and jobs == 1)
    started = time.monotonic()
    try:
        if jobs > 1:
            from .parallel import replay_paths_jobs

            reports = replay_paths_jobs(configs, args.paths, jobs, strict=args.strict, settle_spans=args.settle_spans,
                                        window=window, timelines=bool(args.html))
        else:
            reports = replay_paths(configs, args.paths, strict=args.strict, settle_spans=args.settle_spans,
                                   on_progress=progress, window=window, timelines=bool(args.html))
    except OTLPInputError as exc:
        progress.clear()
        return _error(f"{exc.issue.format()} (stopped at the first bad input because of --strict; "
                      "fix the input, or drop --strict to check the rest and list every bad line)")
    except Exception as exc:
        if jobs > 1:
            from .parallel import WorkerFailed

            if isinstance(exc, WorkerFailed):  # a bug or a killed worker: no report at all
                progress.clear()
                return _error(f"{exc} (run without --jobs to check the input in one process)")
        raise
    progress.clear()
    report = reports[0]
    log.debug("read %d span(s) from %s in %.2f s: %d episode(s), %d violation(s), %d input issue(s)",
              report.spans_read, ", ".join(args.paths), time.monotonic() - started, len(report.episodes),
              len(report.violations), len(report.issues))
    diff = baseline_diff(reports[1], report) if len(reports) > 1 else None
    exit_code = report.exit_code(fail_on_inconclusive=args.fail_on_inconclusive, skip_invalid=args.skip_invalid,
                                 allow_empty=args.allow_empty)

    if args.junit:
        failed = _write(args.junit, render_junit(report, fail_on_inconclusive=args.fail_on_inconclusive), "--junit")
        if failed is not None:
            return failed
    if args.sarif:
        sarif = render_sarif(report, fail_on_inconclusive=args.fail_on_inconclusive)
        failed = _write(args.sarif, (json.dumps(sarif, indent=2, ensure_ascii=False) + "\n").encode("utf-8"), "--sarif")
        if failed is not None:
            return failed

    if args.html:
        from ..report.html import render_html

        failed = _write(args.html, render_html(report).encode("utf-8"), "--html")
        if failed is not None:
            return failed

    out = safe_stream(sys.stdout)
    if args.format == "json":
        doc = report_document(report, exit_code=exit_code, fail_on_inconclusive=args.fail_on_inconclusive,
                              skip_invalid=args.skip_invalid, allow_empty=args.allow_empty, baseline=diff)
        from ..core.escaping import escape_json_text

        out.write(escape_json_text(json.dumps(doc, indent=2, ensure_ascii=False)) + "\n")
    else:
        from ..term import write

        write(out, render_text(report, quiet=args.quiet, baseline=diff))
    out.flush()
    if report.input_errors:
        # Also on stderr, so a CI log shows where the input was bad even with --format json.
        for issue in report.input_errors:
            err.write(f"{PROG}: {issue.format() if hasattr(issue, 'format') else issue}\n")
        if not args.skip_invalid:
            err.write(f"{PROG}: {len(report.input_errors)} bad input record(s) were skipped and the rest checked; "
                      "exit 2 — fix the input, or pass --skip-invalid to let verdicts decide the exit code\n")
    if report.internal_errors:
        from ..core.escaping import escape_control

        first = escape_control(report.internal_error_first or "")
        err.write(f"{PROG}: {report.internal_errors} internal error(s) while judging (the first: {first}); what each "
                  "kept from being judged is inconclusive, every other trace was judged; exit 2 — please report "
                  "it with the command line used\n")
    if report.empty_reason is not None and not args.allow_empty:
        _error(f"nothing to judge in {', '.join(args.paths)}: {report.empty_reason}; exit 2 "
               "(pass --allow-empty when an empty input is expected)")
    return exit_code


def main(argv: Optional[List[str]] = None) -> int:
    """``python -m spanassert.replay.cli`` — the same as ``spanassert replay``."""
    parser = argparse.ArgumentParser(prog="spanassert")
    sub = parser.add_subparsers(dest="command")
    add_replay_arguments(sub.add_parser("replay"))
    try:
        args = parser.parse_args(["replay", *(sys.argv[1:] if argv is None else argv)])
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else EXIT_ERROR
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
