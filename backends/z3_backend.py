"""z3's ``Optimize`` (SMT with optimisation) in three encodings: exact, pseudo-Boolean, paper.

Kept as one module because the three encodings share one writer (``_Writer``: variables,
rows, objective, the model's reading) and the answer's reading; split, each part would
import the others' internals."""

from __future__ import annotations

import contextlib
import ctypes
import importlib.metadata
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np

from smug_opt.backend import (
    Backend,
    Capabilities,
    IncumbentCallback,
    RawResult,
    SolveOptions,
    Status,
)
from smug_opt.bridges.integer import to_integer
from smug_opt.ir import Problem, Sense

__all__ = ["AUTO_EXACT_BINARIES", "ENCODINGS", "Z3Backend", "choose_encoding"]

ENCODINGS = ("auto", "exact", "pb", "paper")

PB_BITS = 31
"""z3's ``PbGe``/``PbLe`` take C ``int`` coefficients and bounds: rows are scaled so that
``Σ|c_j| < 2**31`` (see :func:`~smug_opt.bridges.integer.to_integer`)."""

AUTO_EXACT_BINARIES = 64
"""``"auto"`` writes binary-only problems with at most this many variables exactly: small
problems are where exact ties matter and cost little (the pb scaling resolves 31 bits and
needs no-good rounds on ties like 0.1 + 0.2 > 0.3)."""

_LIMIT_REASONS = ("timeout", "canceled", "resource", "interrupted")

_EXACT_DEFAULTS = {"maxsat_engine": "wmax"}
"""``wmax`` for the exact encodings: z3's default MaxSAT engine (maxres) does not finish in 8 s
on 10-20-input ReLU nets and 30-170-cell first layers in exact rationals that ``wmax`` solves
in 0.03-2 s; the pb encoding keeps maxres, the faster engine there."""


@dataclass(frozen=True)
class _Lowered:
    """A z3 ``Optimize`` ready to run, with how to read a model back."""

    encoding: str
    opt: Any = None  # None: this level has no model (``skip`` says why)
    read: Callable[[Any], np.ndarray] | None = None  # z3 model -> problem values
    bound: Callable[[bool], float | None] | None = None  # proven lower bound so far (given: a model is held)
    skip: str = ""


class Z3Backend(Backend):
    """z3 ``Optimize``; ``options.extras["encoding"]`` selects how the problem is written.

    * ``"exact"``: Bool per binary (terms ``If(b, a, 0)``), Real per continuous variable,
      exact rationals ``Fraction(float)``, native strict inequalities, ReLU as
      ``If(z > 0, z, 0)``; an objective on binaries only becomes weighted soft
      constraints ``Not(b)`` (MaxSAT), any other ``minimize``. Exact at level 0.
    * ``"pb"`` (binary-only problems): Bool variables, ``PbGe``/``PbLe`` over the rows of
      :func:`~smug_opt.bridges.integer.to_integer` scaled to 31-bit integers, exact soft
      constraints for the objective. Levels as CP-SAT: 0 outward (a relaxation), 1-3 inward.
    * ``"paper"``: the reference code's encoding: an ``Int`` in {0, 1} per binary, terms
      ``ToReal(M)·a`` (exact rationals here), strict ``>`` as is, ``minimize(Sum)``, If-ReLU.
    * ``"auto"`` (default): ``"pb"`` for binary-only problems with more than 64 variables
      (measured 2-7x faster than exact where both prove the optimum), else ``"exact"``.
      So ``capabilities.exact`` holds for ReLU and small problems; a large binary-only
      problem is solved scaled and verified, like CP-SAT, unless ``"exact"`` is asked for.

    ``levels`` is 4 for the pb encoding; the exact and paper encodings solve the problem
    itself at level 0, so their levels 1-3 return NO_SOLUTION at once (re-solving the same
    exact model could only repeat the rejected answer). The other declared ``options`` are
    passed to ``Optimize.set`` (e.g. ``maxsat_engine``). z3 may overrun its ``timeout``: the
    core's hard kill is the real limit, and improving models are streamed as incumbents.
    """

    name: ClassVar[str] = "z3"
    description: ClassVar[str] = "z3 Optimize: exact rationals and strict inequalities, or pseudo-Boolean"
    requires: ClassVar[tuple[str, ...]] = ("z3",)
    pip_extra: ClassVar[str] = "z3"
    capabilities: ClassVar[Capabilities] = Capabilities(strict_inequalities=True, relu=True,
                                                        incumbents=True, exact=True)
    exact_extras: ClassVar[Mapping[str, Any]] = MappingProxyType({"encoding": "exact"})
    levels: ClassVar[int] = 4
    options: ClassVar[Mapping[str, str]] = MappingProxyType({
        "encoding": "'auto' (default), 'exact', 'pb' or 'paper'",
        **{name: "z3 Optimize parameter" for name in (
            "maxsat_engine", "optsmt_engine", "priority", "enable_sat", "enable_sls", "enable_lns",
            "enable_core_rotate", "elim_01", "rlimit", "pb.compile_equality", "maxres.hill_climb",
            "maxres.wmax", "maxres.max_core_size", "maxres.max_correction_set_size", "core.minimize")},
    })

    @classmethod
    def solver_version(cls) -> str:
        return f"z3 {importlib.metadata.version('z3-solver')}"

    def lower(self, problem: Problem, options: SolveOptions, level: int) -> _Lowered:
        import z3

        encoding = choose_encoding(problem, options.extras.get("encoding", "auto"))
        if encoding != "pb" and level > 0:
            return _Lowered(encoding, skip=f"the {encoding} encoding is exact: it has no level {level}")
        ctx = z3.Context()
        opt = z3.Optimize(ctx=ctx)
        writer = _Writer(z3, ctx, opt, problem)
        if encoding == "pb":
            writer.pb_rows(level)
        else:
            writer.declare(ints=encoding == "paper")
            writer.rows()
            writer.relus()
        bound = writer.soft_objective() if encoding != "paper" else None
        if bound is None:
            bound = writer.minimize()
        return _Lowered(encoding, opt, writer.read, bound)

    def optimize(self, model: _Lowered, problem: Problem, options: SolveOptions,
                 on_incumbent: IncumbentCallback) -> RawResult:
        import z3

        if model.opt is None:
            return RawResult(Status.NO_SOLUTION, solver_status="skipped", message=model.skip)
        assert model.read is not None and model.bound is not None
        opt, read = model.opt, model.read
        z3.set_param("verbose", 1 if options.verbose else 0)
        if options.time_limit is not None:
            opt.set("timeout", max(1, math.ceil(options.time_limit * 1000)))
        opt.set("random_seed", int(options.seed))
        settings = {**(_EXACT_DEFAULTS if model.encoding == "exact" else {}), **options.extras}
        for key, value in settings.items():
            if key == "encoding":
                continue
            try:
                opt.set(str(key), value)
            except z3.Z3Exception as exc:
                raise ValueError(f"z3 Optimize rejected extras[{key!r}] = {value!r}: {exc}") from None

        best: list[np.ndarray] = []

        def improving(m: Any) -> None:
            try:
                x = read(m)
            except z3.Z3Exception:  # a model offered as the solve is interrupted: unreadable
                return
            best[:] = [x]
            on_incumbent(x, float(problem.objective @ x))

        opt.set_on_model(improving)
        start = time.monotonic()
        try:
            result, reason = opt.check(), ""
        except z3.Z3Exception as exc:  # some versions raise "canceled" on a timeout
            result, reason = z3.unknown, str(exc)
        finally:
            _forget_on_model(z3, opt)
        elapsed = time.monotonic() - start
        if result == z3.unsat:  # never ask for a model here
            return RawResult(Status.INFEASIBLE, solver_status="unsat")
        x = best[0] if best and result != z3.sat else None
        if x is None:
            with contextlib.suppress(z3.Z3Exception):  # no model after some unknowns
                m = opt.model()
                if result == z3.sat or _satisfies(z3, m, opt.assertions()):
                    x = read(m)
        objective = None if x is None else float(problem.objective @ x)
        try:
            bound = model.bound(x is not None)
        except _Unattained as inf:
            return RawResult(
                Status.FEASIBLE if x is not None else Status.NO_SOLUTION, x, objective,
                _float_down(inf.value), f"sat, infimum not attained ({model.encoding})",
                f"no minimiser exists: the objective's infimum {float(inf.value)!r} is not "
                f"attained (z3 proved {inf.value} + epsilon); a solution is returned, optimality "
                f"cannot be")
        if result == z3.sat and x is not None:
            return RawResult(Status.OPTIMAL, x, objective, objective if bound is None else bound,
                             f"sat ({model.encoding})")
        reason = reason or opt.reason_unknown()
        name = f"unknown: {reason} ({model.encoding})"
        timed_out = options.time_limit is not None and elapsed >= 0.95 * options.time_limit
        if timed_out or any(word in reason for word in _LIMIT_REASONS):
            return RawResult(Status.FEASIBLE if x is not None else Status.NO_SOLUTION, x, objective,
                             bound, name)
        return RawResult(Status.ERROR, x, objective, bound, name, f"z3 gave up: {reason}")


def choose_encoding(problem: Problem, requested: str) -> str:
    """The encoding ``requested`` resolves to for ``problem`` (``"auto"``: see Z3Backend)."""
    if requested not in ENCODINGS:
        raise ValueError(f"unknown z3 encoding {requested!r}; expected one of {', '.join(ENCODINGS)}")
    binary_only = bool(problem.binary.all())
    if requested == "auto":
        return "pb" if binary_only and problem.num_vars > AUTO_EXACT_BINARIES else "exact"
    if requested == "pb" and not binary_only:
        raise ValueError(f"the z3 'pb' encoding needs a binary-only problem; {problem!r} has "
                         f"continuous variables: use encoding 'exact' or 'auto'")
    return requested


class _Writer:
    """Writes one problem into one z3 ``Optimize`` (all terms in one private context)."""

    def __init__(self, z3: Any, ctx: Any, opt: Any, problem: Problem) -> None:
        self.z3, self.ctx, self.opt, self.p = z3, ctx, opt, problem
        self.zero = z3.RealVal(0, ctx)
        self.term: Callable[[int, float], Any] | None = None
        self.vars: list[Any] = []
        self.kind: list[str] = []  # "bool", "int" or "real" per variable

    # ----------------------------------------------------------------- pieces
    def q(self, value: float) -> Any:
        """The exact rational value of a float."""
        f = Fraction(value)
        return self.z3.RealVal(f"{f.numerator}/{f.denominator}" if f.denominator != 1
                               else str(f.numerator), self.ctx)

    def sum(self, terms: list[Any]) -> Any:
        return self.z3.Sum(terms) if len(terms) > 1 else terms[0] if terms else self.zero

    def linear(self, cols: np.ndarray, coefs: np.ndarray) -> Any:
        assert self.term is not None
        return self.sum([self.term(j, a) for j, a in zip(cols.tolist(), coefs.tolist(), strict=True)])

    def relation(self, lhs: Any, sense: Sense, rhs: Any) -> Any:
        return {Sense.LE: lhs <= rhs, Sense.GE: lhs >= rhs, Sense.EQ: lhs == rhs,
                Sense.LT: lhs < rhs, Sense.GT: lhs > rhs}[sense]

    # ---------------------------------------------------- exact and paper
    def declare(self, *, ints: bool) -> None:
        z3, ctx, p = self.z3, self.ctx, self.p
        for j, binary in enumerate(p.binary.tolist()):
            if binary and ints:
                v = z3.Int(f"M{j}", ctx)
                self.opt.add(v >= 0, v <= 1)
            elif binary:
                v = z3.Bool(f"m{j}", ctx)
            else:
                v = z3.Real(f"v{j}", ctx)
                self.opt.add(v >= self.q(p.lb[j]), v <= self.q(p.ub[j]))
            self.vars.append(v)
            self.kind.append("int" if binary and ints else "bool" if binary else "real")
        kinds = self.kind

        def term(j: int, a: float) -> Any:
            if kinds[j] == "bool":
                return z3.If(self.vars[j], self.q(a), self.zero)
            if kinds[j] == "int":
                return z3.ToReal(self.vars[j]) * self.q(a)
            return self.q(a) * self.vars[j]

        self.term = term

    def rows(self) -> None:
        A = self.p.A
        for i in range(self.p.num_rows):
            start, stop = A.indptr[i], A.indptr[i + 1]
            lhs = self.linear(A.indices[start:stop], A.data[start:stop])
            self.opt.add(self.relation(lhs, Sense(self.p.senses[i]), self.q(self.p.rhs[i])))

    def relus(self) -> None:
        z3, p = self.z3, self.p
        R = p.relu_in
        assert R is not None
        for r, out in enumerate(p.relu_out.tolist()):
            start, stop = R.indptr[r], R.indptr[r + 1]
            z = self.linear(R.indices[start:stop], R.data[start:stop]) + self.q(p.relu_const[r])
            self.opt.add(self.vars[out] == z3.If(z > 0, z, self.zero))
            if math.isfinite(p.relu_lo[r]):  # declared bounds are part of the problem
                self.opt.add(z >= self.q(p.relu_lo[r]))
            if math.isfinite(p.relu_hi[r]):
                self.opt.add(z <= self.q(p.relu_hi[r]))

    # ---------------------------------------------------------------- pb
    def pb_rows(self, level: int) -> None:
        z3, ctx = self.z3, self.ctx
        self.vars = [z3.Bool(f"m{j}", ctx) for j in range(self.p.num_vars)]
        self.kind = ["bool"] * self.p.num_vars
        form = to_integer(self.p, level, coefficient_bits=PB_BITS, activity_bits=PB_BITS)
        C = form.C
        pb = _PbMaker(z3, ctx, self.vars)
        for i, (lo, hi) in enumerate(zip(form.row_lo, form.row_hi, strict=True)):
            start, stop = C.indptr[i], C.indptr[i + 1]
            cols, coefs = C.indices[start:stop].tolist(), C.data[start:stop].tolist()
            if not cols:  # a constant row: 0 must lie within its bounds
                if (lo is not None and lo > 0) or (hi is not None and hi < 0):
                    self.opt.add(z3.BoolVal(False, ctx))
                continue
            if lo is not None and lo == hi:
                self.opt.add(pb.make(z3.Z3_mk_pbeq, cols, coefs, lo))
                continue
            if lo is not None:
                self.opt.add(pb.make(z3.Z3_mk_pbge, cols, coefs, lo))
            if hi is not None:
                self.opt.add(pb.make(z3.Z3_mk_pble, cols, coefs, hi))

    # ---------------------------------------------------------- objective
    def soft_objective(self) -> Callable[[bool], float | None] | None:
        """Weighted soft constraints (exact weights) for an objective on Bool variables
        only; None when the objective needs ``minimize``."""
        c = self.p.objective
        used = np.flatnonzero(c)
        if any(self.kind[j] != "bool" for j in used.tolist()):
            return None
        z3 = self.z3
        offset = Fraction(0)
        handle = None
        for j in used.tolist():
            w = Fraction(c[j])
            literal = z3.Not(self.vars[j]) if w > 0 else self.vars[j]
            if w < 0:
                offset += w  # c·b = |c|·(1 - b) + c
            handle = self.opt.add_soft(literal, f"{abs(w).numerator}/{abs(w).denominator}")
        if handle is None:
            return lambda has_model: 0.0

        def bound(has_model: bool) -> float | None:
            low = _number(self.z3, handle.lower())
            return None if low is None else _float_down(low + offset)

        return bound

    def minimize(self) -> Callable[[bool], float | None]:
        c = self.p.objective
        used = np.flatnonzero(c)
        if self.p.integral_objective and all(self.kind[j] == "int" for j in used.tolist()):
            expr = self.z3.Sum([self.z3.IntVal(int(c[j]), self.ctx) * self.vars[j]
                                for j in used.tolist()] or [self.z3.IntVal(0, self.ctx)])
        else:
            expr = self.linear(used, c[used])
        handle = self.opt.minimize(expr)

        def bound(has_model: bool) -> float | None:
            infinite, value, epsilon = (_number(self.z3, v) for v in handle.lower_values())
            if infinite != 0 or value is None or epsilon is None:
                return None  # no finite lower bound (yet)
            if not has_model and _number(self.z3, handle.upper_values()[0]) == 0:
                # A finite best objective but no model: a check cancelled before z3 set up its
                # objectives leaves lower = upper = 0 (seen with 1 ms limits): no bound.
                return None
            if epsilon > 0:  # `value + epsilon`: the infimum ``value`` is not attained
                raise _Unattained(value)
            return _float_down(value)

        return bound

    # -------------------------------------------------------------- read
    def read(self, model: Any) -> np.ndarray:
        """The problem's variable values in a z3 model (rationals rounded to float64)."""
        z3 = self.z3
        x = np.zeros(self.p.num_vars)
        for j, (v, kind) in enumerate(zip(self.vars, self.kind, strict=True)):
            value = model.eval(v, model_completion=True)
            if kind == "bool":
                x[j] = 1.0 if z3.is_true(value) else 0.0
            else:
                number = _number(z3, value)
                if number is None:
                    raise ValueError(f"z3 gave variable {j} the non-rational value {value}")
                x[j] = float(number)
        return x


class _PbMaker:
    """Pseudo-Boolean rows through z3's C API: ``z3.PbGe`` coerces and checks every term in
    Python, 1.6 of the 3.5 s it took to write 2,133 rows of 500 cells (the same terms)."""

    def __init__(self, z3: Any, ctx: Any, variables: list[Any]) -> None:
        self.z3, self.ctx = z3, ctx
        self.asts = [v.as_ast() for v in variables]

    def make(self, maker: Callable[..., Any], cols: list[int], coefs: list[int], k: int) -> Any:
        """``maker`` (``Z3_mk_pbge``/``pble``/``pbeq``) over ``Σ coefs·vars[cols]`` and ``k``,
        all within C ``int`` (:data:`PB_BITS`)."""
        n = len(cols)
        if not all(_INT_MIN <= c <= _INT_MAX for c in coefs) or not _INT_MIN <= k <= _INT_MAX:
            raise ValueError(f"a pseudo-Boolean row exceeds C int: coefficients {coefs}, bound {k}")
        args = (self.z3.Ast * n)(*[self.asts[j] for j in cols])
        weights = (ctypes.c_int * n)(*coefs)
        return self.z3.BoolRef(maker(self.ctx.ref(), n, args, weights, int(k)), self.ctx)


_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1


class _Unattained(Exception):
    """z3 proved the objective's infimum ``value`` but no model attains it."""

    def __init__(self, value: Fraction) -> None:
        super().__init__(str(value))
        self.value = value


def _float_down(value: Fraction) -> float:
    """The largest float not above ``value`` (a bound must stay a bound once rounded)."""
    f = float(value)
    return f if Fraction(f) <= value else math.nextafter(f, -math.inf)


def _forget_on_model(z3: Any, opt: Any) -> None:
    """Drop z3's global reference to the ``set_on_model`` callback: z3py keeps every one in
    a module-level dict until its ``Optimize`` is deleted, which that very reference
    prevents, so each solve's whole context (17 MB on a tiny problem) lived forever."""
    registered = getattr(z3.z3, "_on_models", None)
    key = getattr(opt, "_on_models_id", None)
    if isinstance(registered, dict) and key is not None:
        registered.pop(key, None)
        opt._on_models_id = None


def _satisfies(z3: Any, model: Any, assertions: Any) -> bool:
    """Whether ``model`` satisfies every hard constraint (a model read after ``unknown`` may
    be a partial search state)."""
    return all(z3.is_true(model.eval(a, model_completion=True)) for a in assertions)


def _number(z3: Any, value: Any) -> Fraction | None:
    """A z3 numeral as an exact Fraction; None for anything else (``oo``, ``epsilon``)."""
    if z3.is_int_value(value):
        return Fraction(value.as_long())
    if z3.is_rational_value(value):
        return value.as_fraction()
    return None
