"""Problem builders: ``full_network`` (the stress case) and ``first_layer`` (SMUG)."""

from smug_opt.encode.full_network import full_network, verify_mask_in_model

__all__ = ["full_network", "verify_mask_in_model"]
