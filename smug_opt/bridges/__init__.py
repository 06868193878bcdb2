"""Rewrites a backend may ask for: strict rows to margins, ReLU to big-M, reals to integers."""

from smug_opt.bridges.integer import IntegerForm, to_integer
from smug_opt.bridges.intervals import relu_preactivation_bounds
from smug_opt.bridges.milp import MilpForm, strict_margin, to_milp

__all__ = ["IntegerForm", "MilpForm", "relu_preactivation_bounds", "strict_margin", "to_integer", "to_milp"]
