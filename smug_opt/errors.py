"""Errors about one parameter's value, naming the parameter so each caller can say it its way.

The library names a parameter as its Python API spells it (``time_limit``); the command
line shows the flag a user typed (``--time-limit``) by reading :attr:`ParameterError.parameter`,
never by rewriting the message.
"""

from __future__ import annotations

__all__ = ["ParameterError"]


class ParameterError(ValueError):
    """A bad value for one parameter: ``parameter`` names it (as the Python API spells it),
    ``problem`` says what is wrong with it (``"must be at least 1, got 0"``); the message
    is the two together."""

    def __init__(self, parameter: str, problem: str) -> None:
        super().__init__(f"{parameter} {problem}")
        self.parameter = parameter
        self.problem = problem

    def __reduce__(self) -> tuple[type[ParameterError], tuple[str, str]]:
        return type(self), (self.parameter, self.problem)

    def named(self, name: str) -> str:
        """The message with the parameter called ``name`` (a command-line flag, say)."""
        return f"{name} {self.problem}"
