"""``smug-opt check-certificate``: does a VIPR certificate prove its claim about a ``.smug``?
Exit 0 and what was proven, or exit 1 and the first failing step."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

__all__ = ["add_parser", "run"]


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    from smug_opt.check_certificate import DEFAULT_MAX_BYTES, DEFAULT_MAX_WORK

    p = subparsers.add_parser(
        "check-certificate", help="verify a VIPR certificate for a .smug problem exactly",
        description="Verify, in exact rational arithmetic, a VIPR 1.0 certificate (as written "
                    "by `smug-opt solve --certificate`) for a .smug problem: the MILP is derived "
                    "from the .smug (docs/certificates.md) and must be the one the certificate "
                    "states; then every solution and derivation is checked. Exit 0 with what was "
                    "proven (optimal value v, infeasible, lower bound b); exit 1 with the first "
                    "failure, or for an unreadable file. Independent of the solvers and of the "
                    "certificate writer.")
    p.add_argument("problem", type=Path, help="the problem (.smug)")
    p.add_argument("certificate", type=Path, help="the certificate (.vipr)")
    p.add_argument("--max-bytes", type=int, default=DEFAULT_MAX_BYTES, metavar="N",
                   help=f"refuse a certificate over N bytes (default {DEFAULT_MAX_BYTES:,})")
    p.add_argument("--max-work", type=int, default=DEFAULT_MAX_WORK, metavar="N",
                   help="refuse a certificate needing over N coefficient operations "
                        f"(default {DEFAULT_MAX_WORK:,})")
    return p


def run(args: argparse.Namespace) -> int:
    from smug_opt.check_certificate import CertificateRejected, check_certificate

    for flag, value in (("--max-bytes", args.max_bytes), ("--max-work", args.max_work)):
        if value <= 0:
            raise ValueError(f"{flag} must be positive, got {value}")
    start = time.perf_counter()
    try:
        proven = check_certificate(args.problem, args.certificate, max_bytes=args.max_bytes,
                                   max_work=args.max_work)
    except CertificateRejected as exc:
        print(f"smug-opt check-certificate: rejected: {exc}", file=sys.stderr)
        return 1
    print(f"proven: {proven.describe()} ({args.problem.name}, {proven.derivations:,} derivations, "
          f"{proven.work:,} operations, {time.perf_counter() - start:.2f} s)")
    return 0
