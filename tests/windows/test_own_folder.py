"""On the Windows lane, with real ACLs: the bundle's executable checks its own folder
before it loads its interpreter (packaging/windows/launcher.c): a copy of the built bundle
runs from a folder only its user can change, and stops with exit status 3 and one line
naming the folder once Everyone may write that folder (another user could put their own
python313.dll beside it); `--check-folder`, what the MSI runs after installing the files,
makes the same check and exits without loading the interpreter. The rule `install` and
`doctor` judge a registered host by (native_host/install/host_location.py) says the same
of it, through the real GetNamedSecurityInfoW.
"""

from __future__ import annotations

import json

import pytest

from tests.support.msi import BUILD_IT, DIST, EXECUTABLE
from tests.support.wine import EVERYONE_WRITES, run_code, windows_path

pytestmark = [
    pytest.mark.process,
    pytest.mark.windows_lane,
    pytest.mark.xdist_group("windows_lane"),
]

PLAY = r"""
import json, os, shutil, subprocess, sys, tempfile
from native_host.install import host_location

def start(exe, argument):
    done = subprocess.run([exe, argument], capture_output=True, text=True, timeout=120,
                          stdin=subprocess.PIPE)
    return {"status": done.returncode, "stdout": done.stdout, "stderr": done.stderr}

out = {}
root = tempfile.mkdtemp(dir=os.environ["LOCALAPPDATA"])
folder = os.path.join(root, "pedelec-native-host")
def plain_copy(source, target):  # Wine 8 lacks CopyFile2, which shutil.copy2 calls
    with open(source, "rb") as read, open(target, "wb") as write:
        write.write(read.read())

shutil.copytree(sys.argv[1], folder, copy_function=plain_copy)
exe = os.path.join(folder, sys.argv[2])
out["private"] = start(exe, "version")
out["private_check"] = start(exe, "--check-folder")
out["private_rule"] = host_location.refusal(exe, os.environ)
os.remove(os.path.join(folder, "python313.dll"))
out["no_interpreter"] = start(exe, "version")
out["no_interpreter_check"] = start(exe, "--check-folder")
everyone_writes(folder)
out["shared"] = start(exe, "version")
out["shared_check"] = start(exe, "--check-folder")
out["shared_rule"] = host_location.refusal(exe, os.environ)
out["folder"] = folder
shutil.rmtree(root, ignore_errors=True)
print(json.dumps(out))
"""


def test_the_executable_refuses_to_start_from_a_folder_others_can_write(lane: None) -> None:
    bundle = DIST / "pedelec-native-host"
    if not (bundle / EXECUTABLE).is_file():
        pytest.fail(f"no built bundle in {bundle}: {BUILD_IT}", pytrace=False)
    code = f"import sys; sys.argv[1:] = {[windows_path(bundle), EXECUTABLE]!r}\n"
    seen = json.loads(run_code(code + EVERYONE_WRITES + PLAY, timeout=600))
    assert seen["private"]["status"] == 0, seen["private"]
    assert seen["private_check"] == {"status": 0, "stdout": "", "stderr": ""}
    assert seen["private_rule"] is None
    # `--check-folder` (what the MSI runs) checks and exits: no interpreter is loaded.
    assert seen["no_interpreter_check"] == {"status": 0, "stdout": "", "stderr": ""}
    assert seen["no_interpreter"]["status"] == 3
    assert "cannot load" in seen["no_interpreter"]["stderr"], seen["no_interpreter"]
    for shared in (seen["shared"], seen["shared_check"]):
        assert shared["status"] == 3, shared
        lines = shared["stderr"].strip().splitlines()
        assert len(lines) == 1 and shared["stdout"] == ""
        assert seen["folder"] in lines[0] and "writable by other users" in lines[0]
    assert (
        seen["folder"] in seen["shared_rule"] and "writable by other users" in seen["shared_rule"]
    )
