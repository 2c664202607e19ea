"""On the Windows lane: packaging/windows/build.py refuses a tampered input before it
uses it, and says which and why. The lane's own downloads (setup_lane.py fetched and
checked them) stand in for the index: one copy of the embeddable CPython's sdist with
one byte flipped, and a local simple index serving the locked win_amd64 wheels with one
of them changed. Both builds end with exit status 1 and a message naming the file, its
pin and what was found; nothing of the tampered input is unpacked.

Also here, because it needs wixl: the MSI's summary information, which wixl writes
with a random revision and the build's time, rewritten to the package code and
SOURCE_DATE_EPOCH (msi_summary.py), as msitools' own reader then shows it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.checkout import REPO
from tests.support.packaging_scripts import windows_module
from tests.support.wine import LANE, require_lane

pytestmark = [
    pytest.mark.process,
    pytest.mark.windows_lane,
    pytest.mark.xdist_group("windows_lane"),
]

embeddable = windows_module("embeddable")
windows_build = windows_module("build")
BUILD = REPO / "packaging" / "windows" / "build.py"


@pytest.fixture(autouse=True)
def lane() -> None:
    require_lane()


def run_build(work: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(BUILD), "--work", str(work), "--out", str(work / "out")],
        capture_output=True, text=True, env=env, timeout=600, check=False,
    )  # fmt: skip


def lane_download(name: str) -> Path:
    found = LANE.root / "downloads" / name
    if not found.is_file():
        pytest.fail(f"the lane has no {found}: run tests/windows/setup_lane.py", pytrace=False)
    return found


def test_one_flipped_byte_of_the_embeddable_distribution_stops_the_build(tmp_path: Path) -> None:
    source = embeddable.PYPI_SDIST
    tampered = tmp_path / "downloads" / source.name
    tampered.parent.mkdir()
    data = bytearray(lane_download(source.name).read_bytes())
    data[len(data) // 2] ^= 0x01
    tampered.write_bytes(bytes(data))
    done = run_build(tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    message = done.stderr
    assert "build failed: " + source.name + " does not match its pinned SHA-256" in message
    assert source.sha256 in message and "packaging/windows/embeddable.py" in message
    assert "Traceback" not in message
    assert not (tmp_path / "stage").exists() and not (tmp_path / "stage.partial").exists()


def local_index(root: Path, wheels: list[Path]) -> str:
    """A PEP 503 simple index in `root` serving these wheel files."""
    for wheel in wheels:
        project = re.sub(r"[-_.]+", "-", wheel.name.split("-")[0]).lower()
        folder = root / project
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copy(wheel, folder / wheel.name)
        (folder / "index.html").write_text(f'<a href="{wheel.name}">{wheel.name}</a>\n')
    return root.as_uri()


def test_a_wheel_that_does_not_match_the_lock_stops_the_build(tmp_path: Path) -> None:
    locked = sorted((LANE.root / "wheels").glob("*.whl"))
    if not any(w.name.startswith("idna-") for w in locked):
        pytest.fail(f"the lane has no locked wheels in {LANE.root / 'wheels'}", pytrace=False)
    served = tmp_path / "served"
    served.mkdir()
    for wheel in locked:
        copy = served / wheel.name
        shutil.copy(wheel, copy)
        if wheel.name.startswith("idna-"):
            data = bytearray(copy.read_bytes())
            data[len(data) // 2] ^= 0x01
            copy.write_bytes(bytes(data))
    (tmp_path / "downloads").mkdir()
    pristine = lane_download(embeddable.PYPI_SDIST.name)
    shutil.copy(pristine, tmp_path / "downloads" / pristine.name)
    env = {name: value for name, value in os.environ.items() if not name.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull  # this index alone: no configured index or links
    env["PIP_INDEX_URL"] = local_index(tmp_path / "simple", sorted(served.glob("*.whl")))
    done = run_build(tmp_path, env)
    assert done.returncode == 1, done.stdout + done.stderr
    message = done.stderr
    assert "the win_amd64 wheels do not match windows-runtime.txt" in message
    assert "idna" in message and "DO NOT MATCH THE HASHES" in message
    assert not list((tmp_path / "stage" / "site-packages").glob("idna*"))


def test_the_msi_summary_carries_the_package_code_and_the_commits_time(tmp_path: Path) -> None:
    msi_summary = windows_module("msi_summary")
    msi_document = windows_module("msi_document")
    source = tmp_path / "bundle"
    source.mkdir()
    (source / "a.txt").write_text("a")
    wxs = tmp_path / "p.wxs"
    wxs.write_text(
        '<?xml version="1.0" encoding="utf-8"?>'
        '<Wix xmlns="http://schemas.microsoft.com/wix/2006/wi">'
        '<Product Id="11111111-2222-3333-4444-555555555555" Name="T" Language="1033" '
        'Version="1.2.3" Manufacturer="M" '
        'UpgradeCode="6d0f4b3e-3c1a-4f5e-9b7a-2f0c8d1e5a61">'
        '<Package InstallerVersion="500" Compressed="yes" InstallScope="perUser" />'
        '<MediaTemplate EmbedCab="yes" /><Directory Id="TARGETDIR" Name="SourceDir">'
        '<Directory Id="LocalAppDataFolder"><Directory Id="INSTALLDIR" Name="t">'
        '<Component Id="c" Guid="11111111-2222-3333-4444-777777777777">'
        '<File Id="f" Name="a.txt" Source="bundle/a.txt" /></Component>'
        '</Directory></Directory></Directory><Feature Id="F" Level="1">'
        '<ComponentRef Id="c" /></Feature></Product></Wix>'
    )
    built = []
    for name in ("1.msi", "2.msi"):
        subprocess.run(["wixl", "-a", "x64", "-o", name, wxs.name], cwd=tmp_path, check=True)
        msi_summary.normalise(tmp_path / name, msi_document.package_code("1.2.3"), 1_700_000_000)
        built.append((tmp_path / name).read_bytes())
    assert built[0] == built[1]
    shown = subprocess.run(
        ["msiinfo", "suminfo", str(tmp_path / "1.msi")], capture_output=True, text=True, check=True
    ).stdout
    assert f"{{{msi_document.package_code('1.2.3')}}}" in shown
    assert shown.count("Nov 14 22:13:20 2023") == 2, shown
