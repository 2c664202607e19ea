"""Record a user data dir made by a real Chromium for the parser's unit tests:

    python -m tests.e2e.record_profiles tests/fixtures/profiles/chromium-156-linux

makes the profiles of tests/e2e/profiles.py in a fresh temporary directory and copies
what doctor reads of them (`Local State`, and each profile's `Preferences` and `Secure
Preferences`), byte for byte, into the directory named, with `recorded.json` saying which
browser wrote them and which ids it gave the copies.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

from native_host.hostproc import isolated_env
from tests.e2e import harness, profiles

FILES = ("Local State", "Default/Preferences", "Default/Secure Preferences",
         "Profile 1/Preferences", "Profile 1/Secure Preferences")  # fmt: skip


def main(destination: Path) -> int:
    chromium = harness.find_chromium()
    if chromium is None:
        sys.stderr.write("no chromium executable on PATH\n")
        return 1
    with tempfile.TemporaryDirectory(prefix="pedelec-profiles-") as scratch:
        root = Path(scratch)
        env = harness.browser_env(isolated_env({"PATH": "/usr/bin:/bin"}, root), root)
        made = profiles.make_profiles(chromium, root, env, root / "user-data")
        for name in FILES:
            target = destination / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(made.user_data_dir / name, target)
        facts = {
            "browser": harness.chromium_version(chromium),
            "user_data_dir": str(made.user_data_dir),
            "test_extension_id": harness.EXTENSION_ID,
            "unpacked_copy_id": made.unpacked_copy_id,
            "unpacked_copy": str(made.unpacked_copy),
            "packed_copy_id": made.packed_copy_id,
        }
        (destination / "recorded.json").write_text(json.dumps(facts, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
