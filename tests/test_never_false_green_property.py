"""The "Proof" of issue 12: no cut of the evidence turns a failing episode `passed` (see
false_green_cuts.py for the cuts). Modest sizes here; `make stress` runs many more examples
(tests/stress/test_false_green_cuts.py)."""
from __future__ import annotations

from hypothesis import HealthCheck, example, given, settings

from false_green_cuts import (
    TRIED,
    check_live,
    check_replay_and_serve,
    check_live_fault,
    check_span_limits,
    check_wire_shapes,
    cut_strategy,
    episodes_strategy,
    fault_cut_strategy,
    limits_cut_strategy,
    live_cut_strategy,
    wire_cut_strategy,
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(episodes_strategy, cut_strategy)
def test_no_cut_of_the_evidence_passes_a_failing_episode_in_replay_or_serve(episodes, cut):
    check_replay_and_serve(episodes, cut)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(episodes_strategy, live_cut_strategy)
def test_no_cut_of_the_evidence_passes_a_failing_episode_live(episodes, cut):
    check_live(episodes, cut)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(episodes_strategy, limits_cut_strategy)
def test_no_attribute_limit_of_the_sdk_passes_a_failing_episode(episodes, cut):
    check_span_limits(episodes, cut)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(episodes_strategy, fault_cut_strategy)
# Found by this property before the fix: the end of a late delete_database call (after its
# episode closed) could not be judged, and the closed episode's no-delete stayed `passed`.
@example([[{"tool": "delete_database", "amount": 5, "nested": False, "step": False}]],
         {"nth": 1, "where": "end", "background": False, "plain_root": False, "late_from": 0})
# Found by this property in session 5 (review9c), on main: the start of the sub-agent span that
# opened the episode under a plain root was lost; the episode did not close at its end and took in
# the later search call: must-search `passed` (the whole evidence fails it).
@example([[{"tool": "refund", "amount": 5, "nested": True, "step": False},
           {"tool": "search", "amount": 5, "nested": False, "step": False}]],
         {"nth": 0, "where": "start", "background": False, "plain_root": True, "late_from": None})
# Found by the full-size property at session 5's end (lead), on main: the END of a GenAI span of
# the second trace (nth 6, under a plain root) could not be judged; the episode the lost span would
# have closed took in the later calls, and search-then-refund `passed` (the whole evidence fails it).
@example([[{"tool": "search", "amount": 5, "nested": False, "step": True},
           {"tool": "search", "amount": 5, "nested": True, "step": True}],
          [{"tool": "search", "amount": 5, "nested": True, "step": False},
           {"tool": "search", "amount": 5, "nested": False, "step": False},
           {"tool": "search", "amount": 5, "nested": False, "step": False},
           {"tool": "search", "amount": 5, "nested": False, "step": False},
           {"tool": "search", "amount": 5, "nested": False, "step": False},
           {"tool": "refund", "amount": 5, "nested": False, "step": False}]],
         {"nth": 6, "where": "end", "background": False, "plain_root": True, "late_from": 0})
# The same, found by the same run's first try: the end of the sub-agent span around the refund was
# lost; its episode took in the later searches and must-search `passed`.
@example([[{"tool": "refund", "amount": 5, "nested": True, "step": False}]
          + [{"tool": "search", "amount": 5, "nested": False, "step": False}] * 5],
         {"nth": 1, "where": "end", "background": False, "plain_root": True, "late_from": None})
def test_no_internal_error_while_judging_a_span_passes_a_failing_episode(episodes, cut):
    check_live_fault(episodes, cut)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(episodes_strategy, wire_cut_strategy)
# Found by this property (review10): a refund whose tool name was given again as `search` passed
# must-search in replay and serve, the repeated key read as its last value (and, with it counted as
# dropped, still: a met liveness rule survives what was dropped). Now the span is refused.
@example([[{"tool": "refund", "amount": 5, "nested": False, "step": False}]], {"seed": 0, "shape": "repeated_key"})
# A span with a forbidden call's id and another tool sent first: serve dropped the forbidden call as
# a retry (no-delete passed); replay judged both.
@example([[{"tool": "delete_database", "amount": 5, "nested": False, "step": False}]],
         {"seed": 0, "shape": "id_collision"})
def test_no_odd_shape_of_the_wire_input_passes_a_failing_episode(episodes, cut):
    check_wire_shapes(episodes, cut)


def test_the_property_tried_cuts_and_checked_verdicts():
    # Runs after the four properties (file order): they did try cuts and did check verdicts.
    assert TRIED["examples"] > 0 and TRIED["checks"] > 0 and TRIED["limit_cuts"] > 0 \
        and TRIED["fault_cuts"] > 0 and TRIED["wire_cuts"] > 0, TRIED
    print(f"false-green property: {TRIED}")


# A few cuts through real OTLP: the SDK's own OTLP/HTTP and OTLP/gRPC exporters send the cut spans
# to a `spanassert serve` subprocess; its --report-json must not pass what the whole evidence fails.
REAL_OTLP_CASES = [
    # (episodes, cut): a rotated part without the root; two refunds with the root dropped; a
    # forbidden call whose sub-agent parent was dropped, spans repeated.
    ([[{"tool": "search", "amount": 5, "nested": False, "step": True},
       {"tool": "delete_database", "amount": 5, "nested": False, "step": False}]],
     {"seed": 1, "drop_root": True, "drop_p": 0.0, "dup_p": 0.0, "files": 1, "truncate": False, "cap": None,
      "late": False}),
    ([[{"tool": "refund", "amount": 5, "nested": True, "step": False},
       {"tool": "refund", "amount": 500, "nested": False, "step": True}]],
     {"seed": 2, "drop_root": True, "drop_p": 0.0, "dup_p": 0.3, "files": 1, "truncate": False, "cap": None,
      "late": False}),
    ([[{"tool": "lookup", "amount": 5, "nested": True, "step": False},
       {"tool": "delete_database", "amount": 5, "nested": True, "step": True}],
      [{"tool": "search", "amount": 5, "nested": False, "step": False}]],
     {"seed": 3, "drop_root": False, "drop_p": 0.3, "dup_p": 0.3, "files": 1, "truncate": False, "cap": None,
      "late": False}),
]


def test_a_few_cuts_through_real_otlp_to_a_serve_process(tmp_path):
    import tempfile
    import time

    import yaml
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter

    from false_green_cuts import RULES_SPEC, Cut, assert_never_passed, record_spans, whole_failures
    from test_serve_receiver import Serve

    from spanassert.core.model import CloseReason, Verdict
    from spanassert.core.results import AssertionResult, EpisodeResult

    checked = 0
    for n, (episodes, spec) in enumerate(REAL_OTLP_CASES):
        spans = record_spans(episodes)
        failures = whole_failures(spans)
        assert failures, "each case's whole evidence fails a rule"
        with tempfile.TemporaryDirectory() as d:
            cut = Cut(spans, spec, d)
        where = tmp_path / f"case{n}"
        where.mkdir()
        serve = Serve(where, "--settle", "0.05", "--rootless-wait", "0.2",
                      rules=yaml.safe_dump({"version": 1, "tests": RULES_SPEC}))
        try:
            exporter = HttpExporter(endpoint=serve.url + "/v1/traces") if n % 2 == 0 else \
                GrpcExporter(endpoint=serve.grpc, insecure=True)
            for i in range(0, len(cut.kept), 2):
                assert exporter.export(cut.kept[i:i + 2]).name == "SUCCESS"
            exporter.shutdown()
            time.sleep(0.5)  # serve installs its SIGTERM handler just after it prints its addresses
            code, _, report = serve.stop()
        finally:
            serve.kill()
        assert code == 0
        results = [EpisodeResult(
            key=e["key"], trace_id=e["trace_id"], root_span_id=e["root_span_id"], root_name=e["root_span_name"],
            agent=e["agent"], service=e["service"], close_reason=CloseReason(e["close_reason"]),
            results=[AssertionResult(test_id=r["test"], assertion_type=r["type"], index=r["index"], name=r["name"],
                                     verdict=Verdict(r["verdict"]), message=r["message"], span_id=r["span_id"],
                                     severity=r["severity"], shadow=r["shadow"]) for r in e["results"]],
            call_count=e["call_count"], step_count=e["step_count"], unreadable_calls=e["unreadable_calls"],
        ) for e in report["episodes"]]
        for tid, failed in failures.items():
            assert_never_passed(f"serve over real OTLP, case {n}", results, tid, failed, cut.kept, None, False)
            checked += 1
    assert checked >= len(REAL_OTLP_CASES)
