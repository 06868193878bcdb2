"""Running the conformance checks on a backend: outcomes, the report, known failures."""

from __future__ import annotations

import enum
import functools
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from smug_opt.registry import backend_class
from smug_opt.testing.checks import CHECKS, Check, CheckFn

__all__ = [
    "CheckNotApplicable",
    "CheckOutcome",
    "CheckResult",
    "ConformanceError",
    "ConformanceReport",
    "conformance_checks",
    "known_failure",
    "run_conformance",
]


class ConformanceError(AssertionError):
    """A backend broke a check's invariant; the message names backend and check."""


class CheckNotApplicable(Exception):
    """The check does not apply to the backend's declared capabilities."""


@enum.unique
class CheckOutcome(enum.Enum):
    """How one check ended on one backend."""

    PASSED = "passed"
    FAILED = "failed"
    XFAILED = "xfailed"  # failed, as the backend declared it would
    XPASSED = "xpassed"  # declared as a known failure, but passed
    SKIPPED = "skipped"  # not applicable (capabilities) or disabled


@dataclass(frozen=True)
class CheckResult:
    """One check on one backend: outcome, message (failure, reason or note), seconds."""

    check: str
    outcome: CheckOutcome
    message: str
    seconds: float


@dataclass(frozen=True, repr=False)
class ConformanceReport:
    """Every check's result on one backend. ``ok``: no check failed unexpectedly;
    ``failures``: the checks that did; ``summary()`` (also what ``print(report)`` shows):
    the counts, then one line per check that did not pass; ``results``: every
    :class:`CheckResult`."""

    backend: str
    solver: str
    results: tuple[CheckResult, ...]

    @property
    def ok(self) -> bool:
        return not self.failures

    @property
    def failures(self) -> tuple[CheckResult, ...]:
        return tuple(r for r in self.results if r.outcome is CheckOutcome.FAILED)

    def summary(self) -> str:
        counts = {o: sum(r.outcome is o for r in self.results) for o in CheckOutcome}
        head = ", ".join(f"{n} {o.value}" for o, n in counts.items() if n)
        lines = [f"conformance of {self.backend!r} ({self.solver}): {head}"]
        lines += [f"  {r.outcome.value.upper()} {r.check}: {r.message}" for r in self.results
                  if r.outcome is not CheckOutcome.PASSED]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()

    def __repr__(self) -> str:
        counts = ", ".join(f"{sum(r.outcome is o for r in self.results)} {o.value}"
                           for o in CheckOutcome if any(r.outcome is o for r in self.results))
        return f"<ConformanceReport {self.backend!r}: {counts}; {'ok' if self.ok else 'FAILED'}>"


def _runner(check: Check) -> CheckFn:
    """The check as users call it: capability gate, failures named by backend and check."""

    @functools.wraps(check.fn)
    def run(backend: str) -> str | None:
        cls = backend_class(backend)
        if check.needs is not None and not cls.capabilities.declares(check.needs):
            raise CheckNotApplicable(f"{backend!r} does not declare capabilities.{check.needs}")
        try:
            return check.fn(backend)
        except AssertionError as exc:
            raise ConformanceError(f"[{backend}] {check.name}: {exc}") from None
    return run


def conformance_checks() -> Iterator[tuple[str, CheckFn]]:
    """Every check as ``(name, fn)``; ``fn(backend_name)`` raises :class:`ConformanceError`
    on failure and :class:`CheckNotApplicable` when capabilities rule it out."""
    for check in CHECKS:
        yield check.name, _runner(check)


def known_failure(backend: str, check_name: str) -> str | None:
    """The reason ``backend`` declares for failing ``check_name``, or None."""
    declared: Mapping[str, str] = backend_class(backend).known_failures
    return declared.get(check_name)


def run_conformance(backend: str, *, time_limit_check: bool = True) -> ConformanceReport:
    """Run every check on ``backend`` and report each outcome (raises only when the
    backend is unknown or unusable)."""
    cls = backend_class(backend)
    results = []
    for name, fn in conformance_checks():
        start = time.perf_counter()
        expected = known_failure(backend, name)
        if name == "check_time_limit" and not time_limit_check:
            outcome, message = CheckOutcome.SKIPPED, "disabled (time_limit_check=False)"
        else:
            try:
                note = fn(backend)
                outcome = CheckOutcome.XPASSED if expected else CheckOutcome.PASSED
                message = (f"declared known failure passed: {expected}" if expected
                           else note or "")
            except CheckNotApplicable as exc:
                outcome, message = CheckOutcome.SKIPPED, str(exc)
            except Exception as exc:
                outcome = CheckOutcome.XFAILED if expected else CheckOutcome.FAILED
                detail = str(exc) if isinstance(exc, ConformanceError) else \
                    f"[{backend}] {name}: {type(exc).__name__}: {exc}"
                message = f"{detail} (known: {expected})" if expected else detail
        results.append(CheckResult(name, outcome, message, time.perf_counter() - start))
    return ConformanceReport(backend, cls.solver_version(), tuple(results))


