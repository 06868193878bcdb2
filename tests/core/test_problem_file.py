"""The .smug file format round-trips a problem bit for bit."""

import numpy as np
import pytest

from smug_opt import Problem, ProblemBuilder
from smug_opt.problem_file import FORMAT_VERSION, load_problem, save_problem


def _relu_problem() -> Problem:
    rng = np.random.default_rng(3)
    b = ProblemBuilder(metadata={"name": "net", "k": 3})
    m = b.add_binaries(5)
    y = b.add_continuous(3, 0.0, 9.0)
    b.add_relus(y, rng.normal(size=(3, 5)), m, rng.normal(size=3), lo=-9.0, hi=9.0)
    b.add_constraints(rng.normal(size=(2, 3)), y, [">", "<"], [0.1, 1e-300])
    b.set_objective(m, 1.0)
    return b.build()


def test_round_trip_is_bit_exact(tmp_path):
    p = _relu_problem()
    path = tmp_path / "p.smug"
    save_problem(p, path)
    q = load_problem(path)
    for name in ("kinds", "lb", "ub", "senses", "rhs", "objective", "relu_out",
                 "relu_const", "relu_lo", "relu_hi"):
        a, b = getattr(p, name), getattr(q, name)
        assert a.dtype.kind == b.dtype.kind
        assert a.tobytes() == b.astype(a.dtype).tobytes(), name
    for name in ("A", "relu_in"):
        a, b = getattr(p, name), getattr(q, name)
        assert a.shape == b.shape
        assert a.data.tobytes() == b.data.tobytes()
        assert np.array_equal(a.indices, b.indices) and np.array_equal(a.indptr, b.indptr)
    assert q.metadata == {"name": "net", "k": 3}


def test_tiny_and_huge_floats_survive(tmp_path):
    coeffs = np.array([[5e-324, 1.7976931348623157e308, 0.1, -2.0**-1074]])
    p = Problem.from_arrays(coeffs, "<=", [0.30000000000000004])
    save_problem(p, tmp_path / "x.smug")
    q = load_problem(tmp_path / "x.smug")
    assert q.A.toarray().tobytes() == p.A.toarray().tobytes()
    assert q.rhs[0] == 0.30000000000000004


def test_bad_files_get_clear_errors(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_problem(tmp_path / "missing.smug")
    junk = tmp_path / "junk.smug"
    junk.write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="not a smug-opt problem file"):
        load_problem(junk)
    other = tmp_path / "other.npz"
    np.savez(other, a=np.zeros(2))
    with pytest.raises(ValueError, match="no header"):
        load_problem(other)


def test_unknown_version_is_refused(tmp_path):
    import json
    import zipfile

    path = tmp_path / "p.smug"
    save_problem(Problem.from_arrays([[1.0]], ">=", [1.0]), path)
    with zipfile.ZipFile(path) as z:
        members = {n: z.read(n) for n in z.namelist()}
    header = {"format": "smug-opt-problem", "version": FORMAT_VERSION + 1, "metadata": {}}
    buf = tmp_path / "h.npy"
    np.save(buf, np.frombuffer(json.dumps(header).encode(), dtype=np.uint8))
    members["header.npy"] = buf.read_bytes()
    with zipfile.ZipFile(path, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
    with pytest.raises(ValueError, match="version"):
        load_problem(path)


def test_metadata_must_be_json(tmp_path):
    p = Problem.from_arrays([[1.0]], ">=", [1.0], metadata={"bad": object()})
    with pytest.raises(ValueError, match="JSON"):
        save_problem(p, tmp_path / "p.smug")
