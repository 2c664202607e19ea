"""Who owns a file on Windows and who may change it (native_host/windows_acl.py).

The decision is pure: here it runs on owners and DACLs built field by field from winnt.h
(SID, ACL and ACE layouts) and on ones recorded from Wine's GetNamedSecurityInfoW. The
real API calls run on the Windows lane (tests/windows/test_file_trust.py).
"""

from __future__ import annotations

import struct

import pytest

from native_host import windows_acl as acl

pytestmark = pytest.mark.unit

USER = "S-1-5-21-1004336348-1177238915-682003330-1001"
MALLORY = "S-1-5-21-1004336348-1177238915-682003330-1002"
EVERYONE, AUTHENTICATED, USERS, CREATOR_OWNER = "S-1-1-0", "S-1-5-11", "S-1-5-32-545", "S-1-3-0"

OI, CI, IO = 0x1, 0x2, 0x8
FULL = 0x1F01FF  # FILE_ALL_ACCESS
READ_EXECUTE = 0x1200A9
MODIFY = 0x1301BF


def sid_bytes(text: str) -> bytes:
    """A SID's binary form (winnt.h SID: revision, count, 6-byte authority, sub-authorities)."""
    parts = [int(p) for p in text.split("-")[2:]]
    authority, subs = parts[0], parts[1:]
    return (
        bytes([1, len(subs)]) + authority.to_bytes(6, "big") + struct.pack(f"<{len(subs)}I", *subs)
    )


def ace(sid: str, mask: int, flags: int = 0, kind: int = 0) -> bytes:
    """ACCESS_ALLOWED_ACE (kind 0) or ACCESS_DENIED_ACE (kind 1): header, mask, SID."""
    body = struct.pack("<I", mask) + sid_bytes(sid)
    return struct.pack("<BBH", kind, flags, 4 + len(body)) + body


def object_ace(sid: str, mask: int, object_flags: int) -> bytes:
    """ACCESS_ALLOWED_OBJECT_ACE: mask, flags, the GUIDs the flags announce, SID."""
    guids = b"\x11" * 16 * bin(object_flags).count("1")
    body = struct.pack("<II", mask, object_flags) + guids + sid_bytes(sid)
    return struct.pack("<BBH", 5, 0, 4 + len(body)) + body


def dacl(*aces: bytes) -> bytes:
    body = b"".join(aces)
    return struct.pack("<BBHHH", 2, 0, 8 + len(body), len(aces), 0) + body


def verdict(
    owner: str, *aces: bytes, what: str = acl.FILE, user: str = USER
) -> tuple[str, str] | None:
    return acl.judge(owner, acl.parse_acl(dacl(*aces)), user, what)


# A profile file as Windows makes it: SYSTEM, Administrators and the user, inherited.
PRIVATE = (ace(acl.SYSTEM, FULL, 0x10), ace(acl.ADMINISTRATORS, FULL, 0x10), ace(USER, FULL, 0x10))


def test_sid_strings() -> None:
    for text in (USER, EVERYONE, acl.TRUSTED_INSTALLER, acl.SYSTEM, acl.ADMINISTRATORS):
        assert acl.sid_string(sid_bytes(text)) == text
    with pytest.raises(ValueError):
        acl.sid_string(sid_bytes(USER)[:-1])


def test_a_file_of_the_user_alone_is_trusted() -> None:
    for what in (acl.FILE, acl.DIRECTORY, acl.PROGRAM_FOLDER):
        assert verdict(USER, *PRIVATE, what=what) is None
    assert verdict(USER, *PRIVATE, ace(USERS, READ_EXECUTE), ace(EVERYONE, READ_EXECUTE)) is None


def test_system_owners_are_trusted_and_other_users_are_not() -> None:
    for owner in (acl.SYSTEM, acl.ADMINISTRATORS, acl.TRUSTED_INSTALLER):
        assert verdict(owner, *PRIVATE) is None
    found = verdict(MALLORY, *PRIVATE)
    assert found is not None and found[0] == acl.FOREIGN_OWNER and MALLORY in found[1]
    assert verdict(EVERYONE, *PRIVATE) == (
        acl.FOREIGN_OWNER,
        f"its owner is Everyone ({EVERYONE}), not this user ({USER})",
    )


@pytest.mark.parametrize("writer", [EVERYONE, AUTHENTICATED, USERS, MALLORY])
@pytest.mark.parametrize(
    "right",
    [
        acl.FILE_WRITE_DATA,
        acl.FILE_APPEND_DATA,
        acl.DELETE,
        acl.WRITE_DAC,
        acl.WRITE_OWNER,
        acl.GENERIC_WRITE,
        acl.GENERIC_ALL,
    ],
)
def test_a_file_others_may_change_is_refused(writer: str, right: int) -> None:
    found = verdict(USER, *PRIVATE, ace(writer, READ_EXECUTE | right))
    assert found is not None and found[0] == acl.WRITABLE and writer in found[1]


@pytest.mark.parametrize(
    ("right", "directory", "program_folder"),
    [
        (acl.FILE_DELETE_CHILD, True, True),
        (acl.DELETE, True, True),
        (acl.WRITE_DAC, True, True),
        (acl.WRITE_OWNER, True, True),
        (acl.GENERIC_WRITE, True, True),
        (acl.GENERIC_ALL, True, True),
        (acl.FILE_WRITE_DATA, False, True),  # FILE_ADD_FILE: a DLL beside the program
        (acl.FILE_APPEND_DATA, False, True),  # FILE_ADD_SUBDIRECTORY
    ],
)
def test_directory_rights(right: int, directory: bool, program_folder: bool) -> None:
    entry = ace(AUTHENTICATED, READ_EXECUTE | right, OI | CI)
    assert (verdict(USER, *PRIVATE, entry, what=acl.DIRECTORY) is not None) is directory
    assert (verdict(USER, *PRIVATE, entry, what=acl.PROGRAM_FOLDER) is not None) is program_folder


def test_windows_default_c_and_programdata_are_trusted_directories() -> None:
    """C:\\ and C:\\ProgramData as a default Windows install sets them (icacls): others may
    add entries there, never replace ours."""
    c_drive = (
        ace(acl.ADMINISTRATORS, FULL, OI | CI),
        ace(acl.SYSTEM, FULL, OI | CI),
        ace(USERS, READ_EXECUTE, OI | CI),
        ace(AUTHENTICATED, MODIFY | 0x10000, OI | CI | IO),  # (OI)(CI)(IO)(M): children only
        ace(AUTHENTICATED, acl.FILE_APPEND_DATA),  # (AD): create folders in C:\
    )
    programdata = (
        ace(acl.SYSTEM, FULL, OI | CI),
        ace(acl.ADMINISTRATORS, FULL, OI | CI),
        ace(CREATOR_OWNER, acl.GENERIC_ALL, OI | CI | IO),
        ace(USERS, READ_EXECUTE, OI | CI),
        ace(USERS, 0x2 | 0x4 | 0x10 | 0x100, CI),  # (CI)(WD,AD,WEA,WA)
    )
    for entries in (c_drive, programdata):
        assert verdict(acl.SYSTEM, *entries, what=acl.DIRECTORY) is None
        assert verdict(acl.SYSTEM, *entries, what=acl.PROGRAM_FOLDER) is not None


def test_inherit_only_entries_and_denials_give_nothing() -> None:
    creator = ace(CREATOR_OWNER, acl.GENERIC_ALL, OI | CI | IO)
    everyone_later = ace(EVERYONE, acl.GENERIC_ALL, OI | IO)
    assert verdict(USER, *PRIVATE, creator, everyone_later, what=acl.DIRECTORY) is None
    denied = ace(EVERYONE, acl.GENERIC_ALL, kind=1)
    assert verdict(USER, denied, *PRIVATE) is None
    # A deny is not subtracted from a grant: refusing is the safe mistake.
    assert verdict(USER, denied, ace(EVERYONE, FULL), *PRIVATE) is not None


def test_owner_rights_and_trusted_writers_may_write() -> None:
    writers = (acl.OWNER_RIGHTS, acl.SYSTEM, acl.ADMINISTRATORS, acl.TRUSTED_INSTALLER, USER)
    assert verdict(USER, *(ace(sid, FULL) for sid in writers)) is None


def test_no_dacl_lets_everyone_in() -> None:
    assert acl.judge(USER, None, USER, acl.FILE) == (
        acl.WRITABLE,
        "it has no access control list: everyone may change it",
    )


def test_object_and_unknown_entries() -> None:
    for object_flags in (0, 1, 2, 3):
        found = verdict(USER, *PRIVATE, object_ace(MALLORY, acl.FILE_WRITE_DATA, object_flags))
        assert found is not None and MALLORY in found[1], object_flags
        assert verdict(USER, *PRIVATE, object_ace(MALLORY, READ_EXECUTE, object_flags)) is None
    unknown = struct.pack("<BBH", 0x42, 0, 8) + b"\0" * 4  # a type this code cannot read
    found = verdict(USER, *PRIVATE, unknown)
    assert found is not None and found[0] == acl.WRITABLE


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        dacl(ace(USER, FULL))[:-1],  # the ACL claims more than the buffer
        struct.pack("<BBHHH", 2, 0, 8, 1, 0),  # one ACE announced, none there
        struct.pack("<BBHHH", 2, 0, 12, 1, 0) + struct.pack("<BBH", 0, 0, 40),  # ACE overruns
    ],
)
def test_malformed_acls_raise(raw: bytes) -> None:
    with pytest.raises(ValueError):
        acl.parse_acl(raw)


# Recorded under Wine 8 (GetNamedSecurityInfoW, Windows CPython 3.13): a file made in the
# user's profile, and the same after SetNamedSecurityInfoW with D:(A;;FA;;;OW)(A;;FA;;;WD).
WINE_USER = "S-1-5-21-0-0-0-1000"
WINE_OWNER = "010500000000000515000000000000000000000000000000e8030000"
WINE_PLAIN = (
    "020054000300000000001400ff011f0001010000000000051200000000002400ff011f0001050000000000"
    "0515000000000000000000000000000000e803000000001400a9001200010100000000000100000000"
)
WINE_EVERYONE = (
    "020054000300000000001400ff011f0001010000000000051200000000002400ff011f0001050000000000"
    "0515000000000000000000000000000000e803000000001400ff011300010100000000000100000000"
)


def test_recorded_wine_descriptors() -> None:
    owner = acl.sid_string(bytes.fromhex(WINE_OWNER))
    assert owner == WINE_USER
    plain = acl.parse_acl(bytes.fromhex(WINE_PLAIN))
    assert [(a.kind, a.sid, a.mask) for a in plain] == [
        ("allow", acl.SYSTEM, FULL),
        ("allow", WINE_USER, FULL),
        ("allow", EVERYONE, READ_EXECUTE),
    ]
    assert acl.judge(owner, plain, WINE_USER, acl.FILE) is None
    everyone = acl.parse_acl(bytes.fromhex(WINE_EVERYONE))
    assert acl.judge(owner, everyone, WINE_USER, acl.FILE) == (
        acl.WRITABLE,
        f"Everyone ({EVERYONE}) may change it (access mask 0x1301ff)",
    )
    assert acl.judge(owner, plain, "S-1-5-21-0-0-0-1001", acl.FILE) is not None
