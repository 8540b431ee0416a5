"""The one did-you-mean: which known name a misspelt one most likely meant.

Every suggestion in spanassert (rules-file keys and types, rule names, JSON Schema keywords,
``--test`` ids) is ranked here, by the same spelling measure (difflib's ratio)."""
from __future__ import annotations

import difflib
from typing import Iterable, List, Optional


def same_but_case(word: str, candidates: Iterable[str]) -> Optional[str]:
    """The candidate that is ``word`` in other case, if any."""
    lowered = {c.lower(): c for c in candidates}
    return lowered.get(word.lower())


def spelling(word: str, candidate: str) -> float:
    """How alike two names are spelt, case aside: 0 (nothing shared) to 1 (the same)."""
    return difflib.SequenceMatcher(None, word.lower(), candidate.lower()).ratio()


def close_names(word: str, candidates: Iterable[str], n: int = 1, cutoff: float = 0.6) -> List[str]:
    """Up to ``n`` candidates spelt most like ``word`` (ratio >= ``cutoff``), best first."""
    return difflib.get_close_matches(word, candidates, n=n, cutoff=cutoff)


def did_you_mean(word: str, candidates: Iterable[str]) -> Optional[str]:
    """The candidate ``word`` most likely meant: the same name in other case, else the closest one
    (ratio >= 0.6), else None."""
    pool = list(candidates)
    exact = same_but_case(word, pool)
    if exact is not None:
        return exact
    close = close_names(word, pool)
    return close[0] if close else None
