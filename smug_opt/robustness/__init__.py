"""Robustness queries on networks (DESIGN "Queries on networks are problems like any other"):
an input box and an unsafe output region, answered ``unsat``/``sat``/``unknown`` by rigorous
bounds, an attack and exact solves (:func:`~smug_opt.robustness.decide.decide`), and the
verified explanations built from them (:func:`~smug_opt.robustness.explanation.robust_explanation`)."""

from smug_opt.robustness.decide import ANSWERS, Verdict, decide
from smug_opt.robustness.explanation import RobustExplanation, robust_explanation
from smug_opt.robustness.query import RobustnessQuery

__all__ = ["ANSWERS", "RobustExplanation", "RobustnessQuery", "Verdict", "decide", "robust_explanation"]
