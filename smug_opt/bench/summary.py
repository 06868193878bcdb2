"""A suite's summary per backend: the metrics of its table, each declared once.

A :class:`BackendMetric` names a metric, says how it is computed from one backend's
instance results and job records (:class:`BackendRuns`) and how its cell in the report's
table reads. :func:`summarize_suites` computes every metric of :data:`BACKEND_METRICS`,
``summary.json`` holds them all by name and ``report.md``'s suite table has a column for
each one with a header, in this order: adding a metric is one entry here (or one
:func:`register_metric` call), nothing elsewhere. The definitions behind the built-in
metrics are in :mod:`smug_opt.bench.metrics`.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from smug_opt.backend import Status
from smug_opt.bench.metrics import (
    InstanceResult,
    JobOutcome,
    PerformanceProfile,
    best_known,
    instance_results,
    performance_profile,
    shifted_geometric_mean,
    wrong_reason,
)
from smug_opt.bench.records import RunRecord

__all__ = ["BACKEND_METRICS", "BackendMetric", "BackendRuns", "BackendSummary", "SuiteSummary",
           "format_number", "register_metric", "summarize_suites"]


def format_number(value: Any, digits: int = 3) -> str:
    """A table cell: ``–`` for None or a non-finite float, an int or text as it is, a float
    to ``digits`` significant digits."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    if isinstance(value, (int, str)):
        return str(value)
    return f"{value:.{digits}g}"


@dataclass(frozen=True)
class BackendRuns:
    """What a metric reads: one backend's instance results and job records on one suite,
    and every backend's instance results there (``suite_results``, for relative metrics)."""

    results: list[InstanceResult]
    records: list[RunRecord]
    suite_results: list[InstanceResult]

    def count(self, outcome: JobOutcome) -> int:
        """Instances whose outcome (over the repeats) is ``outcome``."""
        return sum(1 for x in self.results if x.outcome is outcome)


@dataclass(frozen=True)
class BackendMetric:
    """One metric of a backend on a suite: ``name`` (its key in ``summary.json`` and in
    :attr:`BackendSummary.values`), ``header`` (its column in the report; None: shown
    inside another column), ``compute`` and ``cell`` (the column's text from the row's
    values; default: the value, numbers to 3 digits). ``definition``: a line for the
    report's definitions (the built-in ones are defined in :mod:`smug_opt.bench.metrics`)."""

    name: str
    header: str | None
    compute: Callable[[BackendRuns], Any]
    cell: Callable[[Mapping[str, Any]], str] | None = None
    definition: str = ""

    def text(self, values: Mapping[str, Any]) -> str:
        """The metric's cell in a row of ``values``."""
        return self.cell(values) if self.cell is not None else format_number(values[self.name])


def _mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


def _sgm(results: Iterable[InstanceResult]) -> float:
    return shifted_geometric_mean(x.seconds for x in results)


def _sgm_scaled(runs: BackendRuns) -> float:
    backends = dict.fromkeys(x.backend for x in runs.suite_results)
    fastest = min((_sgm(x for x in runs.suite_results if x.backend == b) for b in backends), default=math.nan)
    return _sgm(runs.results) / fastest if fastest > 0 else math.nan


def _median_time(runs: BackendRuns) -> float:
    return float(statistics.median([x.seconds for x in runs.results])) if runs.results else math.nan


def _claims(runs: BackendRuns) -> list[RunRecord]:
    return [r for r in runs.records if r.certified is not None]


def _median_certify_seconds(runs: BackendRuns) -> float | None:
    seconds = [r.times.certify if r.times is not None else 0.0 for r in _claims(runs)]
    return float(statistics.median(seconds)) if seconds else None


def _certified_cell(v: Mapping[str, Any]) -> str:
    if not v["claims"]:
        return "–"
    return f"{v['certified']}/{v['claims']} ({format_number(v['median_certify_seconds'])} s)"


BACKEND_METRICS: list[BackendMetric] = [
    BackendMetric("instances", "instances", lambda r: len(r.results)),
    BackendMetric("solved", "solved", lambda r: r.count(JobOutcome.SOLVED)),
    BackendMetric("feasible", "feasible", lambda r: sum(1 for x in r.results if x.objective is not None)),
    BackendMetric("timeouts", "timeouts",
                  lambda r: r.count(JobOutcome.FEASIBLE) + r.count(JobOutcome.TIMEOUT)),
    BackendMetric("errors", "errors (killed)", lambda r: r.count(JobOutcome.ERROR),
                  cell=lambda v: f"{v['errors']} ({v['killed']})"),
    BackendMetric("killed", None, lambda r: sum(1 for x in r.results if x.killed)),
    BackendMetric("wrong", "wrong", lambda r: r.count(JobOutcome.WRONG)),
    BackendMetric("sgm", "SGM [s]", lambda r: _sgm(r.results)),
    BackendMetric("sgm_scaled", "SGM scaled", _sgm_scaled),
    BackendMetric("median_time", "median [s]", _median_time),
    BackendMetric("gap_to_best", "gap to best",
                  lambda r: _mean([x.gap_to_best for x in r.results if x.gap_to_best is not None])),
    BackendMetric("primal_integral", "primal integral (n)",
                  lambda r: _mean([x.primal_integral for x in r.results if x.primal_integral is not None]),
                  cell=lambda v: f"{format_number(v['primal_integral'])} ({v['primal_integral_instances']})"),
    BackendMetric("primal_integral_instances", None,
                  lambda r: sum(1 for x in r.results if x.primal_integral is not None)),
    BackendMetric("max_overshoot", "max overshoot [s]",
                  lambda r: max([0.0, *overshoots]) if (overshoots := [
                      x.overshoot for x in r.records if x.overshoot is not None]) else None),
    BackendMetric("peak_memory_mb", "peak MB",
                  lambda r: max(memory) if (memory := [
                      x.peak_memory_mb for x in r.records if x.peak_memory_mb is not None]) else None,
                  cell=lambda v: format_number(v["peak_memory_mb"], 4)),
    BackendMetric("certified", "certified (median s)", lambda r: sum(1 for x in _claims(r) if x.certified),
                  cell=_certified_cell),
    BackendMetric("claims", None, lambda r: len(_claims(r))),
    BackendMetric("median_certify_seconds", None, _median_certify_seconds),
    BackendMetric("solver", "solver", lambda r: next((x.solver for x in r.records if x.solver), "")),
]
"""The metrics of every backend on every suite, in the order of the report's columns."""


def register_metric(metric: BackendMetric, *, replace: bool = False) -> None:
    """Add ``metric`` as the report's last column (``replace``: the metric of that name)."""
    known = [m.name for m in BACKEND_METRICS]
    if metric.name in ("suite", "backend"):
        raise ValueError(f"metric name {metric.name!r} is taken by the summary's own field")
    if metric.name in known:
        if not replace:
            raise ValueError(f"a bench metric named {metric.name!r} exists; pass replace=True")
        BACKEND_METRICS[known.index(metric.name)] = metric
    else:
        BACKEND_METRICS.append(metric)


@dataclass(frozen=True)
class BackendSummary:
    """One backend on one suite: every metric of :data:`BACKEND_METRICS` by name in
    ``values``, also readable as an attribute (``summary.sgm``). ``None``: not defined (no
    instance with a best known objective, no incumbents, ...)."""

    suite: str
    backend: str
    values: Mapping[str, Any]

    def __getattr__(self, name: str) -> Any:
        if name != "values" and name in self.values:
            return self.values[name]
        raise AttributeError(f"{type(self).__name__} has no metric {name!r}")

    def to_dict(self) -> dict[str, Any]:
        """``suite``, ``backend`` and every metric, flat (as ``summary.json`` holds it)."""
        return {"suite": self.suite, "backend": self.backend, **self.values}


@dataclass(frozen=True)
class SuiteSummary:
    """Everything the report shows for one suite."""

    suite: str
    instances: tuple[str, ...]
    backends: tuple[BackendSummary, ...]
    profile: PerformanceProfile
    best_known: Mapping[str, float]
    results: tuple[InstanceResult, ...]
    wrong: tuple[tuple[str, str, int, str], ...]  # (instance, backend, repeat, reason)
    errors: tuple[tuple[str, str, int, str], ...]  # (instance, backend, repeat, message)


def summarize_suites(records: Iterable[RunRecord]) -> list[SuiteSummary]:
    """One :class:`SuiteSummary` per suite in ``records`` (suites in first-seen order)."""
    records = list(records)
    best = best_known(records)
    results = instance_results(records)
    out = []
    for suite in dict.fromkeys(r.suite for r in records):
        suite_records = [r for r in records if r.suite == suite]
        suite_results = [x for x in results if x.suite == suite]
        instances = tuple(dict.fromkeys(r.instance for r in suite_records))
        backends = tuple(dict.fromkeys(r.backend for r in suite_records))
        by_pair = {(x.instance, x.backend): x for x in suite_results}
        times = {b: [by_pair[(i, b)].seconds if (i, b) in by_pair
                     and by_pair[(i, b)].outcome is JobOutcome.SOLVED else math.inf for i in instances]
                 for b in backends}
        summaries = []
        for b in backends:
            runs = BackendRuns([x for x in suite_results if x.backend == b],
                               [r for r in suite_records if r.backend == b], suite_results)
            summaries.append(BackendSummary(suite, b, {m.name: m.compute(runs) for m in BACKEND_METRICS}))
        wrong = tuple((r.instance, r.backend, r.repeat, reason) for r in suite_records
                      if (reason := wrong_reason(r, best.get((suite, r.instance)))) is not None)
        errors = tuple((r.instance, r.backend, r.repeat, r.message) for r in suite_records
                       if r.status is Status.ERROR)
        out.append(SuiteSummary(
            suite, instances, tuple(summaries), performance_profile(times),
            {i: best[(suite, i)] for i in instances if (suite, i) in best}, tuple(suite_results),
            wrong, errors,
        ))
    return out
