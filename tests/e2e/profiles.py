"""Real browser profiles holding the test extension in each way doctor tells apart, made
by Debian's Chromium itself (tests/e2e/test_doctor_profiles.py checks doctor against them;
tests/fixtures/profiles/chromium-156-linux/ is one such user data dir, recorded).

Two runs of the browser on one user data dir, each closed cleanly (`Browser.close`), so
the browser writes everything down:

1. profile `Default`, `--load-extension` of the test extension (the id its manifest `key`
   fixes) and of an unpacked copy without the key (an id derived from its folder, as a
   self-built Pedelec gets);
2. profile `Profile 1`, the test extension again, turned off on chrome://extensions, and
   a packed copy (a .crx signed with a key of its own, so another id) that "another
   program" installs through the user data dir's `External Extensions` folder.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from tests.e2e import harness
from tests.e2e.devtools import DevToolsBrowser, DevToolsError
from tests.e2e.harness import STEP_TIMEOUT

UNPACKED_NAME = "Pedelec e2e test (unpacked copy)"
PACKED_NAME = "Pedelec e2e test (packed copy)"
FIRST, SECOND = "Default", "Profile 1"
CRX_MAGIC = b"Cr24"
SIGNED_HEADER_DATA = 10000
"""The CrxFileHeader field holding SignedData, whose field 1 is the crx id (16 bytes)
(components/crx_file/crx3.proto)."""


@dataclass(frozen=True)
class MadeProfiles:
    """A user data dir with two profiles, and the ids the browser gave the copies."""

    user_data_dir: Path
    unpacked_copy_id: str
    packed_copy_id: str
    unpacked_copy: Path
    """The folder the unpacked copy was loaded from."""


def copy_extension(destination: Path, name: str) -> Path:
    """The test extension's files under another name and without its `key`."""
    shutil.copytree(harness.EXTENSION_DIR, destination)
    path = destination / "manifest.json"
    manifest = json.loads(path.read_text())
    del manifest["key"]
    path.write_text(json.dumps({**manifest, "name": name}, indent=2))
    return destination


def _fields(data: bytes) -> dict[int, bytes]:
    """The length-delimited fields of a protobuf message (the only kind a CRX header's
    path to its id has)."""
    found, at = {}, 0

    def varint() -> int:
        nonlocal at
        value, shift = 0, 0
        while True:
            byte = data[at]
            at += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return value

    while at < len(data):
        key = varint()
        if key & 7 != 2:
            raise ValueError(f"unexpected protobuf wire type {key & 7}")
        size = varint()
        found[key >> 3] = data[at : at + size]
        at += size
    return found


def crx_id(crx: bytes) -> str:
    """The extension id a CRX3 file carries in its signed header."""
    if crx[:4] != CRX_MAGIC or int.from_bytes(crx[4:8], "little") != 3:
        raise ValueError("not a CRX3 file")
    header = crx[12 : 12 + int.from_bytes(crx[8:12], "little")]
    raw = _fields(_fields(header)[SIGNED_HEADER_DATA])[1]
    return "".join(chr(ord("a") + int(c, 16)) for c in raw.hex())


def pack(chromium: str, directory: Path, env: Mapping[str, str]) -> Path:
    """`chromium --pack-extension`: `<directory>.crx`, signed with a new key."""
    scratch = directory.parent / f"{directory.name}-packer"
    done = subprocess.run(
        [chromium, *harness.CHROMIUM_FLAGS, f"--user-data-dir={scratch}",
         f"--pack-extension={directory}"],
        env=dict(env), capture_output=True, text=True, timeout=STEP_TIMEOUT,
    )  # fmt: skip
    crx = directory.with_suffix(".crx")
    if not crx.is_file():
        raise RuntimeError(f"--pack-extension wrote no {crx}: {done.stdout}{done.stderr}")
    return crx


def first_profile(
    chromium: str, env: Mapping[str, str], user_data_dir: Path, unpacked: Path, log: Path
) -> DevToolsBrowser:
    """The browser on `Default` with the test extension and the unpacked copy."""
    extensions = [harness.EXTENSION_DIR, unpacked]
    return DevToolsBrowser(chromium, user_data_dir, env, log, FIRST, extensions)


def make_profiles(
    chromium: str,
    root: Path,
    env: Mapping[str, str],
    user_data_dir: Path,
    in_first: Callable[[DevToolsBrowser, str], None] = lambda browser, unpacked_id: None,
    in_second: Callable[[], None] = lambda: None,
) -> MadeProfiles:
    """Both runs (see the module's docstring). `in_first` is called during the first,
    with the browser and the unpacked copy's id; `in_second` during the second."""
    unpacked = copy_extension(root / "unpacked-copy", UNPACKED_NAME)
    first = first_profile(chromium, env, user_data_dir, unpacked, root / f"chromium-{FIRST}.log")
    try:
        page = first.extensions_page()
        ids = {e["id"] for e in first.installed(page) if e["name"] == UNPACKED_NAME}
        (unpacked_id,) = ids
        in_first(first, unpacked_id)
    finally:
        first.close()

    crx = pack(chromium, copy_extension(root / "packed-copy", PACKED_NAME), env)
    packed_id = crx_id(crx.read_bytes())
    external = user_data_dir / "External Extensions"
    external.mkdir()
    entry = {"external_crx": str(crx), "external_version": "1.0"}
    (external / f"{packed_id}.json").write_text(json.dumps(entry))

    second = DevToolsBrowser(
        chromium, user_data_dir, env, root / f"chromium-{SECOND}.log", SECOND,
        [harness.EXTENSION_DIR],
    )  # fmt: skip
    try:
        page = second.extensions_page()
        second.set_enabled(page, harness.EXTENSION_ID, False)
        installed = harness.wait_until(
            lambda: packed_id in {e["id"] for e in second.installed(page)}
        )
        if not installed:
            raise DevToolsError(f"the browser never installed {crx} from {external}")
        in_second()
    finally:
        second.close()
    return MadeProfiles(user_data_dir, unpacked_id, packed_id, unpacked)
