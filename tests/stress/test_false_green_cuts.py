"""The never-a-false-green property (tests/false_green_cuts.py) at stress sizes: many more
generated failing episodes and cuts of their evidence, live, replayed and served. `make test`
runs the same property with few examples (tests/test_never_false_green_property.py)."""
from __future__ import annotations

import time
from typing import Any

from hypothesis import HealthCheck, given, settings

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

from .report import record


def test_no_cut_of_the_evidence_passes_a_failing_episode_at_size(sizes: Any) -> None:
    n = sizes.pick(30, 2000)
    before = dict(TRIED)
    t0 = time.monotonic()

    @settings(max_examples=n, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
    @given(episodes_strategy, cut_strategy)
    def replay_and_serve(episodes: Any, cut: Any) -> None:
        check_replay_and_serve(episodes, cut)

    @settings(max_examples=n, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
    @given(episodes_strategy, live_cut_strategy)
    def live(episodes: Any, cut: Any) -> None:
        check_live(episodes, cut)

    @settings(max_examples=max(1, n // 2), deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
    @given(episodes_strategy, limits_cut_strategy)
    def limits(episodes: Any, cut: Any) -> None:
        check_span_limits(episodes, cut)

    @settings(max_examples=max(1, n // 2), deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
    @given(episodes_strategy, fault_cut_strategy)
    def faults(episodes: Any, cut: Any) -> None:
        check_live_fault(episodes, cut)

    @settings(max_examples=max(1, n // 2), deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
    @given(episodes_strategy, wire_cut_strategy)
    def wire(episodes: Any, cut: Any) -> None:
        check_wire_shapes(episodes, cut)

    replay_and_serve()
    live()
    limits()
    faults()
    wire()
    tried = {k: TRIED[k] - before.get(k, 0) for k in TRIED}
    assert tried["checks"] > 0, tried
    cuts = (tried["replay_cuts"] + tried["file_cuts"] + tried["serve_cuts"] + tried["live_cuts"] + tried["limit_cuts"]
            + tried["fault_cuts"] + tried["wire_cuts"])
    record("never a false green: cut evidence", inputs=cuts, seconds=time.monotonic() - t0,
           note=f"{tried['examples']} examples, {cuts} cuts (replay {tried['replay_cuts']}, single files "
                f"{tried['file_cuts']}, serve {tried['serve_cuts']}, live {tried['live_cuts']}, span limits "
                f"{tried['limit_cuts']}, internal faults {tried['fault_cuts']}, wire shapes {tried['wire_cuts']}), "
                f"{tried['checks']} verdicts checked, 0 passed")
