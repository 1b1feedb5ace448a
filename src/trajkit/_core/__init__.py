"""Layer 1: the pure NumPy core. Functions on arrays; imports only `trajkit._base`."""
