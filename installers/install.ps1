<#
.SYNOPSIS
Install pedelec-native-host for this user (Windows) and register it with Chrome, Chromium
and Edge (HKCU keys pointing at one manifest), via `pedelec-native-host install`.

.EXAMPLE
installers\install.ps1                                   # build in dist\, else a venv
installers\install.ps1 -Bundle C:\path\pedelec-native-host -- --extension-id <id>
installers\install.ps1 -Uninstall

.NOTES
-Bundle DIR   a PyInstaller onedir build (default: dist\pedelec-native-host of this
              checkout, if built); without one, a virtualenv is created from this checkout.
-Venv         create the virtualenv even when a build exists (Python from `py -3`, or -Python).
-Prefix DIR   where the host lives (default: %LOCALAPPDATA%\pedelec-native-host).
-Uninstall    undo the registrations, then remove the prefix.
Remaining arguments go to `pedelec-native-host install` (e.g. --extension-id ID).
Pedelec Desktop rewrites HKCU\Software\Google\Chrome\NativeMessagingHosts\cc.isaaclin.pedelec
at every foreground start; run this again (or `doctor`) if Chrome stops reaching this build.
#>
[CmdletBinding()]
param(
    [string]$Bundle = "",
    [switch]$Venv,
    [string]$Prefix = (Join-Path $env:LOCALAPPDATA "pedelec-native-host"),
    [string]$Python = "",
    [switch]$Uninstall,
    [Parameter(ValueFromRemainingArguments = $true)][string[]]$InstallArgs = @()
)
$ErrorActionPreference = "Stop"
$SourceDir = Split-Path -Parent $PSScriptRoot
$InstallArgs = @($InstallArgs | Where-Object { $_ -ne "--" })

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

if ($Uninstall) {
    $hostExe = Get-InstalledHost
    if ($hostExe) { Invoke-Checked $hostExe @("uninstall") }
    if (Test-Path -LiteralPath $Prefix) {
        # Keep the manifest dir if something else still lives there; remove our builds.
        foreach ($sub in @("bundle", "venv")) {
            $path = Join-Path $Prefix $sub
            if (Test-Path -LiteralPath $path) { Remove-Item -LiteralPath $path -Recurse -Force }
        }
        if (-not (Get-ChildItem -LiteralPath $Prefix -Force)) { Remove-Item -LiteralPath $Prefix }
    }
    Write-Output ("{0,-15} {1}" -f "removed", $Prefix)
    exit 0
}

$defaultBundle = Join-Path $SourceDir "dist\pedelec-native-host"
if (-not $Venv -and -not $Bundle -and (Test-Path -LiteralPath (Join-Path $defaultBundle "pedelec-native-host.exe"))) {
    $Bundle = $defaultBundle
}

New-Item -ItemType Directory -Force -Path $Prefix | Out-Null
if ($Bundle) {
    if (-not (Test-Path -LiteralPath (Join-Path $Bundle "pedelec-native-host.exe"))) {
        throw "$Bundle is not a onedir build (no pedelec-native-host.exe)"
    }
    # A running host locks its .exe: copy beside the old bundle, then swap.
    $new = Join-Path $Prefix "bundle.new"
    $old = Join-Path $Prefix "bundle.old"
    foreach ($path in @($new, $old)) {
        if (Test-Path -LiteralPath $path) { Remove-Item -LiteralPath $path -Recurse -Force }
    }
    Copy-Item -LiteralPath $Bundle -Destination $new -Recurse
    $current = Join-Path $Prefix "bundle"
    if (Test-Path -LiteralPath $current) { Rename-Item -LiteralPath $current -NewName "bundle.old" }
    Rename-Item -LiteralPath $new -NewName "bundle"
    if (Test-Path -LiteralPath $old) { Remove-Item -LiteralPath $old -Recurse -Force -ErrorAction SilentlyContinue }
    Write-Output ("{0,-15} {1} -> {2}" -f "copied", $Bundle, $current)
}
else {
    $venvDir = Join-Path $Prefix "venv"
    if ($Python) { Invoke-Checked $Python @("-m", "venv", $venvDir) }
    else { Invoke-Checked "py" @("-3", "-m", "venv", $venvDir) }
    $venvPython = Join-Path $venvDir "Scripts\python.exe"
    Invoke-Checked $venvPython @("-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--upgrade", $SourceDir)
    Write-Output ("{0,-15} {1} -> {2}" -f "installed", $SourceDir, $venvDir)
}

$hostExe = Get-InstalledHost
Invoke-Checked $hostExe (@("install") + $InstallArgs)
