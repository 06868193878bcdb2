"""The built wheel holds every package of the source tree: pyproject.toml lists them by
hand, and a package left out of the list makes ``import smug_opt`` fail from a wheel while
every editable install still works."""

from __future__ import annotations

from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[2]


def _source_packages() -> set[str]:
    packages = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "smug_opt").rglob("__init__.py")}
    if (ROOT / "backends" / "__init__.py").exists():
        packages.add("smug_opt_backends")
    return packages


def test_the_package_list_names_every_package_of_the_source_tree() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    source = _source_packages()
    assert source - listed == set(), f"pyproject.toml leaves out {sorted(source - listed)}"
    missing = sorted(listed - source)
    assert not missing, f"pyproject.toml lists packages that do not exist: {missing}"
