"""Which backend solves: one by name, a race of named ones, or ``auto`` (the measured best
for the problem's class). Parsed once where a string comes in (a flag, a keyword); the
library below passes the typed value on and never re-parses it."""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["AUTO", "DEFAULT_BACKEND", "BackendChoice", "ChoiceKind"]

AUTO = "auto"
"""The name that races the backends measured best for the problem's class."""

DEFAULT_BACKEND = "highs"
"""The backend every signature and command uses when none is asked for."""


@enum.unique
class ChoiceKind(enum.Enum):
    """How many backends solve, and who picks them."""

    SINGLE = "single"
    """One backend, in its own worker."""
    RACE = "race"
    """The named backends at once; the first proof wins (:mod:`smug_opt.portfolio`)."""
    AUTO = "auto"
    """A race of the backends measured best for the problem's class."""


@dataclass(frozen=True)
class BackendChoice:
    """A parsed backend choice. ``names``: the one backend (SINGLE), the raced backends in
    order (RACE), or empty (AUTO: chosen per problem by :func:`smug_opt.portfolio.auto_backends`)."""

    kind: ChoiceKind
    names: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        expected = {ChoiceKind.SINGLE: len(self.names) == 1, ChoiceKind.AUTO: not self.names,
                    ChoiceKind.RACE: len(self.names) >= 1}[self.kind]
        if not expected or len(set(self.names)) != len(self.names):
            raise ValueError(f"a {self.kind.value} backend choice cannot name {list(self.names)}")

    @classmethod
    def parse(cls, text: str | BackendChoice, *, check: bool = True) -> BackendChoice:
        """``"highs"``, ``"auto"`` or a race ``"a,b,c"``; ``check`` (default) also asks the
        registry for each named backend, so an unknown or unusable one fails here, listing
        what is installed."""
        if isinstance(text, BackendChoice):
            return text
        if not isinstance(text, str):
            raise TypeError(f"backend must be a name or a BackendChoice, got {type(text).__name__}")
        stripped = text.strip()
        if stripped == AUTO:
            return cls(ChoiceKind.AUTO)
        names = tuple(name.strip() for name in stripped.split(","))
        if not stripped or not all(names) or len(set(names)) != len(names):
            raise ValueError(f"backend must be a backend name, 'auto' or distinct backend names "
                             f"separated by commas, got {text!r}")
        choice = cls(ChoiceKind.RACE if "," in stripped else ChoiceKind.SINGLE, names)
        if check:
            choice.check()
        return choice

    def check(self) -> None:
        """Raise the registry's error for a named backend that is unknown or unusable here."""
        from smug_opt.registry import backend_class

        for name in self.names:
            backend_class(name)

    @property
    def is_race(self) -> bool:
        """Whether several backends run at once (a race, or ``auto``)."""
        return self.kind is not ChoiceKind.SINGLE

    @property
    def name(self) -> str:
        """The single backend's name; raises ValueError for a race."""
        if self.kind is not ChoiceKind.SINGLE:
            raise ValueError(f"backend choice {self} is a race, not one backend")
        return self.names[0]

    def __str__(self) -> str:
        return AUTO if self.kind is ChoiceKind.AUTO else ",".join(self.names)
