"""A flood of episodes that open and never close: memory stays at the `episodes.max_open` bound,
evictions are counted, liveness rules of evicted episodes are inconclusive, and a safety violation
seen before eviction is still reported."""
from __future__ import annotations

import gc
import logging
import time
import tracemalloc
from typing import Any, Dict

import pytest

from spanassert.core.model import CloseReason, Verdict

from .report import mib, record
from .rig import CountingProcessor, LiveRig, child, new_root, rules, tool_attrs

# tracemalloc hooks every allocation (about 4x slower), so the short form floods 10,000 traces
# against a bound of 200 (the checkpoint is 10x the bound, the end 50x); full: 1,000,000 against 1,000.


@pytest.mark.timeout(3600)
def test_never_closed_episodes_keep_memory_at_the_bound_and_evictions_are_counted(sizes: Any) -> None:
    total = sizes.pick(10_000, 1_000_000)
    checkpoint = sizes.pick(2_000, 100_000)
    max_open = sizes.pick(200, 1000)
    config = rules(f"  max_open: {max_open}\n  late_window: {max_open}\n")
    figures: Dict[str, int] = {"evicted": 0, "evicted_liveness_inconclusive": 0, "evicted_with_delete": 0,
                               "evicted_delete_failed": 0, "other_close": 0}

    def on_episode(r: Any) -> None:  # aggregates only: a list of results would be the leak
        if r.close_reason is not CloseReason.EVICTED:
            figures["other_close"] += 1
            return
        figures["evicted"] += 1
        v = r.test_verdicts()
        figures["evicted_liveness_inconclusive"] += (v["must-lookup"] is Verdict.INCONCLUSIVE
                                                     and v["lookup-before-refund"] is Verdict.INCONCLUSIVE)
        if r.call_count and r.root_name.endswith("deleter"):
            figures["evicted_with_delete"] += 1
            figures["evicted_delete_failed"] += v["no-delete"] is Verdict.FAILED

    counter = CountingProcessor(keep_ids=False)
    rig = LiveRig(config, export=counter, on_episode=on_episode)
    escaped = 0
    violations = [0]
    rig.processor.telemetry.on_violation = lambda v: violations.__setitem__(0, violations[0] + 1)

    def flood(start: int, stop: int) -> int:
        errors = 0
        for i in range(start, stop):
            try:
                deleter = i % 10 == 0
                root = new_root(rig.tracer, "deleter" if deleter else "searcher")
                child(rig.tracer, root, "execute_tool", tool_attrs("delete_database" if deleter else "search")).end()
                # The root is dropped, never ended: the episode stays open until evicted.
            except Exception:  # noqa: BLE001 - counted and asserted
                errors += 1
        return errors

    # Violations still go through Python logging, but nothing keeps the records (pytest's capture
    # handler would, and its memory would be counted as ours).
    sa_log = logging.getLogger("spanassert")
    old_propagate = sa_log.propagate
    sa_log.propagate = False
    null = logging.NullHandler()
    sa_log.addHandler(null)
    t0 = time.perf_counter()
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        escaped += flood(0, checkpoint)
        gc.collect()
        current_1, peak_1 = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        escaped += flood(checkpoint, total)
        gc.collect()
        current_2, peak_2 = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        sa_log.removeHandler(null)
        sa_log.propagate = old_propagate
    open_now = rig.processor.engine.open_count
    evicted_metric = rig.points("spanassert.overflows").get((("spanassert.kind", "episode_evicted"),), 0)
    growth_1, growth_2 = peak_1 - base, peak_2 - base
    record("memory flood: never-closed episodes", inputs=total, exceptions_escaped=escaped,
           spans_lost=total - counter.total,
           peak_memory=f"{mib(growth_1)} @{checkpoint // 1000}k, {mib(growth_2)} @{total // 1000}k",
           memory_bound=f"max_open={max_open}", seconds=time.perf_counter() - t0,
           note=f"{int(evicted_metric)} evicted (metric), {figures['evicted_delete_failed']}/"
                f"{figures['evicted_with_delete']} evicted safety violations kept, per open episode "
                f"~{(current_2 - base) // max_open} B")
    assert escaped == 0
    assert counter.total == total  # every ended tool span delivered (roots never end)
    assert open_now == max_open
    assert evicted_metric == total - max_open == figures["evicted"]
    assert figures["other_close"] == 0
    assert figures["evicted_liveness_inconclusive"] == figures["evicted"]
    assert figures["evicted_with_delete"] == len(range(0, total - max_open, 10))
    assert figures["evicted_delete_failed"] == figures["evicted_with_delete"]
    assert violations[0] >= total // 10  # the forbidden call is reported when it happens
    # Flat: the peak over the whole flood is the peak once the bound was first reached.
    assert growth_2 <= growth_1 * 1.10 + 256 * 1024, (growth_1, growth_2)
    assert current_2 <= current_1 * 1.10 + 256 * 1024, (current_1, current_2)
