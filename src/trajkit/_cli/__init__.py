"""Layer 4: the `trajkit` command line. May import every other layer."""
