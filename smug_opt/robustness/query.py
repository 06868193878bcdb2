"""The robustness query as a problem: inputs in a box, outputs in an unsafe region.

A :class:`RobustnessQuery` is a network in its flat form (:class:`~smug_opt.network.flat.
FlatNetwork` and the elementwise :class:`~smug_opt.network.flat.Preprocess` in front of
it), a box on the model's input and an unsafe region of the outputs (a disjunction of
:class:`~smug_opt.vnnlib.Conjunct`). :meth:`RobustnessQuery.problem` gives, per disjunct, a
:class:`~smug_opt.ir.Problem` whose feasible solutions are exactly the counterexamples
in that disjunct: one continuous variable per affine input (the box mapped through the
preprocessing, outward-rounded unless the preprocessing is the identity), the network
encoded by :func:`smug_opt.encode.network_milp.encode_layers` with the rigorous bounds of
:mod:`smug_opt.bounds` (α-CROWN's on a fully connected ReLU network), and the disjunct's
rows over the class scores. The network part is built once and shared by every disjunct's problem.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np
import scipy.sparse as sp

from smug_opt.bounds.alpha_crown import tighten
from smug_opt.bounds.alpha_flat import alpha_lower, supports
from smug_opt.bounds.domain import Box
from smug_opt.bounds.pool_relus import pools_as_relus
from smug_opt.bounds.propagation import FlatBounds, propagate
from smug_opt.bounds.relu_chain import ChainBounds, ReluChain
from smug_opt.bounds.rounding import ACCUMULATED, up
from smug_opt.deadline import Deadline
from smug_opt.encode.layer_bounds import LayerBounds
from smug_opt.encode.network_milp import Expression, NetworkEncoding, encode_layers
from smug_opt.exact import dot_error_bound
from smug_opt.ir import Problem, ProblemBuilder
from smug_opt.network.flat import FlatNetwork, Preprocess
from smug_opt.robustness.bounds_memo import BoundsMemo
from smug_opt.vnnlib import Conjunct, VnnlibSpec

__all__ = ["RobustnessQuery"]

_CHAINS: weakref.WeakKeyDictionary[FlatNetwork, tuple[FlatNetwork, ReluChain | None]] = (
    weakref.WeakKeyDictionary())


def _chain_of(net: FlatNetwork) -> tuple[FlatNetwork, ReluChain | None]:
    """The network branch and bound works on (``net`` or its max pooling rewritten as
    ReLUs) and its chain, None when neither is one; once per network (an explanation asks
    hundreds of queries of one)."""
    if net not in _CHAINS:
        chain = ReluChain.from_flat(net)
        rewrite = pools_as_relus(net) if chain is None else None
        if rewrite is not None:
            chain = ReluChain.from_flat(rewrite.net)
        _CHAINS[net] = (net, chain) if rewrite is None or chain is None else (rewrite.net, chain)
    return _CHAINS[net]


@dataclass(frozen=True, eq=False)
class RobustnessQuery:
    """Is there an input ``x`` with ``lo <= x <= hi`` (model input units, flat in the
    model's layout) whose class scores lie in one of ``disjuncts``? ``memo``: bounds found
    by other queries on the same network (an explanation's), to recompute only what this
    box changes."""

    net: FlatNetwork
    preprocess: Preprocess
    lo: np.ndarray
    hi: np.ndarray
    disjuncts: tuple[Conjunct, ...]
    name: str = "query"
    memo: BoundsMemo | None = None
    closure: tuple[np.ndarray, np.ndarray] | None = None
    """The box's closure over the reals (None: ``lo``..``hi``; wider where a VNN-LIB bound is
    strict): bounds and problems cover it, counterexamples stay in ``lo``..``hi``."""
    alpha_steps: int = 0
    """With steps, :meth:`refuted` tries α-CROWN (:func:`~smug_opt.bounds.alpha_flat.alpha_lower`)
    on the disjuncts CROWN leaves open, on the networks it takes (chains of linear layers, ReLUs
    and max pooling)."""

    def __post_init__(self) -> None:
        lo = np.asarray(self.lo, dtype=np.float64).reshape(-1)
        hi = np.asarray(self.hi, dtype=np.float64).reshape(-1)
        if lo.shape != hi.shape:
            raise ValueError(f"the box has {lo.size} lower and {hi.size} upper bounds")
        if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))) or np.any(lo > hi):
            raise ValueError("the input box needs finite bounds with lo <= hi")
        needed = int(self.preprocess.index.max()) + 1 if self.preprocess.index.size else 0
        if lo.size < needed:
            raise ValueError(f"the box has {lo.size} inputs but the model reads {needed}")
        if not self.disjuncts:
            raise ValueError("the unsafe region has no disjunct")
        for d in self.disjuncts:
            if d.matrix.shape[1] != self.net.num_outputs:
                raise ValueError(f"the property constrains {d.matrix.shape[1]} outputs but the "
                                 f"network has {self.net.num_outputs}")
        object.__setattr__(self, "lo", lo)
        object.__setattr__(self, "hi", hi)
        if self.closure is not None:
            closed_lo, closed_hi = (np.asarray(a, dtype=np.float64).reshape(-1) for a in self.closure)
            if closed_lo.shape != lo.shape or closed_hi.shape != hi.shape \
                    or np.any(closed_lo > lo) or np.any(closed_hi < hi):
                raise ValueError("the box's closure must have its shape and contain it")
            object.__setattr__(self, "closure", (closed_lo, closed_hi))

    @classmethod
    def from_spec(cls, net: FlatNetwork, preprocess: Preprocess, spec: VnnlibSpec,
                  name: str = "query") -> RobustnessQuery:
        """The query a VNN-LIB property asks about ``net``."""
        return cls(net, preprocess, spec.lo, spec.hi, spec.disjuncts, name, closure=spec.closure)

    # ------------------------------------------------------------------ the input box
    @property
    def exact_box(self) -> bool:
        """Whether the preprocessing is the identity, so the problem's box is the query's."""
        pre = self.preprocess
        return bool(np.all(pre.scale == 1.0) and np.all(pre.shift == 0.0))

    @cached_property
    def affine_box(self) -> Box:
        """The box of the affine inputs: the image of the input box (of its closure, where
        given), rounded outward when the preprocessing is not the identity (so it contains
        every true image)."""
        pre = self.preprocess
        lo, hi = self.closure or (self.lo, self.hi)
        a, b = pre(lo[None])[0], pre(hi[None])[0]
        lo, hi = np.minimum(a, b), np.maximum(a, b)
        if not self.exact_box:
            for _ in range(2):  # two ulps: the product and the sum were each rounded once
                lo, hi = np.nextafter(lo, -np.inf), np.nextafter(hi, np.inf)
        return Box(lo, hi)

    def model_input(self, xa: np.ndarray) -> np.ndarray:
        """A model input (flat) whose affine input is ``xa`` (up to rounding when the
        preprocessing is not the identity), inside the box; inputs the model does not
        read take the box's centre."""
        pre = self.preprocess
        x = 0.5 * (self.lo + self.hi)
        x[pre.index] = (np.asarray(xa, dtype=np.float64) - pre.shift) / pre.scale
        return np.clip(x, self.lo, self.hi)

    # ---------------------------------------------------------------- bounds, problems
    @cached_property
    def bounds(self) -> FlatBounds:
        """Rigorous bounds on every layer over the affine box (CROWN)."""
        return self._propagate("crown", self.net, {})

    def _propagate(self, kind: str, net: FlatNetwork, options: dict) -> FlatBounds:
        """CROWN's bounds on ``net`` over the affine box, from the memo's nearest (``kind``) if any."""
        box = self.affine_box
        if self.memo is None:
            return propagate(net, box, method="crown", **options)
        return self.memo.find(kind, net, box, lambda reuse: propagate(net, box, method="crown", reuse=reuse,
                                                                      **options))

    def chain_bounds(self, deadline: Deadline | None = None) -> ChainBounds | None:
        """For a chain of linear layers and ReLUs (:class:`~smug_opt.bounds.relu_chain.ReluChain`),
        directly or once its max pooling is rewritten as ReLUs
        (:func:`~smug_opt.bounds.pool_relus.pools_as_relus`): its ReLU inputs' intervals
        over the affine box, CROWN's tightened by α-CROWN (until ``deadline``), ready for
        :func:`~smug_opt.robustness.bab.branch_and_bound`; None for any other network.
        Computed once per query."""
        if "_chain_bounds" not in self.__dict__:
            found = None
            net, chain = _chain_of(self.net)
            if chain is not None:
                box, relus = self.affine_box, range(len(chain.widths))
                if net is self.net:
                    fb = self.bounds
                else:  # the rewrite's: this query's on the layers it shares, CROWN (sparse rows) on
                    rewrite = pools_as_relus(self.net)  # the tournaments (whose passed values are >= 0)
                    assert rewrite is not None
                    fb = self._propagate("pool rewrite", net, {
                        "sparse_rows": True, "settled": frozenset(rewrite.same),
                        "prior": rewrite.prior_with(self.bounds.lo, self.bounds.hi)})
                found = tighten(ChainBounds.of(chain, box.lo, box.hi, [fb.lo[2 * i + 1] for i in relus],
                                               [fb.hi[2 * i + 1] for i in relus]), deadline=deadline)
            self.__dict__["_chain_bounds"] = found
        return self.__dict__["_chain_bounds"]

    @property
    def pooled(self) -> bool:
        """Whether :meth:`chain_bounds` is over max pooling rewritten as ReLUs."""
        return _chain_of(self.net)[0] is not self.net

    def refuted(self) -> np.ndarray:
        """Per disjunct, whether the bounds alone prove that no input reaches it (every
        disjunct's rows bounded in one back-substitution)."""
        rows = np.vstack([d.matrix for d in self.disjuncts])
        rhs = np.concatenate([d.rhs for d in self.disjuncts])
        low, _ = self.bounds.linear(rows, -rhs)
        strict = np.concatenate([d.strict for d in self.disjuncts])
        ends = np.cumsum([d.matrix.shape[0] for d in self.disjuncts])[:-1]
        owner = np.repeat(np.arange(len(self.disjuncts)), [d.matrix.shape[0] for d in self.disjuncts])

        def refuted_by(low: np.ndarray) -> np.ndarray:
            row_refuted = np.where(strict, low >= 0, low > 0)
            return np.array([bool(np.any(part)) for part in np.split(row_refuted, ends)])

        found = refuted_by(low)
        if self.alpha_steps and not found.all() and supports(self.bounds):
            open_rows = ~found[owner]
            low[open_rows] = alpha_lower(self.bounds, rows[open_rows], -rhs[open_rows],
                                         steps=self.alpha_steps, stop_above=np.zeros(int(open_rows.sum())))
            found = refuted_by(low)
        return found

    def encoding_bounds(self) -> FlatBounds:
        """The intervals the problems' encoding declares: :attr:`bounds`, on a fully connected
        ReLU network with the ReLU layers' replaced by :meth:`chain_bounds`' α-CROWN intervals
        (which start from them and only shrink: fewer unstable ReLUs and smaller big-Ms; on
        ``mnistfc`` 256x4 prop_5_0.03, HiGHS proves disjunct 2 infeasible in 53 s with them
        and not in 120 s with CROWN's)."""
        fb, chain = self.bounds, self.chain_bounds()
        if chain is None or self.pooled:  # a rewrite's layers are others
            return fb
        lo, hi = list(fb.lo), list(fb.hi)
        for i, (low, high) in enumerate(zip(chain.lo, chain.hi, strict=True)):
            lo[2 * i + 1], hi[2 * i + 1] = low.numpy(), high.numpy()
            lo[2 * i + 2] = np.maximum(lo[2 * i + 1], 0.0)  # the ReLU's output
            hi[2 * i + 2] = np.maximum(hi[2 * i + 1], 0.0)
        return replace(fb, lo=tuple(lo), hi=tuple(hi), method=f"{fb.method}+alpha-crown")

    @cached_property
    def _encoding(self) -> tuple[Problem, NetworkEncoding, np.ndarray]:
        box = self.affine_box
        builder = ProblemBuilder(metadata={"encoding": "robustness", "query": self.name,
                                           "exact_box": self.exact_box})
        inputs = builder.add_continuous(box.size, box.lo, box.hi)
        fb = self.encoding_bounds()
        given = {k: (fb.lo[k], fb.hi[k]) for k in range(1, len(fb.lo))}
        layer_bounds = LayerBounds("crown", lo={k: v[0] for k, v in given.items()},
                                   hi={k: v[1] for k, v in given.items()},
                                   global_lo={k: v[0] for k, v in given.items()},
                                   global_hi={k: v[1] for k, v in given.items()}, source="crown")
        identity = Expression(sp.identity(box.size, format="csr"), np.zeros(box.size))
        encoding = encode_layers(builder, self.net, identity, box.lo, box.hi, layer_bounds)
        return builder.build(), encoding, inputs

    def problem(self, k: int) -> Problem:
        """The problem whose feasible solutions include every counterexample in disjunct
        ``k`` (objective 0: any solution answers the query).

        The disjunct's rows over the class scores become rows over the problem's variables
        through float64 products, so unless each row reads one score with coefficient ±1
        (then exact) they are relaxed by a rigorous bound on that rounding (right side raised
        by it): every counterexample stays feasible, and a solution is a counterexample only
        once a forward pass confirms it. Relaxed rows are strict, which is still implied by
        every counterexample and makes the solve's margin levels push solutions off the
        boundary, where float64 forward passes can confirm them."""
        base, encoding, _ = self._encoding
        d = self.disjuncts[k]
        scores = encoding.scores
        coef = scores.widened(base.num_vars)
        rows = sp.csr_matrix(d.matrix) @ coef
        rhs = d.rhs - d.matrix @ scores.const
        single = np.count_nonzero(d.matrix, axis=1) == 1
        exact = bool(np.all(single & (np.abs(d.matrix).max(axis=1) == 1.0))) and scores.deviation is None
        if exact:
            senses = np.where(d.strict, "<", "<=").tolist()
        else:
            reach = np.maximum(np.abs(base.lb), np.abs(base.ub))
            magnitude = np.abs(d.matrix) @ (abs(coef) @ reach + np.abs(scores.const)) + np.abs(d.rhs)
            terms = np.count_nonzero(d.matrix, axis=1) + 1
            rhs = rhs + 2.0 * dot_error_bound(terms, magnitude)  # D's and rhs's rounding, outward
            if scores.deviation is not None:  # the problem's scores lie within it of the network's
                rhs = up(rhs + np.abs(d.matrix) @ scores.deviation * ACCUMULATED)
            senses = "<"
        return base.with_constraints(rows, senses, rhs).with_metadata(disjunct=k, rows_exact=exact)

    def affine_input(self, solution: np.ndarray) -> np.ndarray:
        """The affine inputs in a solution of :meth:`problem`."""
        return np.asarray(solution)[self._encoding[2]]
