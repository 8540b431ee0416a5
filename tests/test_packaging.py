"""What an installer and a reader of the package see: the SPDX license with its full text, the
classifiers and project URLs, and the entry points (console script, pytest plugin, configurator)."""
from __future__ import annotations

from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_license_is_an_spdx_expression_with_the_full_apache_text() -> None:
    meta = metadata.metadata("spanassert")
    assert meta["License-Expression"] == "Apache-2.0"
    assert "LICENSE" in (meta.get_all("License-File") or [])
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert text.lstrip().startswith("Apache License")
    assert "Version 2.0, January 2004" in text and "END OF TERMS AND CONDITIONS" in text
    assert len(text.splitlines()) > 190  # the whole text, not a pointer to it


def test_classifiers_and_project_urls_are_declared() -> None:
    meta = metadata.metadata("spanassert")
    classifiers = meta.get_all("Classifier") or []
    assert "Programming Language :: Python :: 3.9" in classifiers and "Typing :: Typed" in classifiers
    assert not any(c.startswith("License ::") for c in classifiers)  # the SPDX field says it
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL") or [])
    assert {"Homepage", "Documentation", "Changelog", "Issues"} <= set(urls)


def test_entry_points_name_modules_that_exist() -> None:
    eps = metadata.entry_points()
    groups = {"console_scripts": "spanassert", "pytest11": "spanassert", "opentelemetry_configurator": "spanassert"}
    for group, name in groups.items():
        in_group = eps.select(group=group) if hasattr(eps, "select") else eps.get(group, [])  # 3.9: a dict
        (ep,) = [e for e in in_group if e.name == name]
        assert ep.load() is not None, f"{group}:{name} -> {ep.value}"
