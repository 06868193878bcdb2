"""A robustness query's budget counted in work, not seconds: the same query gets the same
answer however loaded the machine is (a wall-clock limit per query made an explanation's
set depend on the load: 353 or 402 px on one ``mnistfc`` 256x2 image).

Every other step of a lean query already does a fixed amount of work (the attack's steps,
α-CROWN's steps on the intervals); the two open-ended ones get a count here: the branch and
bound domains bounded (over all the query's disjuncts) and the MILP's branch-and-bound
nodes per disjunct (HiGHS's ``mip_max_nodes``). The node count does not bound the MILP's
root (presolve, the root LP and its cuts): on the VeriVital max-pool CNN one chunk query's
MILP took 79 CPU s at 25 nodes; there, ``milp_nodes=0`` leaves the MILP out. A wall-clock
deadline may still end the query (an explanation's overall time limit); only then does the
answer depend on the clock.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from smug_opt.backend_choice import BackendChoice

__all__ = ["NODE_LIMIT_OPTION", "Work"]

NODE_LIMIT_OPTION = {"highs": "mip_max_nodes"}
"""Per backend, its setting that limits the MILP's branch-and-bound nodes."""


@dataclass(frozen=True)
class Work:
    """``domains``: branch and bound domains a query bounds at most (each bounding of one
    domain counts one); ``milp_nodes``: nodes of each disjunct's MILP at most (0: no MILP)."""

    domains: int
    milp_nodes: int

    def __post_init__(self) -> None:
        for name, least in (("domains", 1), ("milp_nodes", 0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ValueError(f"a work budget's {name} must be an integer >= {least}, got {value!r}")

    def solver_extras(self, backend: str | BackendChoice) -> dict[str, Any]:
        """The solve's ``extras`` that hold the MILP to :attr:`milp_nodes` on ``backend``
        (none without a MILP)."""
        if not self.milp_nodes:
            return {}
        choice = BackendChoice.parse(backend, check=False)
        option = None if choice.is_race else NODE_LIMIT_OPTION.get(choice.name)
        if option is None:
            raise ValueError(f"a work budget needs a backend with a node limit "
                             f"({', '.join(NODE_LIMIT_OPTION)}); {backend!s} has none: "
                             "give a time per query instead")
        return {option: self.milp_nodes}
