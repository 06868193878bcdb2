"""Entry point of a safe-search worker: ``python -m smug_opt.safe_search.share_worker PARENT_PID``.

Reads one pickled :class:`~smug_opt.safe_search.parallel._Share` on stdin, searches it and
writes the pickled :class:`~smug_opt.safe_search.search.SearchOutcome` on what was stdout
(anything else written there, a solver's banner say, goes to stderr). A fresh interpreter,
as every worker of the project: the caller's main module is never run again
(multiprocessing's spawn re-runs a script that has no ``if __name__ == "__main__"``)."""

import os
import pickle
import sys

if __name__ == "__main__":
    answer_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    from smug_opt.safe_search.parallel import search_share
    from smug_opt.spawn import exit_with_parent

    exit_with_parent(int(sys.argv[1]))
    outcome = search_share(pickle.load(sys.stdin.buffer))
    with os.fdopen(answer_fd, "wb") as answer:
        answer.write(pickle.dumps(outcome))
