"""Zero-code setup: the ``opentelemetry_configurator`` entry point (``spanassert``).

``OTEL_PYTHON_CONFIGURATOR=spanassert SPANASSERT_CONFIG=rules.yaml opentelemetry-instrument python agent.py``
"""
from __future__ import annotations

import os
from typing import Any, List

from opentelemetry.sdk._configuration import _OTelSDKConfigurator
from opentelemetry.sdk.trace import SpanProcessor

from ..config.model import Config
from .processor import AssertionSpanProcessor

ENV_CONFIG = "SPANASSERT_CONFIG"
ENV_BACKGROUND = "SPANASSERT_BACKGROUND"


class SpanAssertConfigurator(_OTelSDKConfigurator):
    """``opentelemetry_configurator`` entry point for zero-code setup.

    ``OTEL_PYTHON_CONFIGURATOR=spanassert SPANASSERT_CONFIG=rules.yaml opentelemetry-instrument …``
    configures the SDK as the default configurator does, with one :class:`AssertionSpanProcessor`
    in front of the exporters that ``OTEL_TRACES_EXPORTER`` selects (each behind its own
    ``BatchSpanProcessor``); with no exporter selected it still checks, and violations go to the
    log and onto the live episode root spans. A rules file that does not load stops the program
    before it runs (exit code 2, every problem on stderr): running unchecked would be a silent pass.
    """

    def _configure(self, **kwargs: Any) -> None:
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        path = os.environ.get(ENV_CONFIG)
        if not path:
            import logging

            logging.getLogger("spanassert").warning(
                "spanassert: %s is not set, so no rules are checked; set it to the path of a rules file",
                ENV_CONFIG)
            super()._configure(**kwargs)  # type: ignore[no-untyped-call]  # the SDK's _configure has no annotations
            return
        config = _load_rules(path, exit_on_error="auto_instrumentation_version" in kwargs)
        holder: List[AssertionSpanProcessor] = []

        def export_span_processor(exporter: Any) -> SpanProcessor:
            batch = BatchSpanProcessor(exporter)
            if not holder:
                # Background evaluation unless SPANASSERT_BACKGROUND says no (see the class).
                background = os.environ.get(ENV_BACKGROUND, "").strip().lower() not in ("0", "false", "no")
                holder.append(AssertionSpanProcessor(config, export=[batch], background=background))
                return holder[0]
            # One engine for all exporters: later exporters join the first processor, so each
            # episode is judged once and every exporter gets the same annotated spans.
            holder[0]._export.append(batch)
            return SpanProcessor()

        kwargs.setdefault("export_span_processor", export_span_processor)
        super()._configure(**kwargs)  # type: ignore[no-untyped-call]  # the SDK's _configure has no annotations
        if not holder:
            # OTEL_TRACES_EXPORTER=none (or a caller's own export_span_processor): check anyway.
            from opentelemetry import trace

            provider = trace.get_tracer_provider()
            add = getattr(provider, "add_span_processor", None)
            if add is not None:
                add(AssertionSpanProcessor(config))


def _load_rules(path: str, *, exit_on_error: bool) -> Config:
    """The rules file, or (from ``opentelemetry-instrument``) every problem on stderr and exit 2:
    raising there would only be logged and the program would run unchecked."""
    import sys

    from ..config import load_config, require_runnable
    from ..core.model import ConfigError

    try:
        config = load_config(path)
        require_runnable(config)
        return config
    except ConfigError as exc:
        if not exit_on_error:
            raise
        for d in exc.diagnostics:
            sys.stderr.write(d.format() + "\n")
        sys.stderr.write(f"spanassert: {ENV_CONFIG}={path}: the rules file was refused (problems listed above); "
                         f"fix it (`spanassert validate {path}` checks it alone) or unset {ENV_CONFIG}\n")
        sys.stderr.flush()
        sys.stdout.flush()
        # Python is still importing `site`: SystemExit here would end in a fatal-error traceback.
        os._exit(2)
