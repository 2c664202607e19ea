"""Every PE file of the embeddable CPython carries a valid Authenticode signature of its
publisher, checked before any of it runs: with Debian's `osslsigncode` on Linux (offline:
the signing certificates' own validity at their countersigned time, no revocation
lists, which need the network), with `Get-AuthenticodeSignature` on Windows.

Trust anchors on Linux: Debian's CA bundle (DigiCert Trusted Root G4, the root of the
older PSF certificate that signed libffi and OpenSSL) and Microsoft Identity
Verification Root Certificate Authority 2020 (the root of the PSF certificate of
3.13.2's own files), which Debian does not carry: its certificate is kept beside this
file and used only when its SHA-256 is `ROOT_SHA256` (the fingerprint Microsoft's PKI
repository and many public projects pin for it; SHA-1 F40042E2...BFA2).

Standard library only.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import ssl
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT_CERTIFICATE = HERE / "trust" / "microsoft-identity-verification-root-2020.pem"
ROOT_SHA256 = "5367f20c7ade0e2bca790915056d086b720c33c1fa2a2661acf787e3292e1270"
PSF = "Python Software Foundation"
MICROSOFT = "Microsoft Corporation"
PUBLISHERS = {"vcruntime140.dll": MICROSOFT, "vcruntime140_1.dll": MICROSOFT}
"""Files signed by another publisher than the PSF (the Visual C++ runtime, signed by
Microsoft); every other PE file must be the PSF's."""
CHAIN_NOT_HERE = {MICROSOFT: "Microsoft Root Certificate Authority 2011"}
"""Roots no Debian package carries and this repository does not pin: a file of that
publisher is checked here by its signature's digest and signer only (and by its pinned
SHA-256); the chain is checked on a Windows runner."""
_SIGNER = re.compile(r"Signer's certificate:\s*-+\s*Signer #0:\s*Subject: (?P<subject>[^\n]*)")
_DIGESTS = re.compile(r"Current message digest\s*: (\w+)\s*\nCalculated message digest\s*: (\w+)")


class SignatureError(RuntimeError):
    """A PE file without a valid signature of its expected publisher."""


def publisher(name: str) -> str:
    return PUBLISHERS.get(name, PSF)


def verify(files: Sequence[Path]) -> None:
    """Every file signed by `publisher(name)`; SignatureError names each that is not."""
    if sys.platform == "win32":
        failures = _windows(files)
    else:
        failures = _osslsigncode(files)
    if failures:
        raise SignatureError(
            "Authenticode signatures refused, the interpreter is not used:\n  "
            + "\n  ".join(failures)
        )


def anchors(folder: Path) -> Path:
    """Debian's CA bundle plus the pinned Microsoft root, in one PEM file in `folder`."""
    pem = ROOT_CERTIFICATE.read_text(encoding="ascii")
    found = hashlib.sha256(ssl.PEM_cert_to_DER_cert(pem)).hexdigest()
    if found != ROOT_SHA256:
        raise SignatureError(
            f"{ROOT_CERTIFICATE} has SHA-256 {found}, not the pinned {ROOT_SHA256}"
        )
    bundle = ssl.get_default_verify_paths().cafile or "/etc/ssl/certs/ca-certificates.crt"
    combined = folder / "anchors.pem"
    combined.write_text(Path(bundle).read_text(encoding="ascii") + "\n" + pem, encoding="ascii")
    return combined


def _osslsigncode(files: Sequence[Path]) -> list[str]:
    if shutil.which("osslsigncode") is None:
        raise SignatureError("osslsigncode not found (Debian: apt-get install osslsigncode)")
    failures = []
    with tempfile.TemporaryDirectory() as scratch:
        trusted = str(anchors(Path(scratch)))
        for path in files:
            done = subprocess.run(
                ["osslsigncode", "verify", "-CAfile", trusted, "-TSA-CAfile", trusted,
                 "-ignore-crl", "-in", str(path)],
                capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL,
            )  # fmt: skip
            problem = judge_osslsigncode(path.name, done.returncode, done.stdout + done.stderr)
            if problem:
                failures.append(f"{path.name}: {problem}")
    return failures


def judge_osslsigncode(name: str, status: int, output: str) -> str | None:
    """Why osslsigncode's verdict on `name` is not a valid signature of its publisher."""
    signer = _SIGNER.search(output)
    digests = _DIGESTS.search(output)
    if signer is None or digests is None:
        return "no Authenticode signature"
    if digests[1] != digests[2]:
        return f"its bytes changed after signing (digest {digests[2]}, signed {digests[1]})"
    wanted = publisher(name)
    if f"O={wanted}/" not in signer["subject"] + "/":
        return f"signed by {signer['subject']}, not {wanted}"
    if status != 0 and wanted not in CHAIN_NOT_HERE:
        return "its certificate chain does not verify (osslsigncode verify failed)"
    return None


_POWERSHELL = (
    "$ErrorActionPreference = 'Stop'; "
    '@($env:PEDELEC_PE_FILES -split "`n" | ForEach-Object { '
    "$s = Get-AuthenticodeSignature -LiteralPath $_; "
    "[pscustomobject]@{ Path = $_; Status = [string]$s.Status; "
    "Subject = [string]$s.SignerCertificate.Subject } }) | ConvertTo-Json -Compress"
)


def _windows(files: Sequence[Path]) -> list[str]:  # pragma: no cover - Windows only
    """Get-AuthenticodeSignature: the chain and revocation as Windows judges them."""
    done = subprocess.run(
        ["powershell", "-NoProfile", "-NonInteractive", "-Command", _POWERSHELL],
        env={**os.environ, "PEDELEC_PE_FILES": "\n".join(str(path) for path in files)},
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise SignatureError(f"Get-AuthenticodeSignature failed: {done.stderr.strip()}")
    answers = {Path(a["Path"]).name: a for a in json.loads(done.stdout or "[]")}
    failures = []
    for path in files:
        answer = answers.get(path.name, {"Status": "not checked", "Subject": ""})
        wanted = publisher(path.name)
        if answer["Status"] != "Valid":
            failures.append(f"{path.name}: Get-AuthenticodeSignature says {answer['Status']}")
        elif f"O={wanted}," not in answer["Subject"] + ",":
            failures.append(f"{path.name}: signed by {answer['Subject']}, not {wanted}")
    return failures
