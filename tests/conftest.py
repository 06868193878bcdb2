"""Shared fixtures: the toy third-party plugin, installed for real with pip for the session."""

from __future__ import annotations

import importlib
import importlib.metadata
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from smug_opt import registry

TOY_SOURCE = Path(__file__).parent / "toy_plugin"
TOY_DISTRIBUTION = "smug-opt-toy-backend"
FIRST_PARTY = ("highs", "pulp-cbc", "mip-cbc", "z3", "cpsat", "scip")


def _toy_is_current() -> bool:
    """Installed, and built from the current source (a stale copy is reinstalled)."""
    try:
        dist = importlib.metadata.distribution(TOY_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return False
    installed = dist.locate_file("smug_opt_toy_backend/__init__.py")
    source = TOY_SOURCE / "smug_opt_toy_backend" / "__init__.py"
    return Path(installed).is_file() and Path(installed).read_text() == source.read_text()


def _pip(*args: str) -> None:
    done = subprocess.run([sys.executable, "-m", "pip", *args, "-q"], capture_output=True,
                          text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"pip {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")


@pytest.fixture(scope="session")
def toy_plugin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Install ``tests/toy_plugin`` with pip (from a copy, so the source tree stays clean),
    refresh the registry, and uninstall at the end if this session installed it: its
    ``toy-hang`` and ``toy-crash`` backends must not linger in anyone's environment."""
    installed_here = not _toy_is_current()
    if installed_here:
        copy = tmp_path_factory.mktemp("toy") / "toy_plugin"
        shutil.copytree(TOY_SOURCE, copy)
        _pip("install", "--no-deps", "--no-build-isolation", str(copy))
        importlib.invalidate_caches()
    registry.refresh()
    yield "toy-bruteforce"
    if installed_here:
        from smug_opt.workers import shutdown_workers

        shutdown_workers()
        _pip("uninstall", "-y", TOY_DISTRIBUTION)
        registry.refresh()


def skip_unless_usable(name: str) -> None:
    """Skip the calling test, saying why, when backend ``name`` cannot be used here."""
    try:
        registry.backend_class(name)
    except (registry.UnknownBackendError, registry.BackendUnavailableError) as exc:
        pytest.skip(f"backend {name!r} not usable here: {exc}")
