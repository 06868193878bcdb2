"""SMT-LIB2 export: exact rationals, strictness kept, and z3 finds HiGHS's optimum in it."""

from __future__ import annotations

import io
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from smug_opt import Problem, ProblemBuilder, Status, solve, verify
from smug_opt.export_smt import smt2_string, write_smt2

z3 = pytest.importorskip("z3")


def z3_optimum(text: str) -> Fraction | None:
    """Minimise the exported problem with z3; None when unsat."""
    opt = z3.Optimize()
    opt.set("timeout", 20_000)
    opt.from_string(text)
    result = opt.check()
    if result == z3.unsat:
        return None
    assert result == z3.sat, opt.reason_unknown()
    (objective,) = opt.objectives()
    return opt.model().eval(objective, model_completion=True).as_fraction()


def relu_net(seed: int) -> Problem:
    rng = np.random.default_rng(seed)
    x = rng.random(5)
    W1, b1 = rng.normal(0, 1, (3, 5)) * x, rng.normal(0, 0.3, 3)
    w2 = rng.normal(0, 1, 3)
    h = np.maximum(W1.sum(axis=1) + b1, 0)
    b = ProblemBuilder()
    m = b.add_binaries(5)
    y = b.add_continuous(3, 0.0, 50.0)
    b.add_relus(y, W1, m, b1, lo=-50.0, hi=50.0)
    b.add_constraints(w2[None, :], y, ">" if w2 @ h > 0 else "<", 0.8 * float(w2 @ h))
    b.set_objective(m, 1.0)
    return b.build()


PROBLEMS = {
    "strict": Problem.from_arrays([[1.0, 1.0]], ">", 1.0),
    "non-strict": Problem.from_arrays([[1.0, 1.0]], ">=", 1.0),
    "float tie": Problem.from_arrays([[0.1, 0.2, 0.3]], ">", 0.1 + 0.2),
    "mixed senses": Problem.from_arrays([[1e-9, 1e6, -3.5, 2.0], [1.0, 1.0, 1.0, 1.0], [0.5, 0, 0.5, 0]],
                                        [">", "<=", "=="], [0.0, 3.0, 0.5], objective=[1.0, 2.0, -0.5, 1.0]),
    "infeasible": Problem.from_arrays([[1.0, 1.0]], ">", 2.0),
    "relu 1": relu_net(1),
    "relu 6": relu_net(6),
}


@pytest.mark.parametrize("name", list(PROBLEMS))
def test_z3_reads_it_back_with_the_highs_optimum(name: str) -> None:
    problem = PROBLEMS[name]
    reference = solve(problem, "highs", time_limit=20)
    found = z3_optimum(smt2_string(problem))
    if reference.status is Status.INFEASIBLE:
        assert found is None
    else:
        assert reference.status is Status.OPTIMAL
        assert found is not None and float(found) == reference.objective


def test_an_exact_infeasibility_survives_the_export() -> None:
    """This net's hidden layer is off on the full input, so its row reads w·y < 0, which no
    mask satisfies (activity 0 at best): z3 proves it from the file and through the backend,
    where the MILP lowerings, blind to 0 < 0 within their tolerances, only find no solution."""
    problem = relu_net(5)
    assert z3_optimum(smt2_string(problem)) is None
    assert solve(problem, "z3", time_limit=20).status is Status.INFEASIBLE


def test_coefficients_are_exact_rationals() -> None:
    text = smt2_string(Problem.from_arrays([[0.1, -3.0]], "<", 1e-300))
    f = Fraction(0.1)
    assert f"(/ {f.numerator}.0 {f.denominator}.0)" in text
    assert "(- 3.0)" in text and "(assert (< " in text
    tiny = Fraction(1e-300)
    assert f"(/ {tiny.numerator}.0 {tiny.denominator}.0)" in text


def test_relu_is_an_ite_with_declared_bounds() -> None:
    text = smt2_string(relu_net(0))
    assert "(assert (= v5 (ite (> z0 0.0) z0 0.0)))" in text
    assert "(assert (>= z0 (- 50.0)))" in text and "(assert (<= z0 50.0))" in text
    assert "(minimize " in text and "(check-sat)" in text


def test_writes_to_a_path_and_to_a_file(tmp_path: Path) -> None:
    problem = PROBLEMS["strict"]
    path = tmp_path / "p.smt2"
    write_smt2(problem, path)
    buffer = io.StringIO()
    write_smt2(problem, buffer)
    assert path.read_text() == buffer.getvalue() == smt2_string(problem)


# ---------------------------------------------------------------- standard dialect
def _cvc5_run(text: str) -> tuple[str, dict[str, Fraction | bool]]:
    """Check the file with cvc5 (which rejects z3's extensions): ("sat"/"unsat", model)."""
    cvc5 = pytest.importorskip("cvc5")
    tm = cvc5.TermManager()
    solver = cvc5.Solver(tm)
    symbols = cvc5.SymbolManager(tm)
    parser = cvc5.InputParser(solver, symbols)
    parser.setStringInput(cvc5.InputLanguage.SMT_LIB_2_6, text, "export.smt2")
    answer = ""
    while True:
        command = parser.nextCommand()
        if command.isNull():
            break
        out = command.invoke(solver, symbols).strip()
        answer = out if out in ("sat", "unsat", "unknown") else answer
    model: dict[str, Fraction | bool] = {}
    if answer == "sat":
        for term in symbols.getDeclaredTerms():
            value = solver.getValue(term)
            model[str(term)] = value.getBooleanValue() if value.isBooleanValue() \
                else Fraction(value.getRealValue())
    return answer, model


def _z3_run(text: str) -> tuple[str, dict[str, Fraction | bool]]:
    s = z3.Solver()
    s.from_string(text)
    answer = str(s.check())
    model = {}
    if answer == "sat":
        m = s.model()
        for d in m.decls():
            v = m[d]
            if z3.is_bool(v) or z3.is_rational_value(v):  # the variables, not z3's helpers
                model[d.name()] = z3.is_true(v) if z3.is_bool(v) else v.as_fraction()
    return answer, model


def _as_solution(problem: Problem, model: dict[str, Fraction | bool]) -> np.ndarray:
    x = np.zeros(problem.num_vars)
    for j in range(problem.num_vars):
        key = f"m{j}" if problem.binary[j] else f"v{j}"
        x[j] = float(model.get(key, 0))
    return x


@pytest.mark.parametrize("run", [_cvc5_run, _z3_run], ids=["cvc5", "z3"])
@pytest.mark.parametrize("name", list(PROBLEMS))
def test_standard_dialect_brackets_the_optimum(name: str, run) -> None:
    """sat at ``objective <= optimum`` (with a model that verifies and reaches it), unsat just
    below; infeasible problems unsat with no bound. Read by cvc5 and by z3."""
    problem = PROBLEMS[name]
    reference = solve(problem, "z3", time_limit=20)
    if reference.status is Status.INFEASIBLE:
        assert run(smt2_string(problem, dialect="standard"))[0] == "unsat"
        return
    assert reference.status is Status.OPTIMAL
    optimum = reference.objective
    answer, model = run(smt2_string(problem, dialect="standard", bound=optimum))
    assert answer == "sat"
    check = verify(problem, _as_solution(problem, model))
    if not problem.num_relus:  # ReLU outputs are recomputed by verify from rounded reals
        assert check.ok, check.summary()
        assert check.objective <= Fraction(optimum)
    below = optimum - 0.5 if problem.integral_objective else np.nextafter(optimum, -np.inf)
    assert run(smt2_string(problem, dialect="standard", bound=below))[0] == "unsat"
    assert run(smt2_string(problem, dialect="standard"))[0] == "sat"


def test_cvc5_rejects_the_z3_dialect_and_reads_the_standard_one() -> None:
    problem = PROBLEMS["mixed senses"]
    with pytest.raises(RuntimeError, match="minimize"):
        _cvc5_run(smt2_string(problem))
    text = smt2_string(problem, dialect="standard", bound=1.0)
    assert "(minimize" not in text and "(get-objectives)" not in text
    assert "(set-option :produce-models true)" in text


def test_dialect_and_bound_are_checked() -> None:
    problem = PROBLEMS["strict"]
    with pytest.raises(ValueError, match="unknown SMT-LIB2 dialect 'cvc5'"):
        smt2_string(problem, dialect="cvc5")
    with pytest.raises(ValueError, match="bound must be a finite number with dialect 'standard'"):
        smt2_string(problem, bound=1.0)
    with pytest.raises(ValueError, match="bound must be a finite number"):
        smt2_string(problem, dialect="standard", bound=float("inf"))
