"""``smug-opt bench``: list suites, run a benchmark (resumable), report on runs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from smug_opt.cli.options import add_executor_options, check_executor_options, executor_from_args
from smug_opt.cli.solve import add_strengthen_options, strengthen_setting
from smug_opt.outputs import check_out_dir

__all__ = ["add_parser", "run"]


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser("bench", help="benchmark backends on suites of problems",
                              description="Benchmark backends on suites of saved problems.")
    sub = p.add_subparsers(dest="bench_command", metavar="{list,run,report}", required=True)

    sub.add_parser("list", help="the registered suites, their instance counts and readiness",
                   description="List the registered benchmark suites: instances, how many are "
                               "cached, whether each is ready to run, and what it holds.")

    r = sub.add_parser("run", help="run backends on suites; resumable, results appended as JSONL")
    source = r.add_argument_group("instances (at least one)")
    source.add_argument("--suite", action="append", default=[], metavar="NAME",
                        help="a registered suite (repeatable; see `smug-opt bench list`)")
    source.add_argument("--instances", action="append", default=[], metavar="DIR", type=Path,
                        help="a folder of .smug problem files (repeatable)")
    r.add_argument("--backend", "--backends", dest="backends", default="all",
                   help="'all' (every usable backend) or names separated by commas (default all)")
    r.add_argument("--time-limit", type=float, default=60.0, help="seconds per job (default 60)")
    r.add_argument("--repeats", type=int, default=1, help="runs of each job (default 1)")
    r.add_argument("--threads", type=int, default=1, help="solver threads (default 1)")
    r.add_argument("--seed", type=int, default=0, help="solver seed, the same for every repeat (default 0)")
    r.add_argument("--grace", type=float, default=None,
                   help="seconds past the limit before a job process is killed (default 5: a "
                        "whole job process, unlike solve's warm worker, whose grace is 1 s), plus "
                        "3 times one exact check of the problem as timed by the job before it starts")
    r.add_argument("--memory-limit", type=float, default=None, metavar="MB",
                   help="kill a job whose resident memory passes MB (default: 1/8 of the "
                        "machine's RAM, at least 1024; inf: no limit)")
    add_strengthen_options(r)
    certify = r.add_mutually_exclusive_group()
    certify.add_argument("--certify", action="store_true", default=None,
                         help="prove every floating-point OPTIMAL/INFEASIBLE exactly within the job's "
                              "time limit, else downgrade it (solve's certify=True; the report's "
                              "'certified' column); default: solve's own choice")
    certify.add_argument("--no-certify", action="store_false", dest="certify", help="never certify")
    r.add_argument("--filter", default=None, metavar="GLOB", help="only instances whose name matches")
    add_executor_options(r, what="jobs")
    r.add_argument("--out", type=Path, default=None,
                   help="run directory (default bench/<suites>); re-running resumes it")
    r.add_argument("--retry-errors", action="store_true", help="also re-run jobs recorded as ERROR")
    r.add_argument("--quiet", action="store_true", help="no progress bar")

    rep = sub.add_parser("report", help="markdown + JSON + PNG figures for a run directory",
                         description="Summarise a benchmark run: per-backend solved counts, times, "
                                     "performance profiles and the virtual best, as markdown, JSON "
                                     "and PNG figures (optionally compared with an earlier run).")
    rep.add_argument("run_dir", type=Path, help="a directory written by `smug-opt bench run`")
    rep.add_argument("--compare", type=Path, default=None, metavar="RUN_DIR",
                     help="an earlier run: show per-backend deltas")
    rep.add_argument("--out", type=Path, default=None, help="report directory (default RUN_DIR/report)")
    rep.add_argument("--quiet", action="store_true", help="print only the report's path")
    return p


def run(args: argparse.Namespace) -> int:
    return {"list": _list, "run": _run, "report": _report}[args.bench_command](args)


def _list(args: argparse.Namespace) -> int:
    from smug_opt.bench.suites import cached_count, list_suites, suite_dir

    rows = [("suite", "instances", "cached", "status", "description")]
    for suite in list_suites():
        missing = suite.missing()
        rows.append((suite.name, str(len(suite.specs())), str(cached_count(suite)),
                     "ready" if not missing else "needs " + ", ".join(missing), suite.description))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row[:4], widths, strict=True)) + "  " + row[4])
    print(f"\ncache: {suite_dir('<suite>')}")
    return 0


def _run(args: argparse.Namespace) -> int:
    from smug_opt.bench.harness import RunConfig, resolve_backends, run_benchmark
    from smug_opt.bench.job import JOB_GRACE
    from smug_opt.spawn import resolve_memory_limit

    if not (args.suite or args.instances):
        raise ValueError("give --suite NAME or --instances DIR (see `smug-opt bench list`)")
    check_executor_options(args)
    if not args.time_limit > 0:
        raise ValueError(f"--time-limit must be positive, got {args.time_limit:g}")
    if args.repeats < 1:
        raise ValueError(f"--repeats must be at least 1, got {args.repeats}")
    if args.out is not None:
        check_out_dir(args.out)
    config = RunConfig(
        backends=resolve_backends(args.backends), time_limit=args.time_limit,
        suites=tuple(args.suite), instance_dirs=tuple(str(d) for d in args.instances),
        repeats=args.repeats, threads=args.threads, seed=args.seed,
        grace=JOB_GRACE if args.grace is None else args.grace,
        memory_limit_mb=resolve_memory_limit(args.memory_limit), instance_filter=args.filter,
        strengthen=_strengthen_text(args),
        certify="auto" if args.certify is None else "on" if args.certify else "off",
    )
    out = args.out or Path("bench") / "+".join([*args.suite, *(d.resolve().name for d in args.instances)])
    check_out_dir(out)
    with executor_from_args(args) as executor:
        try:
            outcome = run_benchmark(config, out, executor=executor, quiet=args.quiet,
                                    retry_errors=args.retry_errors)
        except KeyboardInterrupt:
            print(f"interrupted: finished jobs are in {out}; run the same command again to resume",
                  file=sys.stderr)
            return 130
    errors = sum(r.status.name == "ERROR" for r in outcome.records)
    print(f"{len(outcome.records)} jobs run ({errors} errors), {outcome.skipped} already done, "
          f"{outcome.planned} planned; results in {out / 'results.jsonl'}\n"
          f"report: smug-opt bench report {out}")
    return 0


def _strengthen_text(args: argparse.Namespace) -> str:
    """``"auto"``, ``"off"`` or the chosen pieces (``"all"``, ``"cuts,tables"``) for the run."""
    setting = strengthen_setting(args)
    if setting is None:
        return "auto"
    return "off" if setting is False else str(args.strengthen_pieces)


def _report(args: argparse.Namespace) -> int:
    from smug_opt.bench.report import write_report

    if not args.run_dir.is_dir():
        raise ValueError(f"{args.run_dir} is not a run folder (written by `smug-opt bench run`)")
    if args.out is not None:
        check_out_dir(args.out)
    files = write_report(args.run_dir, compare_with=args.compare, out_dir=args.out)
    if not args.quiet:
        print(files.markdown.read_text())
    print(f"report: {files.markdown}\nsummary: {files.summary}\nfigures: "
          + ", ".join(str(f) for f in files.figures), file=sys.stderr if not args.quiet else sys.stdout)
    return 0
