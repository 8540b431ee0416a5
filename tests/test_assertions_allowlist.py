from __future__ import annotations

import pytest
from assertion_driver import ConfigRefused, build, drive, ok

from spanassert.config import load_config
from spanassert.core.model import CloseReason, ConfigError, Verdict


def test_listed_tools_pass() -> None:
    run = drive({"type": "trace_only_tools", "tools": ["search", "fetch"]}, ["search", "fetch", "search"])
    assert run.verdict is Verdict.PASSED
    assert run.outcome.message == "3 call(s), all of allowed tools [fetch, search]"


def test_an_unlisted_tool_fails_at_its_start_once_per_call() -> None:
    run = drive({"type": "trace_only_tools", "tools": ["search"]}, ["search", "delete_database", ok("rm"), "search"])
    assert [(r.phase, r.position) for r in run.failures] == [("start", 1), ("start", 2)]
    assert run.first.failure.message == (
        "`delete_database` called at call #2 (span 0000000000000002) is not an allowed tool; allowed: [search]")
    assert run.first.failure.tool == "delete_database"
    assert run.outcome.verdict is Verdict.FAILED


def test_rule_reacts_to_every_call_and_reports_at_start() -> None:
    a = build({"type": "trace_only_tools", "tools": ["search"]})
    assert a.tools is None and a.reports_at_start and a.order_free
    assert a.needs == frozenset()


def test_tool_pattern_matches_whole_names() -> None:
    spec = {"type": "trace_only_tools", "tool_pattern": "mcp_fs_[a-z]+", "tools": ["search"]}
    assert drive(spec, ["mcp_fs_read", "search", "mcp_fs_write"]).verdict is Verdict.PASSED
    run = drive(spec, ["mcp_fs_read", "xmcp_fs_read", "mcp_fs_read2"])
    assert [r.position for r in run.failures] == [1, 2]
    assert "allowed: [search] or /mcp_fs_[a-z]+/" in run.first.failure.message


def test_cut_short_episode_is_inconclusive() -> None:
    run = drive({"type": "trace_only_tools", "tools": ["search"]}, ["search"], close=CloseReason.EVICTED)
    assert run.verdict is Verdict.INCONCLUSIVE


def test_neither_tools_nor_pattern_is_refused() -> None:
    with pytest.raises(ConfigRefused) as info:
        build({"type": "trace_only_tools"})
    assert info.value.codes == ["E_CFG_REQUIRED"]


@pytest.mark.parametrize("pattern", [".*", "(.|\\n)*", "[\\s\\S]*", ".{0,}"])
def test_a_pattern_that_admits_every_name_is_refused_at_load(pattern: str) -> None:
    text = f"version: 1\ntests:\n  - id: t\n    assertions:\n      - type: trace_only_tools\n        tool_pattern: '{pattern}'\n"
    with pytest.raises(ConfigError) as info:
        load_config(text)
    assert "E_ASSERT_INEFFECTIVE" in [d.code for d in info.value.diagnostics]


def test_a_bad_pattern_is_a_positioned_error() -> None:
    with pytest.raises(ConfigRefused) as info:
        build({"type": "trace_only_tools", "tool_pattern": "(unclosed"})
    assert info.value.codes == ["E_CFG_REGEX"]
