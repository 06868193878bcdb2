"""An independent re-check of a verified explanation: a fixed-seed PGD attack (100 steps,
10 restarts) on the box the explanation leaves free, which must find no counterexample."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from smug_opt.network.flat import FlatNetwork, Preprocess
from smug_opt.robustness.attack import attack
from smug_opt.robustness.explanation import label_changes
from smug_opt.threads import one_blas_thread

__all__ = ["AttackCheck", "attack_check", "explanation_box"]

CHECK_STEPS = 100
CHECK_RESTARTS = 10
CHECK_SEED = 20260


@dataclass(frozen=True)
class AttackCheck:
    """``passed`` when the attack found no input breaking the label; ``margin``: the
    smallest (label score − best other score) it reached, ``x`` where."""

    passed: bool
    margin: float
    x: np.ndarray

    def to_dict(self) -> dict[str, object]:
        return {"attack": f"PGD {CHECK_STEPS} steps, {CHECK_RESTARTS} restarts, seed {CHECK_SEED}",
                "passed": self.passed, "smallest_margin": self.margin}


def explanation_box(x: np.ndarray, fixed: np.ndarray, eps: float, valid_range: tuple[float, float]
                    ) -> tuple[np.ndarray, np.ndarray]:
    """The inputs an explanation covers: ``x`` on ``fixed``, ``[x − ε, x + ε] ∩ range`` elsewhere."""
    x = np.asarray(x, dtype=np.float64).reshape(-1)
    low = np.minimum(np.maximum(x - eps, valid_range[0]), x)
    high = np.maximum(np.minimum(x + eps, valid_range[1]), x)
    return np.where(fixed, x, low), np.where(fixed, x, high)


@one_blas_thread()
def attack_check(net: FlatNetwork, preprocess: Preprocess, x: np.ndarray, fixed: np.ndarray, label: int,
                 eps: float, valid_range: tuple[float, float]) -> AttackCheck:
    """Run the check's attack on the explanation ``fixed`` of ``label`` at ``x``."""
    lo, hi = explanation_box(x, fixed, eps, valid_range)
    found = attack(net, preprocess, lo, hi, label_changes(net.num_outputs, label),
                   steps=CHECK_STEPS, restarts=CHECK_RESTARTS, seed=CHECK_SEED)
    scores = net.forward(preprocess(found.x[None]))[-1][0]
    margin = float(scores[label] - np.delete(scores, label).max())
    return AttackCheck(passed=bool(found.loss > 0), margin=margin, x=found.x)
