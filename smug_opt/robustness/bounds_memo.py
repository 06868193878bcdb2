"""The bounds an explanation's queries found, kept so that the next query recomputes only
what its box changes: consecutive queries free a few values more or fewer (one value near
the end), and on a convolutional network a value reaches few neurons
(:func:`~smug_opt.bounds.cone.reached`); the others keep the intervals found before
(``propagate(..., reuse=...)``). The intervals are the ones a computation from scratch
gives: the reused ones were found over a box that agrees with the new one on every input
they depend on."""

from __future__ import annotations

from collections.abc import Callable

from smug_opt.bounds.domain import Box
from smug_opt.bounds.propagation import FlatBounds
from smug_opt.network.flat import FlatNetwork

__all__ = ["BoundsMemo"]

KEPT = 8
"""Bounds kept per network and kind (the last ones found)."""


class BoundsMemo:
    """The last :data:`KEPT` bounds found per network and kind (``"crown"``, a rewrite's ...);
    :meth:`find` starts from the one whose box differs from the new one in the fewest inputs."""

    def __init__(self) -> None:
        self._found: dict[str, list[FlatBounds]] = {}
        self.reused = 0
        """How many bounds were found from an earlier one."""

    def find(self, kind: str, network: FlatNetwork, box: Box,
             compute: Callable[[FlatBounds | None], FlatBounds]) -> FlatBounds:
        """``compute(reuse)``'s bounds of ``network`` over ``box`` (``reuse``: the nearest
        earlier bounds of this ``kind`` and network, None when there are none), kept."""
        earlier = [fb for fb in self._found.get(kind, []) if fb.network is network]
        nearest = min(earlier, key=lambda fb: _differing(fb.domain, box), default=None)
        found = compute(nearest)
        self.reused += nearest is not None
        self._found[kind] = [*earlier, found][-KEPT:]
        return found


def _differing(domain: object, box: Box) -> int:
    """How many inputs a box ``domain`` and ``box`` differ in."""
    assert isinstance(domain, Box)  # only boxes are kept
    return int(((domain.lo != box.lo) | (domain.hi != box.hi)).sum())
