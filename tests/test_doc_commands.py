"""Every command the docs and the host's own messages give a user works as written
(issue 32).

The commands are read from the docs themselves (tests/support/doc_commands.py). Those
that run on Linux run here, as a user types them: in a fresh copy of this checkout, in a
home of their own outside every temporary folder, with pipx and uv from PyPI, one shell
command at a time. The Linux tarball's run in .ci/run's own step (which builds the
tarball; that step reads the same commands), macOS's only on a Mac. A first test checks
that each command the docs give is one of these, so a new one cannot go unchecked.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from native_host import RELEASES_URL, __version__, versions
from native_host.install import flatpak
from tests.support.checkout import REPO, fresh_checkout, permanent_directory
from tests.support.doc_commands import USER_DOCS, Command, commands, labelled
from tests.support.markers import needs_os
from tests.support.release_scripts import release_module

pytestmark = pytest.mark.process

IN_CI = os.environ.get("CI") == "true"
CLONE = "Any system, with Python: from a clone"
QUICK_START = "Quick start"
SETUP = "Set up and run the tests"
CI_STEPS = {
    ("README.md", "Try it"): "the README's two commands, in a fresh clone",
    ("README.md", "Verify a download"): "the docs' Linux tarball commands",
    ("README.md", "Linux"): "the docs' Linux tarball commands",
    ("README.md", "Remove it > Linux tarball"): "the docs' Linux tarball commands",
    ("docs/install.md", "Release artifacts"): "the docs' Linux tarball commands",
    ("docs/install.md", "Building the frozen bundle (PyInstaller)"): "PyInstaller onedir bundle",
    ("CONTRIBUTING.md", "The Windows lane"): "Windows lane",
}
"""Blocks .ci/run runs in a step of its own (the step's name, as .ci/run prints it)."""
RUN_HERE = {("README.md", CLONE), ("docs/install.md", QUICK_START), ("CONTRIBUTING.md", SETUP)}
"""Blocks this module runs."""
THE_SUITE = ".venv/bin/python -m pytest"
"""CONTRIBUTING's second command: the whole suite, what .ci/run's README step runs."""


def macos_only(command: Command) -> bool:
    """A macOS command: in a block for macOS, or naming Installer, pkgutil or a Library."""
    words = set(command.text.split())
    return (
        command.label.startswith("macOS")
        or bool(words & {"installer", "pkgutil"})
        or "/Library/" in command.text
    )


SYSTEM_WIDE = {
    ("docs/install.md", "Linux: the tarball, for every user"): (
        "tests/test_tarball_system_scope.py",
        "--scope",
    ),
}
"""Blocks that install for every user of the machine (as root, into /opt and /etc): the
named test does the same with the tarball in .ci/run's tarball step, in an /opt-like
folder of its own (the machine's /opt is left alone)."""


def needs_github(command: Command) -> bool:
    """`gh attestation verify`: the release's attestation, on GitHub."""
    return command.text.startswith("gh attestation verify ")


def ci_text() -> str:
    """.ci/run with its line continuations joined."""
    return re.sub(r"\\\n\s*", "", (REPO / ".ci" / "run").read_text())


def test_every_command_the_docs_give_is_run_somewhere() -> None:
    ci = ci_text()
    unplaced = []
    for doc in USER_DOCS:
        for command in commands(doc):
            where = (command.doc, command.label)
            if macos_only(command) or needs_github(command) or where in RUN_HERE:
                continue
            if where in SYSTEM_WIDE:
                test, word = SYSTEM_WIDE[where]
                assert word in (REPO / test).read_text(), test
                continue
            if where in CI_STEPS:
                assert f'step "{CI_STEPS[where]}' in ci, CI_STEPS[where]
                read_there = (
                    command.text in ci  # written there as it is in the docs
                    or f'"{command.doc}:{command.label}"' in ci  # read by doc_commands
                    or f"sed -n '/^## {command.label}$/,/^## /p' {command.doc}" in ci
                )
                assert read_there, command
                continue
            if command.text == THE_SUITE:
                continue  # the README's second command ends with it; .ci/run runs that
            if command.text.startswith("flatpak override"):
                # What `install --flatpak-grant` runs (tests/test_flatpak.py), for this app.
                assert command.text == shlex.join(flatpak.grant_command("org.chromium.Chromium"))
                continue
            unplaced.append(f"{command.doc} ({command.label}): {command.text}")
    assert unplaced == [], "commands no test runs"


def test_the_versions_and_the_release_page_the_docs_name_are_this_trees() -> None:
    """A command naming a release file must name this version's; and every page that
    says where releases are says the same as pyproject's [project.urls]."""
    urls = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["urls"]
    assert urls["Download"] == RELEASES_URL
    for doc in USER_DOCS:
        for command in commands(doc):
            for version in re.findall(r"pedelec-native-host-(\d+\.\d+\.\d+)", command.text):
                assert version == __version__, command
    assert RELEASES_URL in (REPO / "README.md").read_text()
    assert RELEASES_URL in (REPO / "docs" / "install.md").read_text()


def test_macos_commands_name_where_the_package_installs() -> None:
    """They cannot run here; the program they name is the one the package installs (its
    payload's folder in the home, this version's, and the bundle's executable), and what
    they delete is that folder and `current` beside it (native_host/versions.py)."""
    pkg_plan = release_module("macos", "pkg_plan")
    program = f"~{pkg_plan.install_location(__version__)}/{pkg_plan.EXECUTABLE}"
    current = f"~/{pkg_plan.HOME_PREFIX}/{versions.CURRENT}"
    mac = [c.text for doc in USER_DOCS for c in commands(doc) if "~/Library/" in c.text]
    assert len(mac) == 3, mac  # the README: check, remove, delete the folder
    for text in mac:
        named = shlex.split(text.replace("~/", "HOME/"))
        paths = [word.replace("HOME/", "~/") for word in named if word.startswith("HOME/")]
        assert paths and all(program.startswith(p) or p == current for p in paths), text


# --- run as a user runs them ------------------------------------------------------------------
def unavailable(what: str, detail: str) -> None:
    message = f"{what} unavailable: {detail.strip()[-2000:]}"
    if IN_CI:
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="module")
def tools(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """pipx and uv from PyPI, in a virtualenv of their own; its bin directory."""
    venv = tmp_path_factory.mktemp("tools") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    got = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "pipx", "uv"],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    if got.returncode != 0:
        unavailable("pipx and uv from PyPI", got.stdout + got.stderr)
    return venv / "bin"


@dataclass
class User:
    """A user's account: a home outside every temporary folder, a Chromium they have
    started, pipx and uv on PATH (where `pipx ensurepath` puts ~/.local/bin), and a clone."""

    home: Path
    tools: Path
    clone: Path
    cwd: Path = field(init=False)

    def __post_init__(self) -> None:
        self.cwd = self.home

    @property
    def env(self) -> dict[str, str]:
        keep = ("LANG", "LC_ALL", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_CERT",
                "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "UV_INDEX_URL", "HTTPS_PROXY",
                "HTTP_PROXY", "NO_PROXY", "https_proxy", "http_proxy", "no_proxy")  # fmt: skip
        env = {k: v for k, v in os.environ.items() if k in keep}
        bins = [self.home / ".local" / "bin", self.tools]
        env.update(
            HOME=str(self.home),
            PATH=os.pathsep.join([*map(str, bins), "/usr/local/bin", "/usr/bin", "/bin"]),
            UV_PYTHON_DOWNLOADS="never",
            UV_SYSTEM_CERTS="1",
            UV_NATIVE_TLS="1",
            PIP_DISABLE_PIP_VERSION_CHECK="1",
        )
        return env

    def run(self, command: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        """One command as typed at a prompt; `cd DIR` changes the prompt's folder."""
        if command.startswith("cd "):
            self.cwd = (self.cwd / shlex.split(command)[1]).resolve()
            return subprocess.CompletedProcess(command, 0, "", "")
        return subprocess.run(
            ["bash", "-c", command], cwd=self.cwd, env=self.env, capture_output=True,
            text=True, timeout=timeout, check=False, stdin=subprocess.DEVNULL,
        )  # fmt: skip

    def expect(self, command: str, timeout: float = 600) -> str:
        """Run it; `doctor` may find problems (exit 1: no Pedelec Desktop here) but must
        end with its verdict; anything else must succeed."""
        done = self.run(command, timeout)
        output = done.stdout + done.stderr
        if command.split()[-1] == "doctor":
            assert done.returncode in (0, 1), output
            assert done.stdout.splitlines()[-1].startswith("verdict: "), output
        elif "pipx install" in command or "uv tool install" in command:
            if done.returncode != 0:
                unavailable(command, output)
        else:
            assert done.returncode == 0, f"$ {command}\n{output}"
        return done.stdout

    def manifest(self) -> Path:
        return (
            self.home / ".config" / "chromium" / "NativeMessagingHosts" / "cc.isaaclin.pedelec.json"
        )


@pytest.fixture
def user(tools: Path) -> Iterator[User]:
    with permanent_directory() as root:
        home = root / "home"
        (home / ".config" / "chromium").mkdir(parents=True)
        clone = fresh_checkout(home / "src" / "pedelec-native-host")
        yield User(home, tools, clone)


def clone_block() -> list[str]:
    """The README's clone commands, its `git clone` as a fresh copy of this checkout (the
    tests run this tree's files, not GitHub's): the user is in the clone's parent."""
    block = labelled("README.md", CLONE)
    assert block[0] == "git clone https://github.com/kaoruisaac/pedelec-native-host.git"
    return block[1:]


def removal_commands(tool: str) -> list[str]:
    """The README's removal of a pipx or uv install, as its "Remove it" says it."""
    text = (REPO / "README.md").read_text()
    remover = {"pipx": "pipx uninstall", "uv": "uv tool uninstall"}[tool]
    commands = ["pedelec-native-host uninstall", f"{remover} pedelec-native-host"]
    for command in commands:
        assert f"`{command}`" in text, command
    return commands


@pytest.mark.packaging
@needs_os("linux", reason="the docs' Linux commands")
@pytest.mark.timeout(1200)
@pytest.mark.parametrize("tool", ["pipx", "uv"])
def test_the_readme_clone_commands_then_its_removal(user: User, tool: str) -> None:
    user.cwd = user.clone.parent
    readme = (REPO / "README.md").read_text()
    assert "With uv, `uv tool install .` instead of `pipx install .`" in readme
    for command in clone_block():
        if tool == "uv":
            command = command.replace("pipx install .", "uv tool install .")
        user.expect(command)
    assert user.cwd == user.clone
    assert user.manifest().is_file()
    for command in removal_commands(tool):
        user.expect(command)
    assert not user.manifest().exists()
    assert shutil.which("pedelec-native-host", path=user.env["PATH"]) is None


@pytest.mark.packaging
@needs_os("linux", reason="the docs' Linux commands")
@pytest.mark.timeout(1200)
def test_the_install_docs_quick_start_with_pipx_and_install_sh(user: User) -> None:
    first, second = (
        [c for c in labelled("docs/install.md", QUICK_START) if "install.sh" not in c],
        [c for c in labelled("docs/install.md", QUICK_START) if "install.sh" in c],
    )
    user.cwd = user.clone
    for command in first:
        user.expect(command)
    assert user.manifest().is_file()
    for command in removal_commands("pipx"):
        user.expect(command)
    assert not user.manifest().exists()
    installed = user.expect(second[0], timeout=900)
    assert user.manifest().is_file()
    assert "next: check that each browser can start the host: " in installed
    user.expect(second[1])
    assert not user.manifest().exists()


@pytest.mark.packaging
@needs_os("linux", reason="the docs' Linux commands")
@pytest.mark.timeout(1200)
def test_the_contributors_setup_and_wheel_on_debians_python(user: User) -> None:
    """CONTRIBUTING's set-up and its wheel, on the system's own python3 (Debian's has no
    `build` module: the command installs it in the venv first)."""
    setup, suite, wheel = labelled("CONTRIBUTING.md", SETUP)
    assert suite == THE_SUITE
    user.cwd = user.clone
    for command in (setup, wheel):
        user.expect(command, timeout=1200)
    assert [p.name for p in (user.clone / "dist").glob("*.whl")] == [
        f"pedelec_native_host-{__version__}-py3-none-any.whl"
    ]


@pytest.mark.packaging
@needs_os("linux", reason="the docs' Linux commands")
@pytest.mark.timeout(1200)
def test_the_refusal_of_a_clones_venv_names_commands_that_work(user: User) -> None:
    """`install` from the README's "Try it" venv refuses (an editable install) and says
    what to run instead, with the clone's own path; those commands, and the next step
    `install` then prints, run as written."""
    user.cwd = user.clone
    user.expect("python3 -m venv .venv && .venv/bin/python -m pip install -q -e .")
    refused = user.run(".venv/bin/pedelec-native-host install")
    assert refused.returncode == 1, refused.stdout + refused.stderr
    said = re.findall(r"`([^`]+)`", refused.stderr)
    quoted = shlex.quote(str(user.clone))
    assert said[:2] == [f"pipx install {quoted}", f"uv tool install {quoted}"], said
    assert f"{quoted}/installers/install.sh" in said[2] and "pedelec-native-host install" in said
    user.cwd = user.home  # anywhere: the commands name the clone
    user.expect(said[0])
    installed = user.expect("pedelec-native-host install")
    (next_step,) = [line for line in installed.splitlines() if line.startswith("next: ")]
    user.expect(next_step.split(": ", 2)[2])
    for command in removal_commands("pipx"):
        user.expect(command)


def test_every_link_and_module_the_docs_name_exists() -> None:
    """A relative link points at a file of this tree, and every `native_host/...` path
    named in the docs is one (a module that moved leaves no stale name behind)."""
    pages = [REPO / "README.md", REPO / "CONTRIBUTING.md", *sorted((REPO / "docs").glob("*.md"))]
    missing = []
    for page in pages:
        text = page.read_text()
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
            if "://" not in target and not (page.parent / target).exists():
                missing.append(f"{page.relative_to(REPO)}: link {target}")
        for name in re.findall(r"\bnative_host/[\w/]+\.py\b", text):
            if not (REPO / name).is_file():
                missing.append(f"{page.relative_to(REPO)}: {name}")
    assert missing == []
