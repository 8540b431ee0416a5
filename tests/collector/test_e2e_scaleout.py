"""End to end through a real OpenTelemetry Collector: an agent process exports GenAI episodes with
the SDK's OTLP/gRPC exporter, a tier-1 Collector running `collector-config/load-balancing*.yaml`
spreads them over two `spanassert serve` instances, and each episode must be decided exactly once,
on one instance, with the verdicts `replay` gives on the agent's own copy of the spans (written
beside the export with the OTLP JSON file exporter). The file-export pipeline's output must replay
to those verdicts as well.

Each test ends by itself within 120 s of its body (the session's Collector build, when the binary
is not cached yet, is bounded separately by the `collector_binary` fixture).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Tuple

import pytest

from collector.conftest import CONFIG_DIR, FileExportCollector, RunningCollector, free_port
from collector.e2e_helpers import (
    CONVERSATION_TURNS,
    EPISODE_PATTERNS,
    RULES,
    ServeProcess,
    conversation_rules,
    decided_counts,
    episode_keys,
    replay_cli_json,
    run_agent,
    spans_per_key,
    verdict_rows,
    violation_rows,
    wait_until_idle,
)

pytestmark = [pytest.mark.collector, pytest.mark.timeout(120, func_only=True)]

EPISODES = 40
CONVERSATION_KEY = "gen_ai.conversation.id"
# Long enough that every turn of a conversation reaches serve before the conversation idles out,
# short enough to keep the test quick: serve closes the conversations on this timeout.
CONVERSATION_IDLE_SECONDS = 4.0
# serve judges the turns of one conversation in the order their traces settle there, so turns
# must settle in the order they happened: the next turn comes well after the previous one has
# settled (as a user's next message would). Turns fired faster than the settle time can reach serve
# out of order through the router's parallel senders, and cross-turn sequence verdicts then
# depend on that arrival order (reported; not what this test pins).
CONVERSATION_SETTLE_SECONDS = 0.3
CONVERSATION_TURN_GAP_SECONDS = 1.5

StartServes = Callable[..., List[ServeProcess]]


@pytest.fixture
def start_serves(tmp_path: Path) -> Iterator[StartServes]:
    """``start(rules, n, *serve_args)`` -> n started ``spanassert serve`` processes; all killed at
    teardown."""
    started: List[ServeProcess] = []

    def start(rules: Path, n: int, *serve_args: str) -> List[ServeProcess]:
        batch = [ServeProcess(tmp_path / f"serve{len(started) + i}", rules, *serve_args) for i in range(n)]
        started.extend(batch)  # before waiting, so a failed start still gets cleaned up
        for s in batch:
            s.wait_ready()
        return batch

    yield start
    for s in started:
        s.kill()


def _router(run_collector: Callable[..., RunningCollector], config: str,
            serves: List[ServeProcess]) -> Tuple[RunningCollector, str]:
    """Start a tier-1 Collector in front of ``serves``; returns it and its OTLP/gRPC address."""
    grpc_port, http_port = free_port(), free_port()
    router = run_collector(
        CONFIG_DIR / config,
        env={
            "SPANASSERT_OTLP_GRPC_ENDPOINT": f"127.0.0.1:{grpc_port}",
            "SPANASSERT_OTLP_HTTP_ENDPOINT": f"127.0.0.1:{http_port}",
            "SPANASSERT_BACKENDS": "[" + ", ".join(s.grpc for s in serves) + "]",
        },
        wait_ports=(grpc_port, http_port),
    )
    return router, f"127.0.0.1:{grpc_port}"


def _stop(router: RunningCollector) -> None:
    """SIGTERM and wait: the router's shutdown drains its queues into the serve instances."""
    assert router.stop() == 0, router.log()


def _write_rules(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "rules.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def _replay_ground_truth(rules: Path, ground_truth: Path) -> Dict[str, Any]:
    from spanassert.config import load_config
    from spanassert.replay import replay

    report = replay(load_config(str(rules)), [ground_truth])
    assert report.issues == [], report.issues
    return report.to_dict()


def _assert_rules_have_teeth(expected: Dict[str, Any]) -> None:
    """Agreement only means something if every rule passes somewhere and fails somewhere."""
    for test in ("never-delete", "search-is-required", "search-before-book"):
        seen = {verdict for _, t, _, verdict in verdict_rows(expected) if t == test}
        assert {"passed", "failed"} <= seen, f"{test}: only {seen} in the ground truth"


def _assert_scaled_out_like_replay(reports: List[Dict[str, Any]], expected: Dict[str, Any],
                                   spans_of: Dict[str, int]) -> None:
    """Each episode decided exactly once, all its spans on the instance that decided it, and the
    verdicts and violations those of replaying the ground truth."""
    keys_by_instance = [set(episode_keys(r)) for r in reports]
    assert all(keys_by_instance), (
        f"episodes per instance: {[len(k) for k in keys_by_instance]}; the router used only one backend"
    )
    decided = decided_counts(reports)
    assert {k: n for k, n in decided.items() if n != 1} == {}, "episodes decided more than once"
    assert set(decided) == set(episode_keys(expected))

    for i, (report, keys) in enumerate(zip(reports, keys_by_instance)):
        receiver = report["receiver"]
        assert receiver["spans_rejected"] == 0 and receiver["spans_refused"] == 0, receiver
        # Exactly the spans of its own episodes: none of them went elsewhere, none of another's came here.
        assert receiver["spans_accepted"] - receiver["duplicate_spans"] == sum(spans_of[k] for k in keys), (
            f"instance {i}: {receiver}"
        )
        assert {v["episode_key"] for v in report["violations"]} <= keys
        assert report["issues"] == [] and report["summary"]["unreadable_spans"] == 0

    got_rows = set().union(*(verdict_rows(r) for r in reports))
    assert got_rows == verdict_rows(expected)
    got_violations = set().union(*(violation_rows(r) for r in reports))
    assert got_violations == violation_rows(expected)
    calls = {ep["key"]: ep["call_count"] for r in reports for ep in r["episodes"]}
    assert calls == {ep["key"]: ep["call_count"] for ep in expected["episodes"]}


def test_load_balanced_episodes_are_each_decided_once_on_one_instance(
    tmp_path: Path, run_collector: Callable[..., RunningCollector], start_serves: StartServes
) -> None:
    rules = _write_rules(tmp_path, RULES)
    serves = start_serves(rules, 2)
    router, router_endpoint = _router(run_collector, "load-balancing.yaml", serves)
    ground_truth = tmp_path / "ground-truth.jsonl"

    sent = run_agent(tmp_path, router_endpoint, ground_truth,
                     {"mode": "episodes", "count": EPISODES, "patterns": EPISODE_PATTERNS})
    _stop(router)
    reports = [s.stop() for s in serves]

    expected = _replay_ground_truth(rules, ground_truth)
    assert sorted(episode_keys(expected)) == sorted(sent["traces"]) and len(sent["traces"]) == EPISODES
    _assert_rules_have_teeth(expected)
    _assert_scaled_out_like_replay(reports, expected, spans_per_key([ground_truth]))
    # Trace episodes end with their root everywhere: none was cut short by the shutdown.
    assert {ep["close_reason"] for r in reports for ep in r["episodes"]} == {"root_ended"}


def test_file_export_pipeline_output_replays_to_the_same_verdicts(
    tmp_path: Path, start_file_export_collector: Callable[[], FileExportCollector]
) -> None:
    rules = _write_rules(tmp_path, RULES)
    # Forwarding goes to the fixture's loopback OTLP/HTTP sink, standing in for a tracing backend.
    collector = start_file_export_collector()
    ground_truth = tmp_path / "ground-truth.jsonl"

    sent = run_agent(tmp_path, collector.grpc_endpoint, ground_truth,
                     {"mode": "episodes", "count": EPISODES, "patterns": EPISODE_PATTERNS})
    assert collector.collector.stop() == 0, collector.collector.log()
    assert collector.path.exists(), f"the Collector wrote no {collector.path}:\n{collector.collector.log()}"

    got = replay_cli_json(rules, [collector.path])
    expected = _replay_ground_truth(rules, ground_truth)
    _assert_rules_have_teeth(expected)
    assert got["issues"] == []
    assert got["summary"]["spans_read"] == expected["summary"]["spans_read"] == sent["spans"]
    assert sorted(episode_keys(got)) == sorted(episode_keys(expected)) == sorted(sent["traces"])
    assert verdict_rows(got) == verdict_rows(expected)
    assert violation_rows(got) == violation_rows(expected)


def test_conversation_routing_keeps_every_turn_of_a_conversation_on_one_instance(
    tmp_path: Path, run_collector: Callable[..., RunningCollector], start_serves: StartServes
) -> None:
    # The config's caveat (the Collector keys a trace on its first span in each batch) is met by
    # the agent putting gen_ai.conversation.id on every span it creates.
    rules = _write_rules(tmp_path, conversation_rules(CONVERSATION_IDLE_SECONDS))
    serves = start_serves(rules, 2, "--settle", str(CONVERSATION_SETTLE_SECONDS))
    router, router_endpoint = _router(run_collector, "load-balancing-conversation.yaml", serves)
    ground_truth = tmp_path / "ground-truth.jsonl"
    conversations = CONVERSATION_TURNS * 3

    sent = run_agent(tmp_path, router_endpoint, ground_truth,
                     {"mode": "conversations", "conversations": conversations,
                      "turn_gap": CONVERSATION_TURN_GAP_SECONDS})
    _stop(router)
    # Let serve close the conversations on their idle timeout, as in production; at shutdown
    # they would be cut short and liveness rules would answer inconclusive.
    wait_until_idle(serves, sent["spans"], timeout=CONVERSATION_IDLE_SECONDS + 30)
    reports = [s.stop() for s in serves]

    expected = _replay_ground_truth(rules, ground_truth)
    assert sorted(episode_keys(expected)) == sorted(f"conv-{c}" for c in range(len(conversations)))
    assert len(sent["traces"]) == sum(len(turns) for turns in conversations)
    _assert_rules_have_teeth(expected)
    _assert_scaled_out_like_replay(reports, expected, spans_per_key([ground_truth], CONVERSATION_KEY))
    assert {ep["close_reason"] for r in reports for ep in r["episodes"]} == {"idle_timeout"}
