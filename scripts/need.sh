#!/usr/bin/env bash
# need.sh PKG...: installs with apt-get (as root, or through sudo) whichever of
# the Debian packages PKG is not installed yet; refreshes the package lists
# only when the first try fails. Used by scripts/dist.sh and .ci/background.
set -euo pipefail
missing=()
for pkg in "$@"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'ok installed' || missing+=("$pkg")
done
[ ${#missing[@]} -eq 0 ] && exit 0
command -v apt-get >/dev/null || { echo "need: missing ${missing[*]} and no apt-get to install them" >&2; exit 1; }
sudo=
[ "$(id -u)" -eq 0 ] || sudo=sudo
echo "need: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
if ! $sudo apt-get install -y --no-install-recommends "${missing[@]}" >&2; then
  $sudo apt-get update >&2
  $sudo apt-get install -y --no-install-recommends "${missing[@]}" >&2
fi
