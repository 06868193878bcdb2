"""The command line as a new user meets it (issue 12's polish list): the real ``smug-opt``
command in a subprocess, bad input caught before any model loads, clear messages, no noise."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pytest

SMUG_OPT = shutil.which("smug-opt")
pytestmark = pytest.mark.skipif(SMUG_OPT is None, reason="the smug-opt command is not installed")


def smug(*args: str, env: dict[str, str] | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([SMUG_OPT, *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def in_process(capfd: pytest.CaptureFixture[str], *args: str) -> subprocess.CompletedProcess:
    """``smug-opt args`` through its entry point in this process, where a fresh process adds
    nothing to what is checked (a help text, the files a run writes): no interpreter, solver
    or TensorFlow start-up to pay again."""
    from smug_opt.cli import main

    try:
        code = main(list(args))
    except SystemExit as exit_:  # argparse: --help, usage errors
        code = exit_.code if isinstance(exit_.code, int) else 1
    out, err = capfd.readouterr()
    return subprocess.CompletedProcess(["smug-opt", *args], code, out, err)


def cheap(*args: str) -> subprocess.CompletedProcess:
    """Run a command that must fail fast, and check it failed before TensorFlow was imported."""
    done = smug(*args, env={"PYTHONPROFILEIMPORTTIME": "1"})
    imported = [line for line in done.stderr.splitlines() if line.startswith("import time:")]
    assert imported, "PYTHONPROFILEIMPORTTIME gave no import lines"
    assert not [line for line in imported if line.split("|")[-1].strip() in ("tensorflow", "keras")], \
        f"{args} imported TensorFlow before rejecting its arguments"
    done.stderr = "\n".join(line for line in done.stderr.splitlines() if not line.startswith("import time:"))
    assert done.returncode == 1, (args, done.returncode, done.stderr[-2000:])
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    return done


_ONE_PROCESS = """
import contextlib, io, json, sys, traceback
from smug_opt.cli import main
answers = []
for argv in json.loads(sys.argv[1]):
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exit_:
            code = exit_.code
        except BaseException:
            traceback.print_exc()
            code = None
    answers.append([code, err.getvalue(), sorted(m for m in ("tensorflow", "keras") if m in sys.modules)])
print(json.dumps(answers))
"""


class Answer(NamedTuple):
    """One command's exit code, stderr, and the heavy modules loaded once it ended."""

    returncode: int | None
    stderr: str
    heavy: list[str]


def cheap_in_one_process(commands: list[list[str]]) -> dict[tuple[str, ...], Answer]:
    """:func:`cheap` for many commands in one fresh process (one start-up): each runs the
    entry point in turn; TensorFlow in ``sys.modules`` after one of them means that one
    imported it. Checked by :func:`rejected`, in each test."""
    done = subprocess.run([sys.executable, "-W", "ignore", "-c", _ONE_PROCESS, json.dumps(commands)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    answers = json.loads(done.stdout.splitlines()[-1])
    return {tuple(args): Answer(*answer) for args, answer in zip(commands, answers, strict=True)}


def rejected(answers: dict[tuple[str, ...], Answer], *args: str) -> Answer:
    """The answer to ``args`` from :func:`cheap_in_one_process`, checked as :func:`cheap`
    checks its own."""
    done = answers[args]
    assert not done.heavy, f"{args} imported TensorFlow before rejecting its arguments"
    assert done.returncode == 1, (args, done.returncode, done.stderr[-2000:])
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    return done


@pytest.fixture
def a_file(tmp_path) -> Path:
    path = tmp_path / "taken"
    path.write_text("not a folder\n")
    return path


@pytest.fixture
def problem_file(tmp_path) -> Path:
    from smug_opt import Problem, save_problem

    path = tmp_path / "p.smug"
    save_problem(Problem.from_arrays(np.array([[1.0, 1.0]]), [">="], [1.0]), path)
    return path


OUT_COMMANDS = [["explain"], ["explain", "--method", "smug_base"], ["stress", "mnist", "--n", "1"],
                ["evaluate", "--n", "1"], ["bench", "run", "--suite", "synthetic"]]
BAD_EXPLAIN_ARGUMENTS = [
    (["--k", "-3"], "--k must be at least 1"),
    (["--time-limit", "0"], "--time-limit must be positive"),
    (["--backend", "nosuch"], "nosuch"),
    (["--cell", "0"], "--cell must be at least 1"),
    (["--gamma", "-1"], "--gamma must be at least 0"),
    (["--target", "-1"], "--target"),
    (["--tokens", ""], "holds no word"),
    (["--model", "no-such-model"], "or an embedded model (mnist-mlp"),
    (["--workers", "0", "--input", "."], "--workers must be at least 1"),
    (["--executor", "dask", "--input", "."], "--scheduler"),
]


@pytest.fixture(scope="module")
def taken(tmp_path_factory) -> Path:
    """A file where a folder is expected."""
    path = tmp_path_factory.mktemp("out") / "taken"
    path.write_text("not a folder\n")
    return path


@pytest.fixture(scope="module")
def refusals(taken) -> dict[tuple[str, ...], Answer]:
    """The answers to every command of the two parametrised tests below, from one process."""
    commands = [[*command, "--out", str(taken / "sub" if under else taken)]
                for command in OUT_COMMANDS for under in (False, True)]
    commands += [["explain", *args] for args, _ in BAD_EXPLAIN_ARGUMENTS]
    return cheap_in_one_process(commands)


# item 2: an --out that is a file (or under one) is refused before any work, naming --out
@pytest.mark.parametrize("command", OUT_COMMANDS)
@pytest.mark.parametrize("under", [False, True])
def test_out_that_is_a_file_is_refused_before_work(command, under, taken, refusals):
    done = rejected(refusals, *command, "--out", str(taken / "sub" if under else taken))
    assert ("--out" in done.stderr and "is a file" in done.stderr) or "is under" in done.stderr


def test_export_and_bench_report_refuse_a_file_out(a_file, problem_file, tmp_path):
    done = cheap("export", str(problem_file), "--to", "lp", "--out", str(a_file / "x.lp"))
    assert "--out" in done.stderr
    done = cheap("export", str(problem_file), "--to", "lp", "-o", str(tmp_path))  # the old spelling
    assert "is a folder" in done.stderr
    done = cheap("bench", "report", str(tmp_path), "--out", str(a_file))
    assert "--out" in done.stderr


# item 7 (and 13's --gamma -1): bad arguments are rejected before the model loads
@pytest.mark.parametrize("args, message", BAD_EXPLAIN_ARGUMENTS)
def test_explain_rejects_bad_arguments_before_loading(args, message, refusals):
    assert message in rejected(refusals, "explain", *args).stderr


def test_stress_and_evaluate_reject_bad_arguments_before_loading():
    assert "--n must be at least 1" in cheap("stress", "mnist", "--n", "0").stderr
    assert "nosuch" in cheap("stress", "mnist", "--backend", "nosuch").stderr
    assert "--n must be at least 1" in cheap("evaluate", "--n", "0").stderr
    assert "--gamma must be at least 0" in cheap("evaluate", "--gamma", "-1").stderr


# item 8: misleading errors
def test_errors_name_the_real_problem(tmp_path):
    junk = tmp_path / "junk.smug"
    junk.write_bytes(b"\x93NUMPY junk")
    done = cheap("solve", str(junk))
    assert "not a smug-opt problem file" in done.stderr and "allow_pickle" not in done.stderr
    assert "is a folder" in cheap("solve", str(tmp_path)).stderr
    fake = tmp_path / "model.keras"
    fake.write_text("not a model")
    done = cheap("explain", "--model", str(fake), "--input", str(fake))
    assert "is not a Keras model file" in done.stderr and "not found" not in done.stderr.lower()


def test_python_names_are_shown_as_flags():
    import pickle

    from smug_opt.cli import flag_for
    from smug_opt.errors import ParameterError
    from smug_opt.parameters import SmugParameters

    assert [flag_for(p) for p in ("time_limit", "relative_gap", "target", "grid_shape")] == \
        ["--time-limit", "--gap", "--target", "--grid"]
    error = ParameterError("time_limit", "must be positive seconds, got 0")
    assert isinstance(error, ValueError) and str(error) == "time_limit must be positive seconds, got 0"
    assert error.named(flag_for(error.parameter)) == "--time-limit must be positive seconds, got 0"
    copy = pickle.loads(pickle.dumps(error))  # it may come back from a worker process
    assert (copy.parameter, copy.problem) == (error.parameter, error.problem)
    with pytest.raises(ParameterError) as caught:
        SmugParameters(k=0)
    assert caught.value.parameter == "k" and str(caught.value) == "k must be at least 1, got 0"


# item 13: an infeasible solve exits non-zero (3: no solution), a failed bench run leaves nothing
def test_infeasible_solve_exits_with_no_solution_code(tmp_path, capfd):
    from smug_opt import Problem, save_problem

    path = tmp_path / "infeasible.smug"
    save_problem(Problem.from_arrays(np.array([[1.0, 1.0]]), [">"], [2.0]), path)
    done = smug("solve", str(path), "--time-limit", "20")
    assert done.returncode == 3 and "INFEASIBLE" in done.stdout, done.stderr[-2000:]
    assert "Exit status" in in_process(capfd, "solve", "--help").stdout


def test_bench_run_with_an_unknown_backend_leaves_no_folder(tmp_path):
    out = tmp_path / "run"
    done = cheap("bench", "run", "--suite", "synthetic", "--backend", "nosuch", "--out", str(out))
    assert "nosuch" in done.stderr and not out.exists()


# item 11: one spelling per flag, old ones kept as aliases; help says why defaults differ
def test_flags_are_spelled_alike_everywhere(capfd):
    def help_text(*command: str) -> str:
        done = in_process(capfd, *command, "--help")
        assert done.returncode == 0, (command, done.stderr)
        return done.stdout

    for command in (["stress", "mnist"], ["bench", "run"], ["explain"], ["evaluate"]):
        assert "--backend" in help_text(*command), command
    assert "--out" in help_text("export")
    stress_help = " ".join(help_text("stress", "mnist").split())
    assert "explain's first layer" in stress_help
    for sub in ("list", "report"):
        text = help_text("bench", sub)
        assert len(text.split("\n\n")) >= 3, f"bench {sub} --help has no description"
    for command in (["explain"], ["evaluate"], ["bench", "run"]):
        text = help_text(*command)
        assert all(flag in text for flag in ("--workers", "--executor", "--scheduler")), command


# item 6: the vocabulary can be listed
def test_list_vocab_is_instant_and_complete():
    done = smug("explain", "--list-vocab", env={"PYTHONPROFILEIMPORTTIME": "1"})
    assert done.returncode == 0 and "superb" in done.stdout and "<unk>" in done.stdout
    assert "tensorflow" not in done.stderr


def test_overlay_has_a_title_and_a_legend(tmp_path):
    from PIL import Image

    from smug_opt import render

    image = np.zeros((28, 28))
    saliency = np.zeros((28, 28))
    saliency[10:12, 10:12] = 1.0
    bare = Image.open(render.overlay_png(image, saliency, tmp_path / "a.png", title=""))
    titled = Image.open(render.overlay_png(image, saliency, tmp_path / "b.png", title="smug: class 3"))
    assert titled.height > bare.height  # a title band above the legend band
    legend_band = np.asarray(bare.convert("RGB"))[-14:]
    assert (legend_band != 255).any()  # the legend is written, not blank


def test_text_without_a_terminal_has_no_ansi():
    from smug_opt import render

    assert render.text_terminal(["a", "b"], np.array([1.0, 0.0]), colour=False) == "[a] b"
    assert "\033[" in render.text_terminal(["a", "b"], np.array([1.0, 0.0]), colour=True)


# items 3, 5, 6, 10: one real model per run (slower)
def test_text_explain_is_quiet_plain_and_warns_about_unknown_words(tmp_path):
    done = smug("explain", "--tokens", "a superb balanced beer", "--out", str(tmp_path / "t"), "--quiet")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "\033[" not in done.stdout  # a pipe gets no colours
    assert "positive" in done.stdout or "negative" in done.stdout  # the class by name
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert lines == ["smug-opt: warning: 2 word(s) not in the vocabulary become <unk>: a, beer "
                     "(see --list-vocab)"], lines  # nothing else: no absl/oneDNN, no source lines
    record = json.loads((tmp_path / "t" / "record.json").read_text())
    assert record["unknown_words"] == ["a", "beer"]
    # padding is no part of the text: kept by construction, never selected or counted
    assert "/4 tokens" in done.stdout and record["cells_always_kept"] == 96
    assert 1 <= record["mask_size"] <= 4 and record["verified"] is True
    assert "<span" in (tmp_path / "t" / "explanation.html").read_text()  # the words, marked up


@pytest.mark.filterwarnings("ignore:.*not in the vocabulary")  # 'beer': the test before checks it
def test_rerun_into_one_folder_replaces_the_previous_run_and_resizes_images(tmp_path, capfd):
    from PIL import Image

    from smug_opt.data.mnist import load_digits

    out = tmp_path / "results"
    text = in_process(capfd, "explain", "--tokens", "superb beer", "--method", "smug_base", "--out", str(out))
    assert text.returncode == 0 and (out / "explanation.html").exists(), text.stderr[-2000:]
    big = tmp_path / "big.png"
    digit = (load_digits().x_test[0][..., 0] * 255).astype(np.uint8)
    Image.fromarray(digit).resize((100, 100)).save(big)
    image = in_process(capfd, "explain", "--input", str(big), "--method", "smug_base", "--out", str(out))
    assert image.returncode == 0, image.stderr[-2000:]
    assert "resized" in image.stderr and "100x100" in image.stderr
    assert "replaced the previous run's files" in image.stderr and "explanation.html" in image.stderr
    assert sorted(p.name for p in out.iterdir()) == ["cell_mask.npy", "mask.npy", "overlay.png",
                                                     "record.json", "saliency.npy"]
    assert json.loads((out / "record.json").read_text())["resized_from"] == [100, 100]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".results")]  # no staging left


# item 12: a larger --n in the same folder keeps the smaller run's digits and adds to them
# (through the CLI; tests/bench/test_stress.py checks the same on the runner, by default)
@pytest.mark.slow
def test_stress_with_a_larger_n_extends_the_same_digits(tmp_path):
    out = tmp_path / "stress"
    args = ("stress", "mnist", "--backend", "highs", "--time-limit", "60", "--quiet", "--out", str(out))
    three = smug(*args, "--n", "3")
    assert three.returncode == 0, three.stderr[-2000:]
    before = (out / "results.jsonl").read_text().splitlines()
    four = smug(*args, "--n", "4")
    assert four.returncode == 0, four.stderr[-2000:]
    after = (out / "results.jsonl").read_text().splitlines()
    assert len(before) == 3 and len(after) == 4 and after[:3] == before  # kept, one digit added
    table = json.loads((out / "table.json").read_text())
    assert table["config"]["n"] == 4 and table["backends"]["highs"]["all"]["total"] == 4
    assert "4/4" in four.stdout


# items 4 and 10: evaluate takes the model explain takes (logits too), names inputs by file,
# and resizes images by the same stated rule
def test_evaluate_reads_a_logits_model_and_names_inputs_by_file(tmp_path, capfd):
    import keras
    from PIL import Image

    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((28, 28, 1)), keras.layers.Conv2D(4, 3, activation="relu"),
                              keras.layers.Flatten(), keras.layers.Dense(3)])  # logits: no softmax
    model.save(tmp_path / "logits.keras")
    images = tmp_path / "images"
    images.mkdir()
    rng = np.random.default_rng(0)
    Image.fromarray(rng.integers(0, 255, (28, 28), dtype=np.uint8)).save(images / "cat.png")
    Image.fromarray(rng.integers(0, 255, (40, 40), dtype=np.uint8)).save(images / "dog.png")
    out = tmp_path / "eval"
    done = in_process(capfd, "evaluate", "--model", str(tmp_path / "logits.keras"), "--images", str(images),
                      "--methods", "centerbox,maxbox", "--out", str(out), "--quiet")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "softmax" in done.stderr and "dog.png (40x40)" in done.stderr
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    assert sorted({r["name"] for r in records}) == ["cat", "dog"]
    assert all(r["lsc"] is not None for r in records)


def test_only_results_reach_stdout_native_output_goes_to_stderr():
    import sys

    script = ("import os, sys\nfrom smug_opt.console import results_only_stdout\n"
              "with results_only_stdout():\n"
              "    os.write(1, b'native banner\\n')\n"
              "    print('| the table |')\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.stdout == "| the table |\n" and "native banner" in done.stderr


def test_a_command_line_naming_its_sub_command_imports_no_other_one():
    """``smug-opt check-certificate`` builds its own parser only: the other sub-commands'
    modules (and what they import) stay unloaded, and its usage text is the usual one."""
    done = smug("check-certificate", "--help", env={"PYTHONPROFILEIMPORTTIME": "1"})
    assert done.returncode == 0 and "usage: smug-opt check-certificate" in done.stdout
    imported = {line.split("|")[-1].strip() for line in done.stderr.splitlines()
                if line.startswith("import time:")}
    assert "smug_opt.check_certificate" in imported
    assert not imported & {"smug_opt.cli.embedded_inputs", "smug_opt.cli.explain_output"}  # explain's
    listing = smug("--help")  # without a sub-command: every one, as before
    assert "check-certificate" in listing.stdout and "explain" in listing.stdout


def test_a_mistyped_sub_command_is_told_every_command(capsys):
    """``check_certificate`` (the module's spelling) is no command: the usage error lists every
    one, not only the sub-command it resembles."""
    from smug_opt.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(["check_certificate", "problem.smug", "proof.vipr"])
    assert exit_.value.code == 2
    error = capsys.readouterr().err
    assert "invalid choice: 'check_certificate'" in error
    assert all(f"'{command}'" in error for command in ("solve", "explain", "verify", "check-certificate"))
