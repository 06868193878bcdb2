"""Rigorous branch-and-bound over float LPs: exact proofs of optimality and infeasibility
for problems without ReLUs (:mod:`smug_opt.safe_search.search`), over strengthening's
parts where it applies (:mod:`smug_opt.safe_search.prove`)."""

from smug_opt.safe_search.parallel import search
from smug_opt.safe_search.search import SearchOutcome, Settings

__all__ = ["SearchOutcome", "Settings", "search"]
