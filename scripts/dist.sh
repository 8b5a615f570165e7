#!/usr/bin/env bash
# Release archives (`make dist`): builds the agent for the registry targets
# this host can build and writes into dist/ (gitignored):
#   crucible-agent-VERSION-TARGET.tar.gz (.zip for Windows) holding the binary,
#     README.md and LICENSE at the archive's root;
#   the same name + .sha256 (`sha256sum` format);
#   agent.json, the ACP registry entry listing every archive of VERSION in
#     dist/ (whatever machine built it), with its URL, cmd and sha256;
#   icon.svg (assets/icon.svg: 16x16, currentColor only).
#
#   scripts/dist.sh [TARGET...]   build TARGETs (default: this host's), pack, manifest
#   scripts/dist.sh manifest      only rewrite agent.json and icon.svg from dist/
#   scripts/dist.sh binary TARGET build TARGET (a no-op when up to date) and
#                                 print the binary's path
#   scripts/dist.sh check         check dist/ (scripts/dist.py check: the registry's
#                                 schema and rules, checksums, archive contents,
#                                 the Linux binary static and answering initialize,
#                                 the Windows one under Wine)
#
# TARGET is a registry target name:
#   linux-x86_64    static musl binary (x86_64-unknown-linux-musl), so DNS and
#                   everything else work on any distribution: a static glibc
#                   binary would need the host's own glibc NSS modules. Built
#                   on Debian with its rustc-web and -Zbuild-std (rustup's std
#                   for musl may be missing) and musl-gcc for the C parts.
#   windows-x86_64  x86_64-pc-windows-gnu with mingw-w64, through
#                   scripts/cross-check.sh build windows.
#   darwin-aarch64, darwin-x86_64
#                   on a Mac only: `cargo build --target aarch64-apple-darwin`
#                   / x86_64-apple-darwin (rustup target add ... first).
# Default: linux-x86_64 and windows-x86_64 on Linux x86_64; both darwin targets
# on macOS. To publish all of them: run `make dist` on Linux and on a Mac, copy
# the Mac's dist/*darwin* files into the Linux dist/, run
# `scripts/dist.sh manifest`, and upload dist/* to the release v$VERSION.
#
# Environment:
#   DIST_DIR=dist                where the files go
#   DIST_REPO=Mootikins/crucible-agent
#                                GitHub owner/name: agent.json's `repository`
#                                and the default download base
#   DIST_BASE_URL=https://github.com/$DIST_REPO/releases/download/v$VERSION
#                                where the archives will be downloadable
#   PROFILE=release              the cargo profile (`demo` builds faster)
#   CROSS_CHECK_CACHE            the cross builds' cache (see cross-check.sh):
#                                target-build/ holds the musl and Windows builds
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PROFILE=${PROFILE:-release}
DIST_DIR=${DIST_DIR:-dist}
CACHE=${CROSS_CHECK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cross-check}
NAME=crucible-agent
VERSION=$(sed -n 's/^version *= *"\(.*\)"/\1/p' Cargo.toml | head -1)
MUSL=x86_64-unknown-linux-musl

die() { echo "dist: $*" >&2; exit 1; }
say() { echo "dist: $*" >&2; }

# need PKG...: apt-get install whatever of PKG is not installed (Debian).
need() { bash scripts/need.sh "$@"; }

# The cargo output directory of a profile ("dev" writes to debug/).
profile_dir() { if [ "$PROFILE" = dev ]; then echo debug; else echo "$PROFILE"; fi; }

# build_linux_musl: prints the path of the static binary.
build_linux_musl() {
  bash scripts/cross-check.sh toolchain
  need musl-tools
  local t=${MUSL//-/_} unwind=$CACHE/musl-unwind
  # Rust's std for a static musl target links -lunwind, which rustup ships
  # beside its prebuilt musl std; with -Zbuild-std nothing provides it. GCC's
  # libgcc_eh.a has the same _Unwind_* API; from glibc it needs only
  # _dl_find_object, which scripts/dist/dl_find_object.c adds.
  mkdir -p "$unwind"
  rm -f "$unwind/libunwind.a"
  cp "$(gcc -print-file-name=libgcc_eh.a)" "$unwind/libunwind.a"
  musl-gcc -O2 -fPIC -c scripts/dist/dl_find_object.c -o "$unwind/dl_find_object.o"
  ar rs "$unwind/libunwind.a" "$unwind/dl_find_object.o"
  say "cargo build --profile $PROFILE --target $MUSL (Debian rustc-web, -Zbuild-std)"
  # link-self-contained=no: musl-gcc brings musl's crt objects and libc.a
  # (the self-contained ones come with rustup's std, not with build-std).
  # relocation-model=static: rustc would link a static PIE (-static-pie),
  # which musl-gcc's specs turn into a dynamic PIE asking for
  # /lib/ld-musl-x86_64.so.1; a plain static executable needs nothing.
  env RUSTC=/usr/bin/rustc RUSTDOC=/usr/bin/rustdoc RUSTC_BOOTSTRAP=1 \
    "CC_$t=musl-gcc" "AR_$t=ar" "CARGO_TARGET_${t^^}_LINKER=musl-gcc" \
    "CARGO_TARGET_${t^^}_RUSTFLAGS=-C link-self-contained=no -L native=$unwind -C relocation-model=static" \
    CARGO_TARGET_DIR="$CACHE/target-build" \
    /usr/bin/cargo build -Zbuild-std=std,panic_abort --target "$MUSL" \
    --profile "$PROFILE" --bin "$NAME" >&2
  echo "$CACHE/target-build/$MUSL/$(profile_dir)/$NAME"
}

build_windows() {
  local args=(--bin "$NAME") exes
  if [ "$PROFILE" != dev ]; then args+=(--profile "$PROFILE"); fi
  exes=$(bash scripts/cross-check.sh build windows "${args[@]}")
  grep -m1 "/$NAME\.exe\$" <<<"$exes"
}

# A venv with the pinned jsonschema for `check` (the registry validates with it).
JSONSCHEMA_VERSION=4.26.0
checker_python() {
  local venv=${XDG_CACHE_HOME:-$HOME/.cache}/crucible-dist/venv-jsonschema-$JSONSCHEMA_VERSION
  if ! "$venv/bin/python" -c 'import jsonschema' 2>/dev/null; then
    rm -rf "$venv"
    python3 -m venv "$venv" >&2 || die "could not create a Python venv in $venv (Debian/Ubuntu: apt-get install python3-venv)"
    "$venv/bin/pip" install -q --disable-pip-version-check "jsonschema==$JSONSCHEMA_VERSION" >&2 ||
      die "pip could not install jsonschema==$JSONSCHEMA_VERSION (see above)"
  fi
  echo "$venv/bin/python"
}

build_darwin() {
  local triple=$1
  [ "$(uname -s)" = Darwin ] || die "$triple is built on a Mac (this is $(uname -s))"
  say "cargo build --profile $PROFILE --target $triple"
  cargo build --profile "$PROFILE" --target "$triple" --bin "$NAME" >&2
  echo "target/$triple/$(profile_dir)/$NAME"
}

build() {
  case $1 in
    linux-x86_64) build_linux_musl ;;
    windows-x86_64) build_windows ;;
    darwin-aarch64) build_darwin aarch64-apple-darwin ;;
    darwin-x86_64) build_darwin x86_64-apple-darwin ;;
    *) die "cannot build $1 here (known: linux-x86_64, windows-x86_64, darwin-aarch64, darwin-x86_64)" ;;
  esac
}

default_targets() {
  case "$(uname -s)-$(uname -m)" in
    Linux-x86_64) echo linux-x86_64 windows-x86_64 ;;
    Darwin-*) echo darwin-aarch64 darwin-x86_64 ;;
    *) die "no default targets for $(uname -s) $(uname -m); name them" ;;
  esac
}

manifest() {
  local repo=${DIST_REPO:-Mootikins/crucible-agent}
  local base=${DIST_BASE_URL:-https://github.com/$repo/releases/download/v$VERSION}
  python3 scripts/dist.py manifest --dist "$DIST_DIR" --version "$VERSION" \
    --repository "https://github.com/$repo" --base-url "$base" \
    --description "$(sed -n 's/^description *= *"\(.*\)"/\1/p' Cargo.toml | head -1)" \
    --license "$(sed -n 's/^license *= *"\(.*\)"/\1/p' Cargo.toml | head -1)"
  cp assets/icon.svg "$DIST_DIR/icon.svg"
  say "wrote $DIST_DIR/agent.json and $DIST_DIR/icon.svg"
}

main() {
  case ${1:-} in
    manifest) manifest; return ;;
    binary) [ -n "${2:-}" ] || die "binary needs a TARGET"; build "$2"; return ;;
    check)
      shift
      command -v file >/dev/null || need file
      "$(checker_python)" scripts/dist.py check --dist "$DIST_DIR" --version "$VERSION" "$@"
      return ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; return ;;
  esac
  local targets=("$@") target bin
  [ ${#targets[@]} -gt 0 ] || read -r -a targets <<<"$(default_targets)"
  mkdir -p "$DIST_DIR"
  for target in "${targets[@]}"; do
    bin=$(build "$target")
    [ -f "$bin" ] || die "the $target build left no binary at $bin"
    python3 scripts/dist.py pack --dist "$DIST_DIR" --version "$VERSION" \
      --target "$target" --binary "$bin" README.md LICENSE
  done
  manifest
}

# On one line, so that bash reads nothing more of this file after main
# returns (an edit made during a long build cannot break the run).
main "$@"; exit $?
