"""The reader campaign on networks nobody here has seen: seeded random PyTorch nets
(:mod:`generated_nets`) exported to ONNX at opsets 11, 13 and 17 with a fixed or dynamic
batch, saved as ``torch.export`` ``.pt2`` files and named by a factory, each read by
:func:`~smug_opt.network.load.load_model` and run against PyTorch in float64 and
onnxruntime on real digits. A handful of nets by default; ``-m slow`` draws many."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from generated_nets import FAMILIES, FORMATS, Arch, build, draw, export_onnx, real_inputs, specs, torch64

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from smug_opt.network.load import load_model  # noqa: E402
from smug_opt.network.lower import lower  # noqa: E402

FAST = [  # (a net, the formats the fast run reads it in: torch.export takes 5-10 s, -m slow)
    draw("cnn", 0, nhwc=True, norm="channel", conv="asym", bn=True, depthwise=True, residual=True, pad=True,
         pool="avg_ceil", head="flatten", flatten="view", dense="addmm", act="relu6", softmax=True),
    draw("cifar", 1, conv="same", pool="avg_pad", head="global", flatten="squeeze", act="clamp",
         dense="matmul", logit_relu=True, bn=True),
    draw("mlp", 2, norm="scalar", flatten="reshape", dense="linear", act="leaky", logit_relu=True),
]
ONNX_AND_FACTORY = ("onnx11", "onnx13", "onnx17", "factory")
FAST_FORMATS = (ONNX_AND_FACTORY, ("onnx11", "onnx17", "factory"), ONNX_AND_FACTORY)
ATOL = 1e-7
"""The graph's float64 scores against torch's: ONNX holds float attributes (LeakyRelu's alpha,
Clip's bounds in opset 11) in float32, while ``module.double()`` computes with Python's 0.1."""


def scores(network, x: np.ndarray) -> np.ndarray:
    """The network's outputs as the source model gives them (a final softmax applied)."""
    z = network.forward(x)
    if network.output == "softmax":
        e = np.exp(z - z.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
    return z


def check_reads(arch: Arch, folder, formats=FORMATS, *, dynamic: bool = True) -> None:
    """Every format of ``arch`` reads to the same weights (one digest) and computes what
    torch computes in float64 (and onnxruntime in float32), through the graph and the flat form."""
    module = build(arch)
    x = real_inputs(arch)
    expected = torch64(module, x)
    digests = {}
    for fmt, spec in specs(arch, module, folder, formats, dynamic=dynamic).items():
        network = load_model(spec)
        digests[fmt] = network.digest
        where = f"{arch} as {fmt}"
        np.testing.assert_allclose(scores(network, x), expected, rtol=0, atol=ATOL, err_msg=where)
        pre, flat = lower(network)
        flat_scores = flat.forward(pre(x.reshape(len(x), -1)))[-1]
        np.testing.assert_allclose(flat_scores, network.forward(x), rtol=0, atol=1e-9, err_msg=where)
        if fmt.startswith("onnx"):
            session = ort.InferenceSession(spec, providers=["CPUExecutionProvider"])
            batch = x if dynamic else x[:1]
            got = session.run(None, {"x": batch.astype(np.float32)})[0]
            np.testing.assert_allclose(got, expected[: len(batch)], rtol=0, atol=2e-5, err_msg=where)
    assert len(set(digests.values())) == 1, digests


@pytest.mark.parametrize("arch, formats", list(zip(FAST, FAST_FORMATS, strict=True)),
                         ids=lambda a: f"{a.family}{a.seed}" if isinstance(a, Arch) else "")
def test_generated_net_reads_alike_in_every_format(arch, formats, tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    check_reads(arch, tmp_path, formats)


def test_a_fixed_batch_reads_as_a_dynamic_one(tmp_path):
    check_reads(FAST[2], tmp_path, ("onnx11", "onnx13"), dynamic=False)


@pytest.mark.slow
@pytest.mark.parametrize("family, seed", list(itertools.product(FAMILIES, range(12))))
def test_many_generated_nets(family, seed, tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    arch = draw(family, seed)
    formats = FORMATS if family == "mlp" or seed < 3 else ONNX_AND_FACTORY
    check_reads(arch, tmp_path, formats, dynamic=bool(seed % 2))


def test_linear_on_a_3d_tensor(tmp_path):
    """nn.Linear on ``(N, 1, F)`` exports MatMul on a 3-D tensor (was refused: 'Dense with
    weight ... needs a vector')."""
    check_reads(draw("mlp", 3, dense="linear3d", norm="none"), tmp_path, ("onnx11", "onnx17"))


@pytest.mark.slow
@pytest.mark.parametrize("arch", FAST, ids=lambda a: f"{a.family}{a.seed}")
def test_fast_nets_as_pt2_files(arch, tmp_path):
    check_reads(arch, tmp_path, ("onnx17", "pt2"))


@pytest.mark.slow
@pytest.mark.parametrize("opset", [11, 13, 17])
def test_the_exporters_constant_folding(opset, tmp_path):
    """``do_constant_folding=True`` (the exporter's default) pre-computes constants but
    fuses nothing: the same network."""
    arch = FAST[0]
    module = build(arch)
    path = export_onnx(module, arch, tmp_path / "folded.onnx", opset=opset, fold=True)
    x = real_inputs(arch)
    np.testing.assert_allclose(scores(load_model(str(path)), x), torch64(module, x), rtol=0, atol=ATOL)
