"""PyInstaller entry script: the bundle's executable starts from the sealed start image
beside it (`cli.start_bundle`, packaging/release/frozen.py writes it), as the Windows
bundle's own executable does; without a usable image, the same `main` as the console
script, importing the usual way."""

import sys

from native_host.cli import start_bundle

if __name__ == "__main__":
    sys.exit(start_bundle())
