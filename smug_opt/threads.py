"""One thread for many small products: numpy's BLAS and torch each run their own thread
pool, and on a loaded 2-core machine two threads made the bounds' and the attack's small
products 9-10x slower than one."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

__all__ = ["one_blas_thread", "one_thread"]


@contextlib.contextmanager
def one_blas_thread() -> Iterator[None]:
    """numpy's BLAS on one thread while inside (with threadpoolctl, when installed): the
    bounds' and the attack's small products ran 9x slower with two BLAS threads on a loaded
    2-core machine."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        yield
        return
    with threadpool_limits(1):
        yield


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """torch on one thread while inside (restored after): α/β-CROWN's many small products
    ran 10x slower on two threads of a loaded 2-core machine."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)
