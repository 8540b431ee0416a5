"""A fast yes/no check for the JSON Schemas tool arguments and results are validated against.

``jsonschema`` builds error objects, evolves a validator per subschema and resolves references even
for an instance that is valid, which costs tens of microseconds per call: more than the engine's
whole budget per span. Most schemas in rules files use a small set of keywords, so
``compile_fast(validator)`` turns such a schema into a plain predicate ``is_valid(instance) -> bool``
made of closures. It returns None for anything it cannot reproduce exactly, and callers then use
``jsonschema`` as before. The predicate answers True only where ``jsonschema`` finds no error; on
False (or an exception) callers still ask ``jsonschema``, which words the messages.

Every rule here mirrors the keyword function of the ``jsonschema`` validator class in use (drafts 6,
7, 2019-09 and 2020-12, which share these keywords): JSON types as its type checker sees them
(``bool`` is neither integer nor number; ``1.0`` is an integer), ``enum``/``const`` with its
``equal`` (``1 == 1.0`` but ``True != 1``), ``pattern`` with ``re.search``, lengths in code points.
Keywords the dialect does not know are ignored, as ``jsonschema`` ignores them.
"""
from __future__ import annotations

import numbers
import re
from collections.abc import Mapping, Sequence
from typing import Any, Callable, Dict, Final, FrozenSet, List, Optional, Tuple

Predicate = Callable[[Any], bool]

# Nesting deeper than this is left to jsonschema (it is never seen in tool schemas).
_MAX_DEPTH: Final = 48

# Keywords this module reproduces. Any other keyword the dialect knows (`$ref`, `format`,
# `patternProperties`, `multipleOf`, ...) makes the compiler give up.
_SUPPORTED: Final = frozenset({
    "type", "enum", "const",
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
    "minLength", "maxLength", "pattern",
    "items", "minItems", "maxItems", "uniqueItems",
    "properties", "required", "additionalProperties", "minProperties", "maxProperties",
    "allOf", "anyOf", "oneOf", "not", "if",
})
# `$` keywords that change nothing without `$ref`; any other (`$id`, `$anchor`, a nested
# `$schema` that would switch dialect, ...) makes the compiler give up.
_INERT_DOLLAR: Final = frozenset({"$comment", "$defs"})


class _Unsupported(Exception):
    """The schema uses something this module does not reproduce exactly."""


def _always(_x: Any) -> bool:
    return True


def _never(_x: Any) -> bool:
    return False


# -- JSON types, as the draft 6+ type checker of jsonschema sees them --------------------------------
_Number = numbers.Number


def _is_number(x: Any) -> bool:
    t = type(x)
    if t is int or t is float:
        return True
    return not isinstance(x, bool) and isinstance(x, _Number)


def _is_integer(x: Any) -> bool:
    t = type(x)
    if t is int:
        return True
    if isinstance(x, bool):
        return False
    if isinstance(x, int):
        return True
    return isinstance(x, float) and x.is_integer()


def _is_object(x: Any) -> bool:
    return isinstance(x, dict)


def _is_array(x: Any) -> bool:
    return isinstance(x, list)


def _is_string(x: Any) -> bool:
    return isinstance(x, str)


def _is_boolean(x: Any) -> bool:
    return isinstance(x, bool)


def _is_null(x: Any) -> bool:
    return x is None


_TYPE_CHECKS: Final[Dict[str, Predicate]] = {
    "object": _is_object, "array": _is_array, "string": _is_string, "number": _is_number,
    "integer": _is_integer, "boolean": _is_boolean, "null": _is_null,
}


# -- equality, as jsonschema's `equal` helper -------------------------------------------------------
def _equal(one: Any, two: Any) -> bool:
    if one is two:
        return True
    if isinstance(one, str) or isinstance(two, str):
        return bool(one == two)
    if isinstance(one, Sequence) and isinstance(two, Sequence):
        return len(one) == len(two) and all(_equal(i, j) for i, j in zip(one, two))
    if isinstance(one, Mapping) and isinstance(two, Mapping):
        return len(one) == len(two) and all(k in two and _equal(v, two[k]) for k, v in one.items())
    return bool(_unbool(one) == _unbool(two))


_TRUE: Final = object()
_FALSE: Final = object()


def _unbool(x: Any) -> Any:
    if x is True:
        return _TRUE
    if x is False:
        return _FALSE
    return x


# -- combining predicates ---------------------------------------------------------------------------
def _all_of(preds: List[Predicate]) -> Predicate:
    preds = [p for p in preds if p is not _always]
    if any(p is _never for p in preds):
        return _never
    if not preds:
        return _always
    if len(preds) == 1:
        return preds[0]
    if len(preds) == 2:
        a, b = preds

        def both(x: Any) -> bool:
            return a(x) and b(x)

        return both
    items = tuple(preds)

    def every(x: Any) -> bool:
        for p in items:
            if not p(x):
                return False
        return True

    return every


def _any_of(preds: List[Predicate]) -> Predicate:
    """True when one of ``preds`` holds (a list of types, ``anyOf``); one alone is returned as it is."""
    if len(preds) == 1:
        return preds[0]
    alts = tuple(preds)

    def any_holds(x: Any, alts: Tuple[Predicate, ...] = alts) -> bool:
        for p in alts:
            if p(x):
                return True
        return False

    return any_holds


def _only_for(kind: Predicate, check: Predicate) -> Predicate:
    """``check`` applies only to instances of one JSON type; others pass (as in JSON Schema)."""
    if check is _always:
        return _always

    def guarded(x: Any) -> bool:
        return not kind(x) or check(x)

    return guarded


# -- the compiler -----------------------------------------------------------------------------------
def _number(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _Unsupported("non-numeric bound")
    return value


def _count(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _Unsupported("non-numeric count")
    return value


def _length_checks(schema: Dict[str, Any], has: Callable[[str], bool], lo_key: str,
                   hi_key: str) -> List[Predicate]:
    """``len(x)`` within ``schema[lo_key]`` … ``schema[hi_key]`` (string code points, array items,
    object properties: the caller applies them to its type only)."""
    out: List[Predicate] = []
    if has(lo_key):
        lo = _count(schema[lo_key])

        def long_enough(x: Any, lo: int = lo) -> bool:
            return not len(x) < lo
        out.append(long_enough)
    if has(hi_key):
        hi = _count(schema[hi_key])

        def short_enough(x: Any, hi: int = hi) -> bool:
            return not len(x) > hi
        out.append(short_enough)
    return out


def _schema_list(value: Any, known: Any, depth: int) -> List[Predicate]:
    if not isinstance(value, list) or not value:
        raise _Unsupported("expected a non-empty list of schemas")
    return [_compile(s, known, depth + 1) for s in value]


def _compile(schema: Any, known: Any, depth: int) -> Predicate:
    """``known``: the keywords of the dialect (``Validator.VALIDATORS``)."""
    if schema is True:
        return _always
    if schema is False:
        return _never
    if not isinstance(schema, dict) or depth > _MAX_DEPTH:
        raise _Unsupported("not a schema")
    for key in schema:
        if not isinstance(key, str):
            raise _Unsupported("non-string keyword")
        if key in known:
            if key not in _SUPPORTED:
                raise _Unsupported(key)
        elif key.startswith("$") and key not in _INERT_DOLLAR and not (depth == 0 and key == "$schema"):
            raise _Unsupported(key)
        # Otherwise unknown to the dialect: jsonschema ignores it (title, description, `then`
        # without `if`, keywords of another draft, ...).

    def has(k: str) -> bool:
        return k in schema and k in known

    checks: List[Predicate] = []

    if has("type"):
        names = schema["type"]
        names = [names] if isinstance(names, str) else names
        if not isinstance(names, list) or not names or not all(isinstance(n, str) and n in _TYPE_CHECKS for n in names):
            raise _Unsupported("type")
        checks.append(_any_of([_TYPE_CHECKS[n] for n in dict.fromkeys(names)]))

    if has("enum"):
        options = schema["enum"]
        if not isinstance(options, list):
            raise _Unsupported("enum")
        if all(type(o) is str for o in options):
            # jsonschema compares a string with `==`, so only an equal string matches.
            strings = frozenset(options)

            def in_enum(x: Any) -> bool:
                return isinstance(x, str) and x in strings
        else:
            opts = tuple(options)

            def in_enum(x: Any) -> bool:
                for o in opts:
                    if _equal(o, x):
                        return True
                return False

        checks.append(in_enum)

    if has("const"):
        expected = schema["const"]

        def is_const(x: Any) -> bool:
            return _equal(x, expected)

        checks.append(is_const)

    # Numeric bounds (only numbers are checked).
    bounds: List[Tuple[int, Any]] = []
    for op, key in ((0, "minimum"), (1, "maximum"), (2, "exclusiveMinimum"), (3, "exclusiveMaximum")):
        if has(key):
            bounds.append((op, _number(schema[key])))
    if bounds:
        checks.append(_only_for(_is_number, _numeric_check(bounds)))

    # Strings.
    str_checks = _length_checks(schema, has, "minLength", "maxLength")
    if has("pattern"):
        source = schema["pattern"]
        if not isinstance(source, str):
            raise _Unsupported("pattern")
        try:
            search = re.compile(source).search
        except (re.error, TypeError, ValueError, OverflowError, RecursionError):
            raise _Unsupported("pattern") from None

        def matches(x: Any, search: Callable[[str], Any] = search) -> bool:
            return search(x) is not None
        str_checks.append(matches)
    if str_checks:
        checks.append(_only_for(_is_string, _all_of(str_checks)))

    # Arrays.
    arr_checks = _length_checks(schema, has, "minItems", "maxItems")
    if has("items"):
        items = schema["items"]
        if not isinstance(items, (dict, bool)):
            raise _Unsupported("items")  # the tuple form of drafts 6-2019
        each = _compile(items, known, depth + 1)
        if each is _never:
            arr_checks.append(lambda x: not x)
        elif each is not _always:
            def all_items(x: Any, each: Predicate = each) -> bool:
                for item in x:
                    if not each(item):
                        return False
                return True

            arr_checks.append(all_items)
    if has("uniqueItems"):
        flag = schema["uniqueItems"]
        if type(flag) is not bool:
            raise _Unsupported("uniqueItems")  # jsonschema reads any truthy value as true
        if flag:
            arr_checks.append(_unique_items)
    if arr_checks:
        checks.append(_only_for(_is_array, _all_of(arr_checks)))

    # Objects.
    obj_checks: List[Predicate] = []
    if has("required"):
        names = schema["required"]
        if not isinstance(names, list):
            raise _Unsupported("required")
        wanted = tuple(names)
        if wanted:
            def has_required(x: Any, wanted: Tuple[Any, ...] = wanted) -> bool:
                for n in wanted:
                    if n not in x:
                        return False
                return True

            obj_checks.append(has_required)
    obj_checks += _length_checks(schema, has, "minProperties", "maxProperties")
    declared = schema.get("properties", {}) if "properties" in known else {}
    if not isinstance(declared, dict):
        raise _Unsupported("properties")
    if has("properties"):
        pairs = tuple((name, p) for name, p in ((n, _compile(s, known, depth + 1)) for n, s in declared.items())
                      if p is not _always)
        if pairs:
            def props_ok(x: Any, pairs: Tuple[Tuple[Any, Predicate], ...] = pairs) -> bool:
                for name, p in pairs:
                    if name in x and not p(x[name]):
                        return False
                return True

            obj_checks.append(props_ok)
    if has("additionalProperties"):
        # Extras are the keys `properties` does not name (`patternProperties` is refused above).
        names_set = frozenset(declared)
        extra = _compile(schema["additionalProperties"], known, depth + 1)
        if extra is _never:
            def no_extras(x: Any, names_set: FrozenSet[Any] = names_set) -> bool:
                return names_set.issuperset(x)
            obj_checks.append(no_extras)
        elif extra is not _always:
            def extras_ok(x: Any, names_set: Any = names_set, extra: Predicate = extra) -> bool:
                for k, v in x.items():
                    if k not in names_set and not extra(v):
                        return False
                return True

            obj_checks.append(extras_ok)
    if obj_checks:
        checks.append(_only_for(_is_object, _all_of(obj_checks)))

    # Combinators.
    if has("allOf"):
        checks.extend(_schema_list(schema["allOf"], known, depth))
    if has("anyOf"):
        checks.append(_any_of(_schema_list(schema["anyOf"], known, depth)))
    if has("oneOf"):
        alts = tuple(_schema_list(schema["oneOf"], known, depth))

        def one_valid(x: Any, alts: Tuple[Predicate, ...] = alts) -> bool:
            found = False
            for p in alts:
                if p(x):
                    if found:
                        return False
                    found = True
            return found

        checks.append(one_valid)
    if has("not"):
        negated = _compile(schema["not"], known, depth + 1)

        def is_not(x: Any, negated: Predicate = negated) -> bool:
            return not negated(x)
        checks.append(is_not)
    if has("if"):
        cond = _compile(schema["if"], known, depth + 1)
        then = _compile(schema["then"], known, depth + 1) if "then" in schema else _always
        other = _compile(schema["else"], known, depth + 1) if "else" in schema else _always
        if then is not _always or other is not _always:
            def if_then_else(x: Any, cond: Predicate = cond, then: Predicate = then, other: Predicate = other) -> bool:
                return then(x) if cond(x) else other(x)
            checks.append(if_then_else)

    return _all_of(checks)


def _unique_items(x: Any) -> bool:
    """``uniqueItems: true``, as jsonschema judges it: an array of strings only (a tool's tags, a
    rule's detector names) by a set; any other array by jsonschema's own comparison (numbers equal
    across int and float, booleans apart from numbers), imported only when one is met."""
    strings = True
    for item in x:
        if type(item) is not str:
            strings = False
            break
    if strings:
        return len(set(x)) == len(x)
    from jsonschema._utils import uniq

    return bool(uniq(x))


def _numeric_check(bounds: List[Tuple[int, Any]]) -> Predicate:
    if len(bounds) == 1:
        op, b = bounds[0]
        if op == 0:
            return lambda x: not x < b
        if op == 1:
            return lambda x: not x > b
        if op == 2:
            return lambda x: not x <= b
        return lambda x: not x >= b
    preds = [_numeric_check([ob]) for ob in bounds]
    return _all_of(preds)


# Validator classes whose keyword semantics the compiler reproduces (drafts 3 and 4 differ on
# `integer` and the boolean `exclusiveMaximum`, so they are left to jsonschema).
def _supported_classes() -> Tuple[type, ...]:
    import jsonschema

    return (jsonschema.Draft6Validator, jsonschema.Draft7Validator, jsonschema.Draft201909Validator,
            jsonschema.Draft202012Validator)


_CLASSES: Optional[Tuple[type, ...]] = None


def compile_fast(validator: Any) -> Optional[Predicate]:
    """A predicate equivalent to "``validator`` finds no error in the instance", or None when the
    schema uses a keyword (or a validator class) this module does not reproduce exactly."""
    global _CLASSES
    from .schema_meta import LazyValidator

    if type(validator) is LazyValidator:  # a Draft 2020-12 validator not built yet
        return compile_schema_fast(validator.schema, DRAFT_2020_12_KEYWORDS)
    if _CLASSES is None:
        _CLASSES = _supported_classes()
    cls = type(validator)
    if cls not in _CLASSES:
        return None
    return compile_schema_fast(validator.schema, cls.VALIDATORS)


def compile_schema_fast(schema: Any, known: Any) -> Optional[Predicate]:
    """As ``compile_fast`` for a schema and the keyword table of its dialect."""
    try:
        return _compile(schema, known, 0)
    except Exception:  # noqa: BLE001 - _Unsupported, or a schema too odd to compile: jsonschema judges
        return None


# -- checking a config value without importing jsonschema -------------------------------------------
# The keywords of Draft 2020-12 (`jsonschema.Draft202012Validator.VALIDATORS`, the dialect the loader
# and the sequence-rule parser validate config values with), spelled out so that a value can be
# checked at start-up without importing jsonschema (~0.1 s of CPU); tests/test_startup.py pins this
# set against jsonschema's own.
DRAFT_2020_12_KEYWORDS: Final = frozenset({
    "$dynamicRef", "$ref", "additionalProperties", "allOf", "anyOf", "const", "contains", "dependentRequired",
    "dependentSchemas", "enum", "exclusiveMaximum", "exclusiveMinimum", "format", "if", "items", "maxItems",
    "maxLength", "maxProperties", "maximum", "minItems", "minLength", "minProperties", "minimum", "multipleOf",
    "not", "oneOf", "pattern", "patternProperties", "prefixItems", "properties", "propertyNames", "required",
    "type", "unevaluatedItems", "unevaluatedProperties", "uniqueItems",
})

# schema id -> (schema, predicate or None); the schema is kept so its id cannot be reused meanwhile.
_PLAIN: Dict[int, Tuple[Any, Optional[Predicate]]] = {}
_PLAIN_CACHE_SIZE: Final = 1024


def plainly_valid(schema: Any, value: Any) -> bool:
    """True only when ``value`` is valid against the Draft 2020-12 ``schema`` (no format checker) as
    jsonschema would find it; False means "ask jsonschema" (invalid, or not compilable here)."""
    entry = _PLAIN.get(id(schema))
    if entry is None or entry[0] is not schema:
        entry = (schema, compile_schema_fast(schema, DRAFT_2020_12_KEYWORDS))
        if len(_PLAIN) >= _PLAIN_CACHE_SIZE:
            _PLAIN.clear()
        _PLAIN[id(schema)] = entry
    predicate = entry[1]
    if predicate is None:
        return False
    try:
        return bool(predicate(value))
    except Exception:  # noqa: BLE001 - an odd value: jsonschema judges
        return False
