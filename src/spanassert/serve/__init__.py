"""``spanassert serve``: an OTLP receiver (gRPC and HTTP) running the same engine as live and replay.

Put it behind an OpenTelemetry Collector (or point SDK exporters at it). The parts:

- :mod:`.protocol`  paths, media types, status codes, defaults, endpoints, :class:`ServeOptions`
- :mod:`.intake`    the bounded queue between request threads and the engine thread
- :mod:`.receiver`  :class:`Receiver`: servers, engine thread, trace bookkeeping
- :mod:`.sink`      :class:`ServeSink`: telemetry, one stderr line per violation, the report
- :mod:`.http_server`, :mod:`.grpc_server`  the two OTLP doors
- :mod:`.forwarder` :class:`Forwarder`: ``--forward`` to another OTLP/HTTP receiver
- :mod:`.providers` meter and logger providers from the ``OTEL_*`` variables
- :mod:`.cli`       ``spanassert serve``

Nothing is unbounded: the intake queue, the trace buffer, the forwarding queue and the early-report
memory all have caps, and when the intake queue is full senders are told to retry (HTTP 503 +
``Retry-After``, gRPC ``RESOURCE_EXHAUSTED`` + ``RetryInfo``), which the OTLP exporters do.
"""
from __future__ import annotations

from .cli import add_serve_arguments, run_serve
from .forwarder import Forwarder
from .intake import IntakeQueue
from .protocol import EndpointError, ServeOptions, parse_endpoint
from .providers import logger_provider_from_env, meter_provider_from_env
from .receiver import Receiver
from .sink import ServeSink

__all__ = [
    "EndpointError",
    "Receiver",
    "ServeOptions",
    "ServeSink",
    "IntakeQueue",
    "Forwarder",
    "add_serve_arguments",
    "run_serve",
    "parse_endpoint",
    "meter_provider_from_env",
    "logger_provider_from_env",
]
