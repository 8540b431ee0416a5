"""Reliability and security suite: fuzzing, concurrency, memory flood, faults, hostile input, leaks."""
from __future__ import annotations
