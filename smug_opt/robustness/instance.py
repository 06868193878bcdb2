"""One verification instance from files: a model, a VNN-LIB property, a time limit; the
references that confirm counterexamples; the competition's result file.

:func:`load_instance_model` reads a model once (several instances share it);
:func:`verify_files` answers one instance (a property of several input boxes box by box:
``sat`` at the first box that has a counterexample, ``unsat`` when every box is);
:func:`results_text` writes what VNN-COMP expects in a result file (``unsat``/``unknown``,
or ``sat`` and the counterexample as ``((X_0 v) ... (Y_0 v) ...)``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from smug_opt.backend_choice import DEFAULT_BACKEND
from smug_opt.deadline import Deadline
from smug_opt.network.flat import FlatNetwork, Preprocess
from smug_opt.network.graph import Network
from smug_opt.robustness.decide import Verdict, decide
from smug_opt.robustness.query import RobustnessQuery
from smug_opt.vnnlib import VnnlibSpec, read_vnnlib_cases

__all__ = ["InstanceModel", "load_instance_model", "results_text", "verify_files"]

ONNXRUNTIME = "onnxruntime"
GRAPH = "graph-float64"


@dataclass(frozen=True, eq=False)
class InstanceModel:
    """A model as read (``network``), in flat form, and the evaluations of the original that
    confirm a counterexample (name → scores of a batch of flat model inputs)."""

    path: str
    network: Network
    preprocess: Preprocess
    flat: FlatNetwork
    references: dict[str, Callable[[np.ndarray], np.ndarray]]


def load_instance_model(path: str | Path) -> InstanceModel:
    """Read a model file (``.onnx``, ``.pt2``, ``.keras``/``.h5``) with
    :func:`smug_opt.network.load.load_model`; an ONNX file is also run by onnxruntime."""
    from smug_opt.network.load import load_model
    from smug_opt.network.lower import lower

    path = str(path)
    network = load_model(path)
    preprocess, flat = lower(network)
    references: dict[str, Callable[[np.ndarray], np.ndarray]] = {GRAPH: network.forward}
    if path.lower().endswith(".onnx"):
        references[ONNXRUNTIME] = _onnxruntime(path)
    return InstanceModel(path, network, preprocess, flat, references)


def _onnxruntime(path: str) -> Callable[[np.ndarray], np.ndarray]:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.log_severity_level = 3
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    given = session.get_inputs()[0]
    dtype = {"tensor(float)": np.float32, "tensor(double)": np.float64}.get(given.type)
    if dtype is None:
        raise ValueError(f"{path}: input {given.name!r} has type {given.type}, not float or double")
    shape = [d if isinstance(d, int) else 1 for d in given.shape]

    def run(x_batch: np.ndarray) -> np.ndarray:
        outs = [session.run(None, {given.name: x.reshape(shape).astype(dtype)})[0] for x in x_batch]
        return np.stack([np.asarray(o, dtype=np.float64).reshape(-1) for o in outs])

    return run


def check_compatible(model: InstanceModel, spec: VnnlibSpec) -> None:
    """Refuse a property whose sizes do not fit the model, or whose output rows are not
    pairwise comparisons when the model ends in softmax/sigmoid (the flat network gives the
    scores before it, which only preserves comparisons), or do not sum to 0 after a
    log-softmax (which shifts every score by one amount)."""
    n_in = int(np.prod(model.network.input_shape))
    if spec.num_inputs != n_in:
        raise ValueError(f"the property declares {spec.num_inputs} inputs X_i but {model.path} "
                         f"takes {n_in} (shape {model.network.input_shape})")
    if spec.num_outputs != model.flat.num_outputs:
        raise ValueError(f"the property declares {spec.num_outputs} outputs Y_j but {model.path} "
                         f"gives {model.flat.num_outputs}")
    if model.network.output == "log_softmax":
        # log_softmax(z) = z - logsumexp(z)·1: a row whose coefficients sum to 0 (exactly: fsum)
        # reads the same on z.
        for d in spec.disjuncts:
            if any(math.fsum(row) != 0.0 for row in d.matrix.tolist()):
                raise ValueError(f"{model.path} ends in log_softmax: only output rows whose coefficients "
                                 f"sum to 0 (comparisons of outputs, Y_i - Y_j <= c) are supported")
    elif model.network.output != "logits":
        for d in spec.disjuncts:
            m = d.matrix
            pairwise = (np.count_nonzero(m, axis=1) == 2) & (m.sum(axis=1) == 0) & (d.rhs == 0)
            if not np.all(pairwise):
                raise ValueError(f"{model.path} ends in {model.network.output}: only comparisons "
                                 f"between outputs (Y_i <= Y_j) are supported on its outputs")


def verify_files(model: InstanceModel, spec_path: str | Path, *, time_limit: float,
                 backend: str = DEFAULT_BACKEND, **options: Any) -> tuple[Verdict, tuple[VnnlibSpec, ...]]:
    """Answer the property in ``spec_path`` (plain or gzipped) about ``model``; also return
    its cases (one per input box). Boxes are decided in the file's order, each within an
    equal share of the time left."""
    cases = read_vnnlib_cases(spec_path)
    for spec in cases:
        check_compatible(model, spec)
    name = Path(spec_path).name
    start, deadline = time.monotonic(), Deadline.after(time_limit)
    verdicts: list[Verdict] = []
    for position, spec in enumerate(cases):
        share = (deadline.remaining() or 0.0) / (len(cases) - position)
        if share <= 0:
            break
        label = name if len(cases) == 1 else f"{name} box {position + 1}/{len(cases)}"
        query = RobustnessQuery.from_spec(model.flat, model.preprocess, spec, name=label)
        verdict = decide(query, time_limit=share, backend=backend, references=model.references, **options)
        if len(cases) == 1:
            return verdict, cases
        verdicts.append(verdict)
        if verdict.answer == "sat":
            break
    return _merged(verdicts, len(cases), time.monotonic() - start), cases


def _merged(verdicts: list[Verdict], n_boxes: int, seconds: float) -> Verdict:
    """One verdict for a property of ``n_boxes`` boxes from those of the boxes decided, in order."""
    notes = [f"box {i + 1}/{n_boxes}: {v.message}" for i, v in enumerate(verdicts) if v.message]
    decided_by = tuple(how for v in verdicts for how in v.decided_by)
    solves = tuple(s for v in verdicts for s in v.solves)
    last = verdicts[-1] if verdicts else None
    if last is not None and last.answer == "sat":
        return replace(last, seconds=seconds, decided_by=decided_by, solves=solves,
                       message="; ".join([*notes, f"counterexample in box {len(verdicts)} of {n_boxes}"]))
    if len(verdicts) == n_boxes and all(v.answer == "unsat" for v in verdicts):
        proof = "exact" if all(v.proof == "exact" for v in verdicts) else "solver"
        return Verdict("unsat", seconds, proof=proof, decided_by=decided_by, message="; ".join(notes),
                       solves=solves)
    open_boxes = [i + 1 for i, v in enumerate(verdicts) if v.answer == "unknown"]
    open_boxes += list(range(len(verdicts) + 1, n_boxes + 1))
    notes.append(f"box(es) {', '.join(map(str, open_boxes))} of {n_boxes} not decided")
    return Verdict("unknown", seconds, decided_by=decided_by, message="; ".join(notes), solves=solves)


def results_text(verdict: Verdict) -> str:
    """The competition's result file: the answer, then for ``sat`` the counterexample's
    inputs and outputs (onnxruntime's where it ran, else the float64 graph's)."""
    if verdict.answer != "sat" or verdict.x is None:
        return verdict.answer + "\n"
    outputs = (verdict.outputs.get(ONNXRUNTIME) or verdict.outputs.get(GRAPH)
               or verdict.outputs["flat-float64"])
    items = [f"(X_{i} {float(v)!r})" for i, v in enumerate(verdict.x)]
    items += [f"(Y_{j} {float(v)!r})" for j, v in enumerate(outputs)]
    return "sat\n(" + "\n ".join(items) + ")\n"
