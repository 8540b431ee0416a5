"""``spanassert mcp-proxy [--config rules.yaml] -- <server command...>``: a stdio proxy in front of any
MCP server that refuses the ``tools/call`` requests a rule blocks, before the server sees them.

The MCP client (an IDE, an agent) starts the proxy instead of the server; the proxy starts the server
as its child and passes every JSON-RPC message through both ways, unchanged, over the ``mcp``
package's own stdio transports (``pip install 'spanassert[mcp]'``). A ``tools/call`` request is first
put to the :class:`~spanassert.live.guard.Guard`:

- blocked: the server never sees it; the client gets the answer MCP gives for a refused tool call, a
  result with ``isError: true`` whose text names the rule and its message (the model reads it and
  can carry on), and an ``execute_tool`` span carrying the decision event is written;
- allowed (or only a shadow test would block it): it goes on to the server, and an ``execute_tool``
  span covers the round trip (arguments at the start, the result or error at the end).

Every span of one proxy run is in one trace under a session span (the episode: counts, order and
data-flow rules see all of the session's calls), unless the request carries its client's W3C trace
context in ``params._meta`` (as the ``mcp`` package's clients do when they trace): then the call's
span joins the client's trace, so the episode is the client's agent run. Spans go to the exporters
``OTEL_TRACES_EXPORTER`` selects (default ``otlp``, configured by the standard ``OTEL_EXPORTER_OTLP_*``
variables; ``console`` writes to stderr, never to stdout, which is the wire), or with ``--export
FILE`` to an OTLP JSON Lines file that ``spanassert replay`` reads.

Here: the command line. :mod:`.gate` decides each call and writes its span (no I/O);
:mod:`.stdio` pumps the messages between the client and the server.
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Any, List, Optional, Sequence

from .gate import MAX_RESULT_CHARS, PROG, PROTOCOL_VERSION_META_KEY, ProxyTelemetry, ToolCallGate, refusal_result
from .stdio import EXIT_CONFIG, EXIT_OK, EXIT_SERVER_GONE, ClaimedStdio, serve_stdio

ENV_CONFIG = "SPANASSERT_CONFIG"



# -- command line -----------------------------------------------------------------------------------
def add_mcp_proxy_arguments(p: argparse.ArgumentParser) -> None:
    p.description = (
        "Start the MCP server command given after `--` and pass every message between it and "
        "this process's stdin/stdout (where the MCP client talks). A tools/call request that a "
        "test with `action: block` refuses never reaches the server: the client gets a tool "
        "result with isError=true naming the rule. Each tool call becomes an execute_tool span, "
        "exported as OTEL_TRACES_EXPORTER / OTEL_EXPORTER_OTLP_* say, or to --export FILE. "
        "Needs the mcp package: pip install 'spanassert[mcp]'. "
        "Example: spanassert mcp-proxy --config rules.yaml -- python my_server.py"
    )
    p.add_argument("--config", metavar="RULES",
                   help=f"rules file (default: ${ENV_CONFIG}); without one, calls are traced and none is refused")
    p.add_argument("--export", metavar="FILE",
                   help="write the spans to this OTLP JSON Lines file (for `spanassert replay`) instead of the "
                        "exporters OTEL_TRACES_EXPORTER selects")
    p.add_argument("server", nargs=argparse.REMAINDER, metavar="-- COMMAND [ARG ...]",
                   help="the MCP server's command line (stdio transport), after `--`")
    p.set_defaults(func=run_mcp_proxy)


def server_command(raw: Sequence[str]) -> List[str]:
    """The server's command line from what follows the options (argparse keeps the ``--``)."""
    command = list(raw)
    if command and command[0] == "--":
        command = command[1:]
    return command


def run_mcp_proxy(args: argparse.Namespace) -> int:
    err = sys.stderr
    command = server_command(args.server)
    if not command:
        err.write(f"{PROG}: no server command: give the MCP server's command line after `--`, "
                  f"e.g. `{PROG} --config rules.yaml -- python server.py`\n")
        return EXIT_CONFIG
    try:
        import anyio
        import mcp  # noqa: F401 -- imported first to name the missing extra
    except ImportError as exc:
        err.write(f"{PROG}: the mcp package is not installed ({exc}); install it with "
                  f"`pip install 'spanassert[mcp]'` (Python 3.10+)\n")
        return EXIT_CONFIG
    path = args.config or os.environ.get(ENV_CONFIG) or None
    config = None
    if path:
        from ....config import load_to_run

        config, _ = load_to_run(path, PROG, err)  # refused: exit 2, as every config error here
        if config is None:
            return EXIT_CONFIG
    try:
        exporters = span_exporters(args.export)
    except ValueError as exc:
        err.write(f"{PROG}: {exc}\n")
        return EXIT_CONFIG
    if config is None:
        err.write(f"{PROG}: no rules file (--config or ${ENV_CONFIG}): tool calls are traced, none is refused\n")
    telemetry = ProxyTelemetry(config, exporters, server=os.path.basename(command[0]))
    import functools

    import anyio

    try:
        return int(anyio.run(functools.partial(serve_stdio, command, telemetry,
                                               exit_when_server_gone=bool(getattr(args, "own_process", False)))))
    finally:
        telemetry.shutdown()


def span_exporters(export_path: Optional[str]) -> List[Any]:
    """``--export FILE``, else what ``OTEL_TRACES_EXPORTER`` names (default ``otlp``; its protocol from
    ``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`` / ``OTEL_EXPORTER_OTLP_PROTOCOL``, default ``http/protobuf``
    as the specification says; endpoint, headers and TLS are read by the exporter itself)."""
    if export_path:
        from ....otlp.writers import JsonLinesSpanExporter

        return [JsonLinesSpanExporter(export_path)]
    names = [n.strip().lower() for n in os.environ.get("OTEL_TRACES_EXPORTER", "otlp").split(",") if n.strip()]
    exporters: List[Any] = []
    for name in names:
        if name == "none":
            continue
        if name == "otlp":
            protocol = (os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
                        or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "http/protobuf").strip().lower()
            if protocol == "grpc":
                from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
            elif protocol == "http/protobuf":
                # the ignore below: one name for the gRPC or the HTTP exporter
                from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # type: ignore[assignment]
                    OTLPSpanExporter,
                )
            else:
                raise ValueError(f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol!r} is not supported here; "
                                 f"use grpc or http/protobuf")
            exporters.append(OTLPSpanExporter())
        elif name == "console":
            from opentelemetry.sdk.trace.export import ConsoleSpanExporter

            exporters.append(ConsoleSpanExporter(out=sys.stderr))  # stdout is the MCP wire
        else:
            raise ValueError(f"OTEL_TRACES_EXPORTER names {name!r}: the proxy knows otlp, console and none "
                             f"(or pass --export FILE)")
    return exporters


__all__ = ["add_mcp_proxy_arguments", "run_mcp_proxy", "ToolCallGate", "ProxyTelemetry", "refusal_result",
           "span_exporters", "serve_stdio", "ClaimedStdio", "PROG", "ENV_CONFIG", "MAX_RESULT_CHARS",
           "PROTOCOL_VERSION_META_KEY", "EXIT_OK", "EXIT_SERVER_GONE", "EXIT_CONFIG"]
