"""Whatever text arrives, ``load_config`` answers with a Config or a ConfigError: never a traceback,
never a hang, never an internal error."""
from __future__ import annotations

from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spanassert.config import Config, ConfigError, load_config

KEYS = st.sampled_from([
    "version", "configVersion", "tests", "id", "type", "tool", "expected", "assertions", "settings", "episodes",
    "mappings", "when", "must_contain", "sequence", "schema", "$ref", "policy", "blocked", "expect", "severity",
    "min_calls", "allow_other_tools", "max", "rules", "match", "input", "idle_timeout", "embedder", "x-a",
    "trace_must_call_tool", "sequence_valid", "tool_blocklist", "args_valid", "must_contain",
]) | st.text(max_size=8)
SCALARS = st.none() | st.booleans() | st.integers(-3, 3) | st.floats(allow_nan=False) | st.text(max_size=12) | KEYS

STRUCTURES = st.recursive(
    SCALARS,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(KEYS, children, max_size=5),
    max_leaves=30,
)


def check(text: str) -> None:
    try:
        result: Any = load_config(text)
    except ConfigError as exc:
        assert exc.diagnostics, text
        codes = {d.code for d in exc.diagnostics}
        assert "E_INTERNAL" not in codes, [d.format() for d in exc.diagnostics]
        for d in exc.diagnostics:
            assert d.severity in ("error", "warning")
            assert isinstance(d.message, str) and d.message
        return
    assert isinstance(result, Config)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=300))
def test_arbitrary_text_gives_config_or_config_error(text: str) -> None:
    check(text + "\n")  # the newline makes it YAML text rather than a path


YAMLISH = st.lists(
    st.sampled_from(["version: 1", "tests:", "  - id: t", "    assertions:", "      - type: trace_max_steps",
                     "        max: 3", "    expected:", "      must_contain: a", "- [", "{", "}", "]", "&a x", "*a",
                     "<<: *a", "? a", ": b", "'", '"', "\t", "---", "...", "!!binary aGk=", "!foo", "%YAML 1.1",
                     "#", "  ", "|", ">", "- - -", "a: &b {c: *b}"]),
    max_size=12,
).map("\n".join)


@settings(max_examples=300, deadline=None)
@given(YAMLISH)
def test_yaml_fragments_give_config_or_config_error(text: str) -> None:
    check(text + "\n")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(STRUCTURES)
def test_arbitrary_structures_dumped_to_yaml_give_config_or_config_error(value: Any) -> None:
    check(yaml.safe_dump(value) + "\n")


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.dictionaries(KEYS, STRUCTURES, max_size=5), max_size=3), st.sampled_from([
    "assertions", "expected"]))
def test_arbitrary_checks_inside_a_valid_frame_give_config_or_config_error(entries: Any, where: str) -> None:
    body = {"id": "t", where: entries if where == "assertions" else (entries[0] if len(entries) == 1 else entries)}
    check(yaml.safe_dump({"version": 1, "tests": [body]}) + "\n")
