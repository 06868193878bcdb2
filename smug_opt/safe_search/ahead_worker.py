"""Entry point of the helper computing HiGHS's verified root cuts ahead
(:mod:`smug_opt.safe_search.ahead`), started by :func:`smug_opt.spawn.spawn`:
``python -m smug_opt.safe_search.ahead_worker FD``.

Receives ``(problem, rounds, seconds, min_binaries)`` on the socket ``FD``; for each problem
certification's search will take (:func:`~smug_opt.safe_search.ahead.searched_problems`)
sends ``(fingerprint, rounds done, cuts)`` after each round, and once more with ``rounds``
when the rounds end early (no new cut: as good as all of them). Ended by its parent."""

import os
import sys
import time

if __name__ == "__main__":
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    from multiprocessing.connection import Connection

    from smug_opt.safe_search.ahead import searched_problems
    from smug_opt.safe_search.covers import Cut
    from smug_opt.safe_search.verified_cuts import fingerprint, root_cut_rounds
    from smug_opt.spawn import exit_with_parent

    exit_with_parent()
    with Connection(int(sys.argv[1])) as conn:
        problem, rounds, seconds, min_binaries = conn.recv()
        deadline = time.monotonic() + seconds
        for part in searched_problems(problem, min_binaries):
            key, done = fingerprint(part), 0
            cuts: list[Cut] = []
            for done, cuts in enumerate(root_cut_rounds(part, deadline - time.monotonic(), rounds), 1):
                conn.send((key, done, cuts))
            if time.monotonic() < deadline:
                conn.send((key, rounds, cuts))
