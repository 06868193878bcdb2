"""Benchmark suites: deterministic builds, the .smug cache, the registry and its errors."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from smug_opt.bench import suites as suites_module
from smug_opt.bench.generators import random_first_layer_problem, random_strict_problem
from smug_opt.bench.suites import (
    InstanceSpec,
    Suite,
    SuiteBuildError,
    SuiteUnavailableError,
    get_suite,
    load_suite,
    register_builder,
    register_suite,
    suite_dir,
)
from smug_opt.problem_file import load_problem


@pytest.fixture(autouse=True)
def private_registry_and_cache(tmp_path, monkeypatch):
    """A cache in tmp_path and a registry copy, so tests neither see nor leave suites."""
    monkeypatch.setenv("SMUG_OPT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(suites_module, "_SUITES", dict(suites_module._SUITES))


def tiny_suite(name: str = "tiny", version: str = "1", builder=None, requires=()) -> Suite:
    specs = lambda: [InstanceSpec(f"p{i}", {"seed": i}) for i in range(3)]  # noqa: E731
    build = builder or (lambda spec: random_strict_problem(12, 6, seed=spec.params["seed"]))
    return Suite(name, "three tiny problems", specs, build, requires=requires, version=version)


def test_synthetic_suite_is_built_once_and_deterministic(tmp_path, monkeypatch):
    instances = load_suite("synthetic")
    assert len(instances) == len(get_suite("synthetic").specs()) == 10
    assert all(i.problem_path.is_file() and i.problem_path.parent == suite_dir("synthetic")
               for i in instances)
    first = instances[0]
    assert first.features["vars"] == 25 and first.features["threshold"] == 0.5
    stamps = [i.problem_path.stat().st_mtime_ns for i in instances]
    assert [i.problem_path.stat().st_mtime_ns for i in load_suite("synthetic")] == stamps  # cached

    monkeypatch.setenv("SMUG_OPT_CACHE", str(tmp_path / "elsewhere"))
    again = load_suite("synthetic")
    for a, b in zip(instances, again, strict=True):
        pa, pb = load_problem(a.problem_path), load_problem(b.problem_path)
        assert (pa.A != pb.A).nnz == 0 and np.array_equal(pa.rhs, pb.rhs)


def test_unknown_suite_lists_the_registered_ones():
    with pytest.raises(ValueError, match="synthetic"):
        get_suite("no-such-suite")


def test_missing_dependency_is_a_clear_error():
    register_suite(tiny_suite(requires=("smug_opt_not_a_module.encoder",)))
    with pytest.raises(SuiteUnavailableError, match="smug_opt_not_a_module.encoder"):
        load_suite("tiny")


def test_builder_that_fails_names_the_instance():
    def broken(spec):
        raise ValueError("bad gamma")

    register_suite(tiny_suite(builder=broken))
    with pytest.raises(SuiteBuildError, match=r"'p0'.*bad gamma"):
        load_suite("tiny")


def test_duplicate_names_and_builder_versions():
    register_suite(tiny_suite())
    with pytest.raises(ValueError, match="already registered"):
        register_suite(tiny_suite())
    old = {i.name: i.problem_path.read_bytes() for i in load_suite("tiny")}
    with pytest.raises(ValueError, match="new version"):
        register_builder("tiny", lambda spec: random_strict_problem(12, 6), version="1")
    register_builder("tiny", lambda spec: random_strict_problem(14, 6, seed=9), version="2")
    rebuilt = load_suite("tiny")  # the version change invalidates the cache
    assert all(i.features["vars"] == 14 for i in rebuilt)
    assert all(i.problem_path.read_bytes() != old[i.name] for i in rebuilt)


def test_paper_scale_instance_has_the_papers_shape():
    spec = next(s for s in get_suite("paper-scale").specs() if s.params["k"] == 500)
    problem = get_suite("paper-scale").builder(spec)
    assert (problem.num_vars, problem.num_rows) == (56 * 56, 500)
    assert problem.has_strict and problem.metadata["cell"] == 4
    assert sorted({s.params["k"] for s in get_suite("paper-scale").specs()}) == [500, 1000, 3000, 5000]


def test_paper_scale_bias_free_family_is_homogeneous_at_gamma_zero():
    """The bias-free stems (a conv before BatchNorm): at γ = 0 every row is ``a·M > 0`` (most
    with mixed-sign ``a``), so the empty mask solves the relaxation ``a·M >= 0``; at γ = 0.5
    the right-hand sides are half the (positive) activations."""
    specs = {s.name: s for s in get_suite("paper-scale").specs()}
    assert {"nobias-g0-k3000-s0", "nobias-g0-k3000-s2", "nobias-g0.5-k3000-s1",
            "g0.5-k3000-s0"} <= set(specs)
    suite = get_suite("paper-scale")
    zero = suite.builder(specs["nobias-g0-k3000-s0"])
    half = suite.builder(specs["nobias-g0.5-k3000-s0"])
    assert zero.num_rows == half.num_rows == 3000 and zero.num_vars == 56 * 56
    assert np.all(zero.rhs == 0) and np.all(half.rhs > 0)
    signs = [np.sign(zero.A[i].data) for i in range(zero.num_rows)]
    assert all(s.max() > 0 for s in signs)
    assert sum(s.min() < 0 for s in signs) > zero.num_rows / 2
    assert "no bias" in zero.metadata["layer"]


@pytest.mark.skipif(importlib.util.find_spec("smug_opt.encode.first_layer") is None,
                    reason="the first-layer encoder is not available")
def test_random_first_layer_problem_matches_the_encoder():
    """The generator's rows are what the SMUG encoder writes for the same layer: the same
    matrix bit for bit, the right-hand sides up to the rounding of ``o`` (summation order)."""
    from smug_opt.encode.first_layer import build_problem
    from smug_opt.models.base import AffineLayer, resolve_padding

    rng = np.random.default_rng(5)  # the generator's draws, in its order
    weights = rng.normal(0.0, np.sqrt(2.0 / (3 * 3 * 2)), size=(3, 3, 2, 4))
    bias = rng.normal(0.0, 0.05, size=4)
    image = rng.random((10, 10, 2))
    pad = resolve_padding("same", 10, 3, 2, 1)
    layer = AffineLayer("conv2d", weights, bias, (2, 2), (1, 1), (pad, pad), (10, 10, 2), (5, 5, 4))
    o = layer.preactivation(image).ravel()
    positive = np.flatnonzero(o > 0)
    neurons = positive[np.argsort(-o[positive], kind="stable")[:20]]
    expected = build_problem(layer, image, neurons, gamma=0.5, cell=2)
    got = random_first_layer_problem(20, cell=2, gamma=0.5, seed=5, image_shape=(10, 10, 2), filters=4,
                                     kernel=3, stride=2)
    assert (got.A != expected.A).nnz == 0
    np.testing.assert_allclose(got.rhs, expected.rhs, rtol=1e-13, atol=1e-15)
    assert np.array_equal(got.senses, expected.senses)
