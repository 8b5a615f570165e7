#!/usr/bin/env bash
# need.sh PKG...: installs with apt-get (as root, or through sudo) whichever of
# the Debian packages PKG is not installed yet, after refreshing the package
# lists (stale lists can name versions that are gone, or a rustc-web too old
# for the lock file). Waits for another apt's lock. Used by scripts/dist.sh
# and .ci/background; scripts/cross-check.sh has its own copy (it is also
# used on its own) and upgrades rustc-web when the lock file needs a newer one.
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
$sudo apt-get -o DPkg::Lock::Timeout=600 update >&2
$sudo apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends "${missing[@]}" >&2
