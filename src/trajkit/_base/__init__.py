"""Layer 0: array type aliases, errors, seeding and the version. Imports nothing from trajkit."""
