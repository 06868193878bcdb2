"""What a HiGHS LP solve answered, read once for every node LP of the project (the safe
search's :class:`~smug_opt.safe_search.relaxation.Relaxation` and the certificate writer's
:class:`~smug_opt.certificate.node_lp.NodeLp`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["LpAnswer", "read_answer"]


@dataclass(frozen=True)
class LpAnswer:
    """``status``: ``"optimal"`` (``x``, row duals ``duals`` and the float ``value`` set),
    ``"infeasible"`` (``ray``: HiGHS's dual ray, None when it gave none) or ``"unknown"``
    (time limit or a solver failure)."""

    status: str
    x: np.ndarray | None = None
    duals: np.ndarray | None = None
    value: float = float("nan")
    ray: np.ndarray | None = None


def read_answer(h: Any) -> LpAnswer:
    """The answer of the HiGHS instance ``h`` after its last ``run()``."""
    import highspy

    status = h.getModelStatus()
    if status == highspy.HighsModelStatus.kOptimal:
        solution = h.getSolution()
        return LpAnswer("optimal", x=np.asarray(solution.col_value, dtype=np.float64),
                        duals=np.asarray(solution.row_dual, dtype=np.float64),
                        value=float(h.getInfo().objective_function_value))
    if status == highspy.HighsModelStatus.kInfeasible:
        _, has_ray, ray = h.getDualRay()
        return LpAnswer("infeasible", ray=np.asarray(ray, dtype=np.float64) if has_ray else None)
    return LpAnswer("unknown")
