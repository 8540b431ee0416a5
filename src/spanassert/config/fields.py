"""The one check of a typed mapping against its :class:`~spanassert.assertions.base.Field` s: keys
it does not declare, required keys that are missing, and each value against its field's JSON
Schema (:func:`value_problem`, which picks the most relevant error and words it with the observed
value and the bound). The loader (rules-file sections, assertion keys) and the sequence-rule
parser walk a mapping with :func:`field_problems`; each words and positions what it finds.
"""
from __future__ import annotations

import json
from typing import Any, Callable, Iterator, Mapping, NamedTuple, Optional, Tuple

from ..assertions.base import Field
from ..assertions.schema_fast import plainly_valid
from ..assertions.schema_util import SCHEMAS, schema_key
from ..core.suggest import did_you_mean
from . import codes
from .keypath import KeyPath, format_path

ValueProblem = Tuple[str, str, KeyPath, Optional[str]]  # (code, message, path below the value, hint)

UNKNOWN_KEY = "unknown key"
MISSING_KEY = "missing key"
BAD_VALUE = "bad value"


def field_validator(schema: Mapping[str, Any]) -> Any:
    key = ("field", schema_key(schema))
    v = SCHEMAS.get(key)
    if v is None:
        import jsonschema  # only for a field value the plain checks cannot accept (start-up stays light)

        v = jsonschema.Draft202012Validator(schema)
        SCHEMAS.put(key, v)
    return v


_JSON_TYPE_NAMES = {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
                    list: "a list", dict: "a mapping", type(None): "null"}


def kind_of(value: Any) -> str:
    return _JSON_TYPE_NAMES.get(type(value), type(value).__name__)


def short(value: Any, limit: int = 60) -> str:
    text = json.dumps(value, default=str, ensure_ascii=False) if not isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _expected_types(schema: Mapping[str, Any]) -> str:
    t = schema.get("type")
    names = t if isinstance(t, list) else [t]
    words = {"string": "a string", "integer": "an integer", "number": "a number", "boolean": "a boolean (true/false)",
             "array": "a list", "object": "a mapping", "null": "null"}
    return " or ".join(words.get(str(n), str(n)) for n in names)


# How to write a value of each JSON type in YAML: the fix of a type error.
_TYPE_FIXES = {"string": "text (quote it, e.g. \"1.0\", if YAML would read it as a number, boolean or date)",
               "integer": "a whole number, without quotes", "number": "a number, without quotes",
               "boolean": "`true` or `false`", "array": "a list: `[a, b]` or one `- item` per line",
               "object": "a mapping: `key: value` lines (or `{key: value}`)", "null": "`null`"}


def _type_hint(schema: Mapping[str, Any]) -> str:
    t = schema.get("type")
    names = t if isinstance(t, list) else [t]
    return "write " + ", or ".join(_TYPE_FIXES.get(str(n), str(n)) for n in names)


_SIMPLE_TYPES = {"string": str, "boolean": bool, "array": list, "object": dict}
_SIMPLE_KEYS = frozenset({"type", "minLength", "minimum", "enum", "const"})


def _plainly_valid(schema: Mapping[str, Any], value: Any) -> bool:
    """True when a simple field schema (a type, a bound, an enum) plainly accepts ``value``; most
    fields are this simple, and a jsonschema run per field is most of the cost of loading a file.
    Anything else (or any doubt) goes to jsonschema, which also words the error."""
    if not _SIMPLE_KEYS.issuperset(schema):
        return False
    t = schema.get("type")
    if t is not None:
        if t in ("integer", "number"):
            if isinstance(value, bool) or not isinstance(value, (int, float) if t == "number" else int):
                return False
        else:
            py = _SIMPLE_TYPES.get(t) if isinstance(t, str) else None
            if py is None or not isinstance(value, py) or (py is not bool and isinstance(value, bool)):
                return False
    if "minLength" in schema and not (isinstance(value, str) and len(value) >= schema["minLength"]):
        return False
    if "minimum" in schema and not (isinstance(value, (int, float)) and not isinstance(value, bool)
                                    and value >= schema["minimum"]):
        return False
    if "enum" in schema and not any(value == e and type(value) is type(e) for e in schema["enum"]):
        return False
    return "const" not in schema or (value == schema["const"] and type(value) is type(schema["const"]))


def value_problem(schema: Mapping[str, Any], value: Any, label: str) -> Optional[ValueProblem]:
    """``(code, message, sub_path, hint)`` for the most relevant way ``value`` violates ``schema``."""
    if _plainly_valid(schema, value) or plainly_valid(schema, value):
        return None
    try:
        errors = list(field_validator(schema).iter_errors(value))
    except Exception as exc:  # noqa: BLE001 - a broken Field schema is reported, not raised
        return (codes.E_INTERNAL, f"cannot check `{label}`: {exc}", (), None)
    if not errors:
        return None
    import jsonschema

    err = jsonschema.exceptions.best_match(errors)
    sub: KeyPath = tuple(err.absolute_path)
    where = "`" + label + (format_path(sub) if sub and isinstance(sub[0], int) else
                           ("." + format_path(sub) if sub else "")) + "`"
    kw = err.validator
    bound = err.validator_value
    hint: Optional[str] = None
    if kw == "type":
        return (codes.E_CFG_TYPE, f"{where} must be {_expected_types(err.schema)}, not {kind_of(err.instance)}",
                sub, _type_hint(err.schema))
    if kw == "enum":
        allowed = [str(b) for b in bound]
        guess = did_you_mean(str(err.instance), allowed) if isinstance(err.instance, str) else None
        if guess:
            hint = f"write `{guess}` (values are case-sensitive)" if guess.lower() == str(err.instance).lower() \
                else f"did you mean `{guess}`?"
        else:
            hint = "use one of: " + ", ".join(f"`{a}`" for a in allowed)
        return (codes.E_CFG_VALUE, f"{where} must be one of {', '.join(allowed)}; got {short(err.instance)}",
                sub, hint)
    if kw == "const":
        return (codes.E_CFG_VALUE, f"{where} must be {short(bound)}; got {short(err.instance)}", sub,
                f"write {short(bound)}, or remove the key")
    if kw == "required":
        missing = [k for k in bound if isinstance(err.instance, dict) and k not in err.instance]
        return (codes.E_CFG_REQUIRED, f"{where} is missing required key(s): {', '.join(missing)}", sub,
                "add " + ", ".join(f"`{k}`" for k in missing))
    if kw == "additionalProperties" and isinstance(err.instance, dict):
        props = err.schema.get("properties", {}) if isinstance(err.schema, dict) else {}
        extra = [k for k in err.instance if k not in props]
        if props and extra:
            guess = did_you_mean(str(extra[0]), props)
            return (codes.E_CFG_UNKNOWN_KEY, f"{where} has unknown key(s): {', '.join(map(str, extra))}", sub,
                    f"did you mean `{guess}`?" if guess else "allowed keys: " + ", ".join(sorted(props)))
    if kw in ("minItems", "minLength", "minProperties") and bound == 1:
        return (codes.E_CFG_VALUE, f"{where} must not be empty", sub, "give it a value, or remove the key")
    if kw == "maxLength" and isinstance(err.instance, str):
        return (codes.E_CFG_VALUE, f"{where} is {len(err.instance)} characters long; at most {bound}", sub,
                "shorten it")
    if kw == "pattern":
        return (codes.E_CFG_VALUE, f"{where} must match the pattern {bound}; got {short(err.instance)}", sub,
                "write a value of that form (`spanassert schema` prints the schema of every field)")
    message = err.message if len(err.message) <= 200 else err.message[:199] + "…"
    return (codes.E_CFG_VALUE, f"{where}: {message}", sub,
            "see the field in docs/rules.md (`spanassert schema` prints the schema of every field)")


def _no(_: Any) -> bool:
    return False


class FieldProblem(NamedTuple):
    kind: str  # UNKNOWN_KEY, MISSING_KEY or BAD_VALUE
    key: str
    field: Optional[Field]  # None for an unknown key
    problem: Optional[ValueProblem]  # for a bad value


def field_problems(spec: Mapping[str, Any], fields: Mapping[str, Field], *,
                   known: Callable[[str], bool] = _no,
                   walked_apart: Callable[[Field], bool] = _no,
                   label: Callable[[str], str] = str,
                   check: Callable[[Mapping[str, Any], Any, str], Optional[ValueProblem]] = value_problem,
                   ) -> Iterator[FieldProblem]:
    """What is wrong with ``spec`` as a mapping of ``fields``, in reading order: every key that is
    not a field (unless ``known(key)``), then field by field a required key that is missing or a
    value its schema refuses (``check``, by default :func:`value_problem`, with ``label(key)``
    naming it). A field for which ``walked_apart(field)`` holds has its value checked by its caller."""
    for key in spec:
        if key not in fields and not known(key):
            yield FieldProblem(UNKNOWN_KEY, key, None, None)
    for name, field in fields.items():
        if name not in spec:
            if field.required:
                yield FieldProblem(MISSING_KEY, name, field, None)
            continue
        if walked_apart(field):
            continue
        problem = check(field.schema, spec[name], label(name))
        if problem is not None:
            yield FieldProblem(BAD_VALUE, name, field, problem)


__all__ = ["BAD_VALUE", "MISSING_KEY", "UNKNOWN_KEY", "FieldProblem", "ValueProblem", "field_problems",
           "field_validator", "kind_of", "short", "value_problem"]
