"""How many HiGHS claims get a VIPR certificate that the checker accepts, and at what cost.

For each instance of a bench suite: HiGHS (isolated worker, uncertified) within the time
limit; for an OPTIMAL or INFEASIBLE claim, :func:`smug_opt.certificate.write_certificate`
within ``--certificate-time`` (in-process), then ``smug-opt check-certificate`` in its own
process. "solve s" is the solve's own time (``times.solve``: the backend's run, without
worker start-up); "total s" the whole call.

    python benchmarks/certify/vipr_certificates.py mnist-first-layer --time-limit 10 > table.md

``suite`` may also be a folder of ``.smug`` files (e.g. a cached stress suite's, whose
whole-network encodings carry ReLUs).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from smug_opt import load_problem, solve
from smug_opt.bench.suites import load_suite
from smug_opt.certificate import CLAIMS, CertificateError, write_certificate


def _check(problem: Path, certificate: Path) -> tuple[bool, float]:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "smug_opt", "check-certificate", str(problem),
                           str(certificate)], capture_output=True, text=True, check=False)
    return done.returncode == 0, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("suite", help="a bench suite's name, or a folder of .smug files")
    parser.add_argument("--time-limit", type=float, default=10.0)
    parser.add_argument("--certificate-time", type=float, default=60.0)
    parser.add_argument("--match", default="", help="only instances whose name matches this regex")
    args = parser.parse_args()
    rows = []
    print("| instance | HiGHS | objective | solve s | total s | certificate s | nodes | cert/solve "
          "| cert/total | check s | checked |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(args.suite)
        instances = ([(path.stem, path) for path in sorted(folder.glob("*.smug"))] if folder.is_dir()
                     else [(inst.name, inst.problem_path) for inst in load_suite(args.suite)])
        for name, problem_path in instances:
            if not re.search(args.match, name):
                continue
            p = load_problem(problem_path)
            r = solve(p, "highs", time_limit=args.time_limit, certify=False)
            claim = r.status.name
            if claim not in CLAIMS:
                print(f"| {name} | {claim} | {r.objective} | {r.times.solve:.2f} | "
                      f"{r.times.total:.2f} | - | - | - | - | - | no claim |", flush=True)
                continue
            out = Path(tmp) / f"{name}.vipr"
            start = time.perf_counter()
            try:
                cert = write_certificate(p, claim, r.x, out, seconds=args.certificate_time)
                nodes, note = cert.nodes, ""
            except CertificateError as exc:
                nodes, note = None, str(exc)
            cert_s = time.perf_counter() - start
            checked, check_s = _check(problem_path, out) if nodes is not None else (False, 0.0)
            rows.append((nodes is not None, checked, cert_s, r.times.solve, r.times.total, check_s))
            shown = note[:60] if nodes is None else ("yes" if checked else "REJECTED")
            print(f"| {name} | {claim} | {r.objective} | {r.times.solve:.2f} | {r.times.total:.2f} | "
                  f"{cert_s:.2f} | {nodes if nodes is not None else '-'} | "
                  f"{cert_s / max(r.times.solve, 1e-3):.1f} | {cert_s / r.times.total:.2f} | "
                  f"{check_s:.2f} | {shown} |", flush=True)
    written = [row for row in rows if row[0]]
    if not written:
        print(f"\n{len(rows)} OPTIMAL/INFEASIBLE claims; no certificate written.")
        return
    ratio_solve = np.array([row[2] / max(row[3], 1e-3) for row in written])
    ratio_total = np.array([row[2] / row[4] for row in written])
    print(f"\n{len(rows)} OPTIMAL/INFEASIBLE claims; certificates written for {len(written)}, the checker "
          f"accepted {sum(row[1] for row in written)} and rejected {sum(not row[1] for row in written)}. "
          f"Certificate time / solve time: median {np.median(ratio_solve):.1f}, max {ratio_solve.max():.1f}; "
          f"/ total solve call: median {np.median(ratio_total):.2f}, max {ratio_total.max():.2f}. "
          f"Check seconds: median {np.median([row[5] for row in written]):.2f}, max "
          f"{max(row[5] for row in written):.2f}. Load at the end: {os.getloadavg()[0]:.2f} (2 cores).")


if __name__ == "__main__":
    main()
