#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs promtool as /usr/local/bin/promtool for deploy/check_monitoring.py, unless one is on
# PATH. It comes from Debian 12's prometheus package, unpacked rather than installed: installing
# it would also add (and try to start) a Prometheus server.
set -euo pipefail

command -v promtool >/dev/null && exit 0
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
chmod 0755 "$tmp"  # apt's download user must be able to write there
fetch() { (cd "$tmp" && apt-get download -qq prometheus 2>/dev/null); }
if ! fetch; then
  $SUDO apt-get update -qq
  fetch
fi
dpkg-deb -x "$tmp"/prometheus_*.deb "$tmp/x"
$SUDO install -m 0755 "$tmp/x/usr/bin/promtool" /usr/local/bin/promtool
echo "install-promtool: $(/usr/local/bin/promtool --version 2>&1 | head -1) in /usr/local/bin" >&2
