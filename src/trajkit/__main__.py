"""`python -m trajkit`: the same as the `trajkit` console script."""

import sys

from trajkit._cli.main import main

if __name__ == "__main__":
    sys.exit(main())
