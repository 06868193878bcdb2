"""Answer a robustness query: ``unsat`` (no counterexample), ``sat`` (one, confirmed) or
``unknown`` (the time limit came first, or a solver's candidate was not confirmed).

In order: rigorous bounds refute the disjuncts they can (no solver: a proof in exact
terms, the bounds being outward-rounded); a PGD attack looks for a counterexample in the
others, then one attack per open disjunct; on a fully connected ReLU network (and, in a
``lean`` query of an explanation, on one whose max pooling reads ReLUs: rewritten by
:mod:`smug_opt.bounds.pool_relus`; ``verify``'s queries there keep their time for the
MILP, as before the rewrite: not measured on VeriVital's instances with it), branch and
bound with α/β-CROWN bounds (:mod:`smug_opt.robustness.bab`, rigorous too: ``"bab"``)
decides the disjuncts it can within :data:`BAB_SHARE` of the time left, each open disjunct
with an equal share of it (a counterexample in a later disjunct is not hidden behind a hard
earlier one); each disjunct still open is solved as a :class:`~smug_opt.ir.Problem` through
:func:`smug_opt.solve` (the encoding with α-CROWN's intervals; backends, races and exact
verification apply), again each with an equal share of the time left, and an
INFEASIBLE answer refutes it with that solve's ``proof``. A counterexample, whoever found
it, is confirmed before ``sat`` is said: the float64 forward pass of the flat network
puts its outputs in the unsafe region, and so does every ``reference`` given (the original
model: its float64 graph, onnxruntime on the file); from a solver it also passed the
solve's exact verification against the problem.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from smug_opt.backend_choice import DEFAULT_BACKEND, BackendChoice
from smug_opt.deadline import Deadline
from smug_opt.query_work import Work
from smug_opt.robustness.attack import attack, flat_gradient, unsafe_loss
from smug_opt.robustness.bab import ROOT_STEPS, Leaves, branch_and_bound
from smug_opt.robustness.query import RobustnessQuery
from smug_opt.threads import one_blas_thread, one_thread

__all__ = ["ANSWERS", "Verdict", "decide"]

ANSWERS = ("unsat", "sat", "unknown")
"""VNN-COMP's words (since 2022): property holds, violated, not decided."""

SHORT_RESTARTS = 64
SHORT_STEPS = 50
"""The second attack on all open disjuncts: random starts, short step schedules (on
``mnistfc`` 256x2 prop_9_0.05 the 16 long runs of the first all end at one corner with
loss 0.94; 64 runs of 50 steps reach the unsafe region in under a second, for 3 of 3
seeds). The attacks aimed at one disjunct each run the short schedule too: on the 15 sat
``mnistfc`` instances decided so far, none needed them, and with 200 steps they took a
fifth of a 256x4 instance's 300 s before branch and bound at load 10."""
BAB_SHARE = 0.5
"""The share of the time left after the attacks that branch and bound gets, split equally
between the open disjuncts; then, again this share of the time left, split equally, for the
searches their share cut (each continued from its open domains); the solver gets the rest,
again split equally, for the disjuncts still open. On ``mnistfc`` 256x4 prop_0_0.03 at load
12.8 (59 CPU s in 300 s), the first round left 8 of 9 disjuncts with 4-31 domains open each;
HiGHS then found nothing in 16-19 s each. On ``mnistfc`` 256x4 prop_5_0.03, disjunct 2, branch and bound left
2,112 domains open after 287 s; HiGHS on the encoding with α-CROWN's intervals proved it
infeasible in 53 s (load 9). Every instance branch and bound decided in the 2021 table
took under half its time."""
DEEP_LAYERS = 4
"""From this many ReLU layers, verify's branch and bound (not a lean query's) splits the
shallowest layer first and re-bounds every layer above each split per domain: on
``mnistfc`` 256x4 prop_5_0.03 disjunct 2, unsat in 49 domains (1.5 CPU s) against 50,803
domains open after 287 s by score alone; 256x6 prop_5_0.03 disjunct 0, unsat in 155
domains (10.1 CPU s) against open after 20 CPU s. On 256x2 it loses (prop_1_0.03 disjunct
8: open after 20.8 CPU s against unsat in 1.3 s); 3 layers not measured
(benchmarks/verify/README.md)."""
LEAN_RESTARTS = 4
LEAN_ROOT_STEPS = 0
LEAN_STEPS = 5
"""A lean query's attack runs and branch and bound's α steps on the root domain and on each
later domain: in an explanation's queries (few unstable ReLUs, mostly ``unsat``) splitting
at once and fewer runs cost a third of the full chain on ``mnist-10x2`` (see
benchmarks/robust/README.md)."""


Reference = Callable[[np.ndarray], np.ndarray]
"""Class scores ``(batch, n_out)`` of model inputs ``(batch, n_in)`` (flat), by some other
evaluation of the original model."""


@dataclass(frozen=True)
class Verdict:
    """The answer, the counterexample (model input, flat) and its outputs by each check for
    ``sat``, how an ``unsat`` was proven (``"exact"``: bounds or exact solver proofs
    only; ``"solver"``: some disjunct rests on a floating-point solver's word), and per
    disjunct what decided it (``"bounds"``, ``"infeasible"``, ``"attack"``, ``"bab"``,
    ``"solver"``, ``"open"``)."""

    answer: str
    seconds: float
    x: np.ndarray | None = None
    outputs: Mapping[str, list[float]] = field(default_factory=dict)
    proof: str | None = None
    decided_by: tuple[str, ...] = ()
    message: str = ""
    solves: tuple[dict[str, Any], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready record."""
        return {"answer": self.answer, "seconds": round(self.seconds, 3), "proof": self.proof,
                "decided_by": list(self.decided_by), "message": self.message,
                "x": None if self.x is None else self.x.tolist(), "outputs": dict(self.outputs),
                "solves": list(self.solves)}


def _confirm(query: RobustnessQuery, x: np.ndarray, references: Mapping[str, Reference]
             ) -> tuple[bool, dict[str, list[float]], str]:
    """Whether every evaluation puts ``x``'s outputs in the unsafe region."""
    outputs: dict[str, list[float]] = {}
    scores = query.net.forward(query.preprocess(x[None]))[-1][0]
    outputs["flat-float64"] = scores.tolist()
    for name, reference in references.items():
        outputs[name] = np.asarray(reference(x[None]), dtype=np.float64).reshape(-1).tolist()
    failed = [name for name, y in outputs.items() if not any(d.holds(np.array(y)) for d in query.disjuncts)]
    return not failed, outputs, ", ".join(failed)


def _excess(query: RobustnessQuery, k: int, scores: np.ndarray) -> float:
    """How far ``scores`` are from disjunct ``k`` (its worst row's excess)."""
    d = query.disjuncts[k]
    return float(np.max(d.matrix @ scores - d.rhs))


def _nudges(query: RobustnessQuery, k: int, x: np.ndarray) -> list[np.ndarray]:
    """``x`` moved by growing fractions of the box's width against the sign of the gradient
    of disjunct ``k``'s loss: a solver's counterexample sits on the decision boundary (the
    strict row met with margin ~1e-13), one small step crosses it."""
    disjunct = (query.disjuncts[k],)
    values = query.net.forward(query.preprocess(x[None]))
    _, g_scores = unsafe_loss(values[-1], disjunct)
    g_affine = flat_gradient(query.net, values, g_scores)
    g = query.preprocess.backward(g_affine, x.size)
    width = query.hi - query.lo
    return [np.clip(x - step * width * np.sign(g[0]), query.lo, query.hi) for step in (1e-6, 1e-4, 1e-2)]


def decide(query: RobustnessQuery, *, time_limit: float | None = 60.0,
           backend: str | BackendChoice = DEFAULT_BACKEND,
           references: Mapping[str, Reference] | None = None, attack_steps: int = 200,
           seed: int = 0, solve_options: Mapping[str, Any] | None = None, lean: bool = False,
           leaves: dict[int, Leaves] | None = None, work: Work | None = None) -> Verdict:
    """Answer ``query`` within ``time_limit`` seconds (see the module docstring).

    ``references`` evaluate the original model for the confirmation of a counterexample;
    ``solve_options`` go to :func:`smug_opt.solve` (threads, extras, memory_limit_mb, ...).
    ``lean``: for the many small queries of an explanation, whose batched attack has
    already looked for counterexamples: one short attack (:data:`LEAN_RESTARTS` runs) and
    no aimed ones, and branch and bound splits at once (:data:`LEAN_ROOT_STEPS`); branch and
    bound, then the solver, take each disjunct in turn with all the time left (through max
    pooling, :attr:`RobustnessQuery.pooled`, branch and bound only :data:`BAB_SHARE` of it:
    on a few free inputs its splits meet many empty subdomains that the MILP rules out at once).
    ``leaves``: for queries on the same network and unsafe region with other boxes (an
    explanation's), per disjunct the leaves of its last branch and bound proof: each search
    starts from them (:class:`~smug_opt.robustness.bab.Leaves`) and leaves its own.
    ``work``: branch and bound and the solver stop at its counts
    (:class:`~smug_opt.query_work.Work`) instead of at shares of the time:
    ``time_limit`` (None: none) then only ends the query as a whole.
    """
    from smug_opt.solving import solve

    references = dict(references or {})
    milp_extras = {} if work is None else work.solver_extras(backend)
    domains_left = None if work is None else work.domains
    start = time.monotonic()
    deadline = Deadline.after(time_limit)
    decided = ["open"] * len(query.disjuncts)

    def verdict(answer: str, **kw: Any) -> Verdict:
        return Verdict(answer, time.monotonic() - start, decided_by=tuple(decided), **kw)

    with one_blas_thread():
        for refuted in np.flatnonzero(query.refuted()).tolist():
            decided[refuted] = "bounds"
        open_ = [k for k, how in enumerate(decided) if how == "open"]
        if not open_:
            return verdict("unsat", proof="exact")
        aimed = tuple(query.disjuncts[k] for k in open_)
        found = attack(query.net, query.preprocess, query.lo, query.hi, aimed, steps=attack_steps, seed=seed,
                       restarts=LEAN_RESTARTS if lean else 16, deadline=deadline)
        if found.loss > 0 and not lean:  # many short runs: the long one's big steps settle in one corner
            short = attack(query.net, query.preprocess, query.lo, query.hi, aimed, steps=SHORT_STEPS,
                           restarts=SHORT_RESTARTS, seed=seed + 1 + len(query.disjuncts), deadline=deadline)
            found = min(found, short, key=lambda result: result.loss)
    if found.loss <= 0:
        ok, outputs, failed = _confirm(query, found.x, references)
        if ok:
            hit = next(k for k in open_ if query.disjuncts[k].holds(np.array(outputs["flat-float64"])))
            decided[hit] = "attack"
            return verdict("sat", x=found.x, outputs=outputs, proof="exact")
    closest = query.net.forward(query.preprocess(found.x[None]))[-1][0]
    open_.sort(key=lambda k: _excess(query, k, closest))  # the attack's nearest first
    with one_blas_thread():
        for k in ([] if lean else open_):  # one attack per disjunct, aimed at it alone
            if deadline.passed(0.5):
                break
            near = attack(query.net, query.preprocess, query.lo, query.hi, (query.disjuncts[k],),
                          steps=min(attack_steps, SHORT_STEPS), restarts=8, seed=seed + 1 + k)
            if near.loss <= 0:
                ok, outputs, _ = _confirm(query, near.x, references)
                if ok:
                    decided[k] = "attack"
                    return verdict("sat", x=near.x, outputs=outputs, proof="exact")
    bab_log: list[dict[str, Any]] = []
    with one_blas_thread(), one_thread():
        chain = query.chain_bounds(deadline) if lean or not query.pooled else None
        pending = [(k, None if leaves is None else leaves.get(k)) for k in open_] if chain is not None else []
        if work is not None and chain is not None:
            domains_left = work.domains_for(sum(chain.chain.widths))
        deep = chain is not None and not lean and len(chain.chain.widths) >= DEEP_LAYERS
        for round_ in range(1 if lean else 2):  # the second continues the searches cut by their share
            whole = work is not None or (lean and not query.pooled)  # counted work or every second left
            searching = deadline if whole else deadline.share(BAB_SHARE)
            cut: list[tuple[int, Leaves | None]] = []
            for position, (k, begin) in enumerate(pending):
                assert chain is not None  # nothing is pending without bounds
                if deadline.passed(0.5):
                    return verdict("unknown", message="time limit", solves=tuple(bab_log))
                d = query.disjuncts[k]
                share = searching if lean or work is not None else (
                    searching.share(1.0 / (len(pending) - position)))
                if domains_left is not None and domains_left <= 0:
                    break  # the work is spent: the solver, within its own count, takes the rest
                searched = branch_and_bound(chain, d.matrix, d.rhs, d.strict, share,
                                            root_steps=LEAN_ROOT_STEPS if lean else ROOT_STEPS,
                                            steps=LEAN_STEPS if lean else None, start=begin,
                                            work=domains_left, refine_layers=None if deep else 0,
                                            shallow_first=deep)
                if domains_left is not None:
                    domains_left -= searched.domains
                if leaves is not None and round_ == 0 and searched.leaves is not None:
                    leaves[k] = searched.leaves
                bab_log.append({"disjunct": k, "status": searched.status, "domains": searched.domains,
                                "seconds": round(searched.seconds, 3), "solver": "bab", "round": round_ + 1,
                                "message": searched.message, "unfinished": (
                                    None if searched.unfinished is None else searched.unfinished.value)})
                if searched.status == "unsat":
                    decided[k] = "bab"
                elif searched.status == "candidate" and searched.x is not None:
                    x = query.model_input(searched.x)
                    ok, outputs, _ = _confirm(query, x, references)
                    if not ok:
                        near = attack(query.net, query.preprocess, query.lo, query.hi, (d,),
                                      steps=attack_steps, restarts=2, seed=seed, start=x)
                        x = near.x
                        ok, outputs, _ = _confirm(query, x, references)
                    if ok:
                        decided[k] = "bab"
                        return verdict("sat", x=x, outputs=outputs, proof="exact", solves=tuple(bab_log))
                elif searched.open_leaves is not None:
                    cut.append((k, searched.open_leaves))
            pending = cut
    proofs: list[str] = []
    solves: list[dict[str, Any]] = list(bab_log)
    unsolved: list[str] = []
    left = [k for k in open_ if decided[k] == "open"]
    if work is not None and not work.milp_nodes and left:
        return verdict("unknown", message="work spent (no MILP in the budget)", solves=tuple(solves))
    for position, k in enumerate(left):
        if deadline.passed(0.5):
            return verdict("unknown", message="time limit", solves=tuple(solves))
        share = deadline if lean or work is not None else deadline.share(1.0 / (len(left) - position))
        options = dict(solve_options or {})
        options["extras"] = {**dict(options.get("extras") or {}), **milp_extras}
        result = solve(query.problem(k), backend, time_limit=share, start=None, **options)
        solves.append({"disjunct": k, "status": result.status.name, "proof": result.proof,
                       "seconds": round(result.times.total, 3), "solver": result.solver,
                       "message": result.message})
        if result.status.name == "INFEASIBLE":
            decided[k] = "infeasible"
            proofs.append(result.proof or "solver")
            continue
        if result.has_solution:
            x = query.model_input(query.affine_input(result.values()))
            ok, outputs, failed = _confirm(query, x, references)
            for nudged in ([] if ok else _nudges(query, k, x)):  # on the boundary: one small step in
                ok, outputs, failed = _confirm(query, nudged, references)
                if ok:
                    x = nudged
                    break
            if not ok:  # still not inside: a short attack from it looks
                near = attack(query.net, query.preprocess, query.lo, query.hi, (query.disjuncts[k],),
                              steps=attack_steps, restarts=2, seed=seed, start=x)
                if near.loss <= 0:
                    x = near.x
                    ok, outputs, failed = _confirm(query, x, references)
            if ok:
                decided[k] = "solver"
                return verdict("sat", x=x, outputs=outputs, proof="exact", solves=tuple(solves))
            unsolved.append(f"disjunct {k}: the solver's counterexample is not confirmed by {failed}")
            continue
        unsolved.append(f"disjunct {k}: {result.status.name} {result.message}".strip())
    if unsolved:  # a later disjunct may still have shown a counterexample: all were tried
        return verdict("unknown", solves=tuple(solves), message="; ".join(unsolved))
    return verdict("unsat", proof="exact" if all(p == "exact" for p in proofs) else "solver",
                   solves=tuple(solves))
