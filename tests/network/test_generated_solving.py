"""The generated nets (:mod:`generated_nets`, briefly trained) through what takes a model:
the whole-network stress problem, whose optimum must equal a brute force over every cell
mask run by PyTorch in float64 on the original module; ``verify`` on a VNN-LIB box; the
first-layer explanation; ``smug-opt inspect``. Each gives one answer in every format (ONNX
at two opsets, a factory, ``.pt2`` with ``-m slow``). Operators outside the list are one
error naming the node and its op type."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from generated_nets import Arch, build, draw, real_inputs, specs, torch64

torch = pytest.importorskip("torch")
pytest.importorskip("onnxruntime")

import smug_opt  # noqa: E402
from smug_opt.cli import main  # noqa: E402
from smug_opt.encode.full_network import full_network  # noqa: E402
from smug_opt.network.load import load_model  # noqa: E402
from smug_opt.network.torch_reader import read_torch  # noqa: E402
from smug_opt.robustness.instance import load_instance_model, verify_files  # noqa: E402

FAST_FORMATS = ("onnx11", "onnx17", "factory")
TINY = draw("mlp", 2, norm="scalar", flatten="reshape", dense="linear", act="relu", logit_relu=True,
            train=200)
EXPLAINED = draw("mlp", 3, norm="channel", flatten="view", dense="linear", act="relu", logit_relu=False,
                 hidden=12, train=200)
CNNS = [
    draw("cnn", 4, nhwc=True, norm="scalar", conv="stride", channels=2, bn=True, depthwise=False,
         residual=True, pad=False, pool="max_pad", head="flatten", flatten="view", dense="linear", act="relu",
         softmax=True, logit_relu=False, hidden=6, train=150),
    draw("cnn", 5, norm="none", conv="dilated", channels=2, bn=False, depthwise=True, residual=False,
         pad=True, pool="avg_pad_excl", head="flatten", flatten="flatten", dense="matmul", act="leaky",
         softmax=False, logit_relu=False, hidden=6, train=150),
]


def masked_fill(arch: Arch, module) -> np.ndarray:
    """The model input of a masked pixel per channel: 0 after the input normalisation."""
    channels = arch.input_shape[-1] if arch.choices.get("nhwc") else arch.input_shape[0]
    if arch.choices["norm"] == "none":
        return np.zeros(channels)
    return np.broadcast_to(module.mean.double().numpy().reshape(-1), (channels,)).copy()


def brute_force_cells(arch: Arch, module, x: np.ndarray, cell: int) -> int:
    """The fewest ``cell``×``cell`` cells whose pixels, the rest masked, keep the module's
    float64 prediction strictly on top: every mask of the grid, run by torch."""
    nhwc = bool(arch.choices.get("nhwc"))
    h, w = x.shape[:2] if nhwc else x.shape[1:]
    rows, cols = np.arange(h) // cell, np.arange(w) // cell
    cell_of = rows[:, None] * (-(-w // cell)) + cols[None, :]
    n_cells = int(cell_of.max()) + 1
    label = int(np.argmax(torch64(module, x[None])[0]))
    fill = masked_fill(arch, module)
    fill = fill[None, None, :] if nhwc else fill[:, None, None]
    best = n_cells + 1
    masks = ((np.arange(2 ** n_cells)[:, None] >> np.arange(n_cells)) & 1).astype(bool)
    for chunk in np.array_split(masks, max(1, len(masks) // 2048)):
        keep = chunk[:, cell_of]  # (batch, h, w)
        keep = keep[..., None] if nhwc else keep[:, None]
        scores = torch64(module, np.where(keep, x[None], fill[None]))
        others = np.delete(scores, label, axis=1)
        holds = (scores[:, label][:, None] > others).all(axis=1)
        if holds.any():
            best = min(best, int(chunk[holds].sum(axis=1).min()))
    return best


def stress_optimum(spec: str, x: np.ndarray, cell: int) -> float:
    problem = full_network(load_model(spec), x, cell=cell)
    result = smug_opt.solve(problem, backend="highs", time_limit=120, isolate=False)
    assert result.status.name == "OPTIMAL" and result.verified, (spec, result.status)
    return float(result.objective)


def check_stress(arch: Arch, folder, formats, digits: int, cell: int) -> None:
    """The stress optimum on ``digits`` held-out digits (those the module predicts with no
    tie at the top: a ReLU on the logits may zero them all) equals the brute force."""
    module = build(arch)
    found = specs(arch, module, folder, formats)
    xs = real_inputs(arch, 4 * digits)
    top = np.sort(torch64(module, xs), axis=1)
    xs = xs[top[:, -1] > top[:, -2]][:digits]
    assert len(xs), f"{arch}: every digit's prediction ties"
    for x in xs:
        expected = brute_force_cells(arch, module, x, cell)
        got = {fmt: stress_optimum(spec, x, cell) for fmt, spec in found.items()}
        assert set(got.values()) == {expected}, (arch, got, expected)


def test_stress_optimum_equals_a_brute_force_in_every_format(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    check_stress(TINY, tmp_path, FAST_FORMATS, digits=3, cell=10)  # 3x3 cells: 512 masks


def test_stress_cells_of_an_mlp_on_channels_last_colour_images(tmp_path, monkeypatch):
    """An MLP reading (H, W, C) images flattened as they come: each affine input in the
    cell of its pixel, the channels sharing it (``full_network`` of such a Network gave the
    grid 1 x 3072 and refused any cell > 1)."""
    monkeypatch.syspath_prepend(str(tmp_path))
    arch = draw("cifar", 7, features=False, nhwc=True, norm="channel", flatten="flatten", dense="linear",
                act="relu", logit_relu=False, softmax=False, hidden=8, train=100)
    check_stress(arch, tmp_path, ("onnx17",), digits=2, cell=11)  # 3x3 cells of a 32x32 image


def vnnlib_box(x: np.ndarray, label: int, n_out: int, eps: float) -> str:
    """The box ``x ± eps`` within [0, 1] and the unsafe region 'some class scores at least
    the label's'."""
    flat = x.reshape(-1)
    lines = [f"(declare-const X_{i} Real)" for i in range(flat.size)]
    lines += [f"(declare-const Y_{j} Real)" for j in range(n_out)]
    for i, v in enumerate(flat.tolist()):
        lines.append(f"(assert (<= X_{i} {min(v + eps, 1.0)!r}))")
        lines.append(f"(assert (>= X_{i} {max(v - eps, 0.0)!r}))")
    unsafe = " ".join(f"(and (>= Y_{j} Y_{label}))" for j in range(n_out) if j != label)
    lines.append(f"(assert (or {unsafe}))")
    return "\n".join(lines) + "\n"


def check_verify(arch: Arch, folder, formats, eps_answers: dict[float, str | None]) -> None:
    """The answer on the box of each ``eps`` around a digit, the same in every format and
    decided: the expected one, or either (None) where no answer is known beforehand."""
    module = build(arch)
    found = specs(arch, module, folder, formats)
    x = real_inputs(arch, 1)[0]
    label = int(np.argmax(torch64(module, x[None])[0]))
    for eps, expected in eps_answers.items():
        path = folder / f"box_{eps}.vnnlib"
        path.write_text(vnnlib_box(x, label, 10, eps))
        answers = {fmt: verify_files(load_instance_model(spec), path, time_limit=60)[0].answer
                   for fmt, spec in found.items()}
        decided = {expected} if expected else {"sat", "unsat"}
        assert len(set(answers.values())) == 1 and set(answers.values()) <= decided, (arch, eps, answers)


def test_verify_gives_one_answer_in_every_format(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    check_verify(TINY, tmp_path, FAST_FORMATS, {0.005: "unsat", 0.3: "sat"})


def test_first_layer_explanation_in_every_format(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    module = build(EXPLAINED)
    x = real_inputs(EXPLAINED, 1)[0]
    found = specs(EXPLAINED, module, tmp_path, ("onnx13", "factory"))
    results = {fmt: smug_opt.explain(spec, x, backend="highs", cell=7, k=4, gamma=0.5, time_limit=60)
               for fmt, spec in found.items()}
    assert {e.result.status.name for e in results.values()} == {"OPTIMAL"}
    assert len({e.result.objective for e in results.values()}) == 1, {f: e.result.objective for f, e in
                                                                      results.items()}
    assert len({tuple(e.neurons) for e in results.values()}) == 1


def test_inspect_prints_a_generated_net(tmp_path, capsys):
    arch = Arch("cnn", 4, {**CNNS[0].choices, "train": 0})
    path = specs(arch, build(arch), tmp_path, ("onnx13",))["onnx13"]
    assert main(["inspect", path, "--input-range", "0,1"]) == 0
    out = capsys.readouterr().out
    assert "layout channels_last" in out and "output 10 class scores (softmax)" in out


@pytest.mark.parametrize("layer, op", [("sin", "Sin"), ("transpose_conv", "ConvTranspose"),
                                       ("sigmoid", "Sigmoid"), ("square", "Mul")])
def test_an_operator_outside_the_list_is_one_error_naming_the_node(layer, op):
    from torch import nn

    class Odd(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.up = nn.ConvTranspose2d(1, 2, 3)
            self.fc = nn.LazyLinear(3)

        def forward(self, x):
            h = {"sin": torch.sin, "transpose_conv": self.up, "sigmoid": torch.sigmoid,
                 "square": lambda t: t * t}[layer](x)
            return self.fc(torch.flatten(h, 1))

    module = Odd()
    module(torch.zeros(1, 1, 6, 6))
    with pytest.raises(ValueError, match=rf"^ONNX node '/[\w/.]*{op}[\w_]*' (has op type {op}|\({op}\))"):
        read_torch(module, (1, 6, 6))


@pytest.mark.slow
@pytest.mark.parametrize("arch", CNNS, ids=lambda a: f"{a.family}{a.seed}")
def test_stress_on_cnns_equals_a_brute_force(arch, tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    check_stress(arch, tmp_path, (*FAST_FORMATS, "pt2"), digits=2, cell=7)


@pytest.mark.slow
@pytest.mark.parametrize("arch", [TINY, *CNNS], ids=lambda a: f"{a.family}{a.seed}")
def test_verify_on_every_format_including_pt2(arch, tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    check_verify(arch, tmp_path, ("onnx13", "factory", "pt2"), {0.0: "unsat", 0.002: None, 0.4: "sat"})


@pytest.mark.slow
@pytest.mark.parametrize("family, seed", list(itertools.product(("mlp", "cnn"), range(3))))
def test_stress_on_drawn_nets(family, seed, tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    arch = draw(family, seed, train=150, channels=2, hidden=6, logit_relu=False)  # (ReLU'd logits: TINY;
    # trained briefly, mlp 0 with them scores 0 for every class on every digit)
    check_stress(arch, tmp_path, ("onnx17", "factory"), digits=2, cell=7)
