"""``python -m smug_opt`` runs the ``smug-opt`` command line."""

import sys

from smug_opt.cli import main

sys.exit(main())
