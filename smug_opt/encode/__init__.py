"""Problem builders: ``first_layer`` (SMUG's masked first layer) and ``full_network`` (the
whole-network stress case)."""

from smug_opt.encode.first_layer import build_problem, cell_grid, encode_first_layer
from smug_opt.encode.full_network import full_network, verify_mask_in_model

__all__ = ["build_problem", "cell_grid", "encode_first_layer", "full_network", "verify_mask_in_model"]
