#!/usr/bin/env bash
# Release files (`make dist`): builds the agent for the registry targets this
# host can build and writes into dist/ (gitignored), per target:
#   crucible-agent-VERSION-TARGET.tar.gz (.zip for Windows) holding the binary,
#     README.md and LICENSE at the archive's root, and the same name + .sha256
#     (`sha256sum` format);
#   npm/crucible-agent-OS-CPU-VERSION.tgz, the npm package holding the binary
#     (`os` and `cpu` set; `npm pack`);
#   python/crucible_agent-VERSION-py3-none-PLATFORM.whl, a wheel whose script
#     is the binary (pip and uv put it on PATH);
# and once:
#   npm/crucible-agent-VERSION.tgz, the launcher package (`npx crucible-agent`):
#     a Node script that runs the platform package's binary
#     (scripts/dist/npm/crucible-agent.js), all six as optionalDependencies;
#   agent.json, the ACP registry entry listing every archive of VERSION in
#     dist/ (whatever machine built it) with its URL, cmd and sha256, plus the
#     npx and uvx packages crucible-agent@VERSION;
#   icon.svg (assets/icon.svg: 16x16, currentColor only).
#
#   scripts/dist.sh [TARGET...]   build TARGETs (default: this host's), package, manifest
#   scripts/dist.sh manifest      only rewrite agent.json, icon.svg and the npm
#                                 launcher from dist/
#   scripts/dist.sh binary TARGET build TARGET (a no-op when up to date) and
#                                 print the binary's path
#   scripts/dist.sh package TARGET BINARY
#                                 the archive, npm package and wheel of a binary
#                                 built elsewhere (the release workflow's)
#   scripts/dist.sh check         check dist/ (scripts/dist.py check: the registry's
#                                 schema and rules, checksums, archive contents,
#                                 the Linux binaries static and answering
#                                 initialize (aarch64 under qemu-aarch64), the
#                                 Windows one under Wine; the npm packages and
#                                 wheels installed offline and run through npx,
#                                 npm -g, pip and uvx; the launcher's tests; the
#                                 workflows against GitHub's schema)
#
# TARGET is a registry target name:
#   linux-x86_64    static musl binary (x86_64-unknown-linux-musl), so DNS and
#                   everything else work on any distribution: a static glibc
#                   binary would need the host's own glibc NSS modules. Built
#                   on Debian with its rustc-web and -Zbuild-std (rustup's std
#                   for musl may be missing) and musl-gcc for the C parts.
#   linux-aarch64   the same for aarch64-unknown-linux-musl, cross-built with
#                   gcc-aarch64-linux-gnu and Debian's musl-dev:arm64 (the arm64
#                   architecture is added to dpkg for it).
#   windows-x86_64  x86_64-pc-windows-gnu with mingw-w64, through
#                   scripts/cross-check.sh build windows.
#   darwin-aarch64, darwin-x86_64
#                   on a Mac only: `cargo build --target aarch64-apple-darwin`
#                   / x86_64-apple-darwin (rustup target add ... first).
#   windows-aarch64 built by the release workflow on a Windows ARM runner
#                   (here only type-checked: cross-check.sh check
#                   aarch64-pc-windows-msvc).
# Default: linux-x86_64, linux-aarch64 and windows-x86_64 on Linux x86_64;
# both darwin targets on macOS. A release builds all six natively on GitHub's
# runners (.github/workflows/release.yml; see docs/src/releasing.md).
#
# Environment:
#   DIST_DIR=dist                where the files go
#   DIST_REPO=Mootikins/crucible-agent
#                                GitHub owner/name: agent.json's `repository`
#                                and the default download base
#   DIST_BASE_URL=https://github.com/$DIST_REPO/releases/download/v$VERSION
#                                where the archives will be downloadable
#   PROFILE=release              the cargo profile (`demo` builds faster)
#   PYTHON=python3               the Python that runs scripts/dist.py
#   CROSS_CHECK_CACHE            the cross builds' cache (see cross-check.sh):
#                                target-build/ holds the musl and Windows builds
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PROFILE=${PROFILE:-release}
DIST_DIR=${DIST_DIR:-dist}
PYTHON=${PYTHON:-python3}
CACHE=${CROSS_CHECK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cross-check}
NAME=crucible-agent
VERSION=$(sed -n 's/^version *= *"\(.*\)"/\1/p' Cargo.toml | head -1)

die() { echo "dist: $*" >&2; exit 1; }
say() { echo "dist: $*" >&2; }

# need PKG...: apt-get install whatever of PKG is not installed (Debian).
need() { bash scripts/need.sh "$@"; }

# The cargo output directory of a profile ("dev" writes to debug/).
profile_dir() { if [ "$PROFILE" = dev ]; then echo debug; else echo "$PROFILE"; fi; }

# build_linux_musl TRIPLE: prints the path of the static binary.
build_linux_musl() {
  local triple=$1 cc ar gcc
  case $triple in
    x86_64-unknown-linux-musl)
      need musl-tools
      cc=musl-gcc ar=ar gcc=gcc ;;
    aarch64-unknown-linux-musl)
      # Debian's musl for arm64 (multiarch) brings aarch64-linux-musl-gcc,
      # a wrapper over the cross GCC with musl's specs.
      if ! dpkg --print-foreign-architectures | grep -qx arm64; then
        say "dpkg --add-architecture arm64 (for musl-dev:arm64)"
        if [ "$(id -u)" -eq 0 ]; then dpkg --add-architecture arm64; else sudo dpkg --add-architecture arm64; fi
      fi
      need gcc-aarch64-linux-gnu musl-dev:arm64
      cc=aarch64-linux-musl-gcc ar=aarch64-linux-gnu-ar gcc=aarch64-linux-gnu-gcc ;;
    *) die "no static musl build for $triple" ;;
  esac
  bash scripts/cross-check.sh toolchain
  local t=${triple//-/_} unwind=$CACHE/musl-unwind
  [ "$triple" = x86_64-unknown-linux-musl ] || unwind=$CACHE/musl-unwind-${triple%%-*}
  # Rust's std for a static musl target links -lunwind, which rustup ships
  # beside its prebuilt musl std; with -Zbuild-std nothing provides it. GCC's
  # libgcc_eh.a has the same _Unwind_* API; from glibc it needs only
  # _dl_find_object, which scripts/dist/dl_find_object.c adds.
  mkdir -p "$unwind"
  rm -f "$unwind/libunwind.a"
  cp "$("$gcc" -print-file-name=libgcc_eh.a)" "$unwind/libunwind.a"
  "$cc" -O2 -fPIC -c scripts/dist/dl_find_object.c -o "$unwind/dl_find_object.o"
  "$ar" rs "$unwind/libunwind.a" "$unwind/dl_find_object.o"
  say "cargo build --profile $PROFILE --target $triple (Debian rustc-web, -Zbuild-std)"
  # link-self-contained=no: the musl-gcc wrapper brings musl's crt objects
  # and libc.a (the self-contained ones come with rustup's std, not with
  # build-std). relocation-model=static: rustc would link a static PIE
  # (-static-pie), which musl-gcc's specs turn into a dynamic PIE asking for
  # /lib/ld-musl-*.so.1; a plain static executable needs nothing.
  env RUSTC=/usr/bin/rustc RUSTDOC=/usr/bin/rustdoc RUSTC_BOOTSTRAP=1 \
    "CC_$t=$cc" "AR_$t=$ar" "CARGO_TARGET_${t^^}_LINKER=$cc" \
    "CARGO_TARGET_${t^^}_RUSTFLAGS=-C link-self-contained=no -L native=$unwind -C relocation-model=static" \
    CARGO_TARGET_DIR="$CACHE/target-build" \
    /usr/bin/cargo build -Zbuild-std=std,panic_abort --target "$triple" \
    --profile "$PROFILE" --bin "$NAME" >&2
  echo "$CACHE/target-build/$triple/$(profile_dir)/$NAME"
}

build_windows() {
  local args=(--bin "$NAME") exes
  if [ "$PROFILE" != dev ]; then args+=(--profile "$PROFILE"); fi
  exes=$(bash scripts/cross-check.sh build windows "${args[@]}")
  grep -m1 "/$NAME\.exe\$" <<<"$exes"
}

# A venv for `check`: the pinned jsonschema (the registry validates with it),
# uv (for `uvx --from WHEEL`) and check-jsonschema (the GitHub workflow schema,
# built in: no download).
JSONSCHEMA_VERSION=4.26.0 UV_VERSION=0.13.9 CHECK_JSONSCHEMA_VERSION=0.39.0
checker_python() {
  local venv=${XDG_CACHE_HOME:-$HOME/.cache}/crucible-dist/venv-$JSONSCHEMA_VERSION-$UV_VERSION-$CHECK_JSONSCHEMA_VERSION
  if ! "$venv/bin/python" -c 'import jsonschema, check_jsonschema' 2>/dev/null || [ ! -x "$venv/bin/uvx" ]; then
    rm -rf "$venv"
    python3 -m venv "$venv" >&2 || die "could not create a Python venv in $venv (Debian/Ubuntu: apt-get install python3-venv)"
    "$venv/bin/pip" install -q --disable-pip-version-check "jsonschema==$JSONSCHEMA_VERSION" \
      "uv==$UV_VERSION" "check-jsonschema==$CHECK_JSONSCHEMA_VERSION" >&2 ||
      die "pip could not install jsonschema==$JSONSCHEMA_VERSION, uv==$UV_VERSION, check-jsonschema==$CHECK_JSONSCHEMA_VERSION (see above)"
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
    linux-x86_64) build_linux_musl x86_64-unknown-linux-musl ;;
    linux-aarch64) build_linux_musl aarch64-unknown-linux-musl ;;
    windows-x86_64) build_windows ;;
    darwin-aarch64) build_darwin aarch64-apple-darwin ;;
    darwin-x86_64) build_darwin x86_64-apple-darwin ;;
    *) die "cannot build $1 here (known: linux-x86_64, linux-aarch64, windows-x86_64, darwin-aarch64, darwin-x86_64)" ;;
  esac
}

default_targets() {
  case "$(uname -s)-$(uname -m)" in
    Linux-x86_64) echo linux-x86_64 linux-aarch64 windows-x86_64 ;;
    Darwin-*) echo darwin-aarch64 darwin-x86_64 ;;
    *) die "no default targets for $(uname -s) $(uname -m); name them" ;;
  esac
}

# The package metadata dist.py's manifest, npm and wheel take.
REPO=${DIST_REPO:-Mootikins/crucible-agent}
META=(--dist "$DIST_DIR" --version "$VERSION" --repository "https://github.com/$REPO"
  --description "$(sed -n 's/^description *= *"\(.*\)"/\1/p' Cargo.toml | head -1)"
  --license "$(sed -n 's/^license *= *"\(.*\)"/\1/p' Cargo.toml | head -1)")

manifest() {
  local base=${DIST_BASE_URL:-https://github.com/$REPO/releases/download/v$VERSION}
  "$PYTHON" scripts/dist.py manifest "${META[@]}" --base-url "$base"
  cp assets/icon.svg "$DIST_DIR/icon.svg"
  command -v npm >/dev/null || die "npm packs the npm packages: install Node.js (node and npm)"
  "$PYTHON" scripts/dist.py npm "${META[@]}"
  say "wrote $DIST_DIR/agent.json, $DIST_DIR/icon.svg and the npm launcher"
}

# package TARGET BINARY: the archive, the npm package and the wheel of TARGET.
package() {
  "$PYTHON" scripts/dist.py pack --dist "$DIST_DIR" --version "$VERSION" \
    --target "$1" --binary "$2" README.md LICENSE
  command -v npm >/dev/null || die "npm packs the npm packages: install Node.js (node and npm)"
  "$PYTHON" scripts/dist.py npm "${META[@]}" --target "$1" --binary "$2"
  "$PYTHON" scripts/dist.py wheel "${META[@]}" --target "$1" --binary "$2"
}

main() {
  case ${1:-} in
    manifest) manifest; return ;;
    package) [ -n "${3:-}" ] || die "package needs a TARGET and a BINARY"
      mkdir -p "$DIST_DIR"; package "$2" "$3"; return ;;
    binary) [ -n "${2:-}" ] || die "binary needs a TARGET"; build "$2"; return ;;
    check)
      shift
      command -v file >/dev/null || need file
      # The linux-aarch64 binary runs under qemu-aarch64 on other machines.
      if [ -f "$DIST_DIR/$NAME-$VERSION-linux-aarch64.tar.gz" ] && [ "$(uname -m)" != aarch64 ]; then
        command -v qemu-aarch64 >/dev/null || need qemu-user
      fi
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
    package "$target" "$bin"
  done
  manifest
}

# On one line, so that bash reads nothing more of this file after main
# returns (an edit made during a long build cannot break the run).
main "$@"; exit $?
