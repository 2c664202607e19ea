#!/bin/sh
# Install pedelec-native-host for this user (Linux, macOS) from this source tree and
# register it with every Chromium-based browser found, via `pedelec-native-host install`.
#
#   installers/install.sh [--prefix DIR] [--bundle DIR] [-- INSTALL-OPTIONS...]
#   installers/install.sh --uninstall [--prefix DIR]
#
# By default a virtualenv is built under the prefix from the current files of this tree
# (never from an old build lying in dist/ or build/), with $PYTHON (default python3, 3.11+).
# --prefix DIR  where the host lives (default: ~/.local/share/pedelec-native-host on Linux,
#               ~/Library/Application Support/pedelec-native-host on macOS). Keep it out of
#               ~/Documents, ~/Desktop and ~/Downloads on macOS (privacy-protected folders).
#               The prefix is recorded, so --uninstall finds it without --prefix.
# --bundle DIR  install this PyInstaller onedir build instead of a virtualenv (only when
#               asked: build it from this tree first, see docs/install.md), into a folder
#               of its version: hosts running an older one keep theirs until they exit.
# --uninstall   undo the registrations, then remove what this script put in the prefix.
# Everything after `--` goes to `pedelec-native-host install` (e.g. --extension-id ID,
# --browser chrome, --user-data-dir DIR). A failed install leaves the previous state.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
source_dir=$(dirname "$here")
case "$(uname -s)" in
    Darwin)
        default_prefix="$HOME/Library/Application Support/pedelec-native-host"
        default_state="$HOME/Library/Application Support/pedelec-native-host"
        ;;
    *)
        default_prefix="${XDG_DATA_HOME:-$HOME/.local/share}/pedelec-native-host"
        default_state="${XDG_STATE_HOME:-$HOME/.local/state}/pedelec-native-host"
        ;;
esac
# The host's own state directory (where its install record lives) holds ours too.
state_dir=${PEDELEC_NATIVE_HOST_STATE_DIR:-$default_state}
prefix_record="$state_dir/installer-prefix"
host_record="$state_dir/install-record.json"

prefix=""
bundle=""
uninstall=0
while [ $# -gt 0 ]; do
    case "$1" in
        --prefix) [ $# -ge 2 ] || { echo "install.sh: --prefix needs a directory" >&2; exit 2; }
                  prefix=$2; shift 2 ;;
        --bundle) [ $# -ge 2 ] || { echo "install.sh: --bundle needs a directory" >&2; exit 2; }
                  bundle=$2; shift 2 ;;
        --uninstall) uninstall=1; shift ;;
        --) shift; break ;;
        -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
        *) echo "install.sh: unknown option $1 (options for install go after --)" >&2; exit 2 ;;
    esac
done
if [ "$uninstall" = 1 ] && [ $# -gt 0 ]; then
    echo "install.sh: --uninstall takes no install options" >&2; exit 2
fi

say() { printf '%-15s %s\n' "$1" "$2"; }

installed_host() {
    if [ -f "$prefix/current" ]; then
        candidate="$prefix/$(cat "$prefix/current")/pedelec-native-host"
        if [ -x "$candidate" ]; then echo "$candidate"; return; fi
    fi
    if [ -x "$prefix/venv/bin/pedelec-native-host" ]; then echo "$prefix/venv/bin/pedelec-native-host"; fi
}

# A onedir build's version folders under the prefix (each holds its start image).
version_folders() {
    for folder in "$prefix"/*/; do
        if [ -f "$folder/pedelec-native-host.image" ] && [ -x "$folder/pedelec-native-host" ]; then
            printf '%s\n' "${folder%/}"
        fi
    done
}

# --- uninstall --------------------------------------------------------------------------
if [ "$uninstall" = 1 ]; then
    if [ -z "$prefix" ] && [ -f "$prefix_record" ]; then prefix=$(cat "$prefix_record"); fi
    prefix=${prefix:-$default_prefix}
    host=$(installed_host)
    if [ -z "$host" ]; then
        echo "install.sh: nothing installed in $prefix (pass --prefix DIR if you used one)" >&2
        exit 1
    fi
    # Our record goes first so the host can remove the state directory it created.
    recorded=""
    if [ -f "$prefix_record" ]; then recorded=$(cat "$prefix_record"); rm -f "$prefix_record"; fi
    if ! "$host" uninstall; then
        if [ -n "$recorded" ]; then printf '%s\n' "$recorded" > "$prefix_record"; fi
        echo "install.sh: $host uninstall failed; $prefix left in place" >&2
        exit 1
    fi
    version_folders | while IFS= read -r folder; do rm -rf "$folder"; done
    rm -rf "$prefix/venv" "$prefix/current"
    say "removed" "$prefix/venv and its version folders"
    rmdir "$prefix" 2>/dev/null && say "removed" "directory $prefix"
    rmdir "$state_dir" 2>/dev/null && say "removed" "directory $state_dir"
    exit 0
fi

# --- install ----------------------------------------------------------------------------
prefix=${prefix:-$default_prefix}
case "$prefix" in /*) ;; *) prefix="$PWD/$prefix" ;; esac
if [ -n "$bundle" ] && [ ! -x "$bundle/pedelec-native-host" ]; then
    echo "install.sh: $bundle is not a onedir build (no executable pedelec-native-host)" >&2
    exit 1
fi
python=${PYTHON:-python3}
if [ -z "$bundle" ]; then
    "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null \
        || { echo "install.sh: $python is missing or older than 3.11; set PYTHON=..." >&2; exit 1; }
fi

# The prefix is where the browser's host lives: made private (umask 077: nobody else may
# read or write what this script creates), and an existing one must be this user's and
# writable by nobody else (`install` then checks every folder on the way to it).
umask 077
if [ -d "$prefix" ]; then
    if [ -z "$(find "$prefix" -prune -user "$(id -u)")" ]; then
        echo "install.sh: $prefix belongs to another user; choose another --prefix" >&2
        exit 1
    fi
    if [ -n "$(find "$prefix" -prune -perm -0002)" ]; then
        echo "install.sh: $prefix is writable by other users, who could swap the host;" \
            "run: chmod go-w '$prefix' (or choose another --prefix)" >&2
        exit 1
    fi
fi

# Whatever fails from here on, put things back as they were.
prefix_existed=0; [ -d "$prefix" ] && prefix_existed=1
registered_before=0; [ -f "$host_record" ] && registered_before=1
work=""
host=""
version=""
created_version=0
finished=0
cleanup() {
    [ -n "$work" ] && rm -rf "$work"
    [ "$finished" = 1 ] && return
    # A first install that failed half way: undo whatever registrations it wrote.
    if [ "$registered_before" = 0 ] && [ -n "$host" ] && [ -f "$host_record" ]; then
        "$host" uninstall >/dev/null 2>&1 || true
    fi
    for kind in venv "$version"; do
        if [ -n "$kind" ] && [ -d "$prefix/$kind.old" ]; then
            rm -rf "${prefix:?}/$kind"
            mv "$prefix/$kind.old" "$prefix/$kind"
        elif [ -n "$kind" ] && [ "$kind" != venv ] && [ "$created_version" = 1 ]; then
            rm -rf "${prefix:?}/$kind"
        fi
    done
    rm -rf "$prefix/venv.new" "$prefix/$version.new"
    [ "$prefix_existed" = 1 ] || rm -rf "$prefix"
    echo "install.sh: install failed; $prefix is back as it was" >&2
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mkdir -p "$prefix"
rm -rf "$prefix/venv.old" "$prefix/venv.new"
if [ -n "$bundle" ]; then
    # Into a folder of its version, beside any older one: hosts running an older version
    # keep their files; its `install` moves the registration, and an older folder goes
    # once no host runs from it (native_host/versions.py).
    version=$("$bundle/pedelec-native-host" version | sed -n 's/^pedelec-native-host //p')
    case "$version" in
        ""|*/*|.|..) echo "install.sh: $bundle does not say its version" >&2; exit 1 ;;
    esac
    rm -rf "$prefix/$version.old" "$prefix/$version.new"
    cp -R "$bundle" "$prefix/$version.new"
    [ -d "$prefix/$version" ] || created_version=1
    for kind in venv "$version"; do
        if [ -d "$prefix/$kind" ]; then mv "$prefix/$kind" "$prefix/$kind.old"; fi
    done
    mv "$prefix/$version.new" "$prefix/$version"
    say "copied" "$bundle -> $prefix/$version"
else
    # Build from a clean copy of the current files: a leftover build/ dir or dist/ bundle
    # in this tree must never end up installed.
    work=$(mktemp -d "${TMPDIR:-/tmp}/pedelec-native-host-build.XXXXXX")
    (cd "$source_dir" && tar -cf - --exclude=./.git --exclude=./.venv --exclude=./build \
        --exclude=./dist --exclude='*.egg-info' --exclude=__pycache__ .) | (cd "$work" && tar -xf -)
    # A virtualenv cannot move, so the new one is built in place; the old one waits aside.
    if [ -d "$prefix/venv" ]; then mv "$prefix/venv" "$prefix/venv.old"; fi
    "$python" -m venv "$prefix/venv"
    "$prefix/venv/bin/python" -m pip install --quiet --disable-pip-version-check "$work"
    say "installed" "$source_dir -> $prefix/venv"
fi

if [ -n "$bundle" ]; then host="$prefix/$version/pedelec-native-host"; else host="$prefix/venv/bin/pedelec-native-host"; fi
"$host" install "$@"

finished=1
rm -rf "$prefix/venv.old"
if [ -n "$version" ]; then
    rm -rf "$prefix/$version.old"
else  # a virtualenv now: no onedir build of this prefix is registered any more
    version_folders | while IFS= read -r folder; do rm -rf "$folder"; done
    rm -f "$prefix/current"
fi
mkdir -p "$state_dir"
printf '%s\n' "$prefix" > "$prefix_record"
say "recorded" "$prefix_record (install.sh --uninstall finds the prefix there)"
# The host's own `install` printed the next step: its `doctor`, by full path.
