"""On the Windows lane: files and programs are trusted by their owner and DACL, read
through the real GetSecurityInfo and GetNamedSecurityInfoW (native_host/windows_acl.py,
docs/security.md "Windows: owners and ACLs"). DACLs are set with SetNamedSecurityInfoW from
SDDL, as an administrator or another user's installer would leave them.

Wine keeps a file's DACL only as Unix mode bits: any write right granted to others reads
back as Everyone 0x1301ff, and an owner set with SetNamedSecurityInfoW does not stay (the
owner is the Unix file's). So the lane shows "others may write" refused and "the user
alone" accepted, for files, directories and programs; the finer rules (another owner,
FILE_ADD_FILE beside a program but not further up) are unit-tested on DACLs built field
by field (tests/test_windows_acl.py).
"""

from __future__ import annotations

import json

import pytest

from tests.support.wine import run_code

pytestmark = [
    pytest.mark.process,
    pytest.mark.windows_lane,
    pytest.mark.xdist_group("windows_lane"),
]

CHECKS = r"""
import ctypes, json, os, shutil, tempfile
from ctypes import wintypes
from native_host import files
from native_host.launch import trust

advapi32 = ctypes.WinDLL("advapi32", use_last_error=True)
advapi32.SetNamedSecurityInfoW.argtypes = [wintypes.LPWSTR, ctypes.c_int, wintypes.DWORD,
    ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]

def set_sddl(path, sddl, what=0x4):  # DACL_SECURITY_INFORMATION (0x1: OWNER)
    sd, size = ctypes.c_void_p(), wintypes.DWORD()
    assert advapi32.ConvertStringSecurityDescriptorToSecurityDescriptorW(
        sddl, 1, ctypes.byref(sd), ctypes.byref(size)), ctypes.get_last_error()
    present, part, defaulted = wintypes.BOOL(), ctypes.c_void_p(), wintypes.BOOL()
    if what == 0x4:
        found = (ctypes.byref(present), ctypes.byref(part), ctypes.byref(defaulted))
        assert advapi32.GetSecurityDescriptorDacl(sd, *found)
        code = advapi32.SetNamedSecurityInfoW(path, 1, what, None, None, part, None)
    else:
        assert advapi32.GetSecurityDescriptorOwner(sd, ctypes.byref(part), ctypes.byref(defaulted))
        code = advapi32.SetNamedSecurityInfoW(path, 1, what, part, None, None, None)
    assert code == 0, code

def read(path):
    try:
        return {"ok": files.read_trusted(path).decode()}
    except files.FileRefusedError as exc:
        return {"reason": exc.reason, "text": exc.explanation}

def program(path):
    try:
        trust.open_trusted(path, os.environ).close()
        return {"ok": True}
    except trust.UntrustedProgramError as exc:
        return {"violation": exc.violation, "path": exc.path, "why": exc.why}

EVERYONE_WRITES = "D:(A;;FA;;;OW)(A;;FA;;;WD)"
out = {}
root = tempfile.mkdtemp(dir=os.environ["USERPROFILE"])
plain = os.path.join(root, "runtime.json")
with open(plain, "w") as f:
    f.write("{}")
out["plain"] = read(plain)
everyone = os.path.join(root, "app-launch.json")
shutil.copy(plain, everyone)
set_sddl(everyone, EVERYONE_WRITES)
out["everyone"] = read(everyone)
shared = os.path.join(root, "shared")
os.mkdir(shared)
inside = os.path.join(shared, "install-record.json")
shutil.copy(plain, inside)
set_sddl(shared, EVERYONE_WRITES)
out["shared_dir"] = read(inside)
# A program under C:\Program Files: fine as installed; refused when others may change it
# or its folders.
folder = tempfile.mkdtemp(prefix="Pedelec ", dir=r"C:\Program Files")
exe = os.path.join(folder, "bin", "Pedelec.exe")
os.mkdir(os.path.dirname(exe))
shutil.copy(os.path.join(os.path.dirname(os.__file__), "..", "python.exe"), exe)
out["program"] = program(exe)
set_sddl(exe, EVERYONE_WRITES)
out["program_writable"] = program(exe)
set_sddl(exe, "D:(A;;FA;;;OW)(A;;0x1200a9;;;WD)")
set_sddl(folder, EVERYONE_WRITES)
out["folder_writable"] = program(exe)
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def checks(lane: None) -> dict[str, dict[str, str]]:
    result: dict[str, dict[str, str]] = json.loads(run_code(CHECKS, timeout=300))
    return result


def test_a_file_in_the_users_profile_is_read(checks: dict[str, dict[str, str]]) -> None:
    assert checks["plain"] == {"ok": "{}"}


def test_a_file_everyone_may_write_is_refused(checks: dict[str, dict[str, str]]) -> None:
    assert checks["everyone"]["reason"] == "writable_by_others", checks["everyone"]
    assert "Everyone (S-1-1-0) may change it" in checks["everyone"]["text"]
    assert checks["shared_dir"]["reason"] == "directory_writable_by_others", checks["shared_dir"]


def test_a_program_others_may_change_is_refused(checks: dict[str, dict[str, str]]) -> None:
    assert checks["program"] == {"ok": True}
    assert checks["program_writable"]["violation"] == "executablePermissions", checks
    assert "(the executable) is writable by other users" in checks["program_writable"]["why"]
    assert checks["folder_writable"]["violation"] == "executableDirectory"
    assert "(a directory on the way) is writable" in checks["folder_writable"]["why"]
