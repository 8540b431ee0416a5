"""How a place in a rules file is named: a key path (keys and list indexes), written as
``tests[0].assertions[1].tool`` in diagnostics."""
from __future__ import annotations

from typing import List, Optional, Tuple, Union

KeyPath = Tuple[Union[str, int], ...]
Position = Tuple[Optional[int], Optional[int]]


def format_path(path: KeyPath) -> str:
    """``("tests", 0, "assertions", 1, "tool")`` -> ``tests[0].assertions[1].tool``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part and all(c.isalnum() or c in "_-$" for c in part):
            out += ("." if out else "") + part
        else:
            out += '["' + part.replace("\\", "\\\\").replace('"', '\\"') + '"]'
    return out


def parse_field_path(field: str) -> KeyPath:
    """``policy.schema`` / ``rules[2].then`` / ``rules.2.then`` -> a key path below an assertion."""
    out: List[Union[str, int]] = []
    for chunk in field.replace("]", "").replace("[", ".").split("."):
        if not chunk:
            continue
        out.append(int(chunk) if chunk.isdigit() else chunk)
    return tuple(out)
