"""Shared fixtures: the toy third-party plugin, installed for real with pip for the session."""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from smug_opt import Problem, registry
from smug_opt.filelock import exclusive_lock

TOY_SOURCE = Path(__file__).parent / "toy_plugin"
TOY_DISTRIBUTION = "smug-opt-toy-backend"
SCIPY_SOURCE = Path(__file__).parent / "scipy_plugin"
SCIPY_DISTRIBUTION = "smug-opt-scipy-backend"
FIRST_PARTY = tuple(sorted(ep.name for ep in importlib.metadata.distribution("smug-opt").entry_points
                           if ep.group == registry.ENTRY_POINT_GROUP))
"""The backends this project registers (its pyproject's entry points), usable here or not."""


def _is_current(source: Path, distribution: str) -> bool:
    """Installed, and built from the current source: the same modules and entry points (a
    stale copy is reinstalled)."""
    try:
        dist = importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        return False
    for module in source.glob("*/*.py"):
        installed = Path(dist.locate_file(f"{module.parent.name}/{module.name}"))
        if not (installed.is_file() and installed.read_text() == module.read_text()):
            return False
    section = (source / "pyproject.toml").read_text().split('[project.entry-points."smug_opt.backends"]')[1]
    declared = set(re.findall(r'^([\w-]+) = "', section.split("\n[")[0], re.M))
    return {ep.name for ep in dist.entry_points} == declared


def _pip(*args: str) -> None:
    done = subprocess.run([sys.executable, "-m", "pip", *args, "-q"], capture_output=True,
                          text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"pip {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")


def _shared_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory this session's processes share: the base temp of the session, or under
    pytest-xdist the parent of the workers' base temps."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def _installed(source: Path, distribution: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[bool]:
    """Install the plugin package at ``source`` with pip (from a copy, so the source tree
    stays clean), refresh the registry, and uninstall at the end if this session installed
    it: its misbehaving backends must not linger in anyone's environment. Under pytest-xdist
    the workers count their users in a file under a lock: the first installs, the last
    uninstalls (one worker's teardown never pulls the plugin from under another)."""
    shared = _shared_dir(tmp_path_factory)
    users = shared / f"{distribution}.users.json"
    with exclusive_lock(shared / f"{distribution}.lock"):
        state = json.loads(users.read_text()) if users.is_file() else {"users": 0, "installed_here": False}
        if state["users"] == 0:
            state["installed_here"] = not _is_current(source, distribution)
            if state["installed_here"]:
                copy = Path(tempfile.mkdtemp(dir=shared)) / source.name
                shutil.copytree(source, copy)
                _pip("install", "--no-deps", "--no-build-isolation", str(copy))
        state["users"] += 1
        users.write_text(json.dumps(state))
    importlib.invalidate_caches()
    registry.refresh()
    yield state["installed_here"]
    with exclusive_lock(shared / f"{distribution}.lock"):
        state = json.loads(users.read_text())
        state["users"] -= 1
        users.write_text(json.dumps(state))
        if state["users"] == 0 and state["installed_here"]:
            from smug_opt.workers import shutdown_workers

            shutdown_workers()
            _pip("uninstall", "-y", distribution)
            registry.refresh()


@pytest.fixture(scope="session")
def toy_plugin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``tests/toy_plugin`` installed for the session; yields its complete backend's name."""
    for _ in _installed(TOY_SOURCE, TOY_DISTRIBUTION, tmp_path_factory):
        yield "toy-bruteforce"


@pytest.fixture(scope="session")
def scipy_plugin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``tests/scipy_plugin`` (the README's example and its planted-bug variants)
    installed for the session; yields the honest backend's name."""
    for _ in _installed(SCIPY_SOURCE, SCIPY_DISTRIBUTION, tmp_path_factory):
        yield "scipy-milp"


def skip_unless_accepts(name: str, problem: Problem) -> None:
    """Skip the calling test when backend ``name`` declares ``binary_only`` (it refuses
    continuous variables, so it cannot be held to an answer) and ``problem`` has some."""
    if registry.backend_class(name, check_available=False).capabilities.binary_only \
            and not problem.binary.all():
        pytest.skip(f"backend {name!r} takes 0/1 problems only; this one has continuous variables")


def skip_unless_usable(name: str) -> None:
    """Skip the calling test, saying why, when backend ``name`` cannot be used here."""
    try:
        registry.backend_class(name)
    except (registry.UnknownBackendError, registry.BackendUnavailableError) as exc:
        pytest.skip(f"backend {name!r} not usable here: {exc}")
