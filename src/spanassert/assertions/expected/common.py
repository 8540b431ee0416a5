"""What the ``expected:`` families share: their diagnostic codes, the test for a given value, the
evidence shown in a message, and policy files read next to the rules file."""
from __future__ import annotations

import os
from typing import Any, Dict, Mapping

from ...core.model import MISSING
from ..base import (
    BuildContext,
)

E_CFG_VACUOUS = "E_CFG_VACUOUS"
E_CFG_UNSATISFIABLE = "E_CFG_UNSATISFIABLE"
E_CFG_POLICY = "E_CFG_POLICY"
E_CFG_EMBEDDER = "E_CFG_EMBEDDER"
E_CFG_UNTRUSTED = "E_CFG_UNTRUSTED"
E_CFG_NOT_EXECUTABLE = "E_CFG_NOT_EXECUTABLE"
E_CFG_CONFLICT = "E_CFG_CONFLICT"
W_CFG_NO_EFFECT = "W_CFG_NO_EFFECT"


def given(values: Mapping[str, Any], key: str) -> bool:
    v = values.get(key, MISSING)
    return v is not MISSING and v is not None


def load_policy_file(path: str, ctx: BuildContext, field: str) -> Any:
    """Read a YAML or JSON policy file (relative to the rules file). Reports and returns MISSING on error.

    For an untrusted rules file, only a file inside the rules file's folder is read: an absolute
    path, a path through ``..``, or a symbolic link leading out is refused (``E_CFG_UNTRUSTED``)."""
    full = path if os.path.isabs(path) or not ctx.base_dir else os.path.join(ctx.base_dir, path)
    if ctx.untrusted:
        folder = os.path.realpath(ctx.base_dir or os.getcwd())
        try:
            inside = not os.path.isabs(path) and os.path.commonpath([folder, os.path.realpath(full)]) == folder
        except ValueError:  # another drive
            inside = False
        if not inside:
            ctx.error(E_CFG_UNTRUSTED, f"policy file {path!r} is outside the rules file's folder, which an untrusted "
                      "rules file may not read", field=field,
                      hint="keep policy files next to the rules file (a relative path without `..`), or load "
                           "the file as trusted only if you trust its author (see SECURITY.md)")
            return MISSING
    from ...config.source import MAX_CONFIG_BYTES

    try:
        with open(full, encoding="utf-8") as fh:
            text = fh.read(MAX_CONFIG_BYTES + 1)  # enough to tell that a file is too large
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        ctx.error(E_CFG_POLICY, f"cannot read policy file {path!r}: {reason}", field=field,
                  hint="paths are relative to the rules file; a policy file is UTF-8 YAML or JSON")
        return MISSING
    return _parse_policy(text, full, path, ctx, field)



def _parse_policy(text: str, full: str, path: str, ctx: BuildContext, field: str) -> Any:
    """A policy file's value, read with the rules file's bounds and checks (size, alias bombs, repeated
    keys, values YAML 1.1 and 1.2 read apart); a ``.json`` file as JSON. Reports and returns MISSING."""
    from ...config.source import Source, SourceProblem, check_text_size, parse_document

    def refuse(message: str, hint: str, line: Any = None, column: Any = None) -> Any:
        at = f", line {line}, column {column}" if line is not None else ""
        ctx.error(E_CFG_POLICY, f"policy file {path!r}{at}: {message}", field=field, hint=hint)
        return MISSING

    try:
        check_text_size(text)
        if full.lower().endswith(".json"):
            return _json_policy(text)
        document = parse_document(Source(text, full, os.path.dirname(full)))
    except SourceProblem as problem:
        d = problem.diagnostics[0]
        return refuse(d.message, d.hint or "fix the file's YAML/JSON", d.line, d.column)
    except ValueError as exc:  # JSON
        return refuse(f"not valid JSON: {exc}", "fix the JSON (or write the policy as YAML in a .yaml file)")
    if document.problems:
        d = document.problems[0]
        return refuse(d.message, d.hint or "fix the file's YAML", d.line, d.column)
    return document.value


def _json_policy(text: str) -> Any:
    import json

    def pairs(items: Any) -> Dict[str, Any]:
        out: Dict[str, Any] = {}
        for key, value in items:
            if key in out:
                raise ValueError(f"the key {key!r} is given twice in one object (parsers differ on which one wins)")
            out[key] = value
        return out

    def constant(name: str) -> Any:
        raise ValueError(f"`{name}` is not JSON")

    return json.loads(text, object_pairs_hook=pairs, parse_constant=constant)
