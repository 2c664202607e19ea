"""Versions side by side (issue 30): which version each install runs now, which ones are
retired, and removing a retired one once no host uses it.

A running host's code must stay as it is until it exits. Its Python modules it has in
memory (native_host/startimage.py), but a frozen bundle's folder also holds the
interpreter's libraries, which the host has mapped and loads more of on demand; an
upgrade that replaced them in place could crash it, and Windows refuses to delete them
at all. So each frozen kind installs every version into a folder of its own,
`<root>/<version>/`, and registers the executable inside it; `<root>/current` names the
folder registered now (`install` writes it when it registers a frozen bundle there; the
MSI installs it as one of its files). Every other version folder under that root is
retired: no browser starts it any more. It is removed once no host uses it (each host
holds its start image, `files.hold_shared`): by `install`, and by every host as it
exits (on Windows a process cannot remove its own executable, so there the next host's
exit removes the folder of the last one).

A launcher install (a virtualenv, pipx, uv) has one image beside its launcher: when
`install` writes a new one while hosts still run from the old, the old is renamed
`<image>.<version>.retired` rather than replaced, so that `doctor` can say which
version they run; it is removed the same way.
"""

from __future__ import annotations

import os
import sys

from native_host import files, startimage

CURRENT = "current"
"""The file in a versions root naming the version folder registered now."""
RETIRED = ".retired"
"""The suffix of a launcher's image kept for the hosts still running from it."""
EXECUTABLES = ("pedelec-native-host", "pedelec-native-host.exe")
MAX_CURRENT_BYTES = 256


def version_folder(executable: str) -> tuple[str, str] | None:
    """(root, folder name) of a frozen bundle's executable that lives in a version
    folder (`<root>/current` exists beside it), else None."""
    folder = os.path.dirname(os.path.abspath(executable))
    root = os.path.dirname(folder)
    if not os.path.isfile(os.path.join(root, CURRENT)):
        return None
    return root, os.path.basename(folder)


def current(root: str) -> str | None:
    """The folder `<root>/current` names (a bare folder name), or None."""
    try:
        data = files.read_trusted(os.path.join(root, CURRENT), MAX_CURRENT_BYTES)
    except files.FileRefusedError:
        return None
    name = data.decode("utf-8", "replace").strip()
    if not name or name in (".", "..") or "/" in name or "\\" in name:
        return None
    return name


def set_current(root: str, name: str) -> None:
    """Name `root/name` the folder registered now (readable by everyone: a system-wide
    install's root is read by every user's hosts)."""
    files.atomic_write(os.path.join(root, CURRENT), f"{name}\n".encode(), 0o644)


def is_version_folder(path: str) -> bool:
    """A folder holding a bundle: its start image or its executable (what a removal that
    Windows stopped half way, at files a host still ran from, leaves is one too)."""
    if os.path.islink(path) or not os.path.isdir(path):
        return False
    held = (startimage.IMAGE_NAME, *EXECUTABLES)
    return any(os.path.isfile(os.path.join(path, name)) for name in held)


def retired_folders(root: str) -> list[str]:
    """Every version folder under `root` but the current one (none without a current)."""
    now = current(root)
    if now is None:
        return []
    try:
        names = sorted(os.listdir(root))
    except OSError:
        return []
    found = [os.path.join(root, name) for name in names if name != now]
    return [path for path in found if is_version_folder(path)]


def folder_in_use(folder: str) -> bool:
    """Whether a host runs from this version folder (it holds its image, or, started
    without it, its executable)."""
    held = [os.path.join(folder, startimage.IMAGE_NAME)]
    held += [os.path.join(folder, name) for name in EXECUTABLES]
    return any(files.in_use(path) for path in held)


def retire_image(path: str) -> str | None:
    """Before `install` replaces the launcher's image: keep it under a retired name if
    hosts run from it (returns that name), so they stay visible until they exit."""
    if not files.in_use(path):
        return None
    version = startimage.written_version(path) or "unknown"
    base = f"{path}.{version}"
    kept, count = base + RETIRED, 1
    while os.path.lexists(kept):
        count += 1
        kept = f"{base}-{count}{RETIRED}"
    os.rename(path, kept)
    return kept


def retired_images(path: str) -> list[str]:
    """The retired images kept beside the launcher image at `path`."""
    folder, name = os.path.split(path)
    try:
        names = sorted(os.listdir(folder or "."))
    except OSError:
        return []
    found = [n for n in names if n.startswith(name + ".") and n.endswith(RETIRED)]
    return [os.path.join(folder, n) for n in found]


def retired_version(path: str) -> str:
    """The version a retired image or version folder was (its name says so)."""
    name = os.path.basename(path)
    if name.endswith(RETIRED):
        return name.removesuffix(RETIRED).split(".image.", 1)[-1].split("-")[0]
    return name


def remove_unused(retired: list[str]) -> tuple[list[str], list[str]]:
    """Remove every retired image or folder no host uses; (removed, still in use)."""
    removed, used = [], []
    for path in retired:
        in_use = folder_in_use(path) if os.path.isdir(path) else files.in_use(path)
        if in_use:
            used.append(path)
            continue
        if os.path.isdir(path):
            import shutil  # only now: every relay's exit comes here (docs/performance.md)

            shutil.rmtree(path, ignore_errors=True)
        else:
            try:
                os.unlink(path)
            except OSError:
                pass  # still there: counted as not removed
        if not os.path.lexists(path):
            removed.append(path)
    return removed, used


def retired_of(executable: str | None, image: str | None) -> list[str]:
    """What the install a host runs from has retired: the other version folders beside
    its own (a frozen bundle's), and the retired images beside its image."""
    found: list[str] = []
    if executable is not None:
        placed = version_folder(executable)
        if placed is not None:
            found += retired_folders(placed[0])
    if image is not None:
        found += retired_images(image)
    return found


def leave() -> list[str]:
    """What a relay does as it exits: stop marking its image as used, then remove what
    its install has retired that no host uses any more (its own folder too, once retired,
    where the system lets a process remove its own files). Returns what it removed."""
    image = startimage.release()
    frozen = getattr(sys, "frozen", False)
    retired = retired_of(sys.executable if frozen else None, image)
    return remove_unused(retired)[0]
