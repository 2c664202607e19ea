"""The per-user macOS package's pure parts, as text and data (packaging/macos/build.py
hands them to `pkgbuild` and `productbuild`; tests/test_release_artifacts.py checks them
on any system).

What the package does, and why:
- **The user's home, never the system.** The distribution enables only the
  current-user-home domain (`enable_currentUserHome`); Apple's Distribution XML reference
  says such an install is done as the current user, not as root, and cannot write
  outside the home, so it needs no administrator password. The component's install
  location is then taken inside that home (`/Library/...` lands in `~/Library/...`):
  `install_location(version)` is the bundle's folder, `~/Library/Application Support/
  pedelec-native-host/<version>`, where installers/install.sh --bundle puts a onedir
  build. The payload is the bundle itself, so the package never touches its parent
  folder, which holds the host's config.json and install record (native_host/paths.py).
- **A folder and a package of its own for each version** (issue 30). Hosts of the
  installed version may be running while a newer package installs: the newer version
  goes into its own folder, beside, so none of their files is replaced, and the package
  has its own identifier (`identifier(version, scope)`), so Installer never takes it
  for an upgrade of the older one, which would remove that one's files (on an upgrade,
  Installer removes what the older receipt listed and the newer payload lacks). The
  `postinstall`'s `install` moves the registration to the new folder; the older folder
  goes once no host runs from it (native_host/versions.py); its receipt stays, as every
  receipt does.
- **Nothing relocated.** Installer "relocates" a bundle of the payload it finds
  elsewhere under the same identifier (an interpreter's Python.framework would be
  moved into /Library/Frameworks' copy); every bundle pkgbuild finds is pinned in place
  (`pinned_components`).
- **Registration by `install`.** The manifests need the home's absolute path, which only
  the install knows, so `postinstall` runs the installed bundle's own
  `pedelec-native-host install --browser all` (every macOS row of the locations table):
  as the user, it writes the manifests and the install record owned by the user, with
  install's own modes (0600 files, 0700 directories), and `uninstall` undoes it. It
  refuses to register into a home that is not the running user's own (a root install
  into another user's home would write root's files there).

The system package (`SYSTEM`, for machines whose browsers ignore per-user hosts under
`NativeMessagingUserLevelHosts` false; docs/install.md, "For administrators") is the same
payload in the other domain: the distribution enables only the local system
(`enable_localSystem`), so Installer asks for an administrator and puts the bundle in
`/Library/Application Support/pedelec-native-host/<version>`, root's; its `postinstall` runs
as root and registers it with the bundle's own `install --scope system --browser all`:
0644 manifests in the browsers' system folders (`/Library/Google/Chrome/
NativeMessagingHosts`, `/Library/Application Support/Chromium/NativeMessagingHosts`,
`/Library/Microsoft/Edge/NativeMessagingHosts`, ...: the locations table's system rows),
which `install` refuses to do for a bundle anyone but root could change. Its install
record goes beside the version folders, where its `uninstall` finds it. Its receipts
have names of their own (`cc.isaaclin.pedelec.native-host.system.<version>`), so each
package is installed and forgotten on its own, and both can be installed at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from xml.sax.saxutils import escape, quoteattr

IDENTIFIER = "cc.isaaclin.pedelec.native-host"
"""The per-user component packages' identifiers start with this; each version adds its
own."""
TITLE = "Pedelec native messaging host"
PKG_NAME = "pedelec-native-host-{version}.pkg"
COMPONENT_NAME = "pedelec-native-host-component.pkg"
"""The `pkgbuild` output `productbuild` wraps (kept out of the release folder)."""
HOME_PREFIX = "Library/Application Support/pedelec-native-host"
"""Under the home (or the system volume): the host's folder (its config and state live
there too), and the root of its version folders."""
EXECUTABLE = "pedelec-native-host"
ARCHITECTURES = {"arm64": "arm64", "x86_64": "x86_64"}
"""`platform.machine()` -> Installer's `hostArchitectures` word: the bundle is built for
the build machine's architecture only, and Installer refuses it on another."""


class PlanError(ValueError):
    """Something the package cannot express."""


@dataclass(frozen=True)
class PkgScope:
    """What the per-user and the system package do differently."""

    identifier: str
    """What the component package's identifier starts with (`identifier` adds the
    version)."""
    pkg_name: str
    component_name: str
    """The `pkgbuild` output `productbuild` wraps (kept out of the release folder)."""
    current_user_home: bool
    """The Installer domain: the current user's home, else the local system."""
    postinstall: str
    """The script's template (`postinstall_script` fills it in)."""


POSTINSTALL = """#!/bin/sh
# pedelec-native-host's postinstall (packaging/macos/pkg_plan.py): registers the bundle
# just installed with every macOS browser of the locations table, by its own `install`
# (which also retires the older versions' folders: they go once no host runs from them).
# Installer passes: $1 the package, $2 where the payload went (in a home install,
# <home>/{prefix}/{folder}), $3 the target (there, the home). Should $2 come
# without the home, it is taken under $3.
set -u
destination=${{2%/}}
suffix="/{prefix}/{folder}"
if [ "$destination" = "$suffix" ]; then
    destination=${{3%/}}$destination
fi
case "$destination" in
    ?*"$suffix") home=${{destination%"$suffix"}} ;;
    *)
        echo "pedelec-native-host: not installed into a user's home ($destination);" \\
            "choose \\"Install for me only\\" (installer -target CurrentUserHomeDirectory)" >&2
        exit 1 ;;
esac
if [ ! -O "$home" ]; then
    echo "pedelec-native-host: refusing to register as user $(id -un) in $home," \\
        "which is another user's home: install the package as that user, without sudo" >&2
    exit 1
fi
HOME=$home
export HOME
exec "$destination/{executable}" install --browser all
"""

SYSTEM_POSTINSTALL = """#!/bin/sh
# pedelec-native-host's system postinstall (packaging/macos/pkg_plan.py): registers the
# bundle just installed for every user, in the system folders of every macOS browser of
# the locations table, by its own `install --scope system` (which also retires the older
# versions' folders: they go once no host runs from them). Installer runs it as root and
# passes: $1 the package, $2 where the payload went (under the target, the folder
# "{prefix}/{folder}"), $3 the target volume ("/").
set -u
destination=${{2%/}}
expected="${{3%/}}/{prefix}/{folder}"
if [ "$destination" != "$expected" ]; then
    echo "pedelec-native-host: the system package goes to $expected, not $destination" >&2
    exit 1
fi
if [ "$(id -u)" != 0 ]; then
    echo "pedelec-native-host: the system package registers the host for every user:" \\
        "install it as an administrator (sudo installer -pkg <package> -target /)" >&2
    exit 1
fi
# The install record beside the version folders: `uninstall` run with it finds it.
PEDELEC_NATIVE_HOST_STATE_DIR="${{3%/}}/{prefix}"
export PEDELEC_NATIVE_HOST_STATE_DIR
exec "$destination/{executable}" install --scope system --browser all
"""

USER = PkgScope(IDENTIFIER, PKG_NAME, COMPONENT_NAME, True, POSTINSTALL)
SYSTEM = PkgScope(
    f"{IDENTIFIER}.system",
    "pedelec-native-host-{version}-system.pkg",
    "pedelec-native-host-system-component.pkg",
    False,
    SYSTEM_POSTINSTALL,
)
SCOPES = (USER, SYSTEM)
"""Both packages, built from one bundle by build.py."""


def pkg_name(version: str, scope: PkgScope = USER) -> str:
    return scope.pkg_name.format(version=version)


def identifier(version: str, scope: PkgScope = USER) -> str:
    """The component package's identifier, its receipt's name (`pkgutil --pkgs`)."""
    return f"{scope.identifier}.{version}"


def install_location(version: str) -> str:
    """pkgbuild's `--install-location`: the version's own folder (in a home install it is
    taken inside the home)."""
    if not version or "/" in version or version in (".", ".."):
        raise PlanError(f"no folder can be named for version {version!r}")
    return f"/{HOME_PREFIX}/{version}"


def host_architecture(machine: str) -> str:
    if machine not in ARCHITECTURES:
        raise PlanError(f"no macOS package for machine {machine!r}; known: {sorted(ARCHITECTURES)}")
    return ARCHITECTURES[machine]


def distribution_xml(version: str, machine: str, scope: PkgScope = USER) -> str:
    """productbuild's `--distribution`: one hidden choice, the component package, and one
    place it can go: the current user's home, or (the system package) the local system."""
    arch = quoteattr(host_architecture(machine))
    component = escape(scope.component_name)
    home, system = ("true", "false") if scope.current_user_home else ("false", "true")
    title = TITLE if scope.current_user_home else f"{TITLE} (every user)"
    return f"""<?xml version="1.0" encoding="utf-8"?>
<installer-gui-script minSpecVersion="2">
    <title>{escape(f"{title} {version}")}</title>
    <options customize="never" require-scripts="false" hostArchitectures={arch}/>
    <domains enable_anywhere="false" enable_currentUserHome="{home}" enable_localSystem="{system}"/>
    <choices-outline>
        <line choice="default"/>
    </choices-outline>
    <choice id="default" visible="false">
        <pkg-ref id={quoteattr(identifier(version, scope))}/>
    </choice>
    <pkg-ref id={quoteattr(identifier(version, scope))} version={quoteattr(version)}
             onConclusion="none">{component}</pkg-ref>
</installer-gui-script>
"""


def postinstall_script(version: str, scope: PkgScope = USER) -> str:
    """The component's `postinstall` for `version` (POSIX sh: macOS's /bin/sh, and dash
    where the tests run it)."""
    folder = install_location(version).rsplit("/", 1)[1]
    return scope.postinstall.format(prefix=HOME_PREFIX, folder=folder, executable=EXECUTABLE)


COMPONENT_SETTINGS = {
    "BundleIsRelocatable": False,
    "BundleIsVersionChecked": False,
    "BundleHasStrictIdentifier": False,
    "BundleOverwriteAction": "upgrade",
}
"""What every bundle of the payload gets: installed where the payload puts it, whatever
version is on disk, replacing what an older package put there."""


def pinned_components(analyzed: list[dict[str, object]]) -> list[dict[str, object]]:
    """`pkgbuild --analyze`'s component list with every bundle pinned in place
    (`COMPONENT_SETTINGS`); each bundle's own keys (its path, its nested bundles, which
    stay where their parent is) kept."""
    pinned = []
    for component in analyzed:
        if "RootRelativeBundlePath" not in component:
            raise PlanError(f"a component without RootRelativeBundlePath: {component!r}")
        pinned.append({**component, **COMPONENT_SETTINGS})
    return pinned
