"""Assay types spanassert cannot execute (an LLM judge, tool-definition snapshots): declared, so that
using one gets a specific refusal (``E_CFG_NOT_EXECUTABLE``) instead of an unknown-type error.
"""
from __future__ import annotations

from typing import Any, Dict

from ...core.model import EpisodeView, Outcome
from ..base import Assertion, BuildContext, Field
from ..registry import register_expected
from .common import (
    E_CFG_NOT_EXECUTABLE,
)


def _not_executable(type_name: str, fields: Dict[str, Field], why: str, hint: str) -> type:
    class NotExecutable(Assertion):
        doc = f"Not executable by spanassert: {why}"
        executable = False

        def __init__(self, test_id: str, index: int, values: Dict[str, Any], ctx: BuildContext) -> None:
            super().__init__(test_id, index, values, ctx)
            self.tools = frozenset()
            ctx.error(E_CFG_NOT_EXECUTABLE, f"`expected: {type_name}` is not executable by spanassert: {why}",
                      field="type", hint=hint)

        def on_close(self, state: Any, episode: EpisodeView) -> Outcome:
            return Outcome.inconclusive(f"`{type_name}` is not executable by spanassert")

    NotExecutable.type_name = type_name
    NotExecutable.fields = fields
    NotExecutable.__name__ = NotExecutable.__qualname__ = "".join(p.title() for p in type_name.split("_"))
    register_expected(NotExecutable)
    return NotExecutable


_JUDGE_FIELDS = {
    "min_score": Field({"type": "number"}, doc="Judge score bound (Assay)."),
    "rubric_version": Field({"type": "string"}, doc="Judge rubric (Assay)."),
    "thresholding": Field({"type": "object"}, doc="Baseline tolerance (Assay)."),
}
_JUDGE_WHY = "it is scored by an LLM judge, and spanassert runs no judge, so it could only guess"
_JUDGE_HINT = "check the final output with must_contain, regex_match, json_schema or semantic_similarity_to"

Faithfulness = _not_executable("faithfulness", dict(_JUDGE_FIELDS), _JUDGE_WHY, _JUDGE_HINT)
Relevance = _not_executable("relevance", dict(_JUDGE_FIELDS), _JUDGE_WHY, _JUDGE_HINT)
JudgeCriteria = _not_executable(
    "judge_criteria", {"judge_criteria": Field({}, doc="Judge criteria (Assay).")}, _JUDGE_WHY, _JUDGE_HINT)
ToolDescriptionIntegrity = _not_executable(
    "tool_description_integrity",
    {"pinned_tools": Field({"type": "array"}, doc="Pinned tool definitions (Assay).")},
    "it compares tool definitions (descriptions and input schemas), which tool-call spans do not carry",
    "pin tool definitions where they are served (e.g. an MCP proxy); spans cannot show them",
)
ToolCollisionDetect = _not_executable(
    "tool_collision_detect",
    {"trusted_servers": Field({"type": "array", "items": {"type": "string"}}, doc="Trusted servers (Assay).")},
    "it needs the tool definitions each server registered, which tool-call spans do not carry",
    "detect tool-name collisions where tool lists are served; spans cannot show them",
)
