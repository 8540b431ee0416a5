"""``spanassert init``: write a starting rules file, drafted from recorded traces or an annotated example."""
from __future__ import annotations

import argparse
import os
import sys
from typing import Any, List

EXIT_OK = 0
EXIT_CONFIG = 2


def add_init_arguments(p: argparse.ArgumentParser) -> None:
    p.description = (
        "Write a starting rules file. With --from-trace, it is drafted from recorded traces (every "
        "format `replay` reads): the allowlist of the tools seen, per-tool call caps, argument "
        "schemas, orderings that always held, step and token budgets, each with headroom and a "
        "comment; every test in `mode: shadow` unless --enforce. Without it, a small annotated "
        "example. Exit 0 when written, 2 when the input could not be read or the output exists."
    )
    p.add_argument("--from-trace", nargs="+", metavar="FILE", dest="traces",
                   help="OTLP trace files or directories to draft from")
    p.add_argument("-o", "--output", "-c", "--config", metavar="FILE", dest="output",
                   help="the rules file to write (default: standard output); --config/-c is the same option, "
                        "spelled as on replay and serve")
    p.add_argument("--enforce", action="store_true", help="write the tests enforced instead of in shadow mode")
    p.add_argument("--force", action="store_true", help="overwrite the output file if it exists")
    from ..term import add_verbose_option

    add_verbose_option(p)
    p.set_defaults(func=run_init)


def run_init(args: Any) -> int:
    from .draft import EXAMPLE, draft, observe

    if args.output and os.path.exists(args.output) and not args.force:
        sys.stderr.write(f"spanassert init: {args.output} exists; pass --force to overwrite it\n")
        return EXIT_CONFIG
    if args.traces:
        issues: List[Any] = []
        episodes, spans = observe(args.traces, on_issue=issues.append)
        for issue in issues:
            sys.stderr.write(f"spanassert init: {issue}\n")
        errors = [i for i in issues if getattr(i, "severity", "error") == "error"]
        if not episodes:
            why = "no span could be read" if not spans else f"{spans} span(s) read, but no agent episode in them"
            sys.stderr.write(f"spanassert init: nothing to draft from: {why} ({', '.join(args.traces)[:300]})\n"
                             "    fix: pass OTLP trace files (JSON, JSON Lines, protobuf) recorded from the agent\n")
            return EXIT_CONFIG
        if errors:
            sys.stderr.write(f"spanassert init: {len(errors)} input error(s); the draft covers only what was read\n")
        text = draft(episodes, [str(t) for t in args.traces], enforce=args.enforce)
    else:
        text = EXAMPLE
    if args.output:
        tmp = args.output + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, args.output)
        sys.stderr.write(f"spanassert init: wrote {args.output}\n")
    else:
        sys.stdout.write(text)
    return EXIT_OK


__all__ = ["add_init_arguments", "run_init"]
