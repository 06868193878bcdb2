"""The Problem IR: construction, validation and the builder."""

import numpy as np
import pytest
import scipy.sparse as sp

from smug_opt import Problem, ProblemBuilder, Sense, VarKind


def test_from_arrays_dense_and_sparse_agree():
    A = np.array([[1.0, -2.0, 0.5], [0.0, 1.0, 1.0]])
    dense = Problem.from_arrays(A, [">", "<="], [0.0, 1.5])
    sparse = Problem.from_arrays(sp.csr_matrix(A), [">", "<="], [0.0, 1.5])
    assert (dense.A != sparse.A).nnz == 0
    assert dense.senses.tolist() == [Sense.GT, Sense.LE]
    assert dense.objective.tolist() == [1.0, 1.0, 1.0]
    assert np.all(dense.kinds == VarKind.BINARY)
    assert dense.integral_objective


@pytest.mark.parametrize(
    ("A", "senses", "rhs", "message"),
    [
        ([[1.0, np.nan]], ">", [0.0], "non-finite"),
        ([[1.0, np.inf]], ">", [0.0], "non-finite"),
        ([[1.0, 2.0]], "!=", [0.0], "unknown constraint sense"),
        ([[1.0, 2.0]], [">", ">"], [0.0], "2 senses for 1"),
        ([[1.0, 2.0]], ">", [0.0, 1.0], "rhs has 2 entries"),
        ([[1.0, 2.0]], ">", [np.nan], "NaN"),
        (np.zeros((0, 0)), ">", [], "empty"),
        ([1.0, 2.0], ">", [0.0], "2-D"),
    ],
)
def test_bad_input_names_the_problem(A, senses, rhs, message):
    with pytest.raises(ValueError, match=message):
        Problem.from_arrays(A, senses, rhs)


def test_builder_relu_order_is_checked():
    b = ProblemBuilder()
    m = b.add_binaries(2)
    y = b.add_continuous(2, 0.0, 10.0)
    b.add_relus(y[1:], [[1.0]], y[:1])  # reads y0 before y0 is defined by a relu
    b.add_relus(y[:1], [[1.0, 1.0]], m)
    with pytest.raises(ValueError, match="later relu"):
        b.build()


def test_builder_rejects_bad_blocks():
    b = ProblemBuilder()
    m = b.add_binaries(2)
    with pytest.raises(ValueError, match="out of range"):
        b.add_constraints([[1.0, 1.0]], [0, 5], ">=", 1.0)
    with pytest.raises(ValueError, match="columns"):
        b.add_constraints([[1.0, 1.0, 1.0]], m, ">=", 1.0)
    with pytest.raises(ValueError, match="finite bounds|NaN or inf"):
        b.add_continuous(1, -np.inf, 1.0)
    with pytest.raises(ValueError, match="lo > hi"):
        b.add_relus(b.add_continuous(1, 0, 1), [[1.0, 1.0]], m, lo=2.0, hi=1.0)


def test_relu_output_must_be_continuous():
    b = ProblemBuilder()
    m = b.add_binaries(2)
    b.add_relus(m[:1], [[1.0]], m[1:])
    with pytest.raises(ValueError, match="continuous"):
        b.build()


def test_with_constraints_appends_rows():
    p = Problem.from_arrays([[1.0, 1.0]], ">=", [1.0])
    q = p.with_constraints([[1.0, -1.0]], "==", [0.0])
    assert q.num_rows == 2 and p.num_rows == 1
    assert q.senses.tolist() == [Sense.GE, Sense.EQ]


def test_determined_by_binaries():
    b = ProblemBuilder()
    m = b.add_binaries(2)
    y = b.add_continuous(1, 0.0, 5.0)
    b.add_relus(y, [[1.0, -1.0]], m)
    assert b.build().determined_by_binaries
    b.add_continuous(1, 0.0, 1.0)
    assert not b.build().determined_by_binaries


def test_arrays_are_read_only():
    p = Problem.from_arrays([[1.0, 1.0]], ">=", [1.0])
    with pytest.raises(ValueError):
        p.rhs[0] = 5.0


def _relu_problem() -> Problem:
    b = ProblemBuilder(metadata={"cells": [0, 1]})
    m = b.add_binaries(2)
    y = b.add_continuous(1, 0.0, 5.0)
    b.add_relus(y, [[1.0, -1.0]], m)
    b.add_constraints([[1.0, 1.0, 1.0]], np.arange(3), ">", 0.5)
    return b.build()


def _every_array(p: Problem) -> dict[str, np.ndarray]:
    arrays = {name: getattr(p, name) for name in
              ("kinds", "lb", "ub", "senses", "rhs", "objective", "relu_out", "relu_const",
               "relu_lo", "relu_hi")}
    for name in ("A", "relu_in"):
        matrix = getattr(p, name)
        arrays |= {f"{name}.data": matrix.data, f"{name}.indices": matrix.indices,
                   f"{name}.indptr": matrix.indptr}
    return arrays


def test_every_array_and_the_metadata_are_read_only_also_after_pickling():
    import pickle

    for p in (_relu_problem(), pickle.loads(pickle.dumps(_relu_problem()))):
        for name, array in _every_array(p).items():
            assert not array.flags.writeable, name
            if array.size:
                with pytest.raises(ValueError, match="read-only"):
                    array[0] = array[0]
        with pytest.raises(TypeError):
            p.metadata["cells"] = []  # type: ignore[index]
        assert p.metadata == {"cells": [0, 1]} and dict(p.with_metadata(k=1).metadata)["k"] == 1


def test_writable_inputs_are_copied_so_the_caller_cannot_change_the_problem():
    from dataclasses import replace

    p = _relu_problem()
    rhs, A = np.array([0.25]), sp.csr_matrix(np.array([[2.0, 0.0, 1.0]]))
    metadata = {"note": "x"}
    q = replace(p, rhs=rhs, A=A, metadata=metadata)
    rhs[0], A.data[0], metadata["note"] = 9.0, 9.0, "changed"
    assert q.rhs[0] == 0.25 and q.A[0, 0] == 2.0 and q.metadata["note"] == "x"
    assert rhs.flags.writeable and A.data.flags.writeable  # the caller's arrays are untouched


def test_relu_in_is_an_empty_matrix_without_relus():
    p = Problem.from_arrays([[1.0, 1.0]], ">=", [1.0])
    assert p.relu_in.shape == (0, 2) and p.relu_in.nnz == 0
    q = Problem(kinds=p.kinds, lb=p.lb, ub=p.ub, A=p.A, senses=p.senses, rhs=p.rhs,
                objective=p.objective)
    assert q.relu_in.shape == (0, 2)
    with pytest.raises(ValueError, match="relu_in must be a scipy.sparse CSR matrix"):
        Problem(kinds=p.kinds, lb=p.lb, ub=p.ub, A=p.A, senses=p.senses, rhs=p.rhs,
                objective=p.objective, relu_in=np.zeros((0, 2)))


def test_the_ir_does_not_import_its_file_format():
    """The dependency is one-way: problem_file reads and writes Problems, ir knows no file."""
    import ast
    import inspect

    import smug_opt.ir

    tree = ast.parse(inspect.getsource(smug_opt.ir))
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    imported |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                 for alias in node.names}
    assert {name for name in imported if name and name.startswith("smug_opt")} == \
        {"smug_opt.frozen", "smug_opt.problem_arrays"}
