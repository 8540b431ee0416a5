"""One declared Assertion contract, one list of types, no undocumented type.

- Every capability the engine reads from an assertion is a typed attribute of the base class with a
  default (a type says only where it differs). Checked two ways: statically (Assertion.CAPABILITIES
  are annotated and have defaults) and by watching: every documented rule runs through the real
  engine (live processor, replay, serve's precheck) inside a spy that records which attributes the
  core and the front doors read; each must be declared on Assertion.
- The registries are the only list of types: every registered type is documented (README.md or
  docs/), and every documented block that uses it loads (tests/test_readme.py runs them)."""
from __future__ import annotations

import ast
import inspect
import json
import sys
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Set, Tuple, Type

import pytest
import yaml
from native import COMPILED, ran_pure
from test_readme import YAML_BLOCKS, Block, first_line_marker, rules_text

from spanassert.assertions import ASSERTION_TYPES, EXPECTED_TYPES, Assertion, BuildContext
from spanassert.config import load_config
from spanassert.config.model import Config

ROOT = Path(__file__).resolve().parents[1]


# -- the contract, statically ---------------------------------------------------------------------
# Read from the source of the base class, which both builds are made from: a compiled (native) class
# keeps no __annotations__, and a per-instance attribute is a descriptor on it, its default set by
# the constructor.
def _base_declarations(source: Optional[str] = None) -> Dict[str, Tuple[bool, bool]]:
    """Assertion's class body: name -> (annotated there, given a value there or in Assertion.__init__)."""
    tree = ast.parse(source if source is not None else BASE_SOURCE.read_text(encoding="utf-8"))
    [cls] = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Assertion"]
    found: Dict[str, Tuple[bool, bool]] = {}
    for node in cls.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            found[node.target.id] = (True, node.value is not None)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    found[target.id] = (found.get(target.id, (False, False))[0], True)
    [init] = [n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"]
    for node in ast.walk(init):
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets = [node.target]
        else:
            continue
        for target in targets:
            if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
                found[target.attr] = (found.get(target.attr, (False, False))[0], True)
    return found


BASE_SOURCE = ROOT / "src/spanassert/assertions/base.py"


class _OverridesNothing(Assertion):
    type_name = "trace_overrides_nothing"  # never registered


@pytest.mark.parametrize("name", Assertion.CAPABILITIES)
def test_every_capability_is_a_typed_attribute_of_the_base_class_with_a_default(name: str) -> None:
    annotated, valued = _base_declarations().get(name, (False, False))
    assert annotated, f"Assertion.{name} has no type"
    assert valued, f"Assertion.{name} has no default on the base class"
    getattr(_OverridesNothing("t", 0, {}, BuildContext()), name)  # and a rule built in this build answers it


def test_the_declarations_check_sees_an_untyped_or_defaultless_capability() -> None:
    source = BASE_SOURCE.read_text(encoding="utf-8").replace(
        "    CAPABILITIES: ClassVar", "    untyped = False\n    typed_only: bool\n    CAPABILITIES: ClassVar", 1)
    found = _base_declarations(source)
    assert found["untyped"] == (False, True) and found["typed_only"] == (True, False)
    assert found["order_free"] == (True, True) and found["test_id"] == (True, True)  # set by __init__
    assert "made_up" not in found


def _all_types() -> List[Tuple[str, Type[Assertion]]]:
    return [(f"assertions:{n}", c) for n, c in sorted(ASSERTION_TYPES.items())] + \
           [(f"expected:{n}", c) for n, c in sorted(EXPECTED_TYPES.items())]


@pytest.mark.parametrize("where, cls", _all_types(), ids=[w for w, _ in _all_types()])
def test_a_type_overrides_capabilities_only_with_values_of_the_declared_kind(
        where: str, cls: Type[Assertion], monkeypatch: pytest.MonkeyPatch) -> None:
    assert issubclass(cls, Assertion) and cls.type_name and cls.doc, where
    # Every rule of the type the docs build (each executable type has one: the docs test below;
    # a block naming the examples' toy embedder loads with examples/ on the path).
    monkeypatch.syspath_prepend(str(ROOT / "examples"))
    configs = [c for _, c in _documented_configs()] + [
        load_config(rules_text(b)) for b in YAML_BLOCKS
        if first_line_marker(b.text, "expect") is None and "embedder" in b.text and cls.type_name in b.text]
    built = [a for config in configs for t in config.tests for a in t.assertions if type(a) is cls]
    assert built or not cls.executable, f"{where} is executable but no documented block builds it"
    for name in ("decides_on_close", "order_free", "executable"):
        on_class = getattr(cls, name)
        # A per-instance capability of a native class is its attribute's descriptor on the class
        # (the default is set when a rule is built): the rules built hold the values.
        # A type refused at load is never built: nothing reads its per-instance values.
        assert isinstance(on_class, bool) or (COMPILED and inspect.isdatadescriptor(on_class)), \
            f"{where}: {name} = {on_class!r}"
        for a in built:
            assert isinstance(getattr(a, name), bool), f"{where}: {name} = {getattr(a, name)!r} on a built rule"
    assert cls.scope in ("trace", "unit"), where


# -- the docs -------------------------------------------------------------------------------------
def _documented_types() -> Tuple[Set[str], Set[str], str]:
    """(assertion types, expected types) used by a YAML block that loads, and all the docs' text."""
    assertion_types: Set[str] = set()
    expected_types: Set[str] = set()
    for block in YAML_BLOCKS:
        if first_line_marker(block.text, "expect") is not None:
            continue  # a refused example documents a refusal, not the type
        doc = yaml.safe_load(rules_text(block))
        for test in (doc or {}).get("tests") or []:
            for a in test.get("assertions") or []:
                if isinstance(a, dict) and isinstance(a.get("type"), str):
                    assertion_types.add(a["type"])
            expected = test.get("expected")
            if isinstance(expected, dict) and isinstance(expected.get("type"), str):
                expected_types.add(expected["type"])
    text = "\n".join(p.read_text(encoding="utf-8") for p in sorted({b.doc for b in YAML_BLOCKS}))
    return assertion_types, expected_types, text


@pytest.mark.parametrize("where, cls", _all_types(), ids=[w for w, _ in _all_types()])
def test_every_registered_type_is_documented_with_an_example(where: str, cls: Type[Assertion]) -> None:
    assertion_types, expected_types, text = _documented_types()
    if not cls.executable:
        # Accepted names that are refused at load: the docs name them and say why.
        assert f"`{cls.type_name}`" in text, f"{where} is registered but the docs never name it"
        return
    documented = assertion_types if where.startswith("assertions:") else expected_types
    assert cls.type_name in documented, (
        f"{where} is registered but no YAML block in README.md or docs/ uses it; add an entry with an "
        f"example (see docs/adding-an-assertion-type.md)")


def test_the_docs_check_sees_a_missing_type() -> None:
    # A registered type nobody documented must be caught.
    class Undocumented(Assertion):
        type_name = "trace_nobody_documented_this"
        doc = "Never fails; never inconclusive."

    with pytest.raises(AssertionError, match="no YAML block in README.md or docs/ uses it"):
        test_every_registered_type_is_documented_with_an_example("assertions:trace_nobody_documented_this",
                                                                  Undocumented)


# -- the contract, watched ------------------------------------------------------------------------
_READ: Dict[str, Set[str]] = {}
_OUTSIDE = ("spanassert.core", "spanassert.live", "spanassert.replay", "spanassert.serve")


def _spy(cls: Type[Assertion]) -> Type[Assertion]:
    def __getattribute__(self: Any, name: str) -> Any:
        caller = sys._getframe(1).f_globals.get("__name__", "")
        if caller.startswith(_OUTSIDE):
            _READ.setdefault(name, set()).add(caller)
        return object.__getattribute__(self, name)

    return type(cls.__name__, (cls,), {"__getattribute__": __getattribute__})


def _documented_configs() -> List[Tuple[Block, Config]]:
    """Every documented rules file that loads (but those needing an embedder), loaded once per run:
    a test that changes a rule (a spy) takes its own copy with :func:`_documented_configs_fresh`."""
    if not _CONFIGS:
        _CONFIGS.extend(_documented_configs_fresh())
    return list(_CONFIGS)


_CONFIGS: List[Tuple[Block, Config]] = []


def _documented_configs_fresh() -> Iterator[Tuple[Block, Config]]:
    for block in YAML_BLOCKS:
        if first_line_marker(block.text, "expect") is not None or "embedder" in block.text:
            continue
        yield block, load_config(rules_text(block))


def _tools_of(config: Config) -> List[str]:
    names = {"other_tool"}
    for t in config.tests:
        for a in t.trace_assertions:
            names.update(a.tools or ())
    return sorted(names)


def test_the_engine_reads_only_declared_attributes_of_an_assertion(tmp_path: Path, request: Any) -> None:
    if ran_pure(request):
        return  # a property of the source: compiled code reads native attributes without asking Python
    from livekit import Rig

    from spanassert.core.engine import Engine, Sink
    from spanassert.otlp import read_spans
    from spanassert.otlp.writers import write_jsonl
    from spanassert.replay import replay_records

    _READ.clear()
    ran = 0
    for block, config in _documented_configs_fresh():
        for t in config.tests:
            for a in t.assertions:
                a.__class__ = _spy(type(a))
        tools = _tools_of(config)
        # Live door: the SDK, the processor, the engine; one episode calling every named tool.
        rig = Rig(config)
        with rig.tracer.start_as_current_span("invoke_agent a", attributes={"gen_ai.operation.name": "invoke_agent"}):
            with rig.tracer.start_as_current_span("chat m", attributes={"gen_ai.operation.name": "chat"}):
                pass
            for tool in tools:
                with rig.tracer.start_as_current_span(f"execute_tool {tool}", attributes={
                        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool,
                        "gen_ai.tool.call.arguments": json.dumps({"q": 1}),
                        "gen_ai.tool.call.result": json.dumps({"ok": True})}):
                    pass
        rig.provider.shutdown()
        # Replay, and serve's check of each tool span on arrival: the same spans as records.
        path = tmp_path / f"{ran}.jsonl"
        write_jsonl(rig.exporter.get_finished_spans(), path)
        records = list(read_spans([str(path)]))
        assert replay_records(config, records).spans_read == len(tools) + 2
        # The same file without its root (a rotated file): the incomplete episode's verdicts.
        assert replay_records(config, [r for r in records if r.parent_span_id]).spans_read == len(tools) + 1
        engine = Engine(config, Sink())
        for r in records:
            if "gen_ai.tool.name" in r.attributes:
                engine.precheck(r.trace_id, r.span_id, r.parent_span_id, r.name, r.attributes, r.start_ns,
                                r.end_ns, r.status_code, r.events)
        ran += 1
    assert ran >= 10
    # A met liveness rule in an episode whose root was not seen (a rotated file): the engine asks
    # whether its pass survives the calls it did not see.
    config = load_config("version: 1\ntests:\n  - id: met\n    assertions: "
                         "[{type: trace_must_call_tool, tool: other_tool}]\n")
    for t in config.tests:
        for a in t.assertions:
            a.__class__ = _spy(type(a))
    rootless = [r for r in read_spans([str(path)]) if r.parent_span_id]
    [episode] = replay_records(config, rootless).episodes
    assert episode.incomplete and episode.results[0].verdict.value == "passed"
    # A met order rule in an episode whose calls started at the same instant (review11: order_matters).
    tied = list(read_spans([str(path)]))
    calls = [r for r in tied if "gen_ai.tool.name" in r.attributes]
    for r in calls[1:]:
        r.start_ns = calls[0].start_ns
    config = load_config("version: 1\ntests:\n  - id: order\n    assertions: [{type: trace_trajectory, mode: "
                         f"contains, expected: [{calls[0].attributes['gen_ai.tool.name']}]}}]\n")
    for t in config.tests:
        for a in t.assertions:
            a.__class__ = _spy(type(a))
    [episode] = replay_records(config, tied).episodes
    assert len(calls) >= 2 and episode.results[0].verdict.value == "inconclusive"
    undeclared = {name: sorted(callers) for name, callers in _READ.items()
                  if not hasattr(Assertion, name) and name not in Assertion.__annotations__}
    assert not undeclared, f"read from assertions but not declared on Assertion: {undeclared}"
    assert set(Assertion.CAPABILITIES) - {"reports_at_start"} <= set(_READ), sorted(_READ)
