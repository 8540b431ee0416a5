"""The registries: ``type:`` name -> assertion class, one for ``assertions:`` entries and one for
``expected:`` blocks. They are the only list of types: the loader, ``spanassert schema``, the docs
check and the contract tests all read them.

A type registers itself with ``register(cls)`` (``register_expected(cls)``) after its class: the
built-in types do, because a class with a decorator does not compile as a native class (issue 15);
both work as class decorators too (a plugin's class is never compiled). The tables below name the
module of every type so that a registry imports that module only when the type is first used.
"""
from __future__ import annotations

from typing import Any, Dict, Iterator, List, Optional, Tuple, Type

from .base import Assertion

# `assertions:` entries and `expected:` blocks are two surfaces; some names exist on both with
# different fields (e.g. `sequence_valid`), so each surface has its own registry.
#
# Each registry knows every type's name and the module that defines it, and imports that module
# when the type is first used: loading a rules file imports only the assertion modules it names
# (start-up). Names (``in``, iteration, ``sorted``) never import; classes (``[]``, ``get``,
# ``values``, ``items``) import on demand. ``tests/test_startup.py`` holds the tables to what the
# modules register.
_ASSERTION_MODULES: Dict[str, str] = {
    "trace_only_tools": "allowlist",
    "trace_max_cost": "budgets", "trace_max_duration": "budgets", "trace_max_tokens": "budgets",
    "trace_args_valid": "call_checks", "trace_tool_duration": "call_checks", "trace_tool_status": "call_checks",
    "trace_final_tool": "ending",
    "trace_no_flow": "flow",
    "trace_no_repeat": "loops",
    "trace_no_sensitive_data": "sensitive",
    "trace_tool_sequence": "sequence", "trace_trajectory": "sequence",
    "trace_max_steps": "steps", "trace_max_tool_calls": "steps",
    "trace_must_call_tool": "tool_calls", "trace_must_not_call_tool": "tool_calls",
    "trace_tool_result": "tool_result",
    "args_valid": "unit", "sequence_valid": "unit", "tool_blocklist": "unit",
}
_EXPECTED_MODULES: Dict[str, str] = {
    "args_valid": "expected.calls", "tool_blocklist": "expected.calls", "tool_output_valid": "expected.calls",
    "json_schema": "expected.output", "must_contain": "expected.output", "must_not_contain": "expected.output",
    "regex_match": "expected.output", "regex_not_match": "expected.output",
    "faithfulness": "expected.refused", "judge_criteria": "expected.refused", "relevance": "expected.refused",
    "tool_collision_detect": "expected.refused", "tool_description_integrity": "expected.refused",
    "sequence_valid": "expected.sequence",
    "semantic_similarity_to": "expected.similarity",
}
# Every module that registers a type (what `values()` imports), including any not in the tables.
_ALL_MODULES = ("allowlist", "budgets", "call_checks", "ending", "expected", "flow", "loops", "rules", "sensitive",
                "sequence", "steps", "tool_calls", "tool_result", "unit")


class _Registry(Dict[str, Type[Assertion]]):
    """Type name -> class, importing a type's module the first time its class is asked for."""

    def __init__(self, modules: Dict[str, str]) -> None:
        super().__init__()
        self._modules = modules

    def _load(self, name: str) -> None:
        module = self._modules.get(name)
        if module is not None and not dict.__contains__(self, name):
            import importlib

            importlib.import_module(f"spanassert.assertions.{module}")

    def load_all(self) -> None:
        import importlib

        for module in _ALL_MODULES:
            importlib.import_module(f"spanassert.assertions.{module}")

    def __contains__(self, name: object) -> bool:
        return name in self._modules or dict.__contains__(self, name)

    def __getitem__(self, name: str) -> Type[Assertion]:
        self._load(name)
        return dict.__getitem__(self, name)

    def get(self, name: str, default: Any = None) -> Any:
        self._load(name)
        return dict.get(self, name, default)

    def _names(self) -> List[str]:
        return list(dict.fromkeys([*self._modules, *dict.keys(self)]))

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())

    def keys(self) -> Any:
        return self._names()

    def values(self) -> Any:
        self.load_all()
        return dict.values(self)

    def items(self) -> Any:
        self.load_all()
        return dict.items(self)

    def __repr__(self) -> str:
        return f"<assertion types: {', '.join(self._names())}>"


ASSERTION_TYPES: Dict[str, Type[Assertion]] = _Registry(_ASSERTION_MODULES)
EXPECTED_TYPES: Dict[str, Type[Assertion]] = _Registry(_EXPECTED_MODULES)


# The capabilities read from each instance (Assertion.CAPABILITIES but the ClassVar ones): a type sets
# them in __init__ (tests/test_native_ready.py holds the list to Assertion's declarations).
PER_INSTANCE_CAPABILITIES = tuple(n for n in Assertion.CAPABILITIES if n not in ("decides_on_close", "order_matters"))
_ADOPTED: Dict[type, Dict[str, Any]] = {}  # class -> the per-instance capabilities taken out of its body
_SETTERS: Dict[type, List[Tuple[Any, Any]]] = {}  # class -> (field setter, value) for each of its instances


def _native_fields() -> Optional[Dict[str, Any]]:
    """The per-instance capabilities' fields of a compiled Assertion (data descriptors); None in the
    pure build."""
    fields = {n: vars(Assertion).get(n) for n in PER_INSTANCE_CAPABILITIES}
    return fields if all(hasattr(type(f), "__set__") for f in fields.values()) else None


def _setters(cls: type, fields: Dict[str, Any]) -> List[Tuple[Any, Any]]:
    """What an instance of ``cls`` gets from class bodies, nearest class last (it wins, as in an
    attribute lookup); each class body seen is emptied of them on the way."""
    got = _SETTERS.get(cls)
    if got is None:
        values: Dict[str, Any] = {}
        for klass in reversed(cls.__mro__):
            if klass is Assertion or not issubclass(klass, Assertion):
                continue
            body = _ADOPTED.get(klass)
            if body is None:
                body = {n: v for n, v in vars(klass).items() if n in fields and not hasattr(type(v), "__set__")}
                for name in body:
                    delattr(klass, name)
                _ADOPTED[klass] = body
            values.update(body)
        got = _SETTERS[cls] = [(fields[n].__set__, v) for n, v in values.items()]
    return got


def _adopt_class_body_capabilities(cls: Type[Assertion]) -> None:
    """A compiled engine (Assertion a native class) reads a per-instance capability from the
    instance's own field; a class body that sets one (a plugin written before they moved to
    ``__init__``) is not that field: Python code would read the class value, compiled code the
    base's default. Such values move to the instances: out of the class bodies (so that a write in an
    ``__init__`` reaches the field too) and into each new instance's field by the outermost
    registered ``__init__``, before any ``__init__`` body runs. In the pure build every reader reads
    the class value: nothing to do."""
    fields = _native_fields()
    if fields is None or not _setters(cls, fields):
        return
    init = cls.__init__

    def __init__(self: Assertion, *args: Any, **kwargs: Any) -> None:
        kind = type(self)
        if next(k for k in kind.__mro__ if "_spanassert_adopts" in vars(k)) is cls:
            for set_field, value in _setters(kind, fields):
                set_field(self, value)
        init(self, *args, **kwargs)

    setattr(cls, "__init__", __init__)  # noqa: B010 - mypy refuses an assignment to a method
    setattr(cls, "_spanassert_adopts", True)  # noqa: B010 - marks the class whose __init__ adopts


def register(cls: Type[Assertion]) -> Type[Assertion]:
    _adopt_class_body_capabilities(cls)
    dict.__setitem__(ASSERTION_TYPES, cls.type_name, cls)
    return cls


def register_expected(cls: Type[Assertion]) -> Type[Assertion]:
    _adopt_class_body_capabilities(cls)
    dict.__setitem__(EXPECTED_TYPES, cls.type_name, cls)
    return cls


__all__ = ["ASSERTION_TYPES", "EXPECTED_TYPES", "register", "register_expected"]
