#!/usr/bin/env bash
# System packages corpusflow uses beyond PyPI: LibreOffice headless, through which
# docling reads legacy .doc/.ppt/.xls. Installed with apt-get where that is possible
# (root or passwordless sudo on Debian/Ubuntu); otherwise says exactly what to install.
# Without it everything else works and legacy Office files fail as `unsupported`.
set -uo pipefail
if command -v soffice >/dev/null 2>&1 || command -v libreoffice >/dev/null 2>&1; then
  exit 0
fi
pkgs="libreoffice-writer-nogui libreoffice-calc-nogui libreoffice-impress-nogui"
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then sudo="sudo -n"; fi
fi
if command -v apt-get >/dev/null 2>&1 && { [ "$(id -u)" -eq 0 ] || [ -n "$sudo" ]; }; then
  echo "installing LibreOffice headless for legacy .doc/.ppt/.xls ($pkgs)" >&2
  export DEBIAN_FRONTEND=noninteractive
  if ! $sudo apt-get install -y -q --no-install-recommends $pkgs >/dev/null 2>&1; then
    $sudo apt-get update -q >/dev/null 2>&1
    $sudo apt-get install -y -q --no-install-recommends $pkgs >/dev/null 2>&1 || true
  fi
fi
if ! command -v soffice >/dev/null 2>&1; then
  echo "WARNING: LibreOffice is not installed; legacy .doc/.ppt/.xls files will fail as" \
       "'unsupported'. Install it with: apt-get install -y --no-install-recommends $pkgs" \
       "(or your system's LibreOffice package, so that 'soffice' is on PATH)" >&2
fi
exit 0
