"""``smug-opt solve``: solve a saved problem on one backend and print the verified result."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from smug_opt.backend_choice import DEFAULT_BACKEND, BackendChoice
from smug_opt.result import Proof

if TYPE_CHECKING:
    from smug_opt.ir import Problem
    from smug_opt.result import SolveResult
    from smug_opt.strengthen import Pieces

__all__ = [
    "SolverKwargs",
    "add_certificate_options",
    "add_parser",
    "add_solver_options",
    "add_strengthen_options",
    "certificate_line",
    "check_certificate_options",
    "proof_line",
    "run",
    "solver_kwargs",
    "strengthen_setting",
]


def add_solver_options(p: argparse.ArgumentParser, *, default_backend: str = DEFAULT_BACKEND) -> None:
    """The flags every solving command shares."""
    p.add_argument("--backend", default=default_backend,
                   help=f"backend name (see `smug-opt backends`; default {default_backend}), 'auto' "
                        f"(race the backends measured best for the problem) or a race 'a,b,c'")
    p.add_argument("--race-workers", type=int, default=None, metavar="N",
                   help="with a race: backends run at once (default: the CPU count)")
    p.add_argument("--time-limit", type=float, default=60.0,
                   help="seconds for the whole solve, lowering included (default 60)")
    p.add_argument("--threads", type=int, default=1, help="solver threads (default 1)")
    p.add_argument("--seed", type=int, default=0, help="solver random seed (default 0)")
    p.add_argument("--gap", type=float, default=0.0,
                   help="relative gap accepted as optimal (default 0: prove optimality)")
    p.add_argument("--memory-limit", type=float, default=None, metavar="MB",
                   help="the solver worker's memory budget: a worker that passes it is killed and "
                        "the solve ends ERROR (\"memory limit\") or FEASIBLE with its best verified "
                        "solution (default: 1/8 of the machine's RAM, at least 1024; inf: none)")
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="backend-specific option, repeatable (e.g. --option encoding=pb)")
    add_strengthen_options(p)


def add_strengthen_options(p: argparse.ArgumentParser) -> None:
    """``--strengthen/--no-strengthen`` and ``--strengthen-pieces``."""
    p.add_argument("--strengthen", action=argparse.BooleanOptionalAction, default=None,
                   help="solve a strengthened, equivalent problem (cuts, fixings, implied rows, "
                        "integer rows, components; see README) and verify against the original (default: "
                        "only when >= 10%% of the rows are strict and homogeneous, a·x > 0)")
    p.add_argument("--strengthen-pieces", default="all", metavar="LIST",
                   help="with --strengthen: 'all' (default), 'none' or pieces separated by "
                        "commas from fixings,cuts,tables,implied,integer_rows,components")


def strengthen_setting(args: argparse.Namespace) -> bool | Pieces | None:
    """None (the default choice), False, or the :class:`~smug_opt.strengthen.Pieces`
    chosen by the flags."""
    from smug_opt.strengthen import Pieces

    pieces = Pieces.parse(args.strengthen_pieces)
    if not args.strengthen:
        if args.strengthen_pieces != "all":
            raise ValueError("--strengthen-pieces needs --strengthen")
        return None if args.strengthen is None else False
    return pieces


def _parse_value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


class SolverKwargs(TypedDict):
    """The keyword arguments of :func:`smug_opt.solve` the shared solver flags set."""

    backend: BackendChoice
    time_limit: float
    threads: int
    seed: int
    relative_gap: float
    extras: dict[str, Any]
    memory_limit_mb: float | None
    strengthen: bool | Pieces | None
    workers: int | None


def solver_kwargs(args: argparse.Namespace) -> SolverKwargs:
    """Keyword arguments of :func:`smug_opt.solve` from the shared flags (the backend
    parsed, once, into a :class:`~smug_opt.backend_choice.BackendChoice`)."""
    extras = {}
    for item in args.option:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--option expects KEY=VALUE, got {item!r}")
        extras[key.strip()] = _parse_value(value.strip())
    return {"backend": BackendChoice.parse(args.backend), "time_limit": args.time_limit,
            "threads": args.threads, "seed": args.seed, "relative_gap": args.gap, "extras": extras,
            "memory_limit_mb": args.memory_limit, "strengthen": strengthen_setting(args),
            "workers": args.race_workers}


def proof_line(result: SolveResult) -> str:
    """What a result's status rests on, in words."""
    claim = {"OPTIMAL": "optimality", "INFEASIBLE": "infeasibility"}.get(result.status.name)
    if claim is None:
        return f"none: {result.status.name} claims no proof"
    if result.proof == Proof.EXACT:
        return f"{claim} proven in exact arithmetic"
    basis = "bound" if claim == "optimality" else "search"
    provers = [e.backend for e in result.race if e.proved]  # a race: only the one that proved it
    who = provers[0] if provers else result.solver
    return (f"{claim} rests on {who}'s floating-point {basis} (not an exact proof; "
            f"--certify proves or downgrades it)")


def add_certificate_options(p: argparse.ArgumentParser, *, extra: str = "") -> None:
    """``--certificate FILE`` and ``--certificate-time SECONDS``."""
    p.add_argument("--certificate", type=Path, default=None, metavar="FILE",
                   help="write a VIPR certificate of an OPTIMAL or INFEASIBLE claim to FILE, checkable "
                        "with `smug-opt check-certificate` (docs/certificates.md)" + extra)
    p.add_argument("--certificate-time", type=float, default=None, metavar="SECONDS",
                   help="seconds for proving the certificate (default: the --time-limit)")


def check_certificate_options(args: argparse.Namespace) -> None:
    """Reject a ``--certificate`` path that cannot be written, before anything is solved."""
    path = args.certificate
    if args.certificate_time is not None and not args.certificate_time > 0:
        raise ValueError(f"--certificate-time must be positive, got {args.certificate_time:g}")
    if path is None:
        if args.certificate_time is not None:
            raise ValueError("--certificate-time needs --certificate FILE")
        return
    if path.is_dir():
        raise ValueError(f"--certificate {path} is a folder; give a file name (e.g. out.vipr)")
    if not path.parent.is_dir():
        raise FileNotFoundError(f"--certificate {path}: its folder {path.parent} does not exist")


def certificate_line(problem: Problem, result: SolveResult, path: Path, seconds: float,
                     source: str = "") -> tuple[bool, str]:
    """Write the certificate of ``result``'s claim about ``problem`` to ``path``: whether it
    was written, and a line saying where and what it proves, or why there is none."""
    from smug_opt.certificate import CLAIMS, CertificateError, write_certificate

    claim = result.status.name
    if claim not in CLAIMS:
        return False, f"none written: {claim} is not a claim a certificate proves (OPTIMAL, INFEASIBLE)"
    try:
        cert = write_certificate(problem, claim, result.x, path, seconds=seconds, source=source)
    except CertificateError as exc:
        return False, f"none written ({exc}); the claim stands as reported"
    return True, f"{path}: {cert.summary()}"


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "solve", help="solve a saved .smug problem on one backend",
        description="Solve a saved problem and print the verified result (exit status: "
                    "README, 'Exit status').")
    p.add_argument("problem", type=Path, help="a problem file written by save_problem (.smug)")
    add_solver_options(p)
    certify = p.add_mutually_exclusive_group()
    certify.add_argument("--certify", action="store_true", default=None,
                         help="prove a floating-point solver's OPTIMAL/INFEASIBLE exactly within the "
                              "time limit (exact enumeration or z3), else downgrade it to "
                              "FEASIBLE/NO_SOLUTION (default: only for inputs outside the "
                              "float-faithful range: subnormal numbers, huge costs)")
    certify.add_argument("--no-certify", action="store_false", dest="certify",
                         help="never certify, whatever the input")
    add_certificate_options(p)
    p.add_argument("--json", action="store_true", help="print the full result as JSON")
    p.add_argument("--no-x", action="store_true", help="omit the solution vector from --json")
    p.add_argument("--verbose", action="store_true", help="show the solver's own log (on stderr)")
    return p


def run(args: argparse.Namespace) -> int:
    from smug_opt.cli import EXIT_NO_ANSWER

    if args.problem.is_dir():
        raise ValueError(f"{args.problem} is a folder; give a problem file (.smug)")
    if not args.problem.is_file():
        raise FileNotFoundError(f"{args.problem}: no such problem file")
    check_certificate_options(args)
    from smug_opt import load_problem, solve

    problem = load_problem(args.problem)
    result = solve(problem, verbose=args.verbose, certify=args.certify, **solver_kwargs(args))
    certificate = None
    if args.certificate is not None:
        seconds = args.time_limit if args.certificate_time is None else args.certificate_time
        certificate = certificate_line(problem, result, args.certificate, seconds, str(args.problem))
    if args.json:
        record = result.to_dict(include_x=not args.no_x)
        if certificate is not None:
            record["certificate"] = {"written": certificate[0], "note": certificate[1]}
        print(json.dumps(record, indent=2))
    else:
        t = result.times
        print(f"problem    {args.problem} ({problem!r})")
        print(f"backend    {result.backend} ({result.solver})")
        print(f"status     {result.status.name}")
        print(f"objective  {result.objective}")
        print(f"bound      {result.bound}   gap {result.gap}")
        print(f"proof      {proof_line(result)}")
        print(f"solution   {result.verification}")
        print(f"time       total {t.total:.3f}s  (lower {t.lower:.3f}s, solve {t.solve:.3f}s, "
              f"verify {t.verify:.3f}s, overhead {t.overhead:.3f}s)")
        if result.strengthening is not None:
            print(f"strengthen {result.strengthening.summary()} ({t.strengthen:.3f}s)")
        from smug_opt.portfolio import describe

        for line in describe(result):
            print(f"race       {line}")
        for issue in result.numeric_issues:
            print(f"numeric    {issue}")
        if result.message:
            print(f"note       {result.message}")
        if certificate is not None:
            print(f"certificate {certificate[1]}")
    if result.status.name == "ERROR":
        print(f"solver error: {result.message}", file=sys.stderr)
        return EXIT_NO_ANSWER
    if result.x is None:  # INFEASIBLE (proven) or NO_SOLUTION (limit hit): no answer to use
        print(f"no solution: {result.status.name}", file=sys.stderr)
        return EXIT_NO_ANSWER
    return 0
