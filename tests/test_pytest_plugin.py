"""The pytest plugin, run the way users run it: inner pytest sessions in subprocesses (the global
tracer provider can be set once per process), loading the plugin through its ``pytest11`` entry
point, with the real OpenTelemetry SDK."""
from __future__ import annotations

import textwrap

import pytest

pytest_plugins = ["pytester"]

# A tiny instrumented agent the inner tests drive (global tracer provider, GenAI conventions).
AGENT = '''
import json
from opentelemetry import trace

def run_agent(tools, provider=None, record_arguments=True):
    tracer = trace.get_tracer("inner-agent", tracer_provider=provider)
    with tracer.start_as_current_span("invoke_agent helper", attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "helper"}):
        for n, (name, args) in enumerate(tools):
            attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name,
                     "gen_ai.tool.call.id": f"c{n}"}
            if record_arguments:
                attrs["gen_ai.tool.call.arguments"] = json.dumps(args)
            with tracer.start_as_current_span(f"execute_tool {name}", attributes=attrs) as span:
                span.set_attribute("gen_ai.tool.call.result", json.dumps({"ok": True}))
'''

RULES = '''
version: 1
tests:
  - id: no-delete
    assertions:
      - type: trace_must_not_call_tool
        tool: delete_customer
  - id: refund-limit
    assertions:
      - type: trace_args_valid
        tool: issue_refund
        schema: {properties: {amount: {maximum: 500}}, required: [amount]}
'''

SHADOW_RULES = '''
version: 1
tests:
  - id: watch-deletes
    mode: shadow
    assertions:
      - type: trace_must_not_call_tool
        tool: delete_customer
  - id: lookups-happen
    assertions:
      - type: trace_must_call_tool
        tool: lookup_order
'''


def _project(pytester: pytest.Pytester, tests: str, **files: str) -> None:
    pytester.makepyfile(agent=AGENT, test_inner=textwrap.dedent(tests))
    pytester.makefile(".yaml", rules=RULES, **files)


def test_marked_test_passes_when_every_rule_passes(pytester: pytest.Pytester) -> None:
    _project(pytester, """
        import pytest
        from agent import run_agent

        @pytest.mark.spanassert(config="rules.yaml")
        def test_allowed_refund():
            run_agent([("lookup_order", {"order_id": "A1"}), ("issue_refund", {"amount": 40})])
    """)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--strict-markers")
    result.assert_outcomes(passed=1)


def test_marked_test_fails_with_the_summary_when_a_rule_fails(pytester: pytest.Pytester) -> None:
    _project(pytester, """
        import pytest
        from agent import run_agent

        @pytest.mark.spanassert(config="rules.yaml")
        def test_closes_account():
            run_agent([("lookup_customer", {"email": "d@example.com"}), ("delete_customer", {"id": "C1"}),
                       ("issue_refund", {"amount": 900})])
    """)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*spanassert (rules.yaml): 2 rules failed*",
        "✗ no-delete: `delete_customer` called at call #2*must not be called",
        "✗ refund-limit: `issue_refund` arguments at call #3*violate*`maximum` 500*",
    ])


def test_inconclusive_missing_episode_shadow_and_bad_rules_are_judged_as_documented(
        pytester: pytest.Pytester) -> None:
    # One inner session (subprocesses are slow); each inner test pins one rule of the marker.
    _project(pytester, """
        import pytest
        from agent import run_agent

        @pytest.mark.spanassert(config="rules.yaml")
        def test_arguments_not_recorded():
            run_agent([("issue_refund", {"amount": 900})], record_arguments=False)

        @pytest.mark.spanassert(config="rules.yaml", allow_inconclusive=True)
        def test_arguments_not_recorded_accepted():
            run_agent([("issue_refund", {"amount": 900})], record_arguments=False)

        @pytest.mark.spanassert(config="rules.yaml")
        def test_forgot_to_run_the_agent():
            assert 1 + 1 == 2

        @pytest.mark.spanassert(config="shadow.yaml")
        def test_deletes_after_lookup():
            run_agent([("lookup_order", {}), ("delete_customer", {})])

        @pytest.mark.spanassert("shadow.yaml")
        def test_never_looks_up():
            run_agent([("delete_customer", {})])

        @pytest.mark.spanassert(config="typo.yaml")
        def test_with_typo():
            run_agent([("lookup_order", {})])
    """, shadow=SHADOW_RULES,
             typo="version: 1\ntests:\n  - id: t\n    assertions:\n      - type: trace_must_not_call_tol\n        tool: x\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-v")
    result.assert_outcomes(passed=2, failed=4)
    result.stdout.fnmatch_lines([
        "*test_arguments_not_recorded FAILED*",
        "*test_arguments_not_recorded_accepted PASSED*",
        "*test_forgot_to_run_the_agent FAILED*",
        "*test_deletes_after_lookup PASSED*",
        "*test_never_looks_up FAILED*",
        "*test_with_typo FAILED*",
    ])
    result.stdout.fnmatch_lines([
        "*_ test_arguments_not_recorded _*",
        "*1 rule inconclusive (the spans could not decide them; pass allow_inconclusive=True to accept that)*",
        "? refund-limit: *",
        "*_ test_forgot_to_run_the_agent _*",
        "*no agent or tool span was recorded*",
        "*_ test_never_looks_up _*",
        "*1 rule failed*",
        "✗ lookups-happen: *lookup_order*",
        "*_ test_with_typo _*",
        "*the rules file is invalid*",
        "*typo.yaml:5:*E_CFG_UNKNOWN_TYPE*trace_must_not_call_tol*",
    ])


def test_fixture_captures_only_the_running_tests_spans_and_is_live(pytester: pytest.Pytester) -> None:
    _project(pytester, """
        from agent import run_agent

        def test_first(spanassert_trace):
            run_agent([("lookup_order", {"order_id": "A1"})])
            assert spanassert_trace.trace.call_sequence() == ["lookup_order"]
            run_agent([("issue_refund", {"amount": 5})])
            trace = spanassert_trace()
            assert trace.call_sequence() == ["lookup_order", "issue_refund"]
            assert trace.called("lookup_order", order_id="A1")
            assert not trace.called("lookup_order", order_id="B2")
            assert trace.agents_invoked() == ["helper"]
            assert len(spanassert_trace.spans) == 4

        def test_second_sees_nothing_of_the_first(spanassert_trace):
            assert spanassert_trace.spans == []
            run_agent([("delete_customer", {})])
            assert spanassert_trace.trace.call_sequence() == ["delete_customer"]
            assert not spanassert_trace.check({"forbidden_tools": ["delete_customer"]}).passed

        def test_provider_fixture_spans_are_captured_too(spanassert_trace, spanassert_provider):
            run_agent([("lookup_order", {})], provider=spanassert_provider)
            run_agent([("issue_refund", {"amount": 1})])
            assert sorted(spanassert_trace.trace.call_sequence()) == ["issue_refund", "lookup_order"]

        def test_marker_is_registered(pytestconfig):
            assert any(line.startswith("spanassert(config='rules.yaml', allow_inconclusive=False): ")
                       for line in pytestconfig.getini("markers"))
    """)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--strict-markers", "-v")
    result.assert_outcomes(passed=4)


def test_existing_global_sdk_provider_keeps_its_exporters(pytester: pytest.Pytester) -> None:
    pytester.makeconftest("""
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        EXPORTER = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(EXPORTER))
        trace.set_tracer_provider(provider)
    """)
    _project(pytester, """
        import pytest
        from opentelemetry import trace
        from conftest import EXPORTER
        from agent import run_agent

        @pytest.mark.spanassert(config="rules.yaml")
        def test_uses_the_apps_provider(spanassert_trace):
            run_agent([("lookup_order", {})])
            assert trace.get_tracer_provider() is not None
            assert len(EXPORTER.get_finished_spans()) == 2
            assert spanassert_trace.trace.call_sequence() == ["lookup_order"]
    """)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


def test_non_sdk_global_provider_is_a_clear_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makeconftest("""
        from opentelemetry import trace
        trace.set_tracer_provider(trace.NoOpTracerProvider())
    """)
    _project(pytester, """
        def test_needs_capture(spanassert_trace):
            pass
    """)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*NoOpTracerProvider, not an OpenTelemetry SDK TracerProvider*"])


def test_a_tool_span_still_running_when_the_test_returns_is_not_a_pass(pytester: pytest.Pytester) -> None:
    # A fire-and-forget tool: the agent's span ended, the delete_customer call it started has not when
    # the test body returns. Before: the marker saw only ended spans and passed no-delete (the test
    # passed). The processor live reports it at the call's start; the marker must not pass it either.
    _project(pytester, """
        import threading
        import pytest
        from opentelemetry import trace

        started = threading.Event()
        release = threading.Event()

        def background_tool(ctx):
            tracer = trace.get_tracer("inner-agent")
            with tracer.start_as_current_span("execute_tool delete_customer", context=ctx, attributes={
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "delete_customer"}):
                started.set()
                release.wait(30)

        @pytest.mark.spanassert(config="rules.yaml")
        def test_fire_and_forget():
            tracer = trace.get_tracer("inner-agent")
            with tracer.start_as_current_span("invoke_agent helper", attributes={
                    "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "helper"}) as root:
                threading.Thread(target=background_tool, args=(trace.set_span_in_context(root),)).start()
                assert started.wait(30)

        def test_fixture_check_does_not_pass_while_a_call_runs(spanassert_trace):
            tracer = trace.get_tracer("inner-agent")
            started.clear()
            with tracer.start_as_current_span("invoke_agent helper", attributes={
                    "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "helper"}) as root:
                threading.Thread(target=background_tool, args=(trace.set_span_in_context(root),)).start()
                assert started.wait(30)
            result = spanassert_trace.check("rules.yaml")
            assert not result.passed
            by_label = {i.label: i for i in result.items}
            assert by_label["no-delete"].verdict.value == "inconclusive", by_label  # before: passed
            assert "had not ended" in by_label["no-delete"].detail

        def test_zz_release():
            release.set()
    """)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-v")
    result.stdout.fnmatch_lines([
        "*test_fire_and_forget FAILED*",
        "*spanassert (rules.yaml): 1 span(s) the test started had not ended when it was checked*",
    ])
    result.assert_outcomes(failed=1, passed=2)


def test_a_run_whose_markers_span_limits_evicted_leaves_no_pass(pytester: pytest.Pytester) -> None:
    # Two agent runs in one test; the second calls delete_customer with more attributes than the
    # provider's span limit keeps, so the SDK evicts its GenAI markers (the oldest) and counts them
    # dropped: it opens no episode. Before: the marker and check() passed no-delete on the first run
    # alone (replay said inconclusive of the same spans since fd8e508; check() did not ask).
    _project(pytester, """
        import pytest
        from opentelemetry import trace
        from opentelemetry.sdk.trace import SpanLimits, TracerProvider

        trace.set_tracer_provider(TracerProvider(span_limits=SpanLimits(max_span_attributes=3)))

        def run(tool, extra):
            tracer = trace.get_tracer("inner-agent")
            with tracer.start_as_current_span("run", attributes={"gen_ai.operation.name": "invoke_agent", **extra}):
                tracer.start_span("call", attributes={
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool, **extra}).end()

        LOSSY = {"app.a": 1, "app.b": 2, "app.c": 3}

        @pytest.mark.spanassert(config="rules.yaml")
        def test_clean_run_passes():
            run("lookup_order", {})

        @pytest.mark.spanassert(config="rules.yaml")
        def test_a_run_the_sdk_cut_is_no_pass():
            run("lookup_order", {})
            run("delete_customer", LOSSY)

        def test_fixture_check_is_no_pass(spanassert_trace):
            run("lookup_order", {})
            run("delete_customer", LOSSY)
            assert all(s.dropped_attributes for s in spanassert_trace.spans[2:])
            result = spanassert_trace.check("rules.yaml")
            assert not result.passed
            by_label = {i.label: i for i in result.items}
            assert by_label["no-delete"].verdict.value == "inconclusive", by_label  # before: passed
            assert "opened no episode" in by_label["no-delete"].detail
    """)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-v")
    result.stdout.fnmatch_lines([
        "*test_a_run_the_sdk_cut_is_no_pass FAILED*",
        "*spanassert (rules.yaml): *inconclusive*",
    ])
    result.assert_outcomes(failed=1, passed=2)
