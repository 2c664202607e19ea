#!/bin/sh
# Install pedelec-native-host for this user (Linux, macOS) and register it with every
# Chromium-based browser found, via `pedelec-native-host install`.
#
#   installers/install.sh [--bundle DIR|--venv] [--prefix DIR] [--uninstall] [-- INSTALL-OPTIONS...]
#
# --bundle DIR  a PyInstaller onedir build (default: dist/pedelec-native-host next to this
#               checkout, if built); without one, a virtualenv is created from this checkout.
# --venv        create the virtualenv even when a build exists ($PYTHON, default python3).
# --prefix DIR  where the host lives (default: ~/.local/share/pedelec-native-host on Linux,
#               ~/Library/Application Support/pedelec-native-host on macOS). Keep it out of
#               ~/Documents, ~/Desktop and ~/Downloads on macOS (privacy-protected folders).
# --uninstall   undo the registrations, then remove the prefix.
# Everything after `--` goes to `pedelec-native-host install` (e.g. --extension-id ID,
# --browser chrome, --user-data-dir DIR).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
source_dir=$(dirname "$here")
case "$(uname -s)" in
    Darwin) prefix="$HOME/Library/Application Support/pedelec-native-host" ;;
    *) prefix="${XDG_DATA_HOME:-$HOME/.local/share}/pedelec-native-host" ;;
esac
bundle=""
uninstall=0
use_venv=0
while [ $# -gt 0 ]; do
    case "$1" in
        --bundle) bundle=$2; shift 2 ;;
        --venv) use_venv=1; shift ;;
        --prefix) prefix=$2; shift 2 ;;
        --uninstall) uninstall=1; shift ;;
        --) shift; break ;;
        -h|--help) awk 'NR > 1 && /^#/ { print; next } NR > 1 { exit }' "$0"; exit 0 ;;
        *) echo "install.sh: unknown option $1 (options for install go after --)" >&2; exit 2 ;;
    esac
done

installed_host() {
    if [ -x "$prefix/bundle/pedelec-native-host" ]; then
        echo "$prefix/bundle/pedelec-native-host"
    elif [ -x "$prefix/venv/bin/pedelec-native-host" ]; then
        echo "$prefix/venv/bin/pedelec-native-host"
    fi
}

if [ "$uninstall" = 1 ]; then
    host=$(installed_host)
    if [ -n "$host" ]; then
        "$host" uninstall
    fi
    rm -rf "$prefix"
    echo "removed         $prefix"
    exit 0
fi

if [ "$use_venv" = 0 ] && [ -z "$bundle" ] && [ -x "$source_dir/dist/pedelec-native-host/pedelec-native-host" ]; then
    bundle="$source_dir/dist/pedelec-native-host"
fi

mkdir -p "$prefix"
if [ -n "$bundle" ]; then
    [ -x "$bundle/pedelec-native-host" ] || { echo "install.sh: $bundle is not a onedir build" >&2; exit 1; }
    # Copy next to the old bundle, then swap, so a running host keeps its files.
    rm -rf "$prefix/bundle.new" "$prefix/bundle.old"
    cp -R "$bundle" "$prefix/bundle.new"
    if [ -d "$prefix/bundle" ]; then mv "$prefix/bundle" "$prefix/bundle.old"; fi
    mv "$prefix/bundle.new" "$prefix/bundle"
    rm -rf "$prefix/bundle.old" "$prefix/venv"
    echo "copied          $bundle -> $prefix/bundle"
else
    python=${PYTHON:-python3}
    "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
        || { echo "install.sh: $python is older than 3.11; set PYTHON=..." >&2; exit 1; }
    "$python" -m venv "$prefix/venv"
    "$prefix/venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade "$source_dir"
    rm -rf "$prefix/bundle"
    echo "installed       $source_dir -> $prefix/venv"
fi

exec "$(installed_host)" install "$@"
