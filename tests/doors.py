"""The replay and serve doors for tests that judge the same spans live, replayed and served.

``live_run`` plays spans under the live processor in the real SDK and writes them to a file;
``replay_cli`` runs ``spanassert replay`` as a subprocess (the real CLI: argument parsing, reading,
exit code), with the environment's ``SPANASSERT_*`` settings removed so a developer's shell cannot
change the answer. ``serve_records`` hands records to serve's in-process receiver as its endpoints
would (intake, early check, trace buffer, engine thread, no ports), stops it gracefully and returns
its report; ``verdicts`` reads a report's verdicts (with their messages when asked)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple, Union


def replay_cli(rules: Union[str, Path], path: Union[str, Path], *flags: str,
               env: Optional[Dict[str, str]] = None) -> "subprocess.CompletedProcess[str]":
    """``spanassert replay FLAGS --config RULES PATH``; ``env`` adds settings to the cleaned environment."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SPANASSERT_")}
    clean.update(env or {})
    return subprocess.run([sys.executable, "-m", "spanassert", "replay", *flags, "--config", str(rules), str(path)],
                          capture_output=True, text=True, timeout=120, env=clean)


def live_run(config: Any, play: Callable[[Any], None], path: Union[str, Path], background: bool = False,
             resource: Optional[Dict[str, Any]] = None) -> List[Any]:
    """``play(tracer)`` under the live processor in the real SDK (inline or ``background``), the spans
    exported to the OTLP JSON Lines file ``path``; returns the episodes it decided (on_episode).
    ``resource``: the resource's attributes (default ``service.name: agent``)."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from otlp_file_exporter import FileSpanExporter

    from spanassert import AssertionSpanProcessor

    episodes: List[Any] = []
    proc = AssertionSpanProcessor(config, export=SimpleSpanProcessor(FileSpanExporter(str(path))),
                                  on_episode=episodes.append, tick_interval=0, background=background)
    tp = TracerProvider(resource=Resource.create(resource or {"service.name": "agent"}))
    tp.add_span_processor(proc)
    play(tp.get_tracer("doors"))
    tp.shutdown()
    return episodes


def serve_records(config: Any, records: Iterable[Any], per_request: Optional[int] = None,
                  max_trace_spans: Optional[int] = None, rootless_wait: Optional[float] = 0.05) -> Any:
    """The records through serve's in-process receiver, ``per_request`` records a request (all in one
    by default), then a graceful stop (every held trace judged); returns its report."""
    from spanassert.serve import Receiver, ServeOptions

    options = ServeOptions(grpc_endpoint=None, http_endpoint=None, report_json="in memory", quiet=True, settle=0.0,
                           rootless_wait=rootless_wait)
    if max_trace_spans is not None:
        options.max_trace_spans = max_trace_spans  # a trace that reaches it is judged at once, the rest in parts
    records = list(records)
    step = per_request or max(1, len(records))
    with open(os.devnull, "w") as out:
        rx = Receiver(config, options, out=out)
        rx.start()
        try:
            for i in range(0, len(records), step):
                assert rx.accept(records[i:i + step], None, 0)
        finally:
            rx.stop(timeout=30)
    assert rx.report is not None
    return rx.report


def verdicts(report: Any, messages: bool = False) -> Dict[str, Union[str, Tuple[str, str]]]:
    """{test id: verdict} (or (verdict, message)) over every episode of a report."""
    return {r.test_id: (r.verdict.value, r.message) if messages else r.verdict.value
            for ep in report.episodes for r in ep.results}
