<#
.SYNOPSIS
  Keepsake installer for Windows (PowerShell 5.1+).

.DESCRIPTION
  Builds keepsake-host.exe (cargo build --release --locked), copies it to
  %LOCALAPPDATA%\Keepsake\bin\ and runs `keepsake-host.exe install`, which writes the host manifest
  (UTF-8, no BOM) and the HKCU registry keys for Chrome, Chromium, Edge, Brave and Vivaldi, and the
  Mozilla manifest (allowed_extensions: keepsake@keepsake.dev) with its HKCU\Software\Mozilla key for
  Firefox, LibreWolf and Waterfox.
  All registration logic is in keepsake-host.exe; this script only builds, copies and calls it.
  Running it twice changes nothing. This file is ASCII on purpose (PowerShell 5.1 reads BOM-less
  files in the ANSI code page).

.EXAMPLE
  powershell -ExecutionPolicy Bypass -File .\install.ps1
.EXAMPLE
  powershell -ExecutionPolicy Bypass -File .\install.ps1 -Uninstall
.EXAMPLE
  powershell -ExecutionPolicy Bypass -File .\install.ps1 -NoBuild -- --extension-id abcdefghijklmnopabcdefghijklmnop
#>
[CmdletBinding()]
param(
    # Run `keepsake-host.exe uninstall` and remove the copied binary (chat data is kept).
    [switch]$Uninstall,
    # With -Uninstall: also delete the database (your chat history).
    [switch]$PurgeData,
    # Machine-wide (HKLM, %ProgramData%); run from an elevated PowerShell.
    [switch]$System,
    # Use $env:KEEPSAKE_HOST_BIN or an existing target\release\keepsake-host.exe.
    [switch]$NoBuild,
    # Anything after `--` is passed to keepsake-host.exe install / uninstall.
    [Parameter(ValueFromRemainingArguments = $true)]
    [string[]]$HostArgs
)

$ErrorActionPreference = 'Stop'
Set-StrictMode -Version Latest

$ExtensionId = 'ejaedcjldiggibmnammkkoekohjgefkk'
$Repo = $PSScriptRoot
$BinDir = Join-Path $env:LOCALAPPDATA 'Keepsake\bin'
$Dst = Join-Path $BinDir 'keepsake-host.exe'
$Extra = @()
if ($null -ne $HostArgs) { $Extra = @($HostArgs) }
if ($System) { $Extra = @('--system') + $Extra }

function Invoke-KeepsakeHost([string]$Exe, [string[]]$Arguments) {
    & $Exe @Arguments
    if ($LASTEXITCODE -ne 0) {
        throw "keepsake-host $($Arguments[0]) failed (exit code $LASTEXITCODE)"
    }
}

if ($Uninstall) {
    $exe = $Dst
    if (-not (Test-Path -LiteralPath $exe -PathType Leaf)) {
        $exe = Join-Path $Repo 'target\release\keepsake-host.exe'
    }
    if (-not (Test-Path -LiteralPath $exe -PathType Leaf)) {
        throw "no keepsake-host.exe found (looked at $Dst)"
    }
    if ($PurgeData) { $Extra = $Extra + @('--purge-data') }
    # A running .exe cannot delete itself: run the uninstaller from a temporary copy.
    $tmp = Join-Path $env:TEMP ("keepsake-host-uninstall-{0}.exe" -f $PID)
    Copy-Item -LiteralPath $exe -Destination $tmp -Force
    try {
        Write-Host '==> unregistering keepsake-host'
        Invoke-KeepsakeHost $tmp (@('uninstall') + $Extra)
    } finally {
        Remove-Item -LiteralPath $tmp -Force -ErrorAction SilentlyContinue
    }
    if (Test-Path -LiteralPath $Dst) {
        Remove-Item -LiteralPath $Dst -Force
        Write-Host "removed   $Dst"
    }
    Write-Host '==> done'
    exit 0
}

if ($NoBuild) {
    $Src = $env:KEEPSAKE_HOST_BIN
    if (-not $Src) { $Src = Join-Path $Repo 'target\release\keepsake-host.exe' }
} else {
    if (-not (Get-Command cargo -ErrorAction SilentlyContinue)) {
        throw 'cargo is required (install Rust from https://rustup.rs)'
    }
    Write-Host '==> building keepsake-host (release)'
    Push-Location $Repo
    try {
        & cargo build --release --locked
        if ($LASTEXITCODE -ne 0) { throw "cargo build failed (exit code $LASTEXITCODE)" }
    } finally {
        Pop-Location
    }
    $Src = Join-Path $Repo 'target\release\keepsake-host.exe'
}
if (-not (Test-Path -LiteralPath $Src -PathType Leaf)) {
    throw "$Src not found (build it, or set KEEPSAKE_HOST_BIN)"
}
if ($Dst -match '[&^%]') {
    Write-Warning "$Dst contains & ^ or %, which older Chrome versions cannot launch"
}

# Remember the folders we create, so -Uninstall can remove them again.
$created = @()
$d = $BinDir
while ($d -and -not (Test-Path -LiteralPath $d)) {
    $created += @('--created-dir', $d)
    $d = Split-Path -Parent $d
}
New-Item -ItemType Directory -Force -Path $BinDir | Out-Null

$same = (Test-Path -LiteralPath $Dst -PathType Leaf) -and
    ((Get-FileHash -LiteralPath $Src).Hash -eq (Get-FileHash -LiteralPath $Dst).Hash)
if ($same) {
    Write-Host "unchanged $Dst"
} else {
    try {
        Copy-Item -LiteralPath $Src -Destination $Dst -Force
    } catch {
        throw "cannot replace $Dst (a browser may be running it): close the browser and run install.ps1 again"
    }
    Write-Host "installed $Dst"
}

Write-Host '==> registering with your browsers'
Invoke-KeepsakeHost $Dst (@('install', '--bin', $Dst, '--owns-bin') + $created + $Extra)

Write-Host ''
Write-Host 'Next steps: load the extension'
Write-Host '  1. Open chrome://extensions (edge://extensions, brave://extensions, vivaldi://extensions)'
Write-Host '  2. Turn on Developer mode'
Write-Host ("  3. Load unpacked -> {0}" -f (Join-Path $Repo 'extension'))
Write-Host "  The extension ID will be $ExtensionId (fixed by the key in extension\manifest.json)."
Write-Host "  Check the setup any time with: & '$Dst' doctor"
Write-Host '  Remove it again with: .\install.ps1 -Uninstall   (keeps your chat data)'
