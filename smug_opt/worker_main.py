"""Entry point of a worker process: ``python -m smug_opt.worker_main BACKEND FD``."""

import sys

from smug_opt.workers import child_main

if __name__ == "__main__":
    child_main(sys.argv[1], int(sys.argv[2]))
