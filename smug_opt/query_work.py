"""A robustness query's budget counted in work, not seconds: the same query gets the same
answer however loaded the machine is (a wall-clock limit per query made an explanation's
set depend on the load: 353 or 402 px on one ``mnistfc`` 256x2 image).

Every other step of a lean query already does a fixed amount of work (the attack's steps,
α-CROWN's steps on the intervals); the two open-ended ones get a count here: the branch and
bound domains bounded (over all the query's disjuncts; optionally also capped by domains
times the network's ReLUs, since a wide network's domain costs more) and the MILP's
branch-and-bound nodes per disjunct (HiGHS's ``mip_max_nodes``, SCIP's ``limits/nodes``).
The node count does not bound the MILP's root (presolve, the root LP and its cuts): on the
VeriVital max-pool CNN one chunk query's MILP took 79 CPU s at 25 nodes; there,
``milp_nodes=0`` leaves the MILP out. A wall-clock deadline may still end the query (an
explanation's overall time limit); only then does the answer depend on the clock.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from smug_opt.backend_choice import BackendChoice

__all__ = ["DEFAULT_QUERY_WORK", "NODE_LIMIT_OPTION", "Work", "parse_work"]

NODE_LIMIT_OPTION = {"highs": "mip_max_nodes", "scip": "limits/nodes"}
"""Per backend, its setting that limits the MILP's branch-and-bound nodes."""


@dataclass(frozen=True)
class Work:
    """``domains``: branch and bound domains a query bounds at most (each bounding of one
    domain counts one); ``milp_nodes``: nodes of each disjunct's MILP at most (0: no MILP);
    ``relu_domains`` (None: no such cap): domains times the ReLUs of the network branch and
    bound works on, at most: a domain of a wide network costs more time and memory (~0.1 CPU s
    and ~1 MB over the VeriVital rewrite's 57,888 ReLUs, ~2 ms over 256x2's 512)."""

    domains: int
    milp_nodes: int
    relu_domains: int | None = None

    def __post_init__(self) -> None:
        for name, least in (("domains", 1), ("milp_nodes", 0), ("relu_domains", 1)):
            value = getattr(self, name)
            if name == "relu_domains" and value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ValueError(f"a work budget's {name} must be an integer >= {least}, got {value!r}")

    def domains_for(self, relus: int) -> int:
        """The domains a query may bound on a network of ``relus`` ReLUs."""
        if self.relu_domains is None:
            return self.domains
        return max(1, min(self.domains, self.relu_domains // max(relus, 1)))

    def share(self, parts: int) -> Work:
        """This budget divided by ``parts`` (at least one domain; no MILP stays no MILP)."""
        relu = None if self.relu_domains is None else max(1, self.relu_domains // parts)
        return Work(max(1, self.domains // parts), -(-self.milp_nodes // parts), relu)

    def describe(self) -> str:
        """For progress lines: ``2048 domains (1048576 domains x ReLUs) and 500 MILP nodes per
        query``."""
        cap = "" if self.relu_domains is None else f" ({self.relu_domains} domains x ReLUs)"
        return f"{self.domains} domains{cap} and {self.milp_nodes} MILP nodes per query"

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


DEFAULT_QUERY_WORK = Work(domains=2048, milp_nodes=500, relu_domains=2**20)
"""The command line's budget per query (``--query-work``): see benchmarks/robust/README.md."""


def parse_work(text: str) -> Work:
    """``"DOMAINS,NODES[,RELU_DOMAINS]"`` (as the command line gives it) as a :class:`Work`."""
    parts = text.split(",")
    if len(parts) not in (2, 3) or not all(p.strip().isdigit() for p in parts):
        raise ValueError(f"a work budget is DOMAINS,NODES[,RELU_DOMAINS] (integers, e.g. 2048,500), "
                         f"got {text!r}")
    return Work(*(int(p) for p in parts))
