"""The stress case as a bench suite: model-checked records, resume, the per-digit view,
the CLI; end to end on MNIST."""

from __future__ import annotations

import argparse
import json

import numpy as np
import pytest

import smug_opt.data
import smug_opt.stress as stress
from smug_opt.bench.records import RESULTS_FILE, read_records
from smug_opt.cli import stress as cli_stress
from smug_opt.models.mlp import as_mlp
from smug_opt.stress_models import StressModel


def _tiny_suite(monkeypatch: pytest.MonkeyPatch, layers: list | None = None,
                first_pixels: list[float] | None = None) -> None:
    """A 16-8-3 network on 4x4 'digits', standing in for the zoo model and MNIST (or
    ``layers``; ``first_pixels`` sets the six images' first pixel)."""
    rng = np.random.default_rng(7)
    layers = layers or [(rng.normal(size=(16, 8)), rng.normal(scale=0.5, size=8)),
                        (rng.normal(size=(8, 3)), rng.normal(scale=0.5, size=3))]
    mlp = as_mlp(layers, "tiny")
    images = rng.uniform(0.0, 1.0, size=(6, 4, 4, 1)) * (rng.uniform(size=(6, 4, 4, 1)) > 0.3)
    if first_pixels is not None:
        images[:, 0, 0, 0] = first_pixels
    labels = np.array([0, 1, 2, 3, 4, 5])

    def pick(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        order = np.sort(np.random.default_rng(seed).permutation(6)[:n])  # prefix-stable, as the real draw
        return order, images[order], labels[order]

    loaded = StressModel("tiny", "embedded", "tiny", mlp.digest, (4, 4, 1), mlp=mlp)
    monkeypatch.setattr(stress, "load_stress_model", lambda model: loaded)
    monkeypatch.setattr(smug_opt.data, "pick_test_digits", pick)


def _records(out) -> list:
    return read_records(out / RESULTS_FILE)


def test_runner_writes_checked_records_and_resumes(tmp_path, monkeypatch) -> None:
    """Each digit and backend gives one bench record whose mask passed the exact check and
    the model check (run in the job process); a rerun solves nothing again; the table
    counts per true digit."""
    _tiny_suite(monkeypatch)
    monkeypatch.setenv("SMUG_OPT_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "run"
    table = stress.run_stress(n=3, backends=["highs"], time_limit=20, out_dir=out, progress=False)
    records = _records(out)
    assert len(records) == 3 and len(list((tmp_path / "cache").rglob("*.smug"))) == 3
    for r in records:
        assert r.status.name == "OPTIMAL" and r.verified is True and r.reverified is True
        assert r.checks["verified_in_model"] is True and r.backend == "highs"
        assert r.objective == r.bound and r.checks["mask_pixels"] == len(r.checks["mask"]) <= r.objective
    rows = stress.digit_rows(records)
    assert all(row["solved"] and row["failure"] is None for row in rows)
    assert sorted(row["digit"] for row in rows) == sorted(int(r.features["digit"]) for r in records)
    assert table["backends"]["highs"]["all"] == {
        "solved": 3, "total": 3, "mean_seconds": pytest.approx(np.mean([r.seconds for r in records]))}
    assert sum(c["total"] for c in table["backends"]["highs"]["per_digit"].values()) == 3
    exact = [r for r in records if r.proof == "exact"]
    assert table["backends"]["highs"]["proven_exact"] == len(exact)
    assert all(row["proof"] == r.proof for row, r in zip(rows, records, strict=True))

    again = stress.run_stress(n=3, backends=["highs"], time_limit=20, out_dir=out, progress=False)
    assert len((out / RESULTS_FILE).read_text().splitlines()) == 3
    assert again["backends"] == table["backends"]
    markdown = (out / "table.md").read_text()
    assert "| highs | solved |" in markdown and "3/3" in markdown
    assert json.loads((out / "table.json").read_text())["config"]["model"] == "tiny"


def test_a_larger_n_extends_the_run_and_the_table_shows_only_its_digits(tmp_path, monkeypatch) -> None:
    """n = 3 after n = 2 in one folder solves one more digit and keeps the two; n = 1
    afterwards tables only its digit (issue 12, item 12)."""
    _tiny_suite(monkeypatch)
    monkeypatch.setenv("SMUG_OPT_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "run"
    stress.run_stress(n=2, backends=["highs"], time_limit=20, out_dir=out, progress=False)
    first = {r.instance: r for r in _records(out)}
    table = stress.run_stress(n=3, backends=["highs"], time_limit=20, out_dir=out, progress=False)
    records = _records(out)
    assert len(records) == 3 and {r.instance for r in records} > set(first)
    assert [r for r in records if r.instance in first] == list(first.values())  # kept, not rerun
    assert table["backends"]["highs"]["all"]["total"] == 3
    smaller = stress.run_stress(n=1, backends=["highs"], time_limit=20, out_dir=out, progress=False)
    assert smaller["backends"]["highs"]["all"]["total"] == 1 and len(_records(out)) == 3


def test_model_check_rejects_a_mask_that_loses_the_label(monkeypatch, tmp_path) -> None:
    """The hook is a real check: the whole image keeps the predicted label and is reported
    so; asked about any other label, the same mask fails."""
    _tiny_suite(monkeypatch)
    monkeypatch.setenv("SMUG_OPT_CACHE", str(tmp_path / "cache"))
    from smug_opt.bench.suites import load_suite
    from smug_opt.problem_file import load_problem

    suite, _ = stress.stress_suite("tiny", n=3, bounds="interval")
    for instance in load_suite(suite.name):
        problem = load_problem(instance.problem_path)
        everything = np.ones(problem.num_vars)
        assert suite.check(problem, everything)["verified_in_model"] is True
        other = (int(problem.metadata["label"]) + 1) % 3
        assert suite.check(problem.with_metadata(label=other), everything)["verified_in_model"] is False


def test_a_wrong_mask_is_never_counted_as_solved() -> None:
    rows = [{"backend": "b", "digit": 1, "solved": False, "status": "OPTIMAL", "seconds": 1.0,
             "failure": "the mask does not keep the label", "encode_seconds": 0.1, "objective": 2.0},
            {"backend": "b", "digit": 1, "solved": True, "status": "OPTIMAL", "seconds": 3.0,
             "failure": None, "encode_seconds": 0.1, "objective": 4.0}]
    table = stress.stress_table(rows, ["b"])["backends"]["b"]
    assert table["per_digit"]["1"] == {"solved": 1, "total": 2, "mean_seconds": 3.0}
    assert table["wrong_masks"] == 1 and table["median_seconds"] == 3.0


def test_unknown_backend_and_bad_options_are_named(tmp_path) -> None:
    with pytest.raises(ValueError, match="unknown backend .no-such-solver.; installed backends: "):
        stress.run_stress(n=1, backends=["no-such-solver"], out_dir=tmp_path)
    with pytest.raises(ValueError, match="z3_encoding"):
        stress.run_stress(n=1, backends=["highs"], out_dir=tmp_path, z3_encoding="smt")
    with pytest.raises(ValueError, match="expected a .onnx"):
        stress.load_stress_model("no-such-model")


def test_cli_parses_and_runs(tmp_path, monkeypatch, capsys) -> None:
    _tiny_suite(monkeypatch)
    parser = argparse.ArgumentParser()
    monkeypatch.setenv("SMUG_OPT_CACHE", str(tmp_path / "cache"))
    cli_stress.add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["stress", "mnist", "--n", "2", "--backends", "highs", "--time-limit", "20",
                              "--out", str(tmp_path), "--bounds", "interval", "--quiet",
                              "--z3-encoding", "exact"])
    assert args.suite == "mnist" and args.z3_encoding == "exact" and args.bounds == "interval"
    assert cli_stress.run(args) == 0
    assert "| highs | solved |" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        parser.parse_args(["stress", "cifar"])


def test_inputs_on_which_the_model_predicts_no_class_are_left_out_and_named(tmp_path, monkeypatch) -> None:
    """Hidden units alive only when the first pixel is above 0.5, no output bias: on the
    other images every score is 0, a tie with no prediction to keep."""
    hidden = np.zeros((16, 8))
    hidden[0] = 1.0
    output = np.random.default_rng(3).normal(size=(8, 3))
    _tiny_suite(monkeypatch, [(hidden, np.full(8, -0.5)), (output, np.zeros(3))],
                first_pixels=[0.9, 0.1, 0.9, 0.0, 0.2, 0.8])
    monkeypatch.setenv("SMUG_OPT_CACHE", str(tmp_path / "cache"))
    with pytest.warns(UserWarning, match="left out of the stress case: .*tie for the top class") as caught:
        table = stress.run_stress(n=6, backends=["highs"], time_limit=20, out_dir=tmp_path, progress=False)
    left_out = sorted(str(w.message).split()[1] for w in caught if "left out" in str(w.message))
    assert left_out == ["1", "3", "4"]
    assert sorted(r.instance for r in _records(tmp_path)) == ["d00000", "d00002", "d00005"]
    assert table["config"]["inputs"] == 3
    assert "3 left out: the model predicts no class on them" in (tmp_path / "table.md").read_text()


@pytest.mark.slow
def test_mnist_end_to_end_on_three_digits(tmp_path) -> None:
    """The real zoo model (784-32-10) and real held-out digits, on HiGHS."""
    table = stress.run_stress(n=3, backends=["highs"], time_limit=60, out_dir=tmp_path, progress=False)
    records = _records(tmp_path)
    assert len(records) == 3
    assert all(r.checks["verified_in_model"] for r in records if r.objective is not None)
    assert table["backends"]["highs"]["wrong_masks"] == 0
    assert table["backends"]["highs"]["all"]["solved"] >= 2


def test_the_stress_z3_encodings_are_the_z3_backend_s() -> None:
    """One list of z3 formulations for the stress command, and each is one the z3 backend
    accepts (so the command's choices cannot drift from the backend's)."""
    from smug_opt_backends.z3_backend import ENCODINGS

    command = cli_stress.add_parser(argparse.ArgumentParser().add_subparsers(dest="command"))
    action = next(a for a in command._actions if a.dest == "z3_encoding")
    assert tuple(action.choices) == stress.Z3_ENCODINGS and set(stress.Z3_ENCODINGS) <= set(ENCODINGS)
