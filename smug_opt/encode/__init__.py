"""Problem builders: ``first_layer`` (SMUG's masked first layer) and ``full_network`` (the
whole-network stress case)."""

from smug_opt.encode.first_layer import build_problem, encode_first_layer
from smug_opt.encode.full_network import full_network, solution_mask

__all__ = ["build_problem", "encode_first_layer", "full_network", "solution_mask"]
