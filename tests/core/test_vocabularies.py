"""Closed vocabularies are str enums, parsed once: the first layer's kind, the executor and
what a conformance check needs. Each compares equal to (and is written to JSON as) the
string it replaced, so records stay the same."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from smug_opt.backend import Capabilities, Capability
from smug_opt.executors import EXECUTORS, ExecutorKind, SequentialExecutor, check_executor_args, make_executor
from smug_opt.models.base import AffineLayer, LayerKind
from smug_opt.testing.checks import CHECKS


def test_a_layer_kind_given_as_text_becomes_the_enum():
    layer = AffineLayer("dense", np.ones((3, 2)), np.zeros(2), (), (), (), (3,), (2,))
    assert layer.kind is LayerKind.DENSE and layer.kind == "dense"
    assert json.dumps({"kind": layer.kind}) == '{"kind": "dense"}' and f"{layer.kind}" == "dense"
    with pytest.raises(ValueError, match="kind must be 'dense', 'conv1d' or 'conv2d', got 'conv3d'"):
        AffineLayer("conv3d", np.ones((3, 2)), np.zeros(2), (), (), (), (3,), (2,))


def test_the_executor_flag_is_parsed_once_into_its_kind():
    from smug_opt.cli import build_parser

    args = build_parser().parse_args(["explain", "--executor", "dask", "--scheduler", "tcp://h:1"])
    assert args.executor is ExecutorKind.DASK
    assert build_parser().parse_args(["explain"]).executor is ExecutorKind.LOCAL
    assert EXECUTORS == ("local", "dask") and str(ExecutorKind.LOCAL) == "local"
    assert check_executor_args("local", 1, None) is ExecutorKind.LOCAL
    with pytest.raises(ValueError, match="unknown --executor 'ray'; expected one of local, dask"):
        check_executor_args("ray", 1, None)
    with make_executor(ExecutorKind.LOCAL) as executor:
        assert isinstance(executor, SequentialExecutor)


def test_the_executor_flag_still_names_its_choices(capsys):
    from smug_opt.cli import build_parser

    with pytest.raises(SystemExit):
        build_parser().parse_args(["explain", "--executor", "ray"])
    assert "invalid choice: 'ray' (choose from 'local', 'dask')" in capsys.readouterr().err


def test_every_capability_flag_has_its_name_and_checks_need_names():
    assert {c.value for c in Capability} == {f.name for f in dataclasses.fields(Capabilities)}
    assert all(check.needs is None or isinstance(check.needs, Capability) for check in CHECKS)
    assert {check.needs for check in CHECKS} >= {Capability.EXACT, Capability.LP, Capability.RELU}
    declared = Capabilities(relu=True)
    assert declared.declares(Capability.RELU) and not declared.declares(Capability.EXACT)
