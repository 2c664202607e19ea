#!/bin/sh
# Regenerate the hash-locked requirements of the release builds (docs/security.md, "What
# you install"), from pyproject.toml and build-tools.in, with uv (`pip install uv`):
#
#   packaging/locks/compile.sh            # keep the pinned versions where they still resolve
#   packaging/locks/compile.sh --upgrade  # take the newest versions
#
# build.txt            what builds and ships the Linux and macOS bundles (PyInstaller and
#                      the project's dependencies) and the Windows build's own wheel
#                      (setuptools), for Linux, macOS and Windows, Python 3.11-3.13
# windows-runtime.txt  the win_amd64 CPython 3.13 wheels the Windows bundle ships
# test.txt             the test tools, installed apart from the build environment (with
#                      setuptools: the checkout installs into it without build isolation)
#
# Wheels only (--only-binary): installing a locked requirement never runs code of its
# own. Review the diff (new versions, new packages) before committing it.
set -eu
cd "$(dirname "$0")/../.."
compile() {
    uv pip compile --quiet --no-header --generate-hashes --only-binary :all: \
        --index-url https://pypi.org/simple --no-config "$@"
}
compile ${1+"$1"} --universal --python-version 3.11 pyproject.toml --extra build \
    packaging/locks/build-tools.in -o packaging/locks/build.txt
compile ${1+"$1"} --python-platform x86_64-pc-windows-msvc --python-version 3.13 \
    pyproject.toml -o packaging/locks/windows-runtime.txt
compile ${1+"$1"} --universal --python-version 3.11 pyproject.toml --extra test \
    packaging/locks/build-tools.in -o packaging/locks/test.txt
