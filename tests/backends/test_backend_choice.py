"""The backend choice is parsed once, at the edge, into a typed value; proofs and race
statuses are closed vocabularies that still read (and serialise) as their strings."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest

from smug_opt import Problem, solve
from smug_opt.backend import Status
from smug_opt.backend_choice import BackendChoice, ChoiceKind
from smug_opt.registry import UnknownBackendError
from smug_opt.result import PROOFS, Proof, RaceStatus


@pytest.mark.parametrize(("text", "kind", "names"), [
    ("highs", ChoiceKind.SINGLE, ("highs",)),
    (" auto ", ChoiceKind.AUTO, ()),
    ("highs, z3", ChoiceKind.RACE, ("highs", "z3")),
    ("z3,highs", ChoiceKind.RACE, ("z3", "highs")),
])
def test_a_backend_string_parses_into_its_kind_and_names(text, kind, names):
    choice = BackendChoice.parse(text)
    assert (choice.kind, choice.names) == (kind, names)
    assert BackendChoice.parse(str(choice)) == choice  # round trip through its text
    assert BackendChoice.parse(choice) is choice  # a parsed choice is never re-parsed
    assert pickle.loads(pickle.dumps(choice)) == choice  # it travels to workers
    assert choice.is_race == (kind is not ChoiceKind.SINGLE)


@pytest.mark.parametrize("text", ["", "highs,,z3", "highs,highs", ",", "z3 ,z3"])
def test_a_malformed_choice_is_one_clear_error(text):
    with pytest.raises(ValueError, match="distinct backend names separated by commas"):
        BackendChoice.parse(text)


def test_an_unknown_backend_fails_at_parse_time_naming_the_installed_ones():
    with pytest.raises(UnknownBackendError, match="highs"):
        BackendChoice.parse("hihgs")
    with pytest.raises(UnknownBackendError):
        BackendChoice.parse("highs,hihgs")
    assert BackendChoice.parse("hihgs", check=False).names == ("hihgs",)  # check=False: syntax only


def test_a_race_has_no_single_name():
    with pytest.raises(ValueError, match="is a race"):
        _ = BackendChoice.parse("auto").name
    with pytest.raises(ValueError, match="cannot name"):
        BackendChoice(ChoiceKind.SINGLE, ("a", "b"))


def test_solve_takes_a_parsed_choice_and_reports_proofs_as_an_enum():
    pytest.importorskip("highspy")
    p = Problem.from_arrays(np.array([[1.0, 1.0]]), [">"], [0.5])
    r = solve(p, BackendChoice.parse("highs"), time_limit=10)
    assert r.status is Status.OPTIMAL and r.objective == 1
    assert isinstance(r.proof, Proof) and r.proof == r.proof.value
    assert json.loads(json.dumps(r.to_dict()))["proof"] in PROOFS


def test_proof_and_race_status_read_as_their_strings():
    assert Proof.EXACT == "exact" and str(Proof.SOLVER) == "solver" and f"{Proof.EXACT}" == "exact"
    assert json.dumps([Proof.EXACT, RaceStatus.STOPPED]) == '["exact", "STOPPED"]'
    assert {RaceStatus.of(s) for s in Status} | {RaceStatus.STOPPED} == set(RaceStatus)
    assert RaceStatus.of(Status.NO_SOLUTION) == "NO_SOLUTION"
