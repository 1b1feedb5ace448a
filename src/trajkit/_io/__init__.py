"""Layer 3: recorded-trajectory files. Imports the base, the core and the models."""
