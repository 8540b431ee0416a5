"""The one did-you-mean: the closest known name to a misspelt one."""
from __future__ import annotations

import difflib
from typing import Iterable, Optional


def did_you_mean(word: str, candidates: Iterable[str]) -> Optional[str]:
    """The candidate ``word`` most likely meant: the same name in other case, else the closest one
    (difflib ratio >= 0.6), else None."""
    pool = list(candidates)
    lowered = {c.lower(): c for c in pool}
    if word.lower() in lowered:
        return lowered[word.lower()]
    close = difflib.get_close_matches(word, pool, n=1, cutoff=0.6)
    return close[0] if close else None
