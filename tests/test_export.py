"""LP/MPS export: HiGHS and CBC read the files back and reach the optimum smug-opt finds."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from smug_opt import Problem, ProblemBuilder, solve, verify
from smug_opt.bridges import to_milp
from smug_opt.export import FORMATS, export, write_lp, write_mps
from smug_opt.testing.instances import ALL_ZERO, EQUALITY, INFEASIBLE, mixed, relu_network

highspy = pytest.importorskip("highspy")

WRITERS = {"lp": write_lp, "mps": write_mps}


def _continuous_instance() -> Problem:
    """Binaries and a free-standing continuous variable with a negative lower bound."""
    b = ProblemBuilder()
    x = b.add_binaries(3)
    y = b.add_continuous(1, -2.5, 4.0)
    b.add_constraints([[1.0, 2.0, -1.0, 1.0]], np.concatenate([x, y]), ">=", 1.25)
    b.add_constraints([[0.5, 0.0, 1.0, -1.0]], np.concatenate([x, y]), "<=", 0.75)
    b.set_objective(np.concatenate([x, y]), [1.0, 1.5, 1.0, 0.5])
    return b.build()


# instances whose level-1 optimum is the problem's optimum (no near-ties at the margin)
INSTANCES = {
    "mixed seed 1": mixed(1),
    "mixed seed 3": mixed(3),
    "relu network": relu_network(8),
    "equalities": EQUALITY["two choices"][0],
    "continuous": _continuous_instance(),
    "empty row": ALL_ZERO["empty row 0 <= 1"],
    "infeasible": INFEASIBLE["odd cycle of equalities"],
}


@pytest.fixture(scope="module")
def references() -> dict[str, float | None]:
    """smug-opt's own answer on HiGHS: the objective, or None when infeasible."""
    out = {}
    for name, problem in INSTANCES.items():
        result = solve(problem, "highs", time_limit=30)
        assert result.status.name in ("OPTIMAL", "INFEASIBLE"), (name, result)
        out[name] = result.objective
    return out


def _highs_read(path: Path) -> object:
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    assert h.readModel(str(path)) == highspy.HighsStatus.kOk, path.read_text()[:2000]
    return h


@pytest.mark.parametrize("fmt", ["lp", "mps"])
@pytest.mark.parametrize("name", list(INSTANCES))
def test_highs_reads_back_the_same_optimum(name: str, fmt: str, tmp_path: Path,
                                           references: dict[str, float | None]) -> None:
    problem = INSTANCES[name]
    path = tmp_path / f"model.{fmt}"
    WRITERS[fmt](problem, path)
    h = _highs_read(path)
    h.setOptionValue("mip_rel_gap", 0.0)
    h.run()
    status = h.modelStatusToString(h.getModelStatus())
    if references[name] is None:
        assert status == "Infeasible"
        return
    assert status == "Optimal"
    assert h.getInfo().objective_function_value == pytest.approx(references[name], abs=1e-9)
    # the solution of the exported level-1 MILP is a valid solution of the problem
    names = h.getLp().col_names_
    values = dict(zip(names, h.getSolution().col_value, strict=True))
    x = np.array([values[f"x{j}"] for j in range(problem.num_vars)])
    x[problem.binary] = np.round(x[problem.binary])
    assert verify(problem, x).ok


@pytest.mark.parametrize("fmt", ["lp", "mps"])
def test_numbers_round_trip_exactly(fmt: str, tmp_path: Path) -> None:
    problem = relu_network(16)
    path = tmp_path / f"model.{fmt}"
    WRITERS[fmt](problem, path)
    lp = _highs_read(path).getLp()
    form = to_milp(problem, 1)
    col = {name: j for j, name in enumerate(lp.col_names_)}
    row = {name: i for i, name in enumerate(lp.row_names_)}
    order = [col[f"x{j}"] for j in range(form.num_cols)]
    np.testing.assert_array_equal(np.asarray(lp.col_cost_)[order], form.objective)
    np.testing.assert_array_equal(np.asarray(lp.col_lower_)[order], form.col_lb)
    np.testing.assert_array_equal(np.asarray(lp.col_upper_)[order], form.col_ub)
    rows = [row[f"r{i}"] for i in range(form.num_rows)]  # one-sided rows keep their names
    lo = np.where(np.asarray(lp.row_lower_)[rows] <= -highspy.kHighsInf, -np.inf,
                  np.asarray(lp.row_lower_)[rows])
    hi = np.where(np.asarray(lp.row_upper_)[rows] >= highspy.kHighsInf, np.inf,
                  np.asarray(lp.row_upper_)[rows])
    np.testing.assert_array_equal(lo, form.row_lo)
    np.testing.assert_array_equal(hi, form.row_hi)
    m = lp.a_matrix_
    import scipy.sparse as sp

    read = sp.csc_matrix((m.value_, m.index_, m.start_), shape=(lp.num_row_, lp.num_col_))
    np.testing.assert_array_equal(read[rows][:, order].toarray(), form.A.toarray())


_CBC_SCRIPT = """
import json, sys, mip
out = {}
for path in sys.argv[1:]:
    m = mip.Model(solver_name=mip.CBC)
    m.verbose = 0
    m.read(path)
    m.max_mip_gap = m.max_mip_gap_abs = 0.0
    status = m.optimize(max_seconds=30)
    out[path] = [status.name, m.objective_value, sum(v.var_type in "BI" for v in m.vars)]
print(json.dumps(out))
"""


def test_cbc_reads_back_the_same_optimum(tmp_path: Path, references: dict[str, float | None]) -> None:
    pytest.importorskip("mip")
    paths = {}
    for name, problem in INSTANCES.items():
        for fmt, writer in WRITERS.items():
            paths[name, fmt] = tmp_path / f"{name.replace(' ', '_')}.{fmt}"
            writer(problem, paths[name, fmt])
    # python-mip's CBC must not share a process with OR-Tools: read in a subprocess
    done = subprocess.run([sys.executable, "-c", _CBC_SCRIPT, *map(str, paths.values())],
                          capture_output=True, text=True, timeout=120, check=True)
    answers = json.loads(done.stdout.strip().splitlines()[-1])
    for (name, fmt), path in paths.items():
        status, objective, integers = answers[str(path)]
        expected = references[name]
        if expected is None:
            assert status == "INFEASIBLE", (name, fmt)
        else:
            assert status == "OPTIMAL", (name, fmt, status)
            assert objective == pytest.approx(expected, abs=1e-9), (name, fmt)
        assert integers == int(to_milp(INSTANCES[name], 1).integer.sum()), (name, fmt)


def test_header_names_the_margin(tmp_path: Path) -> None:
    problem = Problem.from_arrays([[1.0, 1.0]], ">", 1.0)
    write_mps(problem, tmp_path / "a.mps", level=2)
    head = (tmp_path / "a.mps").read_text().splitlines()[:3]
    assert head[0].startswith("* ") and "level 2" in head[0]
    assert any("strict" in line and "margin of 1.2e-05 (" in line for line in head), head
    write_lp(problem, tmp_path / "a.lp", level=0)
    text = (tmp_path / "a.lp").read_text()
    assert "\\ 1 strict row(s) (< or >) written as non-strict" in text and "relaxation" in text


def test_export_dispatches_by_format(tmp_path: Path) -> None:
    problem = mixed(1)
    export(problem, "mps", tmp_path / "a.mps")
    export(problem, ".LP", tmp_path / "a.lp")
    assert (tmp_path / "a.mps").read_text().startswith("* smug-opt export")
    assert (tmp_path / "a.lp").read_text().startswith("\\ smug-opt export")
    with pytest.raises(ValueError, match="unknown export format 'cplex'.*lp, mps, smt2"):
        export(problem, "cplex", tmp_path / "a.cplex")
    assert FORMATS == ("lp", "mps", "smt2")


def test_smt2_export_is_delegated_or_clearly_missing(tmp_path: Path) -> None:
    problem = mixed(1)
    if importlib.util.find_spec("smug_opt.export_smt") is None:
        with pytest.raises(RuntimeError, match="smug_opt.export_smt"):
            export(problem, "smt2", tmp_path / "a.smt2")
    else:
        export(problem, "smt2", tmp_path / "a.smt2")
        assert (tmp_path / "a.smt2").stat().st_size > 0
