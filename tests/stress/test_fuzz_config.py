"""Arbitrary YAML into the rules loader: a Config or a ConfigError with positioned diagnostics,
never another exception, never an internal error, never code execution through YAML tags."""
from __future__ import annotations

import os
import tempfile
import time
from typing import Any, List

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spanassert.config import Config, ConfigError, load_config

from .report import record
from .rig import RULES

YAML_TOKENS = [
    "&a ", "*a", "<<: *a\n", "!!python/object/apply:os.system ['touch /tmp/spanassert-pwned']",
    "!!binary aGVsbG8=", "!!set {a, b}", "!!omap [a: 1]", "? [a, b]\n: c\n", "---\n", "...\n", "%YAML 1.1\n",
    "{", "}", "[", "]", ": ", "- ", "\t", "'", '"', "|\n  x\n", ">-\n  y\n", "#", "\\u0000", "\x00", "\ufeff",
    "\udcff", "1e999", "0x1F", ".nan", "~", "yes", "2001-12-14t21:59:43.10-05:00", "!custom x",
    "type: trace_must_call_tool\n", "tool: ", "tests:\n", "version: 1\n", "episodes:\n  max_open: ", "args_match: {q: '",
]
PWNED = "/tmp/spanassert-pwned"


@st.composite
def yaml_text(draw: Any) -> str:
    kind = draw(st.integers(0, 2))
    if kind == 0:  # valid rules with tokens spliced in
        text = RULES
        for _ in range(draw(st.integers(1, 5))):
            pos = draw(st.integers(0, len(text)))
            text = text[:pos] + draw(st.sampled_from(YAML_TOKENS)) + text[pos:]
        return text
    if kind == 1:  # valid rules with lines deleted, duplicated or re-indented
        lines = RULES.splitlines()
        for _ in range(draw(st.integers(1, 4))):
            i = draw(st.integers(0, len(lines) - 1))
            op = draw(st.integers(0, 2))
            if op == 0:
                del lines[i]
            elif op == 1:
                lines.insert(i, lines[i])
            else:
                lines[i] = " " * draw(st.integers(0, 9)) + lines[i].lstrip()
            if not lines:
                break
        return "\n".join(lines) + "\n"
    return "\n" + "".join(draw(st.lists(st.sampled_from(YAML_TOKENS) | st.text(max_size=10), max_size=30)))


def _load(text: Any) -> str:
    try:
        result = load_config(text)
    except ConfigError as exc:
        assert exc.diagnostics
        for d in exc.diagnostics:
            assert d.code != "E_INTERNAL", d.format()
            assert d.severity in ("error", "warning") and d.message
        return "refused"
    assert isinstance(result, Config)
    return "loaded"


def test_arbitrary_yaml_text_and_bytes_give_config_or_config_error(sizes: Any) -> None:
    outcomes: List[str] = []
    escaped: List[BaseException] = []
    t0 = time.perf_counter()

    @settings(max_examples=sizes.pick(200, 4000), deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(st.one_of(yaml_text(), st.binary(max_size=300).map(lambda b: ("bytes", b))))
    def run(example: Any) -> None:
        try:
            if isinstance(example, tuple):
                fd, path = tempfile.mkstemp(suffix=".yaml")
                with os.fdopen(fd, "wb") as f:
                    f.write(example[1])
                try:
                    outcomes.append(_load(path))
                finally:
                    os.unlink(path)
            else:
                outcomes.append(_load(example))
        except BaseException as exc:  # noqa: BLE001 - counted, then re-raised for hypothesis
            escaped.append(exc)
            raise

    run()
    pwned = os.path.exists(PWNED)
    record("fuzz: arbitrary YAML into the rules loader", inputs=len(outcomes) + len(escaped),
           exceptions_escaped=len(escaped), seconds=time.perf_counter() - t0,
           note=f"{outcomes.count('loaded')} loaded, {outcomes.count('refused')} refused; YAML tag executed: {pwned}")
    assert escaped == []
    assert not pwned, "a YAML tag ran code"
    assert "refused" in outcomes and "loaded" in outcomes  # the generator reaches both answers
