"""pytest plugin (entry point ``pytest11``): fixtures and markers for checking agents in tests."""
from __future__ import annotations
