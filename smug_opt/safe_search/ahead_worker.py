"""Entry point of the helper computing HiGHS's verified root cuts ahead
(:mod:`smug_opt.safe_search.ahead`), started by :func:`smug_opt.spawn.spawn`:
``python -m smug_opt.safe_search.ahead_worker FD``.

Receives ``(problem, rounds, seconds, min_binaries, limit_mb)`` on the socket ``FD`` and
exits (status 3) once its resident memory passes ``limit_mb`` (None: no budget; sampled every
:data:`~smug_opt.spawn.POLL_SECONDS` by a thread of its own); for each problem
certification's search will take (:func:`~smug_opt.safe_search.ahead.searched_problems`)
sends ``(fingerprint, rounds done, the round's new cuts)`` after each round (the parent
puts them together), and ``(fingerprint, rounds, [])`` when the rounds are over before
their number (:class:`~smug_opt.safe_search.verified_cuts.Round`'s ``final``: as good as
all of them). Ended by its parent."""

import os
import sys
import threading
import time

if __name__ == "__main__":
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    from multiprocessing.connection import Connection

    from smug_opt.safe_search.ahead import searched_problems
    from smug_opt.safe_search.verified_cuts import fingerprint, root_cut_rounds
    from smug_opt.spawn import POLL_SECONDS, MemoryWatch, exit_with_parent

    def watch(limit_mb: float) -> None:
        memory = MemoryWatch(os.getpid(), limit_mb)
        while not memory.over():
            time.sleep(POLL_SECONDS)
        os._exit(3)

    exit_with_parent()
    with Connection(int(sys.argv[1])) as conn:
        problem, rounds, seconds, min_binaries, limit_mb = conn.recv()
        if limit_mb is not None:
            threading.Thread(target=watch, args=(limit_mb,), name="ahead-memory", daemon=True).start()
        deadline = time.monotonic() + seconds
        for part in searched_problems(problem, min_binaries):
            key, sent = fingerprint(part), 0
            for done, found in enumerate(root_cut_rounds(part, deadline - time.monotonic(), rounds), 1):
                conn.send((key, rounds if found.final else done, found.cuts[sent:]))
                sent = len(found.cuts)
