"""The MSI's summary information made a function of the version and the commit: Debian's
wixl (msitools 0.101) writes a random revision number (the package code) and the time of
the build as its creation and last-save times, whatever `<Package Id>` and
SOURCE_DATE_EPOCH say; WiX 3's light does the same with the time. Those three values
are the only bytes two builds of one commit differ by, so the build overwrites them in
place: the revision number with the package code (msi_document.package_code, a string of
the same length) and both times with SOURCE_DATE_EPOCH. Nothing else of the file moves.

An MSI is an OLE compound file; the summary is its `\\x05SummaryInformation` stream, an
OLE property set ([MS-CFB], [MS-OLEPS]). Stdlib only.
"""

from __future__ import annotations

import struct
from pathlib import Path

STREAM = "\x05SummaryInformation"
PID_REVNUMBER = 9
PID_CREATE_DTM = 12
PID_LASTSAVE_DTM = 13
VT_LPSTR = 30
VT_FILETIME = 64
_FILETIME_EPOCH = 116444736000000000
"""1970-01-01 in FILETIME units (100 ns since 1601-01-01)."""
_FREE = 0xFFFFFFFF
_END = 0xFFFFFFFE


class SummaryError(RuntimeError):
    """The MSI's summary information cannot be found or rewritten."""


class _Compound:
    """Just enough of a compound file to map a stream's bytes to offsets in the file."""

    def __init__(self, data: bytes) -> None:
        if data[:8] != bytes.fromhex("d0cf11e0a1b11ae1"):
            raise SummaryError("not an OLE compound file")
        self.data = data
        self.sector: int = 1 << struct.unpack_from("<H", data, 0x1E)[0]
        self.mini_sector: int = 1 << struct.unpack_from("<H", data, 0x20)[0]
        fat_count, first_directory = struct.unpack_from("<II", data, 0x2C)
        self.cutoff, first_mini_fat, mini_fat_count, first_difat, difat_count = struct.unpack_from(
            "<IIIII", data, 0x38
        )
        fat_sectors = list(struct.unpack_from("<109I", data, 0x4C))
        next_difat = first_difat
        for _ in range(difat_count):
            entries = struct.unpack_from(f"<{self.sector // 4}I", data, self._at(next_difat))
            fat_sectors += entries[:-1]
            next_difat = entries[-1]
        self.fat: list[int] = []
        for sector in fat_sectors[:fat_count]:
            self.fat += struct.unpack_from(f"<{self.sector // 4}I", data, self._at(sector))
        directory = b"".join(self._sector_bytes(first_directory))
        self.entries = [directory[i : i + 128] for i in range(0, len(directory), 128)]
        self.mini_fat: list[int] = []
        if mini_fat_count:
            for block in self._sector_bytes(first_mini_fat):
                self.mini_fat += struct.unpack(f"<{self.sector // 4}I", block)
        root_start: int = struct.unpack_from("<I", self.entries[0], 116)[0]
        self.mini_stream = [self._at(s) for s in self._chain(self.fat, root_start)]

    def _at(self, sector: int) -> int:
        return int(sector + 1) * self.sector

    def _chain(self, table: list[int], start: int) -> list[int]:
        chain: list[int] = []
        while start not in (_END, _FREE):
            if start >= len(table) or len(chain) > len(table):
                raise SummaryError("a broken sector chain")
            chain.append(start)
            start = table[start]
        return chain

    def _sector_bytes(self, start: int) -> list[bytes]:
        return [
            self.data[self._at(s) : self._at(s) + self.sector] for s in self._chain(self.fat, start)
        ]

    def stream_offsets(self, name: str) -> list[int]:
        """The file offset of each byte of stream `name`, in order."""
        for entry in self.entries:
            length = struct.unpack_from("<H", entry, 64)[0]
            if entry[66] == 2 and entry[: max(length - 2, 0)].decode("utf-16-le") == name:
                start = struct.unpack_from("<I", entry, 116)[0]
                size = struct.unpack_from("<Q", entry, 120)[0] & 0xFFFFFFFF
                break
        else:
            raise SummaryError(f"no {name!r} stream")
        offsets: list[int] = []
        if size < self.cutoff:
            per_sector = self.sector // self.mini_sector
            for mini in self._chain(self.mini_fat, start):
                base = self.mini_stream[mini // per_sector]
                first = base + (mini % per_sector) * self.mini_sector
                offsets += range(first, first + self.mini_sector)
        else:
            for sector in self._chain(self.fat, start):
                offsets += range(self._at(sector), self._at(sector) + self.sector)
        if len(offsets) < size:
            raise SummaryError(f"the {name!r} stream is shorter than its size")
        return offsets[:size]


def _properties(stream: bytes) -> dict[int, int]:
    """Property id -> offset of its typed value in the stream (the first section)."""
    section = struct.unpack_from("<I", stream, 28 + 16)[0]
    count = struct.unpack_from("<I", stream, section + 4)[0]
    found = {}
    for index in range(count):
        pid, offset = struct.unpack_from("<II", stream, section + 8 + 8 * index)
        found[pid] = section + offset
    return found


def filetime(epoch: int) -> bytes:
    return struct.pack("<Q", _FILETIME_EPOCH + epoch * 10_000_000)


def normalise(msi: Path, package_code: str, epoch: int) -> None:
    """Set `msi`'s revision number to `{package_code}` and its creation and last-save
    times to `epoch`, in place."""
    data = bytearray(msi.read_bytes())
    offsets = _Compound(bytes(data)).stream_offsets(STREAM)
    stream = bytes(data[o] for o in offsets)
    properties = _properties(stream)
    changes: dict[int, bytes] = {}
    revision = f"{{{package_code.upper()}}}".encode("ascii")
    at = properties.get(PID_REVNUMBER)
    if at is None or struct.unpack_from("<I", stream, at)[0] != VT_LPSTR:
        raise SummaryError(f"{msi.name}: no revision number in its summary information")
    length = struct.unpack_from("<I", stream, at + 4)[0]
    if length != len(revision) + 1:
        raise SummaryError(f"{msi.name}: its revision number is not a GUID ({length} bytes)")
    for index, byte in enumerate(revision + b"\0"):
        changes[at + 8 + index] = bytes([byte])
    for pid in (PID_CREATE_DTM, PID_LASTSAVE_DTM):
        at = properties.get(pid)
        if at is None:
            continue
        if struct.unpack_from("<I", stream, at)[0] != VT_FILETIME:
            raise SummaryError(f"{msi.name}: summary property {pid} is not a time")
        for index, byte in enumerate(filetime(epoch)):
            changes[at + 4 + index] = bytes([byte])
    for position, value in changes.items():
        data[offsets[position]] = value[0]
    msi.write_bytes(bytes(data))
