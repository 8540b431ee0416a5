"""docs/guard.md's framework examples (fenced `py`: the test venv has no ADK or Strands to run them
in) are the code the adapter tests execute: each is the `[doc: …]` region of a scripted agent that
tests/guard/test_google_adk.py or test_strands.py runs in the framework's env
(tests/guard/agents/*_agent.py)."""
from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
AGENTS = HERE / "agents"
DOC = HERE.parent.parent / "docs" / "guard.md"


def doc_region(script: str, name: str) -> str:
    text = (AGENTS / script).read_text(encoding="utf-8")
    m = re.search(rf"^[ \t]*# \[doc: {re.escape(name)}\]\n(.*?)^[ \t]*# \[/doc\]", text, re.M | re.S)
    assert m, f"{script} has no [doc: {name}] region"
    return textwrap.dedent(m.group(1))


@pytest.mark.parametrize("script,name,heading", [
    ("adk_agent.py", "google-adk", "## Google ADK"),
    ("strands_agent.py", "strands", "## Strands"),
])
def test_the_docs_example_is_the_code_the_adapter_test_runs(script: str, name: str, heading: str) -> None:
    doc = DOC.read_text(encoding="utf-8")
    section = doc[doc.index(heading):]
    block = re.search(r"^```py\n(.*?)^```", section, re.M | re.S)
    assert block, f"no py block under {heading}"
    assert doc_region(script, name) in block.group(1)
