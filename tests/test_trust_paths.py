"""Where the launch chain's walk starts (launch/trust.py `split_root`), by each OS's path
rules: a POSIX `/`, a Windows drive and root, a UNC share, either behind `\\\\?\\`. A path
that depends on a current directory (`C:x`, a rooted `\\x`, a relative one) has no root
and is refused, since Chrome starts the host in the manifest's folder, not the user's."""

from __future__ import annotations

import ntpath
import posixpath

import pytest

from native_host.launch.trust import split_root

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("path", "root", "parts"),
    [
        (
            r"C:\Program Files\Pedelec\Pedelec.exe",
            "C:\\",
            ["Program Files", "Pedelec", "Pedelec.exe"],
        ),
        (
            "C:/Program Files/Pedelec/Pedelec.exe",
            "C:\\",
            ["Program Files", "Pedelec", "Pedelec.exe"],
        ),
        (r"\\server\share\apps\Pedelec.exe", "\\\\server\\share\\", ["apps", "Pedelec.exe"]),
        (r"\\?\C:\Program Files\Pedelec.exe", "\\\\?\\C:\\", ["Program Files", "Pedelec.exe"]),
        (
            r"\\?\UNC\server\share\apps\Pedelec.exe",
            "\\\\?\\UNC\\server\\share\\",
            ["apps", "Pedelec.exe"],
        ),
        (r"C:\\", "C:\\", []),
    ],
)
def test_windows_roots(path: str, root: str, parts: list[str]) -> None:
    assert split_root(path, ntpath) == (root, parts)
    # Walking the parts from the root names the same file (never `C:Program Files`).
    assert ntpath.join(root, *parts) == ntpath.normpath(path)


@pytest.mark.parametrize(
    "path", ["C:Program Files\\Pedelec.exe", r"\Program Files\x.exe", "Pedelec.exe", ""]
)
def test_windows_paths_without_drive_and_root_have_no_root(path: str) -> None:
    with pytest.raises(ValueError):
        split_root(path, ntpath)


def test_posix_root_and_parts() -> None:
    assert split_root("/opt//pedelec/./bin/app", posixpath) == (
        "/",
        ["opt", "pedelec", ".", "bin", "app"],
    )
    with pytest.raises(ValueError):
        split_root("opt/pedelec", posixpath)
