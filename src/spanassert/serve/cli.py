"""``spanassert serve``: the command line."""
from __future__ import annotations

import argparse
import contextlib
import json
import logging
import signal
import sys
import threading
import time
from typing import Any, Optional

from ..report.files import write_atomic
from ..term import add_config_option, add_format_option, add_quiet_option, add_verbose_option
from .protocol import (
    DEFAULT_ENGINE_STALL_TIMEOUT,
    DEFAULT_FORWARD_QUEUE_SPANS,
    DEFAULT_GRPC_ENDPOINT,
    DEFAULT_HTTP_ENDPOINT,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_REQUEST_BYTES,
    DEFAULT_MAX_TRACE_SECONDS,
    DEFAULT_MAX_TRACE_SPANS,
    DEFAULT_QUEUE_SPANS,
    DEFAULT_ROOTLESS_WAIT_CAP,
    DEFAULT_SETTLE_SECONDS,
    EndpointError,
    ServeOptions,
    parse_endpoint,
)
from .providers import logger_provider_from_env, meter_provider_from_env
from .receiver import Receiver
from .tls import BEARER_TOKEN_ENV, TLSConfigError, TLSFiles, load_security


def add_serve_arguments(p: argparse.ArgumentParser) -> None:
    p.description = (
        "Run an OTLP receiver (gRPC on 4317, HTTP on 4318) that checks every received trace "
        "against the rules file with the same engine as the live processor and replay. Put it "
        "behind an OpenTelemetry Collector's otlp exporter. Violations go to stderr (one line "
        "each), to metrics/logs, and (with --forward) onto the forwarded spans as "
        "`gen_ai.evaluation.result` events. SIGTERM/SIGINT stop it gracefully (exit 0) after "
        "deciding every accepted span; a second signal cuts that drain short and still writes "
        "what was decided (exit 1 if spans were left unjudged)."
    )
    add_config_option(p, "FILE", "rules file")
    p.add_argument("--grpc-endpoint", default=DEFAULT_GRPC_ENDPOINT, metavar="HOST:PORT",
                   help=f"OTLP/gRPC address (default {DEFAULT_GRPC_ENDPOINT}: this machine only; 0.0.0.0:4317 "
                        "listens on every interface, then use TLS and a token; port 0 picks a free port; "
                        "'off' disables)")
    p.add_argument("--http-endpoint", default=DEFAULT_HTTP_ENDPOINT, metavar="HOST:PORT",
                   help=f"OTLP/HTTP address (default {DEFAULT_HTTP_ENDPOINT}: this machine only; 0.0.0.0:4318 "
                        "listens on every interface; port 0 picks a free port; 'off' disables)")
    p.add_argument("--tls-cert", metavar="FILE", help="PEM certificate (chain): both ports speak TLS 1.2+ only")
    p.add_argument("--tls-key", metavar="FILE", help="PEM private key of --tls-cert")
    p.add_argument("--tls-client-ca", metavar="FILE",
                   help="PEM CA certificate(s): require a client certificate signed by one (mutual TLS)")
    p.add_argument("--bearer-token-file", metavar="FILE",
                   help=f"require `Authorization: Bearer <token>` (gRPC metadata `authorization`) on every export, "
                        f"the token read from FILE (or from ${BEARER_TOKEN_ENV}); /health stays open")
    # Not folded: each add_argument below declares a different option (type, default, metavar, help with its
    # default); a table of those five fields would be the same list again (the duplicates tool pairs them).
    p.add_argument("--max-request-bytes", type=int, default=DEFAULT_MAX_REQUEST_BYTES, metavar="N",
                   help="largest request body, also after gzip decompression "
                        f"(default {DEFAULT_MAX_REQUEST_BYTES >> 20} MiB)")
    p.add_argument("--max-connections", type=int, default=DEFAULT_MAX_CONNECTIONS, metavar="N",
                   help="HTTP connections served at once; more are answered 503 + Retry-After and closed "
                        f"(default {DEFAULT_MAX_CONNECTIONS})")
    p.add_argument("--queue-size", type=int, default=DEFAULT_QUEUE_SPANS, metavar="SPANS",
                   help="spans waiting for the engine before senders are told to retry "
                        f"(default {DEFAULT_QUEUE_SPANS})")
    p.add_argument("--settle", type=float, default=DEFAULT_SETTLE_SECONDS, metavar="SECONDS",
                   help="quiet time after a trace's root arrived before the trace is judged "
                        f"(default {DEFAULT_SETTLE_SECONDS:g})")
    p.add_argument("--rootless-wait", type=float, default=None, metavar="SECONDS",
                   help="quiet time before a trace whose root never arrived is judged "
                        f"(default: the rules file's episodes.idle_timeout, at most {DEFAULT_ROOTLESS_WAIT_CAP:g})")
    p.add_argument("--max-trace-spans", type=int, default=DEFAULT_MAX_TRACE_SPANS, metavar="SPANS",
                   help="a trace holding this many spans is judged at once, and what follows in pieces of this size "
                        f"(late spans of its episode once that closed) (default {DEFAULT_MAX_TRACE_SPANS})")
    p.add_argument("--max-trace-seconds", type=float, default=DEFAULT_MAX_TRACE_SECONDS, metavar="SECONDS",
                   help="a trace still receiving spans this long after its first one is judged at once, the same way "
                        f"(default {DEFAULT_MAX_TRACE_SECONDS:g})")
    p.add_argument("--forward", metavar="URL",
                   help="send every accepted span on to this OTLP/HTTP base URL (/v1/traces is appended), "
                        "offending spans with a gen_ai.evaluation.result event")
    p.add_argument("--forward-queue-size", type=int, default=DEFAULT_FORWARD_QUEUE_SPANS, metavar="SPANS",
                   help="spans waiting to be forwarded before new ones are dropped "
                        f"(default {DEFAULT_FORWARD_QUEUE_SPANS})")
    p.add_argument("--report-json", metavar="FILE",
                   help="at shutdown, write every verdict and violation (replay's report format) to FILE; "
                        "keeps every episode result in memory, so meant for tests and bounded runs")
    p.add_argument("--engine-stall-timeout", type=float, default=DEFAULT_ENGINE_STALL_TIMEOUT, metavar="SECONDS",
                   help="/health answers 503 when the engine thread has not gone round its loop for this long "
                        f"(one trace taking that long to judge, or a hang; default {DEFAULT_ENGINE_STALL_TIMEOUT:g})")
    add_format_option(p, "text (default): one readable line per violation on stderr and a summary line on stdout "
                         "at stop; json: the same as one JSON object per line, for log shippers")
    add_quiet_option(p, "do not print violations to stderr")
    add_verbose_option(p)
    p.set_defaults(func=run_serve)


def _options_from_args(args: argparse.Namespace) -> ServeOptions:
    def endpoint(v: Optional[str]) -> Optional[str]:
        return None if v is None or v.strip().lower() in ("off", "none", "") else v

    return ServeOptions(
        grpc_endpoint=endpoint(args.grpc_endpoint), http_endpoint=endpoint(args.http_endpoint),
        max_request_bytes=args.max_request_bytes, queue_size=args.queue_size, settle=args.settle,
        rootless_wait=args.rootless_wait, forward=args.forward, forward_queue_size=args.forward_queue_size,
        report_json=args.report_json, quiet=args.quiet, engine_stall_timeout=args.engine_stall_timeout,
        max_trace_spans=args.max_trace_spans, max_trace_seconds=args.max_trace_seconds,
        max_connections=args.max_connections, output_format=args.format,
    )


def _report_bytes(receiver: Receiver) -> bytes:
    """The --report-json document. After a cut drain the engine thread may still be finishing a
    trace (it was given a few seconds); a report read while it adds a result is read again."""
    for attempt in range(20):
        try:
            return json.dumps(receiver.report_dict(), indent=2, ensure_ascii=False).encode("utf-8")
        except RuntimeError:  # noqa: PERF203 - "changed size during iteration": read it again
            if attempt == 19:
                raise
            time.sleep(0.05)
    raise AssertionError("unreachable")


def run_serve(args: argparse.Namespace) -> int:
    from ..config import load_to_run

    err = sys.stderr
    config, refused = load_to_run(args.config, "spanassert serve", err)
    if config is None:
        return refused
    options = _options_from_args(args)
    try:
        options.security = load_security(TLSFiles(args.tls_cert, args.tls_key, args.tls_client_ca,
                                                  args.bearer_token_file))
    except TLSConfigError as exc:
        err.write(f"spanassert serve: {exc}\n")
        return 2
    problems = []
    if options.grpc_endpoint is None and options.http_endpoint is None:
        problems.append("both --grpc-endpoint and --http-endpoint are off: nothing would be received")
    counts = (("--max-request-bytes", options.max_request_bytes), ("--queue-size", options.queue_size),
              ("--max-connections", options.max_connections), ("--max-trace-spans", options.max_trace_spans))
    problems += [f"{option} {n}: must be at least 1" for option, n in counts if n < 1]
    times = (("--max-trace-seconds", options.max_trace_seconds),
             ("--engine-stall-timeout", options.engine_stall_timeout))
    problems += [f"{option} {t}: must be > 0 seconds" for option, t in times if not t > 0]  # NaN too
    if options.settle < 0:
        problems.append(f"--settle {options.settle}: must be >= 0 seconds")
    if options.forward and not options.forward.startswith(("http://", "https://")):
        problems.append(f"--forward {options.forward!r}: expected an http:// or https:// URL")
    for ep, name in ((options.grpc_endpoint, "--grpc-endpoint"), (options.http_endpoint, "--http-endpoint")):
        if ep:
            try:
                parse_endpoint(ep, name)
            except EndpointError as exc:
                problems.append(str(exc))
    if problems:
        for p in problems:
            err.write(f"spanassert serve: {p}\n")
        return 2

    if getattr(args, "own_process", False):
        from ..term import tune_gc

        tune_gc()  # the engine thread holds every buffered span: fewer, cheaper collections
    # Violations are printed by the sink; keep the stdlib's last-resort handler from repeating them.
    logging.getLogger("spanassert").addHandler(logging.NullHandler())
    meter_provider = meter_provider_from_env()
    logger_provider = logger_provider_from_env()
    receiver = Receiver(config, options, meter_provider=meter_provider, logger_provider=logger_provider)
    # SIGTERM/SIGINT: stop and drain (decide what was accepted). A second one during the drain cuts
    # it short; the handlers stay installed until the end, so what was decided is still written.
    # They are installed before the ports open: a sender may get an answer (and its owner send
    # SIGTERM) before this thread runs again.
    stop = threading.Event()

    def on_signal(_signum: int, _frame: Any) -> None:
        if not stop.is_set():
            stop.set()
        elif not receiver.cut.is_set():
            receiver.cut.set()
            try:
                err.write("spanassert serve: second signal: cutting the drain short; writing what was decided\n")
                err.flush()
            except (OSError, ValueError):
                pass

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        try:
            receiver.start()
        except EndpointError as exc:
            err.write(f"spanassert serve: {exc}\n")
            return 2
        while not stop.wait(0.5):
            pass
        receiver.stop()
        if options.report_json:
            try:
                data = _report_bytes(receiver)
                write_atomic(options.report_json, data)
            except OSError as exc:
                err.write(f"spanassert serve: cannot write --report-json {options.report_json}: {exc}\n")
        receiver.out.write(receiver.summary() + "\n")
        receiver.out.flush()
        for provider in (meter_provider, logger_provider):
            if provider is not None and not receiver.cut.is_set():
                with contextlib.suppress(Exception):  # an unreachable endpoint must not fail the stop
                    provider.shutdown()
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
    if receiver._engine_error is not None:
        err.write(f"spanassert serve: the engine thread failed: {receiver._engine_error!r}\n")
        return 1
    if receiver.cut.is_set() and receiver.unjudged_spans:
        return 1
    return 0
