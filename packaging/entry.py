"""PyInstaller entry script: the same `main` as the `pedelec-native-host` console script."""

import sys

from native_host.cli import main

if __name__ == "__main__":
    sys.exit(main())
