"""Command line: ``spanassert validate|schema`` (``replay`` and ``serve`` plug in the same way).

Each subcommand is two functions: ``add_<name>_arguments(parser)`` words the command's description,
declares its arguments and sets ``func``, and ``run_<name>(args) -> int`` does the work. To add one,
write both and name the first in :data:`SUBCOMMANDS` with the command's one-line help: the parser
handed to it is made there, once for every command (:func:`build_parser`).

Exit codes: 0 success (warnings allowed), 1 a check failed, 2 a config or usage error.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, TextIO, Tuple

from .term import add_format_option, add_quiet_option, add_rules_file_options, add_verbose_option, safe_stream

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_CONFIG = 2

VALIDATE_SCHEMA_ID = "spanassert.validate.v1"


def _out() -> TextIO:
    return safe_stream(sys.stdout)


# -- validate -----------------------------------------------------------------------------------
def add_validate_arguments(p: argparse.ArgumentParser) -> None:
    p.description = (
        "Check rules files: every problem is reported with file:line:column, key path and a fix. "
        "Unit-test forms (tool_blocklist, args_valid, sequence_valid with test data) are run. "
        "Exit 0 when valid, 1 when a unit-test form failed its `expect`, 2 on any config error."
    )
    p.add_argument("files", nargs="+", metavar="FILE", help="rules file(s) to check")
    add_format_option(p, "output format (default: text)")
    add_quiet_option(p, "text output lists only errors, warnings and failed unit-test forms (the summary line stays)")
    add_verbose_option(p)
    add_rules_file_options(p)
    p.set_defaults(func=run_validate)


def validate_file(path: str, *, allow_ineffective_assertions: bool = False, untrusted: bool = False) -> Dict[str, Any]:
    """One file's validation result, in the shape of the JSON report's ``files`` entries."""
    from .config import ConfigError, load_config, unit_result_line

    diagnostics: List[Any] = []
    unit_results: List[Dict[str, Any]] = []
    config_error = False
    try:
        config = load_config(Path(path), allow_ineffective_assertions=allow_ineffective_assertions, untrusted=untrusted)
    except ConfigError as exc:
        diagnostics = exc.diagnostics
        config_error = any(d.severity == "error" for d in diagnostics) or not diagnostics
    else:
        diagnostics = config.diagnostics
        for test in config.tests:
            for a, outcome in test.unit_results:
                unit_results.append({
                    "test": test.id,
                    "type": a.type_name,
                    "index": a.index,
                    "verdict": outcome.verdict.value,
                    "message": outcome.message,
                    "line": unit_result_line(path, test.id, a, outcome),
                })
    unit_failed = any(u["verdict"] != "passed" for u in unit_results)
    return {
        "file": path,
        "ok": not config_error and not unit_failed,
        "exit_code": EXIT_CONFIG if config_error else (EXIT_FAILED if unit_failed else EXIT_OK),
        "diagnostics": diagnostics,
        "unit_results": unit_results,
    }


def run_validate(args: argparse.Namespace) -> int:
    import logging

    log = logging.getLogger("spanassert.validate")
    results = []
    for f in args.files:
        results.append(validate_file(f, allow_ineffective_assertions=args.allow_ineffective_assertions,
                                     untrusted=args.untrusted))
        log.debug("%s: exit %d, %d diagnostic(s), %d unit-test form(s)", f, results[-1]["exit_code"],
                  len(results[-1]["diagnostics"]), len(results[-1]["unit_results"]))
    exit_code = max((r["exit_code"] for r in results), default=EXIT_OK)
    out = _out()
    if args.format == "json":
        report = {
            "schema": VALIDATE_SCHEMA_ID,
            "ok": exit_code == EXIT_OK,
            "exit_code": exit_code,
            "files": [
                {
                    "file": r["file"],
                    "ok": r["ok"],
                    "diagnostics": [d.to_dict() for d in r["diagnostics"]],
                    "unit_results": [{k: v for k, v in u.items() if k != "line"} for u in r["unit_results"]],
                }
                for r in results
            ],
        }
        from .core.escaping import escape_json_text

        out.write(escape_json_text(json.dumps(report, indent=2, ensure_ascii=False)) + "\n")
        return exit_code

    errors = warnings = passed = failed = 0
    lines: List[str] = []
    for r in results:
        for d in r["diagnostics"]:
            lines.append(d.format())
            if d.severity == "error":
                errors += 1
            else:
                warnings += 1
        for u in r["unit_results"]:
            ok = u["verdict"] == "passed"
            passed += ok
            failed += not ok
            if ok and args.quiet:
                continue
            lines.append(u["line"])
    verdict = {EXIT_OK: "valid", EXIT_FAILED: "unit-test form failed", EXIT_CONFIG: "invalid"}[exit_code]
    n = len(results)
    summary = (f"{verdict}: {n} file{'s' if n != 1 else ''}, {errors} error{'s' if errors != 1 else ''}, "
               f"{warnings} warning{'s' if warnings != 1 else ''}")
    if passed or failed:
        summary += f", unit-test forms {passed} passed / {failed} failed"
    lines.append(summary)
    from .term import write

    write(out, "\n".join(lines) + "\n")
    return exit_code


# -- schema -------------------------------------------------------------------------------------
def add_schema_arguments(p: argparse.ArgumentParser) -> None:
    p.description = (
        "Print the JSON Schema (draft 2020-12) of a rules file. Save it and point your editor at it, "
        "e.g. first line `# yaml-language-server: $schema=./spanassert.schema.json`."
    )
    p.set_defaults(func=run_schema)


def run_schema(args: argparse.Namespace) -> int:  # noqa: ARG001 -- every subcommand's handler takes its args
    from .config.schema import build_schema

    _out().write(json.dumps(build_schema(), indent=2, ensure_ascii=False) + "\n")
    return EXIT_OK


# -- options every subcommand spells the same way (--verbose/-v is declared in term.py) --------------
def _apply_verbose(args: argparse.Namespace) -> None:
    if getattr(args, "verbose", False):
        import logging

        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(name)s: %(levelname)s: %(message)s"))
        logger = logging.getLogger("spanassert")
        logger.addHandler(handler)
        logger.setLevel(logging.DEBUG)


# -- completion ---------------------------------------------------------------------------------
def add_completion_arguments(p: argparse.ArgumentParser) -> None:
    p.description = (
        "Print a completion script for subcommands, options and option values. "
        "bash: `source <(spanassert completion bash)` (or save it to "
        "/etc/bash_completion.d/spanassert); zsh: `source <(spanassert completion zsh)`; "
        "fish: `spanassert completion fish > ~/.config/fish/completions/spanassert.fish`."
    )
    p.add_argument("shell", choices=("bash", "zsh", "fish"), help="the shell to complete in")
    p.set_defaults(func=run_completion)


def run_completion(args: argparse.Namespace) -> int:
    from .completion import completion_script

    _out().write(completion_script(args.shell, build_parser(None, full=True)))
    return EXIT_OK


# -- wiring -------------------------------------------------------------------------------------
# name -> (module, function declaring the command's arguments, one-line help). A command's module is
# imported only when that command runs (or its --help is asked), so `spanassert validate` does not
# pay for the receiver's imports, and `spanassert --help` / `--version` import none of them. The
# one-line help is written here only: the top-level help lists it and the command's parser is made
# with it (tests/test_startup.py checks the two agree).
SUBCOMMANDS: Dict[str, Tuple[str, str, str]] = {
    "validate": ("spanassert.cli", "add_validate_arguments", "check rules files and run their unit-test forms"),
    "schema": ("spanassert.cli", "add_schema_arguments", "print the JSON Schema of the rules file"),
    "replay": ("spanassert.replay.cli", "add_replay_arguments",
               "re-check exported OTLP trace files against a rules file"),
    "serve": ("spanassert.serve", "add_serve_arguments", "receive OTLP traces (gRPC and HTTP) and check them live"),
    "init": ("spanassert.replay.init_cli", "add_init_arguments",
             "write a starting rules file (drafted from traces with --from-trace)"),
    "migrate": ("spanassert.config.migrate", "add_migrate_arguments",
                "convert an Assay v0 rules file (no `version`) to the V1 form"),
    "mcp-proxy": ("spanassert.live.guard_adapters.mcp_proxy", "add_mcp_proxy_arguments",
                  "run an MCP server behind a stdio proxy that refuses the tool calls a rule blocks"),
    "completion": ("spanassert.cli", "add_completion_arguments",
                   "print a shell completion script (bash, zsh or fish)"),
}


def build_parser(argv: Optional[List[str]] = None, *, full: bool = False) -> argparse.ArgumentParser:
    import importlib

    from . import __version__

    parser = argparse.ArgumentParser(
        prog="spanassert",
        description="Check assertions about AI-agent tool calls from OpenTelemetry spans.",
    )
    parser.add_argument("--version", action="version", version=f"spanassert {__version__}",
                        help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    chosen = next((a for a in (argv or []) if not a.startswith("-")), None)
    for name, (module, declare, help_text) in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=help_text)
        if full or name == chosen:
            getattr(importlib.import_module(module), declare)(p)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    """``argv`` None means this process is the program (the ``spanassert`` script, ``python -m
    spanassert``): only then may a command tune process-wide state such as the garbage collector."""
    own_process = argv is None
    if argv is None:
        argv = sys.argv[1:]
    parser = build_parser(argv)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits on usage errors and --help; main returns instead
        return exc.code if isinstance(exc.code, int) else EXIT_CONFIG
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help(sys.stderr)
        return EXIT_CONFIG
    _apply_verbose(args)
    args.own_process = own_process
    return int(func(args))


if __name__ == "__main__":
    sys.exit(main())
