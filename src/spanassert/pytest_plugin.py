"""pytest plugin (entry point ``pytest11``): capture the spans a test emits and check rules on them.

```python
def test_refund_is_looked_up_first(spanassert_trace):
    run_agent("refund ORD-10027")
    trace = spanassert_trace.trace
    assert trace.call_sequence()[:2] == ["lookup_order", "issue_refund"]

@pytest.mark.spanassert(config="rules.yaml")          # relative to this test file
def test_agent_follows_the_rules():
    run_agent("close my account")                      # fails the test if a rule fails
```

The OpenTelemetry API lets a process set its global tracer provider once. So the plugin installs
one session-wide :class:`SpanRouter` on the global SDK ``TracerProvider`` (setting a plain SDK
provider first when none is set yet), and the router hands every ended span to the collector of
the test that is running. Spans of a test-scoped provider (``spanassert_provider``) go to the same
collector.
"""
from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, Generator, List, Mapping, Optional, Tuple, Union

import pytest

if TYPE_CHECKING:  # the SDK loads only when a fixture or marker is used
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider

    from .config.model import Config
    from .trace import CheckResult, Trace

MARKER = "spanassert"
FIXTURE = "spanassert_trace"

_MARKER_HELP = (
    "spanassert(config='rules.yaml', allow_inconclusive=False): after the test body, check the rules "
    "file (path relative to the test file) against the spans the test emitted; fail the test when a "
    "rule failed, was inconclusive (unless allow_inconclusive=True), or no agent or tool span was recorded"
)


class SpanCapture:
    """The spans one test emitted, and the tool calls in them.

    ``spans`` is a snapshot of the ended spans so far; ``trace`` (or calling the object) builds a
    :class:`~spanassert.trace.Trace` from them at any time, so a test can query mid-way.
    """

    def __init__(self) -> None:
        self._spans: List[ReadableSpan] = []
        self._lock = threading.Lock()
        # Spans started while this capture was active and not ended yet, by (trace id, span id).
        self._open: Dict[Tuple[int, int], Any] = {}

    def started(self, span: Any) -> None:
        ctx = span.get_span_context()
        with self._lock:
            self._open[(ctx.trace_id, ctx.span_id)] = span

    def add(self, span: ReadableSpan) -> None:
        ctx: Any = span.get_span_context()
        with self._lock:
            self._spans.append(span)
            if self._open and ctx is not None:
                self._open.pop((ctx.trace_id, ctx.span_id), None)

    def still_open(self) -> List[Any]:
        """The spans started while this capture was active that have not ended (a tool still
        running in another thread when the test returned): they are not in :attr:`spans`."""
        with self._lock:
            return list(self._open.values())

    @property
    def spans(self) -> List[ReadableSpan]:
        with self._lock:
            return list(self._spans)

    @property
    def trace(self) -> Trace:
        from .trace import Trace

        return Trace.from_spans(self.spans)

    def __call__(self) -> Trace:
        return self.trace

    def clear(self) -> None:
        with self._lock:
            self._spans.clear()

    def check(self, rules: Any) -> CheckResult:
        """``spanassert.check`` over the spans so far (rules: a Config, a path, YAML text or an
        understudy-style expectations dict). While a GenAI span the test started has not ended (a
        tool still running), no check passes: its call is not among the spans checked, so every
        `passed` is `inconclusive`, saying why."""
        from .core.model import Verdict
        from .trace import check

        result = check(self.trace, rules)
        running = _running_genai_spans(self)
        if running:
            why = (f"{len(running)} span(s) the test started had not ended when it was checked "
                   f"(e.g. `{_shown_name(running[0])}`)")
            for item in result.items:
                if item.verdict is Verdict.PASSED:
                    item.verdict = Verdict.INCONCLUSIVE
                    item.detail = f"no violation seen, but {why}"
            for key in {item.episode for item in result.items}:
                result.incomplete.setdefault(key, []).append(why)
        return result

    def __len__(self) -> int:
        with self._lock:
            return len(self._spans)

    def __repr__(self) -> str:
        return f"SpanCapture({len(self)} spans)"


def _router_class() -> Any:
    from opentelemetry.sdk.trace import SpanProcessor

    class SpanRouter(SpanProcessor):
        """Sends each ended span to the active test's :class:`SpanCapture` (none between tests)."""

        def __init__(self) -> None:
            self.active: Optional[SpanCapture] = None

        def on_start(self, span: Any, parent_context: Any = None) -> None:
            capture = self.active
            if capture is not None:
                capture.started(span)

        def on_end(self, span: ReadableSpan) -> None:
            capture = self.active
            if capture is not None:
                capture.add(span)

    return SpanRouter


def _capture_processor(capture: SpanCapture) -> Any:
    from opentelemetry.sdk.trace import SpanProcessor

    class _CaptureProcessor(SpanProcessor):
        def on_start(self, span: Any, parent_context: Any = None) -> None:
            capture.started(span)

        def on_end(self, span: ReadableSpan) -> None:
            capture.add(span)

    return _CaptureProcessor()


# One router for the whole process: the global provider can be set only once.
_router: Any = None
_router_provider_id: Optional[int] = None
_install_lock = threading.Lock()


def install_router() -> Any:
    """Put the session-wide router on the global SDK ``TracerProvider`` (setting one when the
    process has none yet) and return it. Raises ``pytest.UsageError`` when the global provider is
    not an SDK provider, since its spans could not be seen."""
    global _router, _router_provider_id
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider

    with _install_lock:
        provider = trace.get_tracer_provider()
        if isinstance(provider, trace.ProxyTracerProvider):
            trace.set_tracer_provider(TracerProvider())
            provider = trace.get_tracer_provider()
        if not isinstance(provider, TracerProvider):
            raise pytest.UsageError(
                f"spanassert: the global tracer provider is a {type(provider).__module__}."
                f"{type(provider).__qualname__}, not an OpenTelemetry SDK TracerProvider, so the spans of the "
                "test cannot be captured; set an opentelemetry.sdk.trace.TracerProvider as the global provider, "
                "or pass the `spanassert_provider` fixture to the code under test")
        if _router is None:
            _router = _router_class()()
        if _router_provider_id != id(provider):
            provider.add_span_processor(_router)
            _router_provider_id = id(provider)
        return _router


@pytest.fixture
def spanassert_trace() -> Generator[SpanCapture, None, None]:
    """Every span the test's code ends through the global tracer provider (and through
    ``spanassert_provider``); ``.trace`` gives the :class:`~spanassert.trace.Trace` so far."""
    router = install_router()
    capture = SpanCapture()
    previous = router.active
    router.active = capture
    try:
        yield capture
    finally:
        router.active = previous


@pytest.fixture
def spanassert_provider(spanassert_trace: SpanCapture) -> Generator[TracerProvider, None, None]:
    """A ``TracerProvider`` for this test only, for code that accepts a provider; its spans are
    captured by ``spanassert_trace`` too. Shut down after the test."""
    from opentelemetry.sdk.trace import TracerProvider

    provider = TracerProvider()
    provider.add_span_processor(_capture_processor(spanassert_trace))
    try:
        yield provider
    finally:
        provider.shutdown()


# -- the marker -------------------------------------------------------------------------------------
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{MARKER}{_MARKER_HELP[len(MARKER):]}")


def pytest_collection_modifyitems(items: List[pytest.Item]) -> None:
    # A marked test needs the capture even when it does not ask for the fixture itself.
    for item in items:
        if item.get_closest_marker(MARKER) is not None:
            names = getattr(item, "fixturenames", None)
            if isinstance(names, list) and FIXTURE not in names:
                names.append(FIXTURE)


_configs: Dict[Tuple[str, float], Config] = {}


def _marker_rules(item: pytest.Item, marker: Any) -> Tuple[Union[Config, Mapping[str, Any]], str]:
    """The marker's rules as a Config (or an expectations dict) and how to name them in messages."""
    from .config import load_config
    from .config.model import Config

    if len(marker.args) > 1 or (marker.args and "config" in marker.kwargs):
        raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.spanassert takes one rules file, "
                                "e.g. @pytest.mark.spanassert(config='rules.yaml')")
    unknown = set(marker.kwargs) - {"config", "allow_inconclusive"}
    if unknown:
        raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.spanassert got unknown argument(s) "
                                f"{', '.join(sorted(unknown))}; it accepts config= and allow_inconclusive=")
    rules = marker.args[0] if marker.args else marker.kwargs.get("config")
    if rules is None:
        raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.spanassert needs a rules file, "
                                "e.g. @pytest.mark.spanassert(config='rules.yaml')")
    if isinstance(rules, Config):
        return rules, rules.source or "the rules"
    if isinstance(rules, Mapping):
        return rules, "the expectations"
    path = Path(os.fspath(rules))
    if not path.is_absolute():
        path = Path(str(item.path)).parent / path
    key = (str(path), path.stat().st_mtime if path.exists() else -1.0)
    config = _configs.get(key)
    if config is None:
        config = load_config(path)  # ConfigError: reported by the caller with every diagnostic
        _configs[key] = config
    try:
        shown = os.path.relpath(path, item.config.invocation_params.dir)
    except ValueError:  # another drive (Windows)
        shown = str(path)
    return config, shown


def verdict_problems(result: CheckResult, *, allow_inconclusive: bool) -> List[str]:
    """Why the marked test fails (empty when it passes): enforced failures, inconclusive checks
    (unless allowed), or no episode at all. (A rules file whose unit-test forms fail never gets here:
    ``check`` refuses it with a ConfigError.)"""
    from .core.model import Verdict

    if result.episodes == 0:
        return ["no agent or tool span was recorded: the test emitted no episode to check "
                "(is the code under test instrumented, and does it use the global tracer provider "
                "or `spanassert_provider`?)"]
    failed = [i for i in result.items if i.verdict is Verdict.FAILED and not i.shadow]
    inconclusive = [i for i in result.items if i.verdict is Verdict.INCONCLUSIVE and not i.shadow]
    problems: List[str] = []
    if failed:
        problems.append(f"{len(failed)} rule{'s' if len(failed) != 1 else ''} failed")
    if inconclusive and not allow_inconclusive:
        problems.append(f"{len(inconclusive)} rule{'s' if len(inconclusive) != 1 else ''} inconclusive "
                        "(the spans could not decide them; pass allow_inconclusive=True to accept that)")
    return problems


def _running_genai_spans(capture: SpanCapture) -> List[Any]:
    """The spans still open when the marker checks: those the conventions recognise as GenAI spans,
    and any span of a trace that has one among the ended spans (its attributes may come at its end)."""
    from .mapping import ROLE_OTHER, Mapper

    still = capture.still_open()
    if not still:
        return []
    mapper = Mapper()

    def genai(span: Any) -> bool:
        try:
            return mapper.role(span.name, dict(span.attributes or {})) != ROLE_OTHER
        except Exception:  # noqa: BLE001 - a span that cannot be read is taken as one that matters
            return True

    def trace_of(span: Any) -> Any:
        return span.get_span_context().trace_id

    traces = {trace_of(s) for s in capture.spans if genai(s)}
    return [s for s in still if genai(s) or trace_of(s) in traces]


def _shown_name(span: Any) -> str:
    from .core.escaping import escape_control

    return escape_control(str(span.name)[:80])


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    result = yield  # the test body raised: that failure stands, nothing more to check
    marker = item.get_closest_marker(MARKER)
    if marker is None:
        return result
    from .core.model import ConfigError
    from .trace import check

    capture = getattr(item, "funcargs", {}).get(FIXTURE)
    if not isinstance(capture, SpanCapture):
        raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.spanassert applies to test functions only")
    try:
        rules, where = _marker_rules(item, marker)
    except ConfigError as exc:
        lines = "\n".join(d.format() for d in exc.diagnostics) or str(exc)
        pytest.fail(f"spanassert: the rules file is invalid:\n{lines}", pytrace=False)
    except OSError as exc:
        pytest.fail(f"spanassert: cannot read the rules file: {exc}", pytrace=False)
    try:
        outcome = check(capture.trace, rules)
    except (ConfigError, ValueError) as exc:
        pytest.fail(f"spanassert: {exc}", pytrace=False)
    problems = verdict_problems(outcome, allow_inconclusive=bool(marker.kwargs.get("allow_inconclusive")))
    running = _running_genai_spans(capture)
    if running and not marker.kwargs.get("allow_inconclusive"):
        # Their calls are not in the spans checked (only ended spans are): a tool still running
        # could break a rule (the live processor reports a forbidden tool at its start).
        problems.append(f"{len(running)} span(s) the test started had not ended when it was checked "
                        f"(e.g. `{_shown_name(running[0])}`): a call still running could break a rule; wait "
                        "for the agent's work to end before the test returns, or pass allow_inconclusive=True")
    if problems:
        pytest.fail(f"spanassert ({where}): " + "; ".join(problems) + "\n" + outcome.summary(), pytrace=False)
    return result
