"""The conformance suite as pytest parametrisation (in the spirit of scikit-learn's
``parametrize_with_checks``): a plugin's whole conformance test is::

    from smug_opt.testing import parametrize_with_checks

    @parametrize_with_checks("my-backend")
    def test_conformance(backend, check):
        check(backend)

One test id per backend and check (``my-backend-check_infeasible``). A check that the
backend's declared capabilities rule out is skipped; one the backend declares in
``known_failures`` is an xfail with the declared reason, and fails (strict) when it
passes, so a stale declaration is noticed.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from smug_opt.testing.run_checks import (
    CheckNotApplicable,
    ConformanceError,
    conformance_checks,
    known_failure,
)

__all__ = ["parametrize_with_checks"]


def _as_test(name: str, check: Callable[[str], str | None]) -> Callable[[str], None]:
    """``check`` with the suite's outcomes turned into pytest's (skip, xfail, strict xpass).
    Known failures are looked up when the test runs, so the plugin may be installed by a
    fixture after collection."""
    import pytest

    @functools.wraps(check)
    def run(backend: str) -> None:
        expected = known_failure(backend, name)
        try:
            check(backend)
        except CheckNotApplicable as exc:
            pytest.skip(str(exc))
        except ConformanceError as exc:
            if expected:
                pytest.xfail(f"known failure: {expected} ({exc})")
            raise
        if expected:
            pytest.fail(f"[{backend}] {name} passed but is declared a known failure: {expected}; "
                        "remove it from known_failures")
    return run


def parametrize_with_checks(*backends: str) -> Any:
    """A ``pytest.mark.parametrize("backend, check", ...)`` over every conformance check on
    every named backend."""
    import pytest

    if not backends:
        raise ValueError("parametrize_with_checks needs at least one backend name")
    params = [pytest.param(backend, _as_test(name, check), id=f"{backend}-{name}")
              for backend in backends for name, check in conformance_checks()]
    return pytest.mark.parametrize(("backend", "check"), params)
