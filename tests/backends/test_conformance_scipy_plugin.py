"""The README's plugin example, tested as a plugin author would: three lines (the fixture
only installs it from tests/scipy_plugin for this session)."""

import pytest

from smug_opt.testing import parametrize_with_checks

pytestmark = pytest.mark.usefixtures("scipy_plugin")


@parametrize_with_checks("scipy-milp", "toy-bruteforce")
def test_conformance(backend, check, toy_plugin):
    check(backend)
