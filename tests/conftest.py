"""Shared fixtures: the toy third-party plugin, installed for real with pip for the session."""

from __future__ import annotations

import hashlib
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

# One OpenMP (torch) and BLAS thread in the test processes and in the CLI runs and solver workers
# they start (they inherit the environment): `-n 2` already puts one test process on each of two
# cores, and extra threads only spin. Training the network adapter's CNN took 14.3 CPU s (57.7 s
# wall) with torch's two threads at load 15, 2.2 CPU s (8.5 s) with one. Set before smug_opt
# (numpy) and torch are imported; a variable already set is kept.
for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

from smug_opt import Problem, registry  # noqa: E402
from smug_opt.filelock import exclusive_lock  # noqa: E402

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


def _shared_dir() -> Path:
    """A directory every test process of this Python environment shares: the default and
    the slow suite run side by side install their plugins into the same site-packages."""
    key = hashlib.sha256(sys.prefix.encode()).hexdigest()[:12]
    shared = Path(tempfile.gettempdir()) / f"smug-opt-test-plugins-{key}"
    shared.mkdir(exist_ok=True)
    return shared


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _installed(source: Path, distribution: str) -> Iterator[None]:
    """Install the plugin package at ``source`` with pip (from a copy, so the source tree
    stays clean), refresh the registry, and uninstall at the end if a session installed
    it: its misbehaving backends must not linger in anyone's environment. Every test
    process of this environment (pytest-xdist's workers, and other sessions beside) records
    its pid in one file under a lock: the first installs, the last uninstalls, so no
    process's teardown pulls the plugin from under another. The pids of processes that
    died without their teardown (a killed run) are dropped when read."""
    shared = _shared_dir()
    users = shared / f"{distribution}.users.json"
    with exclusive_lock(shared / f"{distribution}.lock"):
        state = json.loads(users.read_text()) if users.is_file() else {"pids": [], "installed_here": False}
        state["pids"] = [pid for pid in state["pids"] if _alive(pid)]
        if not state["pids"] and not _is_current(source, distribution):
            copy = Path(tempfile.mkdtemp(dir=shared)) / source.name
            shutil.copytree(source, copy)
            _pip("install", "--no-deps", "--no-build-isolation", str(copy))
            shutil.rmtree(copy.parent)
            state["installed_here"] = True
        state["pids"].append(os.getpid())
        users.write_text(json.dumps(state))
    importlib.invalidate_caches()
    registry.refresh()
    yield
    with exclusive_lock(shared / f"{distribution}.lock"):
        state = json.loads(users.read_text())
        state["pids"] = [pid for pid in state["pids"] if pid != os.getpid() and _alive(pid)]
        last = not state["pids"] and state["installed_here"]
        if last:
            state["installed_here"] = False
        users.write_text(json.dumps(state))
        if last:
            from smug_opt.workers import shutdown_workers

            shutdown_workers()
            _pip("uninstall", "-y", distribution)
            registry.refresh()


@pytest.fixture(scope="session")
def toy_plugin() -> Iterator[str]:
    """``tests/toy_plugin`` installed for the session; yields its complete backend's name."""
    for _ in _installed(TOY_SOURCE, TOY_DISTRIBUTION):
        yield "toy-bruteforce"


@pytest.fixture(scope="session")
def scipy_plugin() -> Iterator[str]:
    """``tests/scipy_plugin`` (the README's example and its planted-bug variants)
    installed for the session; yields the honest backend's name."""
    for _ in _installed(SCIPY_SOURCE, SCIPY_DISTRIBUTION):
        yield "scipy-milp"


def usable_first_party() -> list[str]:
    """The project's own backends usable here, to parametrise cross-backend tests: a plugin
    left installed in the environment, or installed by a test session beside this one (see
    ``_installed``), never joins a parametrisation fixed at collection."""
    return [name for name in registry.available_backends() if name in FIRST_PARTY]


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
