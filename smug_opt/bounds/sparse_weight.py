"""A sparse weight matrix for :class:`~smug_opt.bounds.relu_chain.ReluChain`: the layers of
a CNN (convolutions, pooling tournaments) are far too large to hold dense, and a scipy CSR
product is ~3x faster than torch's sparse CSR one on one thread. :func:`matmul` is
``lam @ W`` for a dense or a :class:`SparseWeight` ``W``, differentiable in ``lam``."""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

__all__ = ["SparseWeight", "matmul"]


class SparseWeight:
    """``(n_out, n_in)`` in CSR, with its transpose; the parts of the torch tensor interface
    the chain uses (``shape``, ``numel``, ``abs``, ``to``, ``T``, ``numpy``)."""

    def __init__(self, matrix: sp.spmatrix, transpose: sp.csr_matrix | None = None) -> None:
        self.matrix = sp.csr_matrix(matrix)
        self.transpose = self.matrix.T.tocsr() if transpose is None else transpose

    @property
    def shape(self) -> tuple[int, int]:
        return self.matrix.shape

    @property
    def dtype(self) -> torch.dtype:
        return torch.float32 if self.matrix.dtype == np.float32 else torch.float64

    def numel(self) -> int:
        return int(self.shape[0]) * int(self.shape[1])

    def abs(self) -> SparseWeight:
        return SparseWeight(abs(self.matrix), abs(self.transpose))

    def to(self, dtype: torch.dtype) -> SparseWeight:
        np_type = np.float32 if dtype == torch.float32 else np.float64
        return SparseWeight(self.matrix.astype(np_type), self.transpose.astype(np_type))

    @property
    def T(self) -> SparseWeight:
        return SparseWeight(self.transpose, self.matrix)

    def numpy(self) -> sp.csr_matrix:
        """The scipy matrix (products with numpy arrays work as with a dense one)."""
        return self.matrix


class _RightProduct(torch.autograd.Function):
    """``lam @ W`` over the last dimension of ``lam``; the gradient ``g @ W.T``."""

    @staticmethod
    def forward(ctx: Any, lam: torch.Tensor, weight: SparseWeight) -> torch.Tensor:  # type: ignore[override]
        ctx.weight = weight
        return _product(lam, weight.transpose)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:  # type: ignore[override]
        return _product(grad, ctx.weight.matrix), None


def _product(lam: torch.Tensor, left: sp.csr_matrix) -> torch.Tensor:
    """``(left @ lam_2d.T).T`` reshaped back: ``lam @ left.T``."""
    flat = lam.detach().reshape(-1, lam.shape[-1]).numpy()
    out = np.ascontiguousarray((left @ flat.T).T, dtype=flat.dtype)
    return torch.from_numpy(out).reshape(*lam.shape[:-1], left.shape[0])


def matmul(lam: torch.Tensor, weight: torch.Tensor | SparseWeight) -> torch.Tensor:
    """``lam @ weight`` (``lam`` ``(..., n_out)``, ``weight`` ``(n_out, n_in)``)."""
    if isinstance(weight, SparseWeight):
        return _RightProduct.apply(lam, weight)
    return lam @ weight
