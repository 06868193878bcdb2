"""Backend discovery through the ``smug_opt.backends`` entry-point group.

First-party backends are found exactly as third-party ones are: by entry point. A plugin
that fails to load is reported (and warned about), never a crash of the registry.
"""

from __future__ import annotations

import functools
import warnings
from dataclasses import dataclass, fields
from importlib.metadata import EntryPoint, entry_points

from smug_opt.backend import Backend, Capabilities

__all__ = [
    "ENTRY_POINT_GROUP",
    "BackendInfo",
    "BackendUnavailableError",
    "UnknownBackendError",
    "available_backends",
    "backend_class",
    "backend_declaring",
    "backend_infos",
    "refresh",
]

ENTRY_POINT_GROUP = "smug_opt.backends"


class UnknownBackendError(ValueError):
    """No backend is registered under the requested name."""


class BackendUnavailableError(RuntimeError):
    """The backend is registered but cannot be used here (missing package, load failure)."""


@dataclass(frozen=True)
class BackendInfo:
    """What ``smug-opt backends`` shows for one registered backend."""

    name: str
    target: str  # module:Class of the entry point
    usable: bool
    reason: str | None  # why not usable
    solver: str | None
    description: str
    capabilities: Capabilities | None
    distribution: str | None


@functools.cache
def _entry_points() -> dict[str, EntryPoint]:
    found: dict[str, EntryPoint] = {}
    eps = sorted(entry_points(group=ENTRY_POINT_GROUP),
                 key=lambda ep: (ep.name, ep.dist.name if ep.dist else "", ep.value))
    for ep in eps:
        if ep.name in found:
            if found[ep.name].value != ep.value:
                warnings.warn(
                    f"two smug-opt backends are named {ep.name!r} ({found[ep.name].value} and "
                    f"{ep.value}); using {found[ep.name].value}",
                    RuntimeWarning, stacklevel=3,
                )
            continue
        found[ep.name] = ep
    return found


@functools.cache
def _load(name: str) -> type[Backend]:
    ep = _entry_points()[name]
    try:
        cls = ep.load()
    except Exception as exc:  # a broken plugin must not break the registry
        raise BackendUnavailableError(
            f"backend {name!r} ({ep.value}) failed to load: {type(exc).__name__}: {exc}"
        ) from exc
    if not (isinstance(cls, type) and issubclass(cls, Backend)):
        raise BackendUnavailableError(
            f"backend {name!r} ({ep.value}) is not a smug_opt.backend.Backend subclass"
        )
    if getattr(cls, "name", None) != name:
        raise BackendUnavailableError(
            f"backend class {ep.value} declares name {getattr(cls, 'name', None)!r} but is "
            f"registered as {name!r}"
        )
    return cls


def refresh() -> None:
    """Forget cached entry points (after installing or removing a plugin)."""
    _entry_points.cache_clear()
    _load.cache_clear()


def registered_names() -> list[str]:
    """Every registered backend name, usable or not."""
    return sorted(_entry_points())


def backend_class(name: str, *, check_available: bool = True) -> type[Backend]:
    """The backend class registered as ``name``; clear errors when it cannot be used."""
    names = _entry_points()
    if name not in names:
        raise UnknownBackendError(
            f"unknown backend {name!r}; installed backends: {', '.join(sorted(names)) or 'none'}"
        )
    cls = _load(name)
    if check_available:
        reason = cls.unavailable_reason()
        if reason:
            raise BackendUnavailableError(f"backend {name!r} is not usable: {reason}")
    return cls


def backend_infos(*, with_versions: bool = True) -> list[BackendInfo]:
    """One :class:`BackendInfo` per registered backend, load failures included."""
    infos = []
    for name, ep in sorted(_entry_points().items()):
        dist = ep.dist.name if ep.dist else None
        try:
            cls = _load(name)
        except BackendUnavailableError as exc:
            warnings.warn(str(exc), RuntimeWarning, stacklevel=2)
            infos.append(BackendInfo(name, ep.value, False, str(exc), None, "", None, dist))
            continue
        reason = cls.unavailable_reason()
        solver = None
        if reason is None and with_versions:
            try:
                solver = cls.solver_version()
            except Exception as exc:
                reason = f"solver version query failed: {type(exc).__name__}: {exc}"
        infos.append(BackendInfo(name, ep.value, reason is None, reason, solver,
                                 cls.description, cls.capabilities, dist))
    return infos


def available_backends() -> list[str]:
    """Names of the backends usable right now (registered, loadable, solver installed)."""
    usable = []
    for name in registered_names():
        try:
            backend_class(name)
        except (BackendUnavailableError, UnknownBackendError):
            continue
        usable.append(name)
    return usable


def backend_declaring(purpose: str, *capabilities: str) -> type[Backend]:
    """The first usable backend, by name, that declares every one of ``capabilities``
    (:class:`~smug_opt.backend.Capabilities` fields) and takes any problem (one declaring
    ``binary_only`` is passed over: the core's questions carry continuous variables): how
    the core finds a solver for ``purpose`` without naming one. Raises
    :class:`BackendUnavailableError` saying what ``purpose`` needs and what would provide it."""
    unknown = set(capabilities) - {f.name for f in fields(Capabilities)}
    if unknown:
        raise ValueError(f"unknown capabilities {sorted(unknown)}; Capabilities declares "
                         f"{[f.name for f in fields(Capabilities)]}")
    unusable = []
    for name in registered_names():
        try:
            cls = _load(name)
        except BackendUnavailableError:
            continue
        if all(getattr(cls.capabilities, c) for c in capabilities) and not cls.capabilities.binary_only:
            reason = cls.unavailable_reason()
            if reason is None:
                return cls
            unusable.append(f"{name!r}: {reason}")
    needs = " and ".join(f"capabilities.{c}" for c in capabilities)
    offer = (f"; registered but not usable: {'; '.join(unusable)}" if unusable
             else "; none is registered (see `smug-opt backends`)")
    raise BackendUnavailableError(f"{purpose} needs a backend that declares {needs}{offer}")
