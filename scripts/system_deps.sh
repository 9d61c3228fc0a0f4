#!/usr/bin/env bash
# System packages corpusflow uses beyond PyPI:
# - LibreOffice headless, through which docling reads legacy .doc/.ppt/.xls;
# - 7-Zip (7zz), which reads ZIP members in methods Python's zipfile cannot (the legacy
#   shrink/implode, deflate64, PPMd, ...; sources.archive).
# Installed with apt-get where that is possible (root or passwordless sudo on
# Debian/Ubuntu); otherwise says exactly what to install. Without them everything else
# works: legacy Office files, and such archive members, fail as `unsupported`.
set -uo pipefail
pkgs=""
if ! command -v soffice >/dev/null 2>&1 && ! command -v libreoffice >/dev/null 2>&1; then
  pkgs="libreoffice-writer-nogui libreoffice-calc-nogui libreoffice-impress-nogui"
fi
if ! command -v 7zz >/dev/null 2>&1 && ! command -v 7z >/dev/null 2>&1; then
  pkgs="$pkgs 7zip"
fi
pkgs="${pkgs# }"
if [ -z "$pkgs" ]; then
  exit 0
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then sudo="sudo -n"; fi
fi
if command -v apt-get >/dev/null 2>&1 && { [ "$(id -u)" -eq 0 ] || [ -n "$sudo" ]; }; then
  echo "installing system packages: $pkgs" >&2
  export DEBIAN_FRONTEND=noninteractive
  if ! $sudo apt-get install -y -q --no-install-recommends $pkgs >/dev/null 2>&1; then
    $sudo apt-get update -q >/dev/null 2>&1
    $sudo apt-get install -y -q --no-install-recommends $pkgs >/dev/null 2>&1 || true
  fi
fi
if ! command -v soffice >/dev/null 2>&1; then
  echo "WARNING: LibreOffice is not installed; legacy .doc/.ppt/.xls files will fail as" \
       "'unsupported'. Install it with: apt-get install -y --no-install-recommends" \
       "libreoffice-writer-nogui libreoffice-calc-nogui libreoffice-impress-nogui" \
       "(or your system's LibreOffice package, so that 'soffice' is on PATH)" >&2
fi
if ! command -v 7zz >/dev/null 2>&1 && ! command -v 7z >/dev/null 2>&1; then
  echo "WARNING: 7-Zip is not installed; ZIP members compressed with legacy methods" \
       "(shrink, implode, deflate64, PPMd) will fail as 'unsupported' unless Info-ZIP" \
       "'unzip' is present. Install it with: apt-get install -y 7zip (or p7zip-full)" >&2
fi
exit 0
