"""Every YAML example in the reference seeds that is a rules file, a test, an assertion or an
`expected:` snippet loads (snippets are wrapped into a minimal `version: 1` file), or is refused with
the code its text states. Examples are extracted from the seed files when the test runs."""
from __future__ import annotations

import os
import re
import textwrap
from pathlib import Path
from typing import Any, Dict, FrozenSet, List, NamedTuple, Optional, Tuple

import pytest
import yaml

from spanassert.assertions.registry import ASSERTION_TYPES, EXPECTED_TYPES
from spanassert.config import ConfigError, load_config

REPO_ROOT = Path(__file__).resolve().parent.parent
SEEDS_DIR = REPO_ROOT.parent / "shared" / "reference" / "seeds"

# A line that can belong to a YAML example (key, list item, comment), as opposed to prose.
_YAML_LINE = re.compile(r"^(\s*#|\s*- |\s*-$|\s*[A-Za-z_$][\w$.-]*:(\s|$))")
_PLACEHOLDER = "{ ... }"

# What the seeds' prose says about particular examples: "Rejected" blocks are refused as checking
# nothing (Assay's vacuous-expected error; our E_CFG_VACUOUS or E_ASSERT_INEFFECTIVE).
REFUSED_BY_TEXT: Dict[str, FrozenSet[str]] = {
    "# Rejected": frozenset({"E_CFG_VACUOUS", "E_ASSERT_INEFFECTIVE"}),
}
# Examples the seeds show with `policy: { ... }`, a placeholder for "your policy here": a literal
# `{...: null}` policy carries no blocklist, regex or schema, so the check cannot fail.
PLACEHOLDER_CODES = frozenset({"E_ASSERT_INEFFECTIVE", "E_CFG_VACUOUS", "E_CFG_UNIT", "E_CFG_UNKNOWN_KEY",
                               "E_CFG_VALUE", "E_CFG_POLICY"})
# YAML in the seeds that is not a spanassert rules file, by the top-level keys that identify it.
NOT_RULES = {frozenset({"expectations", "exact", "prefix", "contains", "subset"}): "understudy Scene expectations"}


class SeedExample(NamedTuple):
    source: str  # "file.txt:line"
    yaml_text: str  # the example as written
    kind: str  # file | tests | test | assertion | assertions | expected
    rules_file: str  # the example as a complete rules file


def _blocks(text: str) -> List[Tuple[int, List[str]]]:
    out: List[Tuple[int, List[str]]] = []
    cur: List[str] = []
    start = 0
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            if cur:
                out.append((start, cur))
                cur = []
            continue
        if _YAML_LINE.match(line) or (cur and line[:1] in " \t"):
            if not cur:
                start = n
            cur.append(line)
        elif cur:
            out.append((start, cur))
            cur = []
    if cur:
        out.append((start, cur))
    return out


def _load(lines: List[str]) -> Any:
    try:
        return yaml.safe_load("\n".join(lines))
    except yaml.YAMLError:
        return None


def _merged(blocks: List[Tuple[int, List[str]]]) -> List[Tuple[int, List[str]]]:
    """A blank line can sit inside one example (`model:` ... blank ... `tests:`): join neighbours whose
    top-level keys are disjoint and that parse as one mapping."""
    out: List[Tuple[int, List[str]]] = []
    for start, lines in blocks:
        if out and not lines[0].lstrip().startswith("#"):
            prev_start, prev = out[-1]
            a, b, both = _load(prev), _load(lines), _load(prev + [""] + lines)
            if (isinstance(a, dict) and isinstance(b, dict) and isinstance(both, dict)
                    and not set(a) & set(b) and len(both) == len(a) + len(b)):
                out[-1] = (prev_start, prev + [""] + lines)
                continue
        out.append((start, lines))
    return out


def _indent(text: str, n: int) -> str:
    return textwrap.indent(text, " " * n)


def _classify(value: Any, text: str) -> Optional[Tuple[str, str]]:
    if isinstance(value, dict):
        keys = set(value)
        if keys & {"version", "configVersion"}:
            return "file", text
        if "type" in keys:
            if value["type"] in ASSERTION_TYPES:
                return "assertion", "version: 1\ntests:\n  - id: seed\n    assertions:\n" + _indent("- " + _indent(text, 2)[2:], 6)
            return "expected", "version: 1\ntests:\n  - id: seed\n    expected:\n" + _indent(text, 6)
        if keys == {"expected"}:
            return "test", "version: 1\ntests:\n  - id: seed\n" + _indent(text, 4)
        return None
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        if all("id" in v for v in value):
            return "tests", "version: 1\ntests:\n" + _indent(text, 2)
        if all("type" in v for v in value):
            return "assertions", "version: 1\ntests:\n  - id: seed\n    assertions:\n" + _indent(text, 6)
    return None


def seed_examples() -> Tuple[List[SeedExample], List[Tuple[str, str]]]:
    """(examples that are rules-file material, [(source, reason)] for YAML that is something else)."""
    import spanassert.assertions  # noqa: F401 - registries decide assertion vs expected snippets

    examples: List[SeedExample] = []
    skipped: List[Tuple[str, str]] = []
    for path in sorted(SEEDS_DIR.glob("*.txt")):
        for start, lines in _merged(_blocks(path.read_text(encoding="utf-8"))):
            text = "\n".join(lines) + "\n"
            value = _load(lines)
            if not isinstance(value, (dict, list)):
                continue  # prose that happens to contain a colon
            where = f"{path.name}:{start}"
            shape = _classify(value, text)
            if shape is None:
                reason = NOT_RULES.get(frozenset(value) if isinstance(value, dict) else frozenset(), "")
                skipped.append((where, reason or "unrecognised example shape"))
                continue
            examples.append(SeedExample(where, text, shape[0], shape[1]))
    return examples, skipped


def _seeds_available() -> None:
    if SEEDS_DIR.is_dir() and any(SEEDS_DIR.glob("*.txt")):
        return
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"seed files are required in CI and are missing: {SEEDS_DIR}")
    pytest.skip(f"seed files not found at {SEEDS_DIR}")


def _expected_refusal(example: SeedExample) -> Optional[FrozenSet[str]]:
    for marker, codes in REFUSED_BY_TEXT.items():
        if marker in example.yaml_text:
            return codes
    if _PLACEHOLDER in example.yaml_text:
        return PLACEHOLDER_CODES
    return None


# Seed examples we knowingly answer differently (none at present): needles -> reason.
KNOWN_GAPS: Dict[Tuple[str, ...], str] = {}


def _params() -> List[Any]:
    if not SEEDS_DIR.is_dir():
        return ["<no seeds>"]
    params: List[Any] = []
    for e in seed_examples()[0]:
        gap = next((why for needles, why in KNOWN_GAPS.items() if all(n in e.yaml_text for n in needles)), None)
        marks = [pytest.mark.xfail(reason=gap, strict=True)] if gap else []
        params.append(pytest.param(e.source, marks=marks, id=e.source))
    return params or ["<no seeds>"]


@pytest.fixture(scope="module")
def examples() -> Dict[str, SeedExample]:
    _seeds_available()
    return {e.source: e for e in seed_examples()[0]}


def test_seed_extraction_finds_every_kind_of_example() -> None:
    _seeds_available()
    found, skipped = seed_examples()
    kinds = {e.kind for e in found}
    assert {"file", "tests", "test", "assertion", "assertions"} <= kinds, kinds
    assert len(found) >= 20
    # Anything that is neither rules material nor known foreign YAML would be silently untested.
    assert [r for _, r in skipped if r == "unrecognised example shape"] == [], skipped


@pytest.mark.parametrize("source", _params())
def test_seed_example_loads_or_is_refused_as_stated(source: str, examples: Dict[str, SeedExample],
                                                     tmp_path: Path) -> None:
    example = examples[source]
    path = tmp_path / "seed.yaml"
    path.write_text(example.rules_file, encoding="utf-8")
    codes = _expected_refusal(example)
    if codes is None:
        try:
            config = load_config(path)
        except ConfigError as exc:
            pytest.fail(f"{source} should load:\n{example.rules_file}\n" +
                        "\n".join(d.format() for d in exc.diagnostics))
        assert config.tests
        assert all(d.severity != "error" for d in config.diagnostics)
        return
    with pytest.raises(ConfigError) as raised:
        load_config(path)
    got = {d.code for d in raised.value.diagnostics if d.severity == "error"}
    assert got & codes, f"{source}: expected one of {sorted(codes)}, got " + \
        "\n".join(d.format() for d in raised.value.diagnostics)
    assert "E_INTERNAL" not in got and "E_ASSERT_BUILD" not in got


def test_seed_unit_test_forms_meet_their_expect(examples: Dict[str, SeedExample], tmp_path: Path) -> None:
    """The seed's unit-test forms state `expect:` that their own data meets."""
    unit_examples = [e for e in examples.values() if "expect:" in e.yaml_text and _expected_refusal(e) is None]
    assert unit_examples
    for example in unit_examples:
        config = load_config(example.rules_file)
        results = [o.verdict.value for t in config.tests for _, o in t.unit_results]
        assert results and set(results) == {"passed"}, (example.source, results)
