"""Suggestions for an unknown assertion type that respect what the name says it wants.

Plain edit distance suggests ``trace_must_call_tool`` for ``trace_must_call_tools_never``: the
nearest spelling, the opposite meaning. Names here are compared by intent first (forbidding vs
requiring, read from words like not/never/no/forbid/block/deny/only) and topic (the other words:
call, tool, args, sequence, ...), then by spelling; the answer also lists the family of types on
the same topic so the right one can be picked by meaning.
"""
from __future__ import annotations

import re
from typing import FrozenSet, Iterable, List, Optional, Tuple

from ..core.suggest import same_but_case, spelling

NEGATIVE = frozenset({"not", "never", "no", "forbid", "forbidden", "forbids", "block", "blocked", "blocklist",
                      "deny", "denied", "denylist", "disallow", "disallowed", "without", "avoid", "ban", "banned",
                      "prevent", "only", "none"})
# Words every family shares, which say nothing about the topic.
FILLER = frozenset({"trace", "must", "should", "is", "be", "the", "a", "an", "of", "to"})
# Words most types share: they count only when nothing more specific is said.
GENERIC = frozenset({"tool", "call"})
SYNONYMS = {"order": "sequence", "ordering": "sequence", "ordered": "sequence", "argument": "args", "arg": "args",
            "param": "args", "parameter": "args", "input": "args", "count": "max", "limit": "max", "number": "max",
            "budget": "max", "output": "result", "response": "result", "return": "result", "latency": "duration",
            "time": "duration", "timeout": "duration", "slow": "duration", "error": "status", "fail": "status",
            "failure": "status", "success": "status", "step": "step", "turn": "step", "deny": "blocklist",
            "denylist": "blocklist", "forbidden": "blocklist", "path": "trajectory", "route": "trajectory"}


def _words(name: str) -> List[str]:
    words = [w for w in re.split(r"[^a-z0-9]+", re.sub(r"([a-z])([A-Z])", r"\1_\2", name).lower()) if w]
    out = []
    for w in words:
        if w.startswith(("blocklist", "denylist")):
            out.append(w)
        elif len(w) > 3 and w.endswith("s") and not w.endswith("ss"):
            out.append(w[:-1])  # tools -> tool, calls -> call
        else:
            out.append(w)
    return out


def negative(name: str) -> bool:
    return any(w in NEGATIVE for w in _words(name))


def topic(name: str) -> FrozenSet[str]:
    words = {SYNONYMS.get(w, w) for w in _words(name) if w not in FILLER}
    words -= NEGATIVE
    specific = words - GENERIC
    return frozenset(specific or words)


def _score(word: str, candidate: str) -> float:
    t1, t2 = topic(word), topic(candidate)
    overlap = len(t1 & t2) / len(t1 | t2) if t1 | t2 else 0.0
    same_intent = 1.0 if negative(word) == negative(candidate) else 0.0
    return 2.0 * same_intent + 1.5 * overlap + spelling(word, candidate)


def suggest_type(word: str, known: Iterable[str]) -> Tuple[Optional[str], List[str]]:
    """(the best guess or None, the family: known types sharing a topic word, best first)."""
    pool = sorted(set(known))
    if not pool:
        return None, []
    exact = same_but_case(word, pool)
    if exact is not None:
        return exact, []
    ranked = sorted(pool, key=lambda c: -_score(word, c))
    best = ranked[0]
    t = topic(word)
    plausible = bool(t & topic(best)) or spelling(word, best) >= 0.6
    family = [c for c in ranked if t & topic(c)][:8]
    return (best if plausible else None), family


def describe_intent(name: str) -> str:
    return "forbids" if negative(name) else "requires/limits"
