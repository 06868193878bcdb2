"""Aggregate metrics: Win% (Wilson interval), sparsity, LSC quartiles, token precision/recall."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np


@dataclass(frozen=True)
class Estimate:
    """A mean or proportion with a two-sided confidence interval ``[low, high]``.

    ``interval`` names how the interval was computed: ``"wilson"`` (binomial proportion)
    or ``"normal"`` (mean +/- z * standard error).
    """

    value: float
    low: float
    high: float
    n: int
    interval: str
    confidence: float = 0.95


@dataclass(frozen=True)
class Quartiles:
    """Median with 25th and 75th percentiles over ``n`` finite values."""

    median: float
    q25: float
    q75: float
    n: int


@dataclass(frozen=True)
class PrecisionRecall:
    """Precision and recall of a token mask against a ground-truth rationale.

    ``precision`` is NaN when the mask selects nothing, ``recall`` when the rationale is empty.
    """

    precision: float
    recall: float


def _z(confidence: float) -> float:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1); got {confidence}")
    return NormalDist().inv_cdf(0.5 + confidence / 2.0)


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion ``successes / n``."""
    if n < 1 or not 0 <= successes <= n:
        raise ValueError(f"need n >= 1 and 0 <= successes <= n; got {successes=}, {n=}")
    z = _z(confidence)
    p = successes / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    low = 0.0 if successes == 0 else max(0.0, centre - half)  # exact at the ends: the two
    high = 1.0 if successes == n else min(1.0, centre + half)  # terms cancel mathematically
    return low, high


def win_rates(lsc: Mapping[str, Sequence[float]], confidence: float = 0.95) -> dict[str, Estimate]:
    """Win%: the share of inputs on which a method's LSC is <= every other method's.

    Ties count as a win for every tied method, so the shares may sum to more than 1. A
    missing score (NaN) counts as +inf: it never wins against a finite score. The interval
    is Wilson's.
    """
    if len(lsc) < 2:
        raise ValueError(f"Win% needs at least two methods; got {list(lsc)}")
    names = list(lsc)
    lengths = {m: len(lsc[m]) for m in names}
    if len(set(lengths.values())) != 1 or 0 in lengths.values():
        raise ValueError(f"every method needs one LSC per input, the same number of inputs; got {lengths}")
    table = np.array([np.asarray(lsc[m], dtype=np.float64) for m in names])
    table = np.where(np.isnan(table), np.inf, table)
    best = table.min(axis=0)
    wins = (table <= best) & np.isfinite(best)
    n = table.shape[1]
    out = {}
    for name, row in zip(names, wins, strict=True):
        k = int(row.sum())
        low, high = wilson_interval(k, n, confidence)
        out[name] = Estimate(k / n, low, high, n, "wilson", confidence)
    return out


def mean_estimate(
    values: Sequence[float], confidence: float = 0.95, *, bounds: tuple[float, float] | None = None
) -> Estimate:
    """Mean of the finite values with a normal-approximation interval (mean +/- z * s / sqrt(n)).

    ``bounds`` clips the interval to the values' possible range (e.g. (0, 1) for fractions).
    """
    arr = np.asarray(values, dtype=np.float64)
    arr = arr[np.isfinite(arr)]
    if arr.size == 0:
        raise ValueError(f"no finite value to average among {len(values)}")
    mean = float(arr.mean())
    half = _z(confidence) * float(arr.std(ddof=1)) / math.sqrt(arr.size) if arr.size > 1 else 0.0
    low, high = mean - half, mean + half
    if bounds is not None:
        low, high = max(low, bounds[0]), min(high, bounds[1])
    return Estimate(mean, low, high, int(arr.size), "normal", confidence)


def sparsity(masks: Sequence[np.ndarray], confidence: float = 0.95) -> Estimate:
    """Mean kept fraction of boolean masks, with a normal-approximation interval clipped to [0, 1]."""
    if len(masks) == 0:
        raise ValueError("sparsity needs at least one mask; got none")
    fractions = [float(np.mean(np.asarray(m, dtype=bool))) for m in masks]
    return mean_estimate(fractions, confidence, bounds=(0.0, 1.0))


def lsc_quartiles(values: Sequence[float]) -> Quartiles:
    """Median LSC with 25th/75th percentiles over the finite values (NaN = no box, dropped)."""
    arr = np.asarray(values, dtype=np.float64)
    arr = arr[np.isfinite(arr)]
    if arr.size == 0:
        raise ValueError(f"no finite LSC among {len(values)} values")
    q25, median, q75 = np.percentile(arr, [25, 50, 75])
    return Quartiles(float(median), float(q25), float(q75), int(arr.size))


def token_precision_recall(mask: np.ndarray, rationale: np.ndarray) -> PrecisionRecall:
    """Precision ``|M & R| / |M|`` and recall ``|M & R| / |R|`` of token mask M vs rationale R."""
    mask = np.asarray(mask, dtype=bool)
    rationale = np.asarray(rationale, dtype=bool)
    if mask.shape != rationale.shape:
        raise ValueError(f"mask shape {mask.shape} does not match rationale shape {rationale.shape}")
    hit = int(np.sum(mask & rationale))
    kept, true = int(mask.sum()), int(rationale.sum())
    return PrecisionRecall(hit / kept if kept else math.nan, hit / true if true else math.nan)
