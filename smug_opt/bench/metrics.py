"""Benchmark metrics: outcomes, shifted geometric means, performance profiles, gaps, primal integrals.

Every metric is computed per suite, over the suite's instances, per backend.

- **Outcome of a job.** *wrong*: the solver's answers failed exact verification (and no
  valid one was found), or the harness's re-check of the returned solution failed, or a
  claim contradicts a verified solution of any backend: OPTIMAL with an objective above
  the best known one, a proven bound above it, or INFEASIBLE although a solution is
  known. A wrong job never counts as solved. *solved*: status OPTIMAL or INFEASIBLE
  (proven), not wrong. *feasible*: a verified solution, optimality not proven (limit hit).
  *timeout*: no verified solution, no error. *error*: the solver or the job process failed,
  or the job was killed at the time limit plus grace or at the memory limit.
- **Repeats.** An instance counts as solved only if every repeat solved it, as wrong if any
  repeat was wrong, as an error if any repeat erred (and none was wrong or all solved);
  its time is the median over repeats.
- **Counts.** *solved*; *feasible*: instances with a verified solution (solved ones
  included); *timeouts*: unsolved without error; *errors* (of which *killed*); *wrong*.
- **Time.** The solve's own end-to-end time (lowering, solving, verification) measured in
  the job process. Unsolved instances count at the time limit.
- **Shifted geometric mean** (Mittelmann), shift s = 10 s:
  `SGM = exp(mean(ln(max(1, t_i + s)))) − s`; *scaled*: divided by the smallest SGM of
  the suite, so the best backend has 1.0.
- **Median time**, unsolved at the limit.
- **Gap to best known.** The best known objective of an instance is the smallest verified
  objective any backend found in any repeat. A backend's gap on an instance is Berthold's
  primal gap of its best verified objective `v` to the best known `b`: 0 if `v = b`, 1 if
  there is no `v` or `v·b < 0`, else `|b − v| / max(|b|, |v|)`. Reported as the mean over
  instances with a best known objective.
- **Primal integral** (Berthold 2013): the integral over `[0, time limit]` of the primal
  gap of the best incumbent so far (1 before the first), from the incumbents the solver
  reported during the solve plus its final verified solution at the end of the solve.
  Only for jobs with reported incumbents; the mean over those. Lower is better: finding
  good solutions early matters.
- **Performance profile** (Dolan and Moré 2002): `r_ps = t_ps / min_s t_ps` for instance `p`
  and backend `s` with unsolved (or wrong) runs at `r = ∞` and times below 1 ms taken as
  1 ms; `ρ_s(τ)` is the share of instances with `r_ps ≤ τ`. `ρ_s(1)` is the share where `s`
  was fastest; `ρ_s(τ)` for large `τ`, the share it solved.
- **Max overshoot.** The largest `max(0, wall − limit)` over a backend's jobs, `wall` the
  time from the start of the solve to the answer (or the kill) measured by the harness:
  how well a backend keeps its time limit (at most the grace, when the job was killed).
- **Peak memory.** The job process's maximum resident set size.
- **Certified.** Of a backend's jobs that end OPTIMAL or INFEASIBLE (its *claims*), those
  whose claim is exact (``proof: exact``: exact by construction, an exact backend, or
  certified by :mod:`smug_opt.certify`), and the median seconds certification took over
  the claims (part of the job's time; 0 where it was not asked).
"""

from __future__ import annotations

import enum
import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from smug_opt.backend import Status
from smug_opt.bench.records import RunRecord

__all__ = [
    "SHIFT",
    "TIME_FLOOR",
    "InstanceResult",
    "JobOutcome",
    "PerformanceProfile",
    "best_known",
    "classify",
    "instance_results",
    "performance_profile",
    "primal_gap",
    "primal_integral",
    "record_primal_integral",
    "results_by_instance",
    "shifted_geometric_mean",
    "wrong_reason",
]

SHIFT = 10.0
"""Seconds added before the geometric mean (Mittelmann's shift)."""

TIME_FLOOR = 1e-3
"""Times below this (seconds) are taken as this in performance-profile ratios."""

_REL_TOL = 1e-9

InstanceKey = tuple[str, str]  # (suite, instance)


@enum.unique
class JobOutcome(enum.Enum):
    """What a job (or an instance over its repeats) amounts to; see the module docstring."""

    SOLVED = "solved"
    FEASIBLE = "feasible"
    TIMEOUT = "timeout"
    ERROR = "error"
    WRONG = "wrong"


def shifted_geometric_mean(times: Iterable[float], shift: float = SHIFT) -> float:
    """``exp(mean(ln(max(1, t + shift)))) − shift``; NaN for no times."""
    values = np.asarray(list(times), dtype=np.float64)
    if values.size == 0:
        return math.nan
    return float(np.exp(np.mean(np.log(np.maximum(1.0, values + shift)))) - shift)


def results_by_instance(records: Iterable[RunRecord]) -> dict[InstanceKey, dict[str, InstanceResult]]:
    """(suite, instance) → backend → its :class:`InstanceResult`: the one definition of
    *solved* and of an instance's time that every table of a bench run uses."""
    table: dict[InstanceKey, dict[str, InstanceResult]] = defaultdict(dict)
    for result in instance_results(records):
        table[(result.suite, result.instance)][result.backend] = result
    return dict(table)


def primal_gap(value: float | None, best: float | None) -> float:
    """Berthold's primal gap of objective ``value`` to the best known ``best``, in [0, 1]."""
    if value is None or best is None:
        return 1.0
    if value == best:
        return 0.0
    if value * best < 0:
        return 1.0
    return abs(best - value) / max(abs(best), abs(value))


def primal_integral(incumbents: Sequence[tuple[float, float]], best: float | None,
                    horizon: float) -> float:
    """``∫_0^horizon p(t) dt`` for the step function ``p`` of the primal gap of the best
    incumbent found by time ``t`` (``(time, objective)`` pairs; 1 before the first)."""
    total, t_prev, gap, incumbent = 0.0, 0.0, 1.0, math.inf
    for t, objective in sorted(incumbents):
        t = min(max(t, 0.0), horizon)
        total += gap * (t - t_prev)
        t_prev = t
        incumbent = min(incumbent, objective)
        gap = primal_gap(incumbent, best)
    return total + gap * (horizon - t_prev)


def record_primal_integral(record: RunRecord, best: float | None) -> float | None:
    """The primal integral of one job over its time limit, or None without incumbents."""
    if not record.incumbents or best is None:
        return None
    events = list(record.incumbents)
    if record.objective is not None and record.times is not None:
        events.append((record.times.total, record.objective))
    return primal_integral(events, best, record.time_limit)


def _tolerance(best: float) -> float:
    return _REL_TOL * max(1.0, abs(best))


def best_known(records: Iterable[RunRecord]) -> dict[InstanceKey, float]:
    """(suite, instance) → the smallest verified objective over all backends and repeats."""
    best: dict[InstanceKey, float] = {}
    for r in records:
        if r.objective is not None and r.reverified is not False:
            key = (r.suite, r.instance)
            best[key] = min(best.get(key, math.inf), r.objective)
    return best


def wrong_reason(record: RunRecord, best: float | None) -> str | None:
    """Why ``record`` is a wrong answer, or None; ``best`` is the instance's best known."""
    if record.verified is False:
        return f"the solver's answer failed exact verification: {record.verification}"
    if record.reverified is False:
        return "the harness's re-check of the returned solution failed"
    if best is None:
        return None
    if record.status is Status.INFEASIBLE:
        return f"claimed infeasible, but a verified solution with objective {best:g} is known"
    tol = _tolerance(best)
    if record.status is Status.OPTIMAL and record.objective is not None and record.objective > best + tol:
        return f"claimed optimal with objective {record.objective:g}, but {best:g} is known"
    if record.bound is not None and record.bound > best + tol:
        return f"claimed a lower bound of {record.bound:g}, but a solution of {best:g} is known"
    return None


def classify(record: RunRecord, best: float | None) -> JobOutcome:
    """The :class:`JobOutcome` of one job."""
    if wrong_reason(record, best) is not None:
        return JobOutcome.WRONG
    if record.status in (Status.OPTIMAL, Status.INFEASIBLE):
        return JobOutcome.SOLVED
    if record.status is Status.ERROR:
        return JobOutcome.ERROR
    return JobOutcome.FEASIBLE if record.objective is not None else JobOutcome.TIMEOUT


@dataclass(frozen=True)
class InstanceResult:
    """One backend on one instance, over its repeats. ``seconds`` is the median time with
    unsolved repeats at the limit; ``objective`` the best verified objective (None: none)."""

    suite: str
    instance: str
    backend: str
    outcome: JobOutcome
    seconds: float
    objective: float | None
    gap_to_best: float | None
    primal_integral: float | None
    killed: bool
    repeats: int
    features: Mapping[str, Any] = field(default_factory=dict)


def instance_results(records: Iterable[RunRecord]) -> list[InstanceResult]:
    """Aggregate ``records`` per (suite, instance, backend); see the module docstring."""
    records = list(records)
    best = best_known(records)
    groups: dict[tuple[str, str, str], list[RunRecord]] = defaultdict(list)
    for r in records:
        groups[(r.suite, r.instance, r.backend)].append(r)
    out = []
    for (suite, instance, backend), group in groups.items():
        b = best.get((suite, instance))
        outcomes = [classify(r, b) for r in group]
        valid = [r for r, o in zip(group, outcomes, strict=True) if o is not JobOutcome.WRONG]
        objectives = [r.objective for r in valid if r.objective is not None]
        objective = min(objectives) if objectives else None
        if JobOutcome.WRONG in outcomes:
            outcome = JobOutcome.WRONG
        elif all(o is JobOutcome.SOLVED for o in outcomes):
            outcome = JobOutcome.SOLVED
        elif JobOutcome.ERROR in outcomes:
            outcome = JobOutcome.ERROR
        else:
            outcome = JobOutcome.FEASIBLE if objective is not None else JobOutcome.TIMEOUT
        times = [min(r.seconds, r.time_limit) if o is JobOutcome.SOLVED else r.time_limit
                 for r, o in zip(group, outcomes, strict=True)]
        integrals = [v for r in valid if (v := record_primal_integral(r, b)) is not None]
        out.append(InstanceResult(
            suite=suite, instance=instance, backend=backend, outcome=outcome,
            seconds=float(statistics.median(times)),
            objective=objective if outcome is not JobOutcome.WRONG else None,
            gap_to_best=None if b is None else primal_gap(
                objective if outcome is not JobOutcome.WRONG else None, b),
            primal_integral=statistics.fmean(integrals) if integrals else None,
            killed=any(r.killed for r in group), repeats=len(group), features=dict(group[0].features),
        ))
    return out


@dataclass(frozen=True)
class PerformanceProfile:
    """Dolan–Moré profile data: ``rho[backend][i]`` is the share of instances the backend
    solved within ``taus[i]`` times the fastest backend's time."""

    backends: tuple[str, ...]
    taus: tuple[float, ...]
    rho: Mapping[str, tuple[float, ...]]
    ratios: Mapping[str, tuple[float, ...]]  # r_ps per backend, over the instances

    def at(self, backend: str, tau: float) -> float:
        """``ρ_backend(τ)``."""
        r = np.asarray(self.ratios[backend])
        return float(np.count_nonzero(r <= tau) / r.size) if r.size else math.nan

    def to_dict(self) -> dict[str, Any]:
        return {"taus": list(self.taus), "rho": {b: list(v) for b, v in self.rho.items()}}


def performance_profile(times: Mapping[str, Sequence[float]]) -> PerformanceProfile:
    """The profile of backend → solve times over the same instances (``inf``: unsolved)."""
    backends = tuple(times)
    matrix = np.array([np.asarray(times[b], dtype=np.float64) for b in backends])
    if matrix.ndim != 2:
        raise ValueError("every backend needs one time per instance")
    matrix = np.where(np.isfinite(matrix), np.maximum(matrix, TIME_FLOOR), np.inf)
    fastest = matrix.min(axis=0) if matrix.size else np.zeros(0)
    with np.errstate(invalid="ignore"):
        ratios = np.where(np.isfinite(matrix), matrix / fastest, np.inf)
    finite = ratios[np.isfinite(ratios)]
    taus = np.unique(np.concatenate([[1.0], finite]))
    rho = {b: tuple(float(np.count_nonzero(ratios[i] <= t) / ratios.shape[1]) if ratios.shape[1]
                    else math.nan for t in taus) for i, b in enumerate(backends)}
    return PerformanceProfile(backends, tuple(float(t) for t in taus), rho,
                              {b: tuple(float(v) for v in ratios[i]) for i, b in enumerate(backends)})
