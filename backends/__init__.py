"""First-party smug-opt backends (installed as ``smug_opt_backends``, found by entry point)."""
