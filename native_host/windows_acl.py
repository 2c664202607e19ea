"""Who owns a file on Windows and who may change it: its owner SID and its DACL
(docs/security.md, "Windows: owners and ACLs").

Windows has no mode bits: the rule Linux applies to uids and `chmod` bits (files.py,
launch/trust.py) is applied here to SIDs and access control entries. A file or directory
is trusted when its owner is the user, SYSTEM, Administrators or TrustedInstaller, and no
other SID is allowed a right that changes it:

- a file: FILE_WRITE_DATA, FILE_APPEND_DATA, DELETE, WRITE_DAC, WRITE_OWNER,
  GENERIC_WRITE, GENERIC_ALL;
- a directory: FILE_DELETE_CHILD, DELETE, WRITE_DAC, WRITE_OWNER, GENERIC_WRITE,
  GENERIC_ALL (replace or rename what is in it, or itself, or give itself more rights);
- the folder a program is started from, also FILE_ADD_FILE and FILE_ADD_SUBDIRECTORY:
  Windows loads DLLs from a program's own folder first, so a file planted beside it runs.

Adding entries to any other directory is what a sticky directory allows on Linux: `C:\\`
grants Authenticated Users FILE_ADD_SUBDIRECTORY and `%ProgramData%` grants Users
FILE_ADD_FILE and FILE_ADD_SUBDIRECTORY, inherited by every folder made in it; what others
create there is theirs, and the owner rule refuses it. Inherit-only entries (CREATOR
OWNER's, for instance) give nothing on the object itself and are skipped; deny entries
are not subtracted (a refusal on their account is the safe mistake).

The parsing and the decision are pure (tested on Linux); `refusal` reads the real
security descriptor (through the Windows bundle's built-in calls, else ctypes) and runs
on Windows only.
"""

from __future__ import annotations

import struct
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import ModuleType

SYSTEM = "S-1-5-18"
ADMINISTRATORS = "S-1-5-32-544"
TRUSTED_INSTALLER = "S-1-5-80-956008885-3418522649-1831038044-1853292631-2271478464"
OWNER_RIGHTS = "S-1-3-4"
"""Stands for the owner, who is one of the trusted SIDs once the owner has been checked."""
TRUSTED_OWNERS = frozenset({SYSTEM, ADMINISTRATORS, TRUSTED_INSTALLER})
"""Besides the user: the system itself, as root is on Linux."""
NAMES = {
    "S-1-1-0": "Everyone",
    "S-1-5-11": "Authenticated Users",
    "S-1-5-32-545": "Users",
    "S-1-5-4": "Interactive",
    "S-1-5-32-546": "Guests",
    "S-1-3-0": "Creator Owner",
    SYSTEM: "SYSTEM",
    ADMINISTRATORS: "Administrators",
    TRUSTED_INSTALLER: "TrustedInstaller",
}
"""Names of well-known SIDs, for messages only."""

# Access mask bits (winnt.h). On a directory 0x2 is FILE_ADD_FILE, 0x4 FILE_ADD_SUBDIRECTORY.
FILE_WRITE_DATA = 0x2
FILE_APPEND_DATA = 0x4
FILE_DELETE_CHILD = 0x40
DELETE = 0x10000
WRITE_DAC = 0x40000
WRITE_OWNER = 0x80000
GENERIC_ALL = 0x10000000
GENERIC_WRITE = 0x40000000
_CHANGE_RIGHTS = DELETE | WRITE_DAC | WRITE_OWNER | GENERIC_WRITE | GENERIC_ALL

FILE = "file"
DIRECTORY = "directory"
PROGRAM_FOLDER = "program folder"
WRITE_RIGHTS = {
    FILE: _CHANGE_RIGHTS | FILE_WRITE_DATA | FILE_APPEND_DATA,
    DIRECTORY: _CHANGE_RIGHTS | FILE_DELETE_CHILD,
    PROGRAM_FOLDER: _CHANGE_RIGHTS | FILE_DELETE_CHILD | FILE_WRITE_DATA | FILE_APPEND_DATA,
}
"""What others must not be allowed, by what is checked (see the module's docstring)."""

# What `refusal` answers (None: trusted).
FOREIGN_OWNER = "foreign_owner"
WRITABLE = "writable_by_others"
UNREADABLE = "unreadable"

_ACE_HEADER = struct.Struct("<BBH")  # AceType, AceFlags, AceSize
_ACL_HEADER = struct.Struct("<BBHHH")  # AclRevision, Sbz1, AclSize, AceCount, Sbz2
_INHERIT_ONLY_ACE = 0x08
_ALLOWED = frozenset({0x0, 0x9})  # ACCESS_ALLOWED_ACE, ACCESS_ALLOWED_CALLBACK_ACE
_ALLOWED_OBJECT = frozenset({0x5, 0xB})  # ... _OBJECT_ACE: flags, then up to two GUIDs
_DENIED = frozenset({0x1, 0x6, 0xA, 0xC})  # ACCESS_DENIED_(OBJECT_|CALLBACK_)*ACE
_ANYONE = "an unknown SID"


class Ace:
    """One entry of a DACL: `kind` is "allow", "deny" or "other" (an allow we cannot
    read, judged as allowing anything to anyone)."""

    __slots__ = ("flags", "kind", "mask", "sid")

    def __init__(self, kind: str, flags: int, mask: int, sid: str) -> None:
        self.kind = kind
        self.flags = flags
        self.mask = mask
        self.sid = sid

    def __repr__(self) -> str:
        return f"Ace({self.kind} {self.sid} 0x{self.mask:x} flags=0x{self.flags:x})"


def sid_string(raw: bytes) -> str:
    """A binary SID as `S-1-5-21-...` (ValueError when it is not one)."""
    if len(raw) < 8 or raw[0] != 1 or len(raw) < 8 + 4 * raw[1]:
        raise ValueError("not a SID")
    authority = int.from_bytes(raw[2:8], "big")
    subs = struct.unpack_from(f"<{raw[1]}I", raw, 8)
    return "-".join(["S", "1", str(authority), *(str(s) for s in subs)])


def _sid_length(raw: bytes, at: int) -> int:
    if len(raw) < at + 8:
        raise ValueError("truncated SID")
    return 8 + 4 * raw[at + 1]


def parse_acl(raw: bytes) -> list[Ace]:
    """The entries of a binary ACL (ValueError when it is truncated or malformed)."""
    if len(raw) < _ACL_HEADER.size:
        raise ValueError("truncated ACL")
    _revision, _, size, count, _ = _ACL_HEADER.unpack_from(raw)
    if size > len(raw):
        raise ValueError("ACL larger than its buffer")
    aces = []
    at = _ACL_HEADER.size
    for _ in range(count):
        if at + _ACE_HEADER.size > size:
            raise ValueError("truncated ACE")
        kind, flags, ace_size = _ACE_HEADER.unpack_from(raw, at)
        if ace_size < 8 or at + ace_size > size:
            raise ValueError("ACE outside its ACL")
        body = raw[at : at + ace_size]
        mask = int.from_bytes(body[4:8], "little")
        sid_at = 8
        if kind in _ALLOWED_OBJECT:
            object_flags = int.from_bytes(body[8:12], "little")
            sid_at = 12 + 16 * bin(object_flags & 0x3).count("1")
        if kind in _ALLOWED or kind in _ALLOWED_OBJECT:
            end = sid_at + _sid_length(body, sid_at)
            aces.append(Ace("allow", flags, mask, sid_string(body[sid_at:end])))
        elif kind in _DENIED:
            aces.append(Ace("deny", flags, mask, ""))
        else:
            aces.append(Ace("other", flags, 0xFFFFFFFF, _ANYONE))
        at += ace_size
    return aces


def _name(sid: str) -> str:
    return f"{NAMES[sid]} ({sid})" if sid in NAMES else sid


def judge(owner: str, aces: list[Ace] | None, user: str, what: str) -> tuple[str, str] | None:
    """Why a file (`what`: FILE, DIRECTORY or PROGRAM_FOLDER) with this owner and DACL
    (None: a NULL DACL, which lets everyone do anything) is not the user's alone, as
    `(FOREIGN_OWNER or WRITABLE, detail)`; None when it is."""
    if owner != user and owner not in TRUSTED_OWNERS:
        return FOREIGN_OWNER, f"its owner is {_name(owner)}, not this user ({user})"
    if aces is None:
        return WRITABLE, "it has no access control list: everyone may change it"
    writers = {user, OWNER_RIGHTS, *TRUSTED_OWNERS}
    forbidden = WRITE_RIGHTS[what]
    for ace in aces:
        if ace.kind == "deny" or ace.flags & _INHERIT_ONLY_ACE:
            continue
        if ace.mask & forbidden and ace.sid not in writers:
            return WRITABLE, f"{_name(ace.sid)} may change it (access mask 0x{ace.mask:x})"
    return None


def refusal(path: str, what: str, fd: int | None = None) -> tuple[str, str] | None:
    """The owner and DACL of `path` (of the open descriptor `fd` when given, so what is
    checked is what is read) judged for this process's user: `(reason, detail)` or None.
    Windows only."""
    try:
        owner, dacl, user = _read_security(path, fd)
        aces = None if dacl is None else parse_acl(dacl)
        return judge(sid_string(owner), aces, sid_string(user), what)
    except (OSError, ValueError) as exc:
        return UNREADABLE, f"its owner and access list cannot be read: {exc}"


BUILT_IN_CALLS = "_pedelec_windows"
"""The module of these calls built into the Windows bundle's executable
(packaging/windows/windows_calls.c): there no start loads ctypes (with the ole32 and
oleaut32 it links, about 55 ms under Wine), which the host needs for nothing else.
Everywhere else ctypes makes the same calls; the parsing and the judging are shared."""


def built_in_calls() -> ModuleType | None:
    """The bundle's built-in module of Windows calls, or None (no file is searched:
    it is a built-in or it is not there)."""
    if BUILT_IN_CALLS not in sys.builtin_module_names:
        return None
    return __import__(BUILT_IN_CALLS)


def _read_security(
    path: str, fd: int | None
) -> tuple[bytes, bytes | None, bytes]:  # pragma: no cover - Windows only
    """(owner SID, DACL or None, this process's user SID), as bytes."""
    calls = built_in_calls()
    if calls is not None:
        import msvcrt

        handle = -1 if fd is None else msvcrt.get_osfhandle(fd)  # type: ignore[attr-defined,unused-ignore]
        owner_sid, acl = calls.file_security(path, handle)
        return owner_sid, acl, _user_sid()
    import ctypes
    from ctypes import wintypes

    windll = ctypes.WinDLL  # type: ignore[attr-defined,unused-ignore]
    advapi32 = windll("advapi32", use_last_error=True)
    kernel32 = windll("kernel32", use_last_error=True)
    pointer = ctypes.c_void_p
    owner, dacl, descriptor = pointer(), pointer(), pointer()
    wanted = 0x1 | 0x4  # OWNER_SECURITY_INFORMATION | DACL_SECURITY_INFORMATION
    se_file_object = 1
    out = (ctypes.byref(owner), None, ctypes.byref(dacl), None, ctypes.byref(descriptor))
    if fd is None:
        call = advapi32.GetNamedSecurityInfoW
        call.argtypes = [wintypes.LPCWSTR, ctypes.c_int, wintypes.DWORD, *[pointer] * 5]
        call.restype = wintypes.DWORD
        code = call(path, se_file_object, wanted, *out)
    else:
        import msvcrt

        call = advapi32.GetSecurityInfo
        call.argtypes = [wintypes.HANDLE, ctypes.c_int, wintypes.DWORD, *[pointer] * 5]
        call.restype = wintypes.DWORD
        code = call(msvcrt.get_osfhandle(fd), se_file_object, wanted, *out)  # type: ignore[attr-defined,unused-ignore]
    if code != 0:
        raise OSError(0, ctypes.FormatError(code), path, code)  # type: ignore[attr-defined,unused-ignore]
    try:
        advapi32.GetLengthSid.argtypes = [pointer]
        advapi32.GetLengthSid.restype = wintypes.DWORD
        if not owner.value:
            raise OSError(0, "the security descriptor names no owner", path)
        owner_sid = ctypes.string_at(owner.value, advapi32.GetLengthSid(owner))
        acl = None
        if dacl.value:
            size = int.from_bytes(ctypes.string_at(dacl.value + 2, 2), "little")
            acl = ctypes.string_at(dacl.value, size)
    finally:
        kernel32.LocalFree.argtypes = [pointer]
        kernel32.LocalFree(descriptor)
    return owner_sid, acl, _user_sid()


_USER_SID: list[bytes] = []
"""This process's user SID once read (a token's user never changes)."""


def _user_sid() -> bytes:  # pragma: no cover - Windows only
    """This process's token user SID."""
    if not _USER_SID:
        sid = process_sid(None)
        if sid is None:
            raise OSError(0, "cannot read this process's user SID")
        _USER_SID.append(sid)
    return _USER_SID[0]


def process_sid(pid: int | None) -> bytes | None:  # pragma: no cover - Windows only
    """The user SID of process `pid` (None: this process) as bytes; None when the
    process cannot be opened or queried (it is not the user's)."""
    calls = built_in_calls()
    if calls is not None:
        found: bytes | None = calls.process_sid(-1 if pid is None else pid)
        return found
    import ctypes
    from ctypes import wintypes

    windll = ctypes.WinDLL  # type: ignore[attr-defined,unused-ignore]
    kernel32 = windll("kernel32", use_last_error=True)
    advapi32 = windll("advapi32", use_last_error=True)
    kernel32.OpenProcess.argtypes = [wintypes.DWORD, wintypes.BOOL, wintypes.DWORD]
    kernel32.OpenProcess.restype = wintypes.HANDLE
    kernel32.GetCurrentProcess.restype = wintypes.HANDLE
    kernel32.CloseHandle.argtypes = [wintypes.HANDLE]
    advapi32.OpenProcessToken.argtypes = [
        wintypes.HANDLE,
        wintypes.DWORD,
        ctypes.POINTER(wintypes.HANDLE),
    ]
    advapi32.GetTokenInformation.argtypes = [
        wintypes.HANDLE,
        ctypes.c_int,
        ctypes.c_void_p,
        wintypes.DWORD,
        ctypes.POINTER(wintypes.DWORD),
    ]
    advapi32.GetLengthSid.argtypes = [ctypes.c_void_p]
    advapi32.GetLengthSid.restype = wintypes.DWORD
    process_query_limited_information, token_query, token_user = 0x1000, 0x0008, 1
    if pid is None:
        process = kernel32.GetCurrentProcess()
    else:
        process = kernel32.OpenProcess(process_query_limited_information, False, pid)
        if not process:
            return None
    token = wintypes.HANDLE()
    try:
        if not advapi32.OpenProcessToken(process, token_query, ctypes.byref(token)):
            return None
        try:
            size = wintypes.DWORD(0)
            advapi32.GetTokenInformation(token, token_user, None, 0, ctypes.byref(size))
            buffer = ctypes.create_string_buffer(size.value)
            if not advapi32.GetTokenInformation(
                token, token_user, buffer, size, ctypes.byref(size)
            ):
                return None
            sid = ctypes.c_void_p.from_buffer(buffer).value  # TOKEN_USER.User.Sid
            return None if sid is None else ctypes.string_at(sid, advapi32.GetLengthSid(sid))
        finally:
            kernel32.CloseHandle(token)
    finally:
        if pid is not None:
            kernel32.CloseHandle(process)
