"""What the ``expected:`` families share: their diagnostic codes, the test for a given value, the
evidence shown in a message, and policy files read next to the rules file."""
from __future__ import annotations

import os
from typing import Any, Mapping

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
    import yaml

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
    try:
        with open(full, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as exc:
        ctx.error(E_CFG_POLICY, f"cannot read policy file {path!r}: {exc.strerror or exc}", field=field,
                  hint="paths are relative to the rules file")
        return MISSING
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        ctx.error(E_CFG_POLICY, f"policy file {path!r} is not valid YAML/JSON{where}: {getattr(exc, 'problem', exc)}",
                  field=field)
        return MISSING
