"""`python -m servebook.cli`."""

import sys

from . import main

main()
sys.exit(0)
