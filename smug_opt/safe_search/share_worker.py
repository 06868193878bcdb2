"""Entry point of a safe-search worker, started by :func:`smug_opt.spawn.spawn`:
``python -m smug_opt.safe_search.share_worker FD``.

Receives one :class:`~smug_opt.safe_search.parallel._Share` on the socket ``FD``, searches
it and sends back the :class:`~smug_opt.safe_search.search.SearchOutcome` (anything written
to stdout, a solver's banner say, goes to stderr). A fresh interpreter, as every worker of
the project: the caller's main module is never run again (multiprocessing's spawn re-runs a
script that has no ``if __name__ == "__main__"``)."""

import os
import sys

if __name__ == "__main__":
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    from multiprocessing.connection import Connection

    from smug_opt.safe_search.parallel import search_share
    from smug_opt.spawn import exit_with_parent

    exit_with_parent()
    with Connection(int(sys.argv[1])) as conn:
        conn.send(search_share(conn.recv()))
