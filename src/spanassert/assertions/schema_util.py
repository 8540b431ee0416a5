"""JSON Schema helpers shared by the argument and output checks.

``schema_is_vacuous`` answers Assay's question "does this schema constrain anything?": a schema that
accepts every instance makes a check that cannot fail, which is refused at load.

``validation_messages`` runs on every checked call. It first asks a predicate compiled from the
schema (``schema_fast``) and only when that says "invalid" (or the schema is beyond it) runs
jsonschema, whose errors make the messages.
"""
from __future__ import annotations

import contextlib
import json
from typing import Any, Callable, Dict, List, Optional, Tuple

from .schema_fast import compile_fast
from .schema_meta import LazyValidator, errors

# Keywords that describe but never reject.
_ANNOTATIONS = frozenset(
    {
        "$schema", "$id", "id", "$comment", "$anchor", "$dynamicAnchor", "$vocabulary",
        "title", "description", "default", "examples", "deprecated", "readOnly", "writeOnly",
        "definitions", "$defs", "contentMediaType", "contentEncoding", "contentSchema",
    }
)
# Keywords whose value is a subschema (or a map/list of subschemas) that only constrains when the
# subschema itself constrains something.
_SUBSCHEMA_MAPS = frozenset({"properties", "patternProperties", "dependentSchemas"})
_SUBSCHEMA_SINGLE = frozenset({"additionalProperties", "items", "additionalItems", "unevaluatedProperties",
                               "unevaluatedItems", "propertyNames", "contains", "then", "else"})
_SUBSCHEMA_ALL = frozenset({"allOf"})
_SUBSCHEMA_ANY = frozenset({"anyOf", "oneOf", "prefixItems"})
# Keywords that can reject an instance on their own. Anything not listed anywhere here is unknown to
# JSON Schema and ignored by validators (e.g. a placeholder `{ ... }`), so it constrains nothing.
_ASSERTIONS = frozenset(
    {
        "type", "enum", "const", "multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum",
        "maxLength", "minLength", "pattern", "format", "maxItems", "minItems", "uniqueItems", "maxContains",
        "minContains", "maxProperties", "minProperties", "required", "dependentRequired", "dependencies",
        "not", "$ref", "$dynamicRef", "$recursiveRef",
    }
)


def schema_is_vacuous(schema: Any) -> bool:
    """True when ``schema`` accepts every JSON instance (so a check against it cannot fail)."""
    if schema is True:
        return True
    if schema is False:
        return False
    if not isinstance(schema, dict):
        return False
    for key, value in schema.items():
        if key in _ANNOTATIONS:
            continue
        if key in _SUBSCHEMA_MAPS:
            if isinstance(value, dict) and all(schema_is_vacuous(v) for v in value.values()):
                continue
            return False
        if key in _SUBSCHEMA_SINGLE:
            if isinstance(value, list):
                if all(schema_is_vacuous(v) for v in value):
                    continue
                return False
            if schema_is_vacuous(value):
                continue
            return False
        if key in _SUBSCHEMA_ALL:
            if isinstance(value, list) and all(schema_is_vacuous(v) for v in value):
                continue
            return False
        if key in _SUBSCHEMA_ANY:
            if isinstance(value, list) and any(schema_is_vacuous(v) for v in value) and key != "prefixItems":
                continue
            if key == "prefixItems" and isinstance(value, list) and all(schema_is_vacuous(v) for v in value):
                continue
            return False
        if key == "if":
            continue  # `if` alone never rejects; `then`/`else` are judged on their own
        if key == "required" and value == []:
            continue
        if key == "type" and isinstance(value, list) and set(value) >= {
            "object", "array", "string", "number", "boolean", "null"
        }:
            continue
        if key == "not" and value is False:
            continue
        if key in _ASSERTIONS:
            return False  # type, enum, const, minimum, required, pattern, format, not, $ref, ...
        # An unknown keyword: validators ignore it, so it rejects nothing.
    return True


# Keywords that read an object's members by name (or constrain an instance to be an object).
_OBJECT_KEYWORDS = frozenset({
    "properties", "required", "patternProperties", "additionalProperties", "dependentRequired",
    "dependentSchemas", "dependencies", "minProperties", "maxProperties", "propertyNames",
    "unevaluatedProperties",
})


def schema_names_arguments(schema: Any, _depth: int = 0) -> bool:
    """Whether ``schema`` speaks of named arguments anywhere (``properties``, ``required``, ``type:
    object``, ...). Such a schema cannot judge arguments that were recorded as a bare value, an
    array or a non-JSON string: a bare ``"prod"`` satisfies ``properties: {name: {not: {const:
    prod}}}`` vacuously. Over-approximates (any subschema counts), which only makes more calls
    undecidable, never one passed."""
    if _depth > _MAX_SCHEMA_DEPTH:
        return True
    if isinstance(schema, dict):
        kind = schema.get("type")
        if kind == "object" or (isinstance(kind, list) and "object" in kind):
            return True
        if not _OBJECT_KEYWORDS.isdisjoint(schema):
            return True
        return any(schema_names_arguments(v, _depth + 1) for v in schema.values() if isinstance(v, (dict, list)))
    if isinstance(schema, list):
        return any(schema_names_arguments(v, _depth + 1) for v in schema)
    return False


class SchemaCache(Dict[Any, Any]):
    """The one cache of compiled JSON Schemas: bounded, oldest entry out first. Reads are plain dict
    lookups (the hot path asks it once per checked call). It holds

    - ``("checked", schema_key(s))``: the validator of a rule's schema, checked against its
      meta-schema (BuildContext.compile_schema): most of the cost of loading a rules file, and
      identical schemas are common across tests;
    - ``("field", schema_key(s))``: the validator of a rules-file field's own schema (the loader);
    - ``id(validator)``: ``(validator, fast predicate)`` (:func:`fast_predicate`); the validator is
      kept in the entry so its id cannot be reused while the entry lives.

    Validators are immutable, so sharing one is safe."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.size = size

    def put(self, key: Any, value: Any) -> None:
        if len(self) >= self.size:
            # Another thread may change the cache meanwhile; it then stays roughly bounded.
            with contextlib.suppress(StopIteration, RuntimeError):
                self.pop(next(iter(self)), None)
        self[key] = value


SCHEMAS = SchemaCache(4096)


def schema_key(schema: Any) -> Optional[str]:
    """The cache key of a schema (its canonical JSON), or None when it has no JSON form."""
    try:
        return json.dumps(schema, sort_keys=True, default=repr)
    except (TypeError, ValueError, RecursionError):
        return None


def fast_predicate(validator: Any) -> Optional[Callable[[Any], bool]]:
    """The compiled yes/no check for ``validator``'s schema, or None when only jsonschema can judge."""
    entry = SCHEMAS.get(id(validator))
    if entry is not None and entry[0] is validator:
        return entry[1]  # type: ignore[no-any-return]  # entries under an id hold (validator, predicate)
    predicate = compile_fast(validator)
    SCHEMAS.put(id(validator), (validator, predicate))
    return predicate


def validation_messages(validator: Any, instance: Any, limit: int = 5) -> List[str]:
    """Human messages for the errors of ``instance`` (at most ``limit``), each naming the path and
    the bound but not the value (values are evidence, shown only when a rule opts in)."""
    entry = SCHEMAS.get(id(validator))
    predicate = entry[1] if entry is not None and entry[0] is validator else fast_predicate(validator)
    if predicate is not None:
        try:
            if predicate(instance):
                return []  # the common case on the hot path: valid, no error objects built
        except Exception:  # noqa: BLE001 - an odd instance (e.g. a complex number): let jsonschema judge
            pass
    # Invalid (or not compilable): jsonschema finds and words the errors, exactly as before.
    return jsonschema_messages(validator, instance, limit)


def jsonschema_messages(validator: Any, instance: Any, limit: int = 5) -> List[str]:
    """``validation_messages`` without the fast path: the errors jsonschema finds (for a schema of
    plain keywords, found the same way without importing it: :func:`.schema_meta.errors`)."""
    if type(validator) is LazyValidator:
        found: List[Tuple[Any, Any, Any]] = errors(validator.schema, instance)
    else:
        found = [(err.absolute_path, err.validator, err.schema) for err in validator.iter_errors(instance)]
    out: List[str] = []
    for path, keyword, schema in sorted(found, key=lambda e: list(e[0])):
        where = "/".join(str(p) for p in path) or "(root)"
        bound = schema.get(keyword) if isinstance(schema, dict) else None
        shown = f" {bound!r}" if bound is not None and not isinstance(bound, (dict, list)) else ""
        out.append(f"{where}: violates `{keyword}`{shown}")
        if len(out) >= limit:
            break
    return out


# -- references -----------------------------------------------------------------------------------
# A rules file's schemas may use `$ref`, resolved only within the schema that holds it: a JSON
# Pointer or anchor into it (`#/$defs/x`, `#name`), or the `$id` of the schema or one of its
# subschemas. Nothing is fetched and no file is opened, at load or while judging: validators are
# built over an empty registry with no retrieval (``local_registry``), and every reference is
# resolved once at load (``ref_problems``), so one that does not resolve is a load error at its
# position instead of an exception in the middle of an episode.

_REF_KEYWORDS = ("$ref", "$dynamicRef", "$recursiveRef")
# Keywords whose value is a subschema, a list of subschemas, or a map of name -> subschema (the
# union over the drafts jsonschema knows).
_SUB_SINGLE = frozenset({
    "additionalItems", "additionalProperties", "contains", "contentSchema", "else", "if", "items", "not",
    "propertyNames", "then", "unevaluatedItems", "unevaluatedProperties",
})
_SUB_LIST = frozenset({"allOf", "anyOf", "oneOf", "prefixItems", "items"})
_SUB_MAP = frozenset({"$defs", "definitions", "dependentSchemas", "patternProperties", "properties", "dependencies"})
_MAX_SCHEMA_DEPTH = 256

_LOCAL_REGISTRY: Any = None


def local_registry() -> Any:
    """The ``referencing.Registry`` validators are built with: empty, and with no retrieval, so a
    reference can only land in the schema itself (jsonschema adds the bundled meta-schemas)."""
    global _LOCAL_REGISTRY
    if _LOCAL_REGISTRY is None:
        import referencing

        _LOCAL_REGISTRY = referencing.Registry()
    return _LOCAL_REGISTRY


def has_references(schema: Any, _depth: int = 0) -> bool:
    """Whether ``schema`` contains a reference keyword anywhere (a cheap pre-check)."""
    if _depth > _MAX_SCHEMA_DEPTH:
        return True
    if isinstance(schema, dict):
        if any(isinstance(schema.get(k), str) for k in _REF_KEYWORDS):
            return True
        return any(has_references(v, _depth + 1) for v in schema.values())
    if isinstance(schema, list):
        return any(has_references(v, _depth + 1) for v in schema)
    return False


RefProblem = Tuple[Tuple[Any, ...], str]


def ref_problems(schema: Any) -> List[RefProblem]:
    """Every reference in ``schema`` that does not resolve within it, as (key path of the reference
    inside the schema, why). Empty when all resolve (or there are none)."""
    if not isinstance(schema, dict) or not has_references(schema):
        return []
    import referencing
    import referencing.jsonschema as rjs
    from referencing.exceptions import Unresolvable

    try:
        dialect = schema.get("$schema")
        spec = (rjs.specification_with(dialect, default=rjs.DRAFT202012) if isinstance(dialect, str)
                else rjs.DRAFT202012)
        root = spec.create_resource(schema)
        base = root.id() or ""
        registry = referencing.Registry().with_resource(base, root).crawl()
        resolver = registry.resolver(base_uri=base)
    except Exception as exc:  # noqa: BLE001 - an odd `$id` or dialect: say so at load
        return [((), f"the schema's references cannot be resolved: {type(exc).__name__}: {exc}")]
    problems: List[RefProblem] = []

    def check(ref: str, keyword: str, at: Any, path: Tuple[Any, ...]) -> None:
        try:
            at.lookup(ref)
        except Unresolvable:
            if ref.startswith("#"):
                why = "it points to nothing in this schema"
            else:
                why = ("it is not within this schema: spanassert never fetches a URL or reads a file to "
                       "resolve a reference")
            problems.append(((*path, keyword), f"`{keyword}: {ref}` does not resolve: {why}"))
        except Exception as exc:  # noqa: BLE001 -- whatever resolving raises is reported as this $ref's problem
            problems.append(((*path, keyword), f"`{keyword}: {ref}` does not resolve: {type(exc).__name__}: {exc}"))

    def walk(node: Any, at: Any, path: Tuple[Any, ...], depth: int) -> None:
        if not isinstance(node, dict):
            return
        if depth > _MAX_SCHEMA_DEPTH:
            problems.append((path, f"the schema is nested deeper than {_MAX_SCHEMA_DEPTH} levels"))
            return
        if depth and isinstance(node.get("$id"), str):
            # An odd `$id` keeps the outer base: resolution below then reports what does not resolve.
            with contextlib.suppress(Exception):
                at = at.in_subresource(spec.create_resource(node))
        for keyword in _REF_KEYWORDS:
            ref = node.get(keyword)
            if isinstance(ref, str):
                check(ref, keyword, at, path)
        for key, value in node.items():
            if key in _SUB_MAP and isinstance(value, dict):
                for name, sub in value.items():
                    walk(sub, at, (*path, key, name), depth + 1)
            elif key in _SUB_LIST and isinstance(value, list):
                for i, sub in enumerate(value):
                    walk(sub, at, (*path, key, i), depth + 1)
            elif key in _SUB_SINGLE and isinstance(value, dict):
                walk(value, at, (*path, key), depth + 1)

    walk(schema, resolver, (), 0)
    return problems

