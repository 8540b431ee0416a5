"""The "Proof" of issue 12: no cut of the evidence turns a failing episode `passed` (see
false_green_cuts.py for the cuts). Modest sizes here; `make stress` runs many more examples
(tests/stress/test_false_green_cuts.py)."""
from __future__ import annotations

from hypothesis import HealthCheck, given, settings

from false_green_cuts import TRIED, check_live, check_replay_and_serve, cut_strategy, episodes_strategy, live_cut_strategy


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(episodes_strategy, cut_strategy)
def test_no_cut_of_the_evidence_passes_a_failing_episode_in_replay_or_serve(episodes, cut):
    check_replay_and_serve(episodes, cut)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(episodes_strategy, live_cut_strategy)
def test_no_cut_of_the_evidence_passes_a_failing_episode_live(episodes, cut):
    check_live(episodes, cut)


def test_the_property_tried_cuts_and_checked_verdicts():
    # Runs after the two properties (file order): they did try cuts and did check verdicts.
    assert TRIED["examples"] > 0 and TRIED["checks"] > 0, TRIED
    print(f"false-green property: {TRIED}")
