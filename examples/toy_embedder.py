"""A toy embedder for `semantic_similarity_to` examples: letter counts, no model, no network.

Real deployments point ``settings.embedder`` at a function that calls their embedding model; the
module must be importable (installed, or its directory on PYTHONPATH).
"""
from __future__ import annotations

from typing import List


def embed(text: str) -> List[float]:
    counts = [0.0] * 26
    for ch in text.lower():
        if "a" <= ch <= "z":
            counts[ord(ch) - ord("a")] += 1.0
    return counts
