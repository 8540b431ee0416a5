"""A rules file's JSON Schema checked against its meta-schema without importing ``jsonschema``.

Importing ``jsonschema`` (with ``referencing`` and its format checkers) and checking a schema
against the Draft 7 meta-schema is about 0.1 s of CPU: half of a small ``spanassert replay``. Most
schemas in rules files use a few plain keywords, so :func:`surely_valid` answers "the meta-schema
check would pass" for such a schema by checking each keyword's value as the Draft 7 meta-schema
does (the loader checks a schema without ``$schema`` and without newer keywords against Draft 7).
It answers False for anything else, and for any doubt: then the loader runs ``jsonschema`` as
before, which words the error. So a schema it accepts is one ``jsonschema`` accepts, and every bad
schema still gets ``jsonschema``'s message (tests/test_schema_meta.py holds it to that).

Such a schema gets a :class:`LazyValidator`: the Draft 2020-12 validator ``jsonschema`` would
build for it (a schema without ``$schema`` is validated with the latest draft), built on first
use. The engine judges arguments with the compiled predicate of :mod:`.schema_fast`, which needs
only the schema, so ``jsonschema`` is imported only when a value fails and its errors are worded.
"""
from __future__ import annotations

import re
from typing import Any, Callable, Dict, List, Optional, Tuple

from .schema_fast import _TYPE_CHECKS, _equal
from .schema_fast import _is_number as _is_number_instance

# Nesting deeper than this is left to jsonschema.
_MAX_DEPTH = 32

_SIMPLE_TYPES = frozenset({"array", "boolean", "integer", "null", "number", "object", "string"})


def _is_number(x: Any) -> bool:
    return type(x) is int or type(x) is float  # bool (and anything odd) is left to jsonschema


def _is_non_negative_integer(x: Any) -> bool:
    if type(x) is int:
        return x >= 0
    return type(x) is float and x.is_integer() and x >= 0


def _is_type(x: Any) -> bool:
    if type(x) is str:
        return x in _SIMPLE_TYPES
    if type(x) is list:
        return bool(x) and all(type(t) is str and t in _SIMPLE_TYPES for t in x) and len(set(x)) == len(x)
    return False


def _is_string_array(x: Any) -> bool:
    return type(x) is list and all(type(s) is str for s in x) and len(set(x)) == len(x)


def _is_regex(x: Any) -> bool:
    if type(x) is not str:
        return False
    try:
        re.compile(x)  # what jsonschema's `regex` format checks, with the same engine
    except (re.error, RecursionError, OverflowError, ValueError):
        return False
    return True


def _is_text(x: Any) -> bool:
    return type(x) is str


def _anything(_x: Any) -> bool:
    return True


def _is_list(x: Any) -> bool:
    return type(x) is list




# Keyword -> check of its value, each as the Draft 7 meta-schema states it (``schema`` values are
# checked by _schema itself). A keyword not here makes the answer "ask jsonschema".
_VALUE_CHECKS: Dict[str, Callable[[Any], bool]] = {
    "type": _is_type,
    "enum": _is_list,
    "const": _anything,
    "minimum": _is_number, "maximum": _is_number, "exclusiveMinimum": _is_number, "exclusiveMaximum": _is_number,
    "minLength": _is_non_negative_integer, "maxLength": _is_non_negative_integer,
    "minItems": _is_non_negative_integer, "maxItems": _is_non_negative_integer,
    "minProperties": _is_non_negative_integer, "maxProperties": _is_non_negative_integer,
    "pattern": _is_regex,
    "required": _is_string_array,
    "title": _is_text, "description": _is_text, "$comment": _is_text,
    "default": _anything, "examples": _is_list,
}
_SUBSCHEMA = frozenset({"additionalProperties", "items", "not", "if", "then", "else"})
_SUBSCHEMA_LISTS = frozenset({"allOf", "anyOf", "oneOf"})  # non-empty arrays of schemas


def _schema(node: Any, depth: int) -> bool:
    if node is True or node is False:
        return True
    if type(node) is not dict or depth > _MAX_DEPTH:
        return False
    for key, value in node.items():
        if type(key) is not str:
            return False
        check = _VALUE_CHECKS.get(key)
        if check is not None:
            if not check(value):
                return False
        elif key in _SUBSCHEMA:
            if not _schema(value, depth + 1):
                return False
        elif key in _SUBSCHEMA_LISTS:
            if type(value) is not list or not value or not all(_schema(v, depth + 1) for v in value):
                return False
        elif key == "properties":
            if type(value) is not dict or not all(type(k) is str and _schema(v, depth + 1)
                                                  for k, v in value.items()):
                return False
        else:
            return False  # `$ref`, `$schema`, `format`, newer drafts' keywords, anything unknown
    return True


def surely_valid(schema: Any) -> bool:
    """True only when ``schema`` has no ``$schema`` and passes the Draft 7 meta-schema check (as
    ``jsonschema.Draft7Validator.check_schema`` finds it, format checks included); False means
    "ask jsonschema". Never raises."""
    try:
        return _schema(schema, 0)
    except Exception:  # noqa: BLE001 - anything odd: jsonschema judges and words it
        return False


# -- the errors jsonschema finds, for a schema surely_valid accepted ---------------------------------
# Each keyword function mirrors its namesake in jsonschema's ``_keywords`` (Draft 2020-12) and
# appends (instance path, keyword, the schema holding it) per error, in the order jsonschema
# yields them; a ``false`` subschema gives the keyword None, as jsonschema's does.
Error = Tuple[Tuple[Any, ...], Optional[str], Any]
_Errors = List[Error]


def _type(v: Any, x: Any, schema: Any, path: Tuple[Any, ...], out: _Errors) -> None:
    if not any(_TYPE_CHECKS[t](x) for t in (v if type(v) is list else (v,))):
        out.append((path, "type", schema))


def _enum(v: Any, x: Any, schema: Any, path: Tuple[Any, ...], out: _Errors) -> None:
    if all(not _equal(each, x) for each in v):
        out.append((path, "enum", schema))


def _const(v: Any, x: Any, schema: Any, path: Tuple[Any, ...], out: _Errors) -> None:
    if not _equal(x, v):
        out.append((path, "const", schema))


def _bound(keyword: str, fails: Callable[[Any, Any], bool]) -> Callable[..., None]:
    def check(v: Any, x: Any, schema: Any, path: Tuple[Any, ...], out: _Errors) -> None:
        if _is_number_instance(x) and fails(x, v):
            out.append((path, keyword, schema))
    return check


def _size(keyword: str, kind: Callable[[Any], bool], too_small: bool) -> Callable[..., None]:
    def check(v: Any, x: Any, schema: Any, path: Tuple[Any, ...], out: _Errors) -> None:
        if kind(x) and (len(x) < v if too_small else len(x) > v):
            out.append((path, keyword, schema))
    return check


def _pattern(v: Any, x: Any, schema: Any, path: Tuple[Any, ...], out: _Errors) -> None:
    if isinstance(x, str) and not re.search(v, x):
        out.append((path, "pattern", schema))


def _required(v: Any, x: Any, schema: Any, path: Tuple[Any, ...], out: _Errors) -> None:
    if isinstance(x, dict):
        out.extend((path, "required", schema) for name in v if name not in x)


def _properties(v: Any, x: Any, _schema: Any, path: Tuple[Any, ...], out: _Errors) -> None:
    if isinstance(x, dict):
        for name, sub in v.items():
            if name in x:
                _descend(sub, x[name], path, name, out)


def _additional(v: Any, x: Any, schema: Any, path: Tuple[Any, ...], out: _Errors) -> None:
    if not isinstance(x, dict):
        return
    known = schema.get("properties", {})
    extras = [name for name in x if name not in known]
    if isinstance(v, dict):
        for name in extras:
            _descend(v, x[name], path, name, out)
    elif not v and extras:
        out.append((path, "additionalProperties", schema))


def _items(v: Any, x: Any, schema: Any, path: Tuple[Any, ...], out: _Errors) -> None:
    if not isinstance(x, list) or not x:
        return
    if v is False:
        out.append((path, "items", schema))
        return
    for i, item in enumerate(x):
        _descend(v, item, path, i, out)


def _valid(sub: Any, x: Any, path: Tuple[Any, ...]) -> bool:
    found: _Errors = []
    _errors(sub, x, path, found)
    return not found


def _all_of(v: Any, x: Any, _schema: Any, path: Tuple[Any, ...], out: _Errors) -> None:
    for sub in v:
        _errors(sub, x, path, out)


def _any_of(v: Any, x: Any, schema: Any, path: Tuple[Any, ...], out: _Errors) -> None:
    if not any(_valid(sub, x, path) for sub in v):
        out.append((path, "anyOf", schema))


def _one_of(v: Any, x: Any, schema: Any, path: Tuple[Any, ...], out: _Errors) -> None:
    valid = sum(1 for sub in v if _valid(sub, x, path))
    if valid != 1:  # none valid, or valid under more than one: one error either way
        out.append((path, "oneOf", schema))


def _not(v: Any, x: Any, schema: Any, path: Tuple[Any, ...], out: _Errors) -> None:
    if _valid(v, x, path):
        out.append((path, "not", schema))


def _if(v: Any, x: Any, schema: Any, path: Tuple[Any, ...], out: _Errors) -> None:
    branch = "then" if _valid(v, x, path) else "else"
    if branch in schema:
        _errors(schema[branch], x, path, out)


_KEYWORD_ERRORS: Dict[str, Callable[..., None]] = {
    "type": _type, "enum": _enum, "const": _const,
    "minimum": _bound("minimum", lambda x, b: x < b), "maximum": _bound("maximum", lambda x, b: x > b),
    "exclusiveMinimum": _bound("exclusiveMinimum", lambda x, b: x <= b),
    "exclusiveMaximum": _bound("exclusiveMaximum", lambda x, b: x >= b),
    "minLength": _size("minLength", _TYPE_CHECKS["string"], True),
    "maxLength": _size("maxLength", _TYPE_CHECKS["string"], False),
    "minItems": _size("minItems", _TYPE_CHECKS["array"], True),
    "maxItems": _size("maxItems", _TYPE_CHECKS["array"], False),
    "minProperties": _size("minProperties", _TYPE_CHECKS["object"], True),
    "maxProperties": _size("maxProperties", _TYPE_CHECKS["object"], False),
    "pattern": _pattern, "required": _required, "properties": _properties, "additionalProperties": _additional,
    "items": _items, "allOf": _all_of, "anyOf": _any_of, "oneOf": _one_of, "not": _not, "if": _if,
}


def _descend(sub: Any, x: Any, path: Tuple[Any, ...], step: Any, out: _Errors) -> None:
    """``sub`` judging ``x`` at ``path + (step,)``; a ``false`` ``sub`` reports at ``path`` (jsonschema's
    descend yields that error before it adds the step to the path)."""
    if sub is False:
        out.append((path, None, False))
    elif sub is not True:
        _errors(sub, x, (*path, step), out)


def _errors(schema: Any, x: Any, path: Tuple[Any, ...], out: _Errors) -> None:
    if schema is True:
        return
    if schema is False:
        out.append((path, None, False))
        return
    for keyword, value in schema.items():
        check = _KEYWORD_ERRORS.get(keyword)
        if check is not None:
            check(value, x, schema, path, out)


def errors(schema: Any, instance: Any) -> _Errors:
    """Every error jsonschema's Draft 2020-12 validator finds in ``instance``, as (instance path,
    keyword, the schema holding the keyword), in its order; only for a schema :func:`surely_valid`
    accepted."""
    out: _Errors = []
    _errors(schema, instance, (), out)
    return out


class LazyValidator:
    """The ``jsonschema`` Draft 2020-12 validator of a schema that :func:`surely_valid` accepted,
    built (and ``jsonschema`` imported) when something other than ``schema`` is first asked of it."""

    __slots__ = ("schema", "_real")

    def __init__(self, schema: Any) -> None:
        self.schema = schema
        self._real: Optional[Any] = None

    def real(self) -> Any:
        real = self._real
        if real is None:
            import jsonschema

            from .schema_util import local_registry

            cls = jsonschema.Draft202012Validator
            real = self._real = cls(self.schema, format_checker=cls.FORMAT_CHECKER, registry=local_registry())
        return real

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)  # copy/pickle probes: not the validator's business
        return getattr(self.real(), name)


__all__ = ["LazyValidator", "errors", "surely_valid"]
