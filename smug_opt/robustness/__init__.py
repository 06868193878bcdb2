"""Robustness queries on networks (DESIGN "Queries on networks are problems like any other"):
an input box and an unsafe output region, answered ``unsat``/``sat``/``unknown`` by rigorous
bounds, an attack and exact solves (:func:`~smug_opt.robustness.decide.decide`), and the
verified explanations built from them (:func:`~smug_opt.robustness.explanation.robust_explanation`,
subset-minimal; :func:`~smug_opt.robustness.minimum.minimum_explanation`, minimum size with a
proven lower bound; :func:`~smug_opt.robustness.model_explanation.explain_robust` on any model)."""

from smug_opt.robustness.decide import ANSWERS, Verdict, decide
from smug_opt.robustness.explanation import RobustExplanation, robust_explanation
from smug_opt.robustness.minimum import MinimumExplanation, minimum_explanation
from smug_opt.robustness.model_explanation import RobustResult, explain_robust
from smug_opt.robustness.query import RobustnessQuery

__all__ = ["ANSWERS", "MinimumExplanation", "RobustExplanation", "RobustResult", "RobustnessQuery", "Verdict",
           "decide", "explain_robust", "minimum_explanation", "robust_explanation"]
