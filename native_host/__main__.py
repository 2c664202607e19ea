"""`python -m native_host` runs the same entry point as the console script."""

import sys

from native_host.cli import main

sys.exit(main())
