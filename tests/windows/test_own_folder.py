"""On the Windows lane, with real ACLs: the bundle's executable checks its own folder
before it loads its interpreter (packaging/windows/launcher.c): a copy of the built bundle
runs from a folder only its user can change, and stops with exit status 3 and one line
naming the folder once Everyone may write that folder (another user could put their own
python313.dll beside it). The rule `install` and `doctor` judge a registered host by
(native_host/install/host_location.py) says the same of it, through the real
GetNamedSecurityInfoW.
"""

from __future__ import annotations

import json

import pytest

from tests.support.msi import BUILD_IT, DIST, EXECUTABLE
from tests.support.wine import run_code, windows_path

pytestmark = [
    pytest.mark.process,
    pytest.mark.windows_lane,
    pytest.mark.xdist_group("windows_lane"),
]

PLAY = r"""
import ctypes, json, os, shutil, subprocess, sys, tempfile
from ctypes import wintypes
from native_host.install import host_location

advapi32 = ctypes.WinDLL("advapi32", use_last_error=True)
advapi32.SetNamedSecurityInfoW.argtypes = [wintypes.LPWSTR, ctypes.c_int, wintypes.DWORD,
    ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]

def everyone_writes(path):
    sd, size = ctypes.c_void_p(), wintypes.DWORD()
    assert advapi32.ConvertStringSecurityDescriptorToSecurityDescriptorW(
        "D:(A;;FA;;;OW)(A;;FA;;;WD)", 1, ctypes.byref(sd), ctypes.byref(size))
    present, dacl, defaulted = wintypes.BOOL(), ctypes.c_void_p(), wintypes.BOOL()
    assert advapi32.GetSecurityDescriptorDacl(
        sd, ctypes.byref(present), ctypes.byref(dacl), ctypes.byref(defaulted))
    assert advapi32.SetNamedSecurityInfoW(path, 1, 0x4, None, None, dacl, None) == 0

def start(exe):
    done = subprocess.run([exe, "version"], capture_output=True, text=True, timeout=120,
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
out["private"] = start(exe)
out["private_rule"] = host_location.refusal(exe, os.environ)
everyone_writes(folder)
out["shared"] = start(exe)
out["shared_rule"] = host_location.refusal(exe, os.environ)
out["folder"] = folder
shutil.rmtree(root, ignore_errors=True)
print(json.dumps(out))
"""


def test_the_executable_refuses_to_start_from_a_folder_others_can_write(lane: None) -> None:
    bundle = DIST / "pedelec-native-host"
    if not (bundle / EXECUTABLE).is_file():
        pytest.fail(f"no built bundle in {bundle}: {BUILD_IT}", pytrace=False)
    code = f"import sys; sys.argv[1:] = {[windows_path(bundle), EXECUTABLE]!r}\n" + PLAY
    seen = json.loads(run_code(code, timeout=600))
    assert seen["private"]["status"] == 0, seen["private"]
    assert seen["private_rule"] is None
    shared = seen["shared"]
    assert shared["status"] == 3, shared
    lines = shared["stderr"].strip().splitlines()
    assert len(lines) == 1 and shared["stdout"] == ""
    assert seen["folder"] in lines[0] and "writable by other users" in lines[0]
    assert (
        seen["folder"] in seen["shared_rule"] and "writable by other users" in seen["shared_rule"]
    )
