<#
.SYNOPSIS
Install pedelec-native-host for this user (Windows) from this source tree and register it
with Chrome, Chromium and Edge (HKCU keys pointing at one manifest), via
`pedelec-native-host install`.

.EXAMPLE
powershell -ExecutionPolicy Bypass -File installers\install.ps1
powershell -ExecutionPolicy Bypass -File installers\install.ps1 -- --extension-id <id>
powershell -ExecutionPolicy Bypass -File installers\install.ps1 -Uninstall

.NOTES
Needs Python 3.11+ with the `py` launcher (the python.org installer's default), or -Python.
By default a virtualenv is built under the prefix from the current files of this tree,
never from an old build lying in dist\ or build\.
-Prefix DIR   where the host lives (default: %LOCALAPPDATA%\pedelec-native-host). It is
              recorded, so -Uninstall finds it without -Prefix.
-Bundle DIR   install this PyInstaller onedir build instead of a virtualenv (only when asked).
-Python EXE   the interpreter to build the virtualenv with (default: `py -3`).
-Uninstall    undo the registrations, then remove what this script put in the prefix.
Remaining arguments go to `pedelec-native-host install` (e.g. --extension-id ID).
A failed install leaves the previous state.
Pedelec Desktop rewrites HKCU\Software\Google\Chrome\NativeMessagingHosts\cc.isaaclin.pedelec
at every foreground start; run this again (or `doctor`) if Chrome stops reaching this build.
#>
# No positional binding: the documented `-- --extension-id <id>` must reach $InstallArgs, not
# -Bundle and -Prefix (with [CmdletBinding()] alone bare words bind by declaration order).
[CmdletBinding(PositionalBinding = $false)]
param(
    [string]$Bundle = "",
    [string]$Prefix = "",
    [string]$Python = "",
    [switch]$Uninstall,
    [Parameter(ValueFromRemainingArguments = $true)][string[]]$InstallArgs = @()
)
$ErrorActionPreference = "Stop"
$SourceDir = Split-Path -Parent $PSScriptRoot
$InstallArgs = @($InstallArgs | Where-Object { $_ -ne "--" })
$DefaultPrefix = Join-Path $env:LOCALAPPDATA "pedelec-native-host"
# The host's own state directory (where its install record lives) holds ours too.
$StateDir = if ($env:PEDELEC_NATIVE_HOST_STATE_DIR) { $env:PEDELEC_NATIVE_HOST_STATE_DIR } else { $DefaultPrefix }
$PrefixRecord = Join-Path $StateDir "installer-prefix"
$HostRecord = Join-Path $StateDir "install-record.json"

function Say([string]$Verb, [string]$What) { Write-Output ("{0,-15} {1}" -f $Verb, $What) }

function Get-InstalledHost {
    foreach ($candidate in @(
            (Join-Path $Prefix "bundle\pedelec-native-host.exe"),
            (Join-Path $Prefix "venv\Scripts\pedelec-native-host.exe"))) {
        if (Test-Path -LiteralPath $candidate -PathType Leaf) { return $candidate }
    }
    return $null
}

function Invoke-Checked([string]$Exe, [string[]]$Arguments) {
    & $Exe @Arguments
    if ($LASTEXITCODE -ne 0) { throw "$Exe $($Arguments -join ' ') failed with exit code $LASTEXITCODE" }
}

function Remove-IfPresent([string]$Path) {
    if (Test-Path -LiteralPath $Path) { Remove-Item -LiteralPath $Path -Recurse -Force }
}

function Remove-IfEmpty([string]$Path) {
    if ((Test-Path -LiteralPath $Path) -and -not (Get-ChildItem -LiteralPath $Path -Force)) {
        Remove-Item -LiteralPath $Path
        Say "removed" "directory $Path"
    }
}

# --- uninstall --------------------------------------------------------------------------
if ($Uninstall) {
    if (-not $Prefix -and (Test-Path -LiteralPath $PrefixRecord)) {
        $Prefix = (Get-Content -LiteralPath $PrefixRecord -TotalCount 1).Trim()
    }
    if (-not $Prefix) { $Prefix = $DefaultPrefix }
    $hostExe = Get-InstalledHost
    if (-not $hostExe) {
        Write-Error "nothing installed in $Prefix (pass -Prefix DIR if you used one)" -ErrorAction Continue
        exit 1
    }
    # Our record goes first so the host can remove the state directory it created.
    $recorded = $null
    if (Test-Path -LiteralPath $PrefixRecord) {
        $recorded = Get-Content -LiteralPath $PrefixRecord -TotalCount 1
        Remove-Item -LiteralPath $PrefixRecord
    }
    try { Invoke-Checked $hostExe @("uninstall") }
    catch {
        if ($recorded) { Set-Content -LiteralPath $PrefixRecord -Value $recorded }
        throw
    }
    foreach ($sub in @("bundle", "venv")) { Remove-IfPresent (Join-Path $Prefix $sub) }
    Say "removed" "$Prefix\venv and $Prefix\bundle"
    Remove-IfEmpty $Prefix
    Remove-IfEmpty $StateDir
    exit 0
}

# --- install ----------------------------------------------------------------------------
if (-not $Prefix) { $Prefix = $DefaultPrefix }
$Prefix = [IO.Path]::GetFullPath($Prefix)
if ($Bundle -and -not (Test-Path -LiteralPath (Join-Path $Bundle "pedelec-native-host.exe"))) {
    throw "$Bundle is not a onedir build (no pedelec-native-host.exe)"
}
# `py -3` (the launcher) unless -Python names an interpreter.
$pyExe = "py"
[string[]]$pyArgs = @("-3")
if ($Python) { $pyExe = $Python; [string[]]$pyArgs = @() }
if (-not $Bundle) {
    $pythonOk = $false
    try {
        & $pyExe @pyArgs -c "import sys; sys.exit(sys.version_info < (3, 11))"
        $pythonOk = ($LASTEXITCODE -eq 0)
    }
    catch { $pythonOk = $false }
    if (-not $pythonOk) {
        throw "$pyExe $pyArgs is missing or older than 3.11: install Python 3.11+ from python.org (with the py launcher), or pass -Python"
    }
}

$prefixExisted = Test-Path -LiteralPath $Prefix
$registeredBefore = Test-Path -LiteralPath $HostRecord
$work = $null
$hostExe = $null
$finished = $false
try {
    New-Item -ItemType Directory -Force -Path $Prefix | Out-Null
    foreach ($sub in @("venv.old", "bundle.old", "venv.new", "bundle.new")) { Remove-IfPresent (Join-Path $Prefix $sub) }
    if ($Bundle) {
        # A running host locks its .exe: copy beside the old bundle, then swap.
        Copy-Item -LiteralPath $Bundle -Destination (Join-Path $Prefix "bundle.new") -Recurse
        foreach ($sub in @("venv", "bundle")) {
            $path = Join-Path $Prefix $sub
            if (Test-Path -LiteralPath $path) { Rename-Item -LiteralPath $path -NewName "$sub.old" }
        }
        Rename-Item -LiteralPath (Join-Path $Prefix "bundle.new") -NewName "bundle"
        Say "copied" "$Bundle -> $Prefix\bundle"
    }
    else {
        # Build from a clean copy of the current files: a leftover build\ dir or dist\
        # bundle in this tree must never end up installed.
        $work = Join-Path ([IO.Path]::GetTempPath()) ("pedelec-native-host-build-" + [guid]::NewGuid())
        New-Item -ItemType Directory -Path $work | Out-Null
        Get-ChildItem -LiteralPath $SourceDir -Force |
            Where-Object { $_.Name -notin @(".git", ".venv", "build", "dist", "__pycache__") -and $_.Name -notlike "*.egg-info" } |
            Copy-Item -Destination $work -Recurse
        # A virtualenv cannot move, so the new one is built in place; the old one waits aside.
        foreach ($sub in @("venv", "bundle")) {
            $path = Join-Path $Prefix $sub
            if (Test-Path -LiteralPath $path) { Rename-Item -LiteralPath $path -NewName "$sub.old" }
        }
        $venvDir = Join-Path $Prefix "venv"
        Invoke-Checked $pyExe (@($pyArgs) + @("-m", "venv", $venvDir))
        $venvPython = Join-Path $venvDir "Scripts\python.exe"
        Invoke-Checked $venvPython @("-m", "pip", "install", "--quiet", "--disable-pip-version-check", $work)
        Say "installed" "$SourceDir -> $venvDir"
    }
    $hostExe = Get-InstalledHost
    Invoke-Checked $hostExe (@("install") + $InstallArgs)
    $finished = $true
}
finally {
    if ($work) { Remove-IfPresent $work }
    if (-not $finished) {
        # A first install that failed half way: undo whatever registrations it wrote.
        if (-not $registeredBefore -and $hostExe -and (Test-Path -LiteralPath $HostRecord)) {
            try { & $hostExe uninstall *> $null } catch { Write-Warning "could not undo the partial registration: $_" }
        }
        foreach ($sub in @("venv", "bundle")) {
            $old = Join-Path $Prefix "$sub.old"
            if (Test-Path -LiteralPath $old) {
                Remove-IfPresent (Join-Path $Prefix $sub)
                Rename-Item -LiteralPath $old -NewName $sub
            }
        }
        foreach ($sub in @("venv.new", "bundle.new")) { Remove-IfPresent (Join-Path $Prefix $sub) }
        if (-not $prefixExisted) { Remove-IfPresent $Prefix }
        Write-Warning "install failed; $Prefix is back as it was"
    }
}

foreach ($sub in @("venv.old", "bundle.old")) {
    # A host still running from the old build may keep it locked until it exits.
    try { Remove-IfPresent (Join-Path $Prefix $sub) }
    catch { Write-Warning "could not remove $Prefix\$sub yet (still in use): remove it later" }
}
New-Item -ItemType Directory -Force -Path $StateDir | Out-Null
Set-Content -LiteralPath $PrefixRecord -Value $Prefix
Say "recorded" "$PrefixRecord (install.ps1 -Uninstall finds the prefix there)"
Write-Output ""
Write-Output "next: check that each browser can start the host:"
Write-Output "  & `"$hostExe`" doctor"
