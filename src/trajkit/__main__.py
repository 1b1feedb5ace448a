"""`python -m trajkit`: the same as the `trajkit` console script."""

from trajkit._cli.main import console_main

if __name__ == "__main__":
    console_main()
