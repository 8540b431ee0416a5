"""Meter and logger providers from the standard ``OTEL_*`` variables."""
from __future__ import annotations

import logging
import os
from typing import Any, Optional

log = logging.getLogger("spanassert.serve")


def _otlp_signal_from_env(signal: str) -> Optional[str]:
    """The OTLP protocol to export ``signal`` ("metrics" or "logs") with, when the standard
    variables ask for it (``OTEL_<SIGNAL>_EXPORTER=otlp`` or an OTLP endpoint); else None."""
    env = os.environ
    exporter = (env.get(f"OTEL_{signal.upper()}_EXPORTER") or "").strip().lower()
    endpoint = env.get(f"OTEL_EXPORTER_OTLP_{signal.upper()}_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    if exporter == "none" or (not exporter and not endpoint):
        return None
    if exporter and exporter != "otlp":
        log.warning("spanassert serve: OTEL_%s_EXPORTER=%s is not supported (only otlp); %s are off",
                    signal.upper(), exporter, signal)
        return None
    return (env.get(f"OTEL_EXPORTER_OTLP_{signal.upper()}_PROTOCOL") or env.get("OTEL_EXPORTER_OTLP_PROTOCOL")
            or "http/protobuf").strip().lower()


def _resource() -> Any:
    from opentelemetry.sdk.resources import Resource

    env = os.environ
    named = "OTEL_SERVICE_NAME" in env or "service.name=" in env.get("OTEL_RESOURCE_ATTRIBUTES", "")
    return Resource.create({} if named else {"service.name": "spanassert"})


def meter_provider_from_env() -> Any:
    """A MeterProvider exporting over OTLP when the standard variables ask for it, else None."""
    protocol = _otlp_signal_from_env("metrics")
    if protocol is None:
        return None
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
    else:
        # the ignore below: the HTTP exporter under the gRPC one's name
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter  # type: ignore[assignment]
    return MeterProvider(resource=_resource(), metric_readers=[PeriodicExportingMetricReader(OTLPMetricExporter())])


def logger_provider_from_env() -> Any:
    """A LoggerProvider exporting violation log records over OTLP when the standard variables ask
    for it, else None (violations then go to Python logging and stderr)."""
    protocol = _otlp_signal_from_env("logs")
    if protocol is None:
        return None
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import BatchLogRecordProcessor

    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
    else:
        # the ignore below: the HTTP exporter under the gRPC one's name
        from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter  # type: ignore[assignment]
    provider = LoggerProvider(resource=_resource())
    provider.add_log_record_processor(BatchLogRecordProcessor(OTLPLogExporter()))
    return provider

