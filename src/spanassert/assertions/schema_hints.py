"""Plain-words diagnostics for JSON Schemas written inside rules.

- A misspelt keyword (``maximun``, ``requird``) is not an error to JSON Schema: unknown keywords
  are ignored, so the check silently never runs. :func:`misspelt_keywords` finds keywords close
  to a real one, with the key path to point at.
- :func:`explain_schema_error` turns jsonschema's meta-schema error (worded for schema authors,
  positioned at the schema's first line) into the path of the offending keyword and a sentence
  saying what is allowed there, with the nearest valid value.
"""
from __future__ import annotations

from typing import Any, Dict, Iterator, List, Optional, Tuple, Union

from ..core.suggest import close_names, same_but_case

KeyPath = Tuple[Union[str, int], ...]

KEYWORDS = frozenset((
    "$schema", "$id", "$ref", "$defs", "$comment", "$anchor", "$dynamicRef", "$dynamicAnchor", "$vocabulary",
    "$recursiveRef", "$recursiveAnchor", "definitions", "type", "enum", "const", "multipleOf", "maximum",
    "exclusiveMaximum", "minimum", "exclusiveMinimum", "maxLength", "minLength", "pattern", "maxItems",
    "minItems", "uniqueItems", "maxContains", "minContains", "maxProperties", "minProperties", "required",
    "dependentRequired", "dependencies", "properties", "patternProperties", "additionalProperties",
    "propertyNames", "items", "prefixItems", "additionalItems", "contains", "unevaluatedItems",
    "unevaluatedProperties", "allOf", "anyOf", "oneOf", "not", "if", "then", "else", "format",
    "contentEncoding", "contentMediaType", "contentSchema", "title", "description", "default", "deprecated",
    "readOnly", "writeOnly", "examples",
))

TYPES = ("array", "boolean", "integer", "null", "number", "object", "string")

# Where subschemas sit: keyword -> "one" (a schema), "map" (name -> schema), "list" (schemas).
_SUBSCHEMAS = {
    "items": "one", "additionalItems": "one", "additionalProperties": "one", "propertyNames": "one",
    "contains": "one", "not": "one", "if": "one", "then": "one", "else": "one", "unevaluatedItems": "one",
    "unevaluatedProperties": "one", "contentSchema": "one",
    "properties": "map", "patternProperties": "map", "$defs": "map", "definitions": "map",
    "dependentSchemas": "map",
    "allOf": "list", "anyOf": "list", "oneOf": "list", "prefixItems": "list",
}


def _schemas(schema: Any, path: KeyPath, depth: int = 0) -> Iterator[Tuple[Dict[str, Any], KeyPath]]:
    if not isinstance(schema, dict) or depth > 64:
        return
    yield schema, path
    for key, kind in _SUBSCHEMAS.items():
        value = schema.get(key)
        if kind == "one" or (key == "items" and isinstance(value, list)):
            if isinstance(value, list):
                for i, sub in enumerate(value):
                    yield from _schemas(sub, (*path, key, i), depth + 1)
            else:
                yield from _schemas(value, (*path, key), depth + 1)
        elif kind == "map" and isinstance(value, dict):
            for name, sub in value.items():
                yield from _schemas(sub, (*path, key, name), depth + 1)
        elif kind == "list" and isinstance(value, list):
            for i, sub in enumerate(value):
                yield from _schemas(sub, (*path, key, i), depth + 1)


def misspelt_keywords(schema: Any) -> List[Tuple[KeyPath, str, str]]:
    """(path of the key, the key, the keyword it is probably meant to be) for every key of a
    schema object that is not a keyword but is close to one."""
    out = []
    for node, path in _schemas(schema, ()):
        for key in node:
            if not isinstance(key, str) or key in KEYWORDS or key.startswith("x-"):
                continue
            near = close_names(key, KEYWORDS, cutoff=0.75)
            guess = near[0] if near else same_but_case(key, KEYWORDS)
            if guess is not None:
                out.append(((*path, key), key, guess))
    return out


def schema_error_hint(exc: Any) -> str:
    """How to fix a ``jsonschema.exceptions.SchemaError`` (the fix line of its E_CFG_SCHEMA)."""
    expected = exc.validator_value if exc.validator == "type" else None
    if exc.validator == "type" and expected in ("object", ["object", "boolean"]):
        return "write a schema as a mapping of keywords, e.g. `{type: string}` (or `true` for any value)"
    if exc.validator == "type" and expected == "array":
        return "write a list, e.g. `[order_id, amount]`"
    if exc.validator == "type" and expected == "string":
        return "write text (quote it if YAML would read it as another type)"
    if exc.validator == "minimum":
        return f"write a number of at least {exc.validator_value}"
    if exc.validator == "uniqueItems":
        return "list each item once"
    path = tuple(exc.absolute_path)
    if (path and path[-1] == "type") or (len(path) >= 2 and path[-2] == "type"):
        return "write one of the JSON types, e.g. `type: string`, or a list of them"
    return "fix that keyword's value (each keyword's form: https://json-schema.org/understanding-json-schema)"


def explain_schema_error(exc: Any) -> Tuple[KeyPath, str]:
    """(path below the schema, message) for a ``jsonschema.exceptions.SchemaError``."""
    path: KeyPath = tuple(exc.absolute_path)
    key = path[-1] if path else None
    value = exc.instance
    # `type` is the keyword unless it names a property (`properties: {type: ...}`) or a definition.
    named = len(path) >= 2 and path[-2] in _NAMING_KEYWORDS
    in_type_list = len(path) >= 3 and path[-2] == "type" and path[-3] not in _NAMING_KEYWORDS
    if (key == "type" and not named) or in_type_list:
        wrong = value if isinstance(value, str) else None
        if isinstance(value, list):
            wrong = next((v for v in value if v not in TYPES), None)
        near = close_names(str(wrong), TYPES) if wrong is not None else []
        hint = f"; did you mean `{near[0]}`?" if near else ""
        return path, (f"`type` must be one of {', '.join(TYPES)} (or a list of them), not {_shown(value)}{hint}")
    where = f"`{key}`" if isinstance(key, str) else "this schema"
    if exc.validator == "type":
        expected = exc.validator_value if isinstance(exc.validator_value, str) else " or ".join(exc.validator_value)
        article = "an" if str(expected)[:1] in "aeiou" else "a"
        return path, f"{where} must be {article} {expected}, not {type(value).__name__} {_shown(value)}"
    if exc.validator == "minimum":
        return path, f"{where} must be at least {exc.validator_value}, not {_shown(value)}"
    if exc.validator == "uniqueItems":
        return path, f"{where} lists the same item twice: {_shown(value)}"
    return path, f"{where}: {exc.message}"


# Keywords whose keys are names chosen by the schema's author (a property may be called `type`).
_NAMING_KEYWORDS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")


def _shown(value: Any, limit: int = 80) -> str:
    """``repr(value)``, cut to ``limit`` characters: the value comes from the rules file and may be
    a 1 MiB string."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit - 1]}… ({len(text)} characters)"


def describe(path: KeyPath) -> Optional[str]:
    """``properties.amount.maximun`` (None for the schema itself)."""
    if not path:
        return None
    return ".".join(str(p) for p in path)
