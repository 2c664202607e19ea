"""The entry point: subcommand words dispatch, anything else relays (spec 7.11 a)."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from native_host import __version__
from native_host.cli import SUBCOMMANDS


@pytest.mark.parametrize("word", sorted(SUBCOMMANDS))
def test_every_subcommand_module_has_a_main(word: str) -> None:
    module = importlib.import_module(SUBCOMMANDS[word][0])
    assert callable(module.main)


def test_version_and_help() -> None:
    version = subprocess.run(
        [sys.executable, "-m", "native_host", "version"], capture_output=True, text=True, check=True
    )
    assert version.stdout.strip() == f"pedelec-native-host {__version__}"
    usage = subprocess.run(
        [sys.executable, "-m", "native_host", "--help"], capture_output=True, text=True, check=True
    )
    for word in SUBCOMMANDS:
        assert word in usage.stdout


def test_a_relay_start_imports_no_subcommand_and_no_pydantic() -> None:
    """The host starts for every page load: the relay must not pay for what a ping
    does not use (spec 9.7)."""
    probe = (
        "import sys\n"
        "import native_host.relay, native_host.config, native_host.logs, native_host.origins\n"
        "heavy = [m for m in ('pydantic', 'native_host.devcore', 'native_host.install',\n"
        "         'native_host.launch', 'native_host.policy', 'native_host.subscriptions')\n"
        "         if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == ""
