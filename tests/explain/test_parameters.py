"""SMUG parameters: one frozen value, checked once, and one set of defaults per model that
every entry point (explain, batch, evaluate, both CLIs) resolves the same way."""

from __future__ import annotations

import argparse
import warnings

import numpy as np
import pytest

from smug_opt.batch import ExplainSettings
from smug_opt.models import zoo
from smug_opt.models.catalog import describe, smug_parameters
from smug_opt.models.description import GENERIC_IMAGE_MODEL
from smug_opt.parameters import PAPER_PARAMETERS, Method, SmugParameters


@pytest.mark.parametrize(("changes", "message"), [
    ({"k": 0}, "k must be at least 1"),
    ({"cell": 0}, "cell must be at least 1"),
    ({"cell": (2, 0)}, "cell must be at least 1"),
    ({"gamma": -0.5}, "gamma must be at least 0"),
    ({"gamma": float("nan")}, "gamma must be at least 0"),
    ({"steps": 0}, "steps must be at least 1"),
    ({"method": "smug_plus"}, "method must be one of smug, smug_base"),
])
def test_a_bad_parameter_is_rejected_on_construction_naming_it(changes, message):
    with pytest.raises(ValueError, match=message):
        SmugParameters(**changes)


def test_parameters_are_normalised_values():
    p = SmugParameters(method="smug_base", k=np.int64(7), gamma=1, cell=[2, 3])
    assert p.method is Method.SMUG_BASE and f"{p.method}" == "smug_base" and str(p.method) == "smug_base"
    assert (type(p.k), type(p.gamma), p.cell) == (int, float, (2, 3))
    assert p.updated(k=None, gamma=0.5) == SmugParameters(method="smug_base", k=7, gamma=0.5, cell=(2, 3))
    with pytest.raises(TypeError, match="unknown SMUG parameter"):
        p.updated(kk=3)


def test_the_embedded_models_declare_their_own_defaults_and_others_get_the_papers():
    assert describe("mnist-cnn").smug == SmugParameters(k=100, gamma=0.5, cell=2)
    assert describe("text-cnn").smug == SmugParameters(k=25, gamma=0.0, cell=1)
    assert describe("some/net.keras") is GENERIC_IMAGE_MODEL
    assert GENERIC_IMAGE_MODEL.smug == PAPER_PARAMETERS == SmugParameters(k=3000, gamma=0.0, cell=4, steps=64)
    for name in zoo.available_models():
        assert describe(name).name == name


def test_the_text_models_facts_agree_with_its_data():
    from smug_opt.data.text import PAD_ID

    text = describe("text-cnn")
    assert text.padding_token == PAD_ID and text.vocabulary
    assert text.class_label(1) == "1 (positive)" and describe("mnist-cnn").class_label(3) == "3"


def _explain_cli_settings(argv: list[str]) -> ExplainSettings:
    from smug_opt.cli import explain as cli_explain

    parser = argparse.ArgumentParser()
    cli_explain.add_parser(parser.add_subparsers())
    args = parser.parse_args(["explain", *argv])
    return cli_explain._settings(args, args.model or "mnist-cnn")


def _evaluate_cli_parameters(argv: list[str], model: str) -> SmugParameters:
    from smug_opt.cli import evaluate as cli_evaluate

    parser = argparse.ArgumentParser()
    cli_evaluate.add_parser(parser.add_subparsers())
    args = parser.parse_args(["evaluate", *argv])
    return smug_parameters(model, k=args.k, gamma=args.gamma, cell=args.cell)


@pytest.mark.parametrize(("model", "evaluate_argv"), [
    ("mnist-cnn", []), ("text-cnn", ["--suite", "text"]), ("net.keras", ["--model", "net.keras"]),
])
def test_every_entry_point_resolves_the_same_defaults_for_the_same_model(model, evaluate_argv):
    """explain(), explain_many(), evaluate() and both CLIs fill in unset parameters by one
    rule; the library entry points are read through the function each of them calls."""
    own = describe(model).smug
    assert smug_parameters(model) == own  # explain(model, x) and evaluate(model, ...)
    assert ExplainSettings.for_model(model).params == own  # explain_many(model, inputs)
    assert _explain_cli_settings(["--model", model]).params == own
    assert _evaluate_cli_parameters(evaluate_argv, model) == own
    # a flag replaces just its parameter, everywhere
    assert _explain_cli_settings(["--model", model, "--k", "7"]).params == own.updated(k=7)
    assert _evaluate_cli_parameters([*evaluate_argv, "--k", "7"], model) == own.updated(k=7)


def test_old_keywords_of_explain_settings_still_work_with_a_deprecation_warning():
    with pytest.warns(DeprecationWarning, match="params=SmugParameters"):
        old = ExplainSettings(k=200, cell=2, backend="highs")
    assert old.params == SmugParameters(k=200, cell=2) and old.backend == "highs"
    assert old.to_dict()["k"] == 200 and old.to_dict()["method"] == "smug"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ExplainSettings().params == PAPER_PARAMETERS
