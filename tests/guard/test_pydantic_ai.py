"""The pydantic-ai guard adapter (a capability's wrap_tool_execute hook) with the real framework and
its offline FunctionModel, in its own env (tests/fwenv.py): inside pydantic-ai's own tool spans, and
with its instrumentation off (the adapter writes the tool spans)."""
from __future__ import annotations

from pathlib import Path

import pytest

from guard.guard_harness import check_acceptance, run_agent
from guard.guard_harness import spans as spans_of


@pytest.mark.timeout(1800)  # the first run may build the env (make test builds it beforehand)
@pytest.mark.parametrize("instrumented", [True, False], ids=["pydantic-ai-spans", "adapter-spans"])
def test_guard_capability_refuses_before_the_tool_runs_and_replays_the_same(tmp_path: Path,
                                                                            instrumented: bool) -> None:
    report, spans, rules = run_agent("pydantic-ai", "pydantic_ai_agent.py", tmp_path,
                                     env={"GUARD_TEST_INSTRUMENT": "1" if instrumented else "0"})
    check_acceptance(report, spans, rules)
    scopes = {s["scope"] for s in spans_of(spans) if s["attributes"].get("gen_ai.operation.name") == "execute_tool"}
    assert scopes == ({"pydantic-ai"} if instrumented else {"spanassert.guard"}), scopes
