"""installers/install.ps1, read as text: no PowerShell runs on this machine or its CI
(Debian 12 has no `powershell` package, `apt-cache policy powershell` finds no candidate,
and neither PyPI nor npm ships pwsh), so what matters is checked statically.

With `[CmdletBinding()]` and no `Position` attributes, PowerShell binds bare arguments to
the parameters in declaration order, so the documented `install.ps1 -- --extension-id
<id>` put `--extension-id` in -Bundle and the id in -Prefix. `PositionalBinding = $false`
sends every bare argument to the ValueFromRemainingArguments parameter instead."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

SCRIPT = Path(__file__).resolve().parent.parent / "installers" / "install.ps1"


def _code() -> str:
    """The script without its comments (`<# ... #>` blocks and `#` lines)."""
    text = re.sub(r"<#.*?#>", "", SCRIPT.read_text(encoding="utf-8"), flags=re.S)
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))


def test_bare_arguments_reach_the_install_arguments_not_bundle_or_prefix() -> None:
    code = _code()
    binding = re.search(r"\[CmdletBinding\(([^)]*)\)\]\s*param\(", code, flags=re.I)
    assert binding is not None, "the script declares its parameters with [CmdletBinding(...)]"
    assert re.fullmatch(r"\s*PositionalBinding\s*=\s*\$false\s*", binding.group(1), re.I)
    params = code[binding.end() : code.index("\n)", binding.end())]
    assert "Position" not in params.replace("PositionalBinding", "")
    assert re.search(
        r"ValueFromRemainingArguments\s*=\s*\$true\)\]\[string\[\]\]\$InstallArgs", params
    )
    assert "-- --extension-id" in SCRIPT.read_text(encoding="utf-8")  # the documented call
