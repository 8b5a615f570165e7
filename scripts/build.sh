#!/usr/bin/env bash
# Builds the binary we ship and leaves it at target/PROFILE/crucible-agent
# (or under $CARGO_TARGET_DIR), whatever the host. On Linux with glibc it is
# linked statically: no shared libraries to find, map and relocate at exec,
# which halves the time from spawn to the `initialize` answer (see the
# README's "Start-up" and `make bench` row 0). Everything else about the
# build is the profile's: `release` unless PROFILE says otherwise.
#
#   CARGO=cargo      the cargo to run
#   PROFILE=release  the cargo profile (`demo` compiles faster; see Cargo.toml)
# Prints the binary's path on stdout; cargo's own output goes to stderr.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
CARGO=${CARGO:-cargo}
TARGET_DIR=${CARGO_TARGET_DIR:-target}
PROFILE=${PROFILE:-release}
HOST=$(rustc -vV | sed -n 's/^host: //p')
OUT="$TARGET_DIR/$PROFILE/crucible-agent"

case "$HOST" in
  *-linux-gnu)
    # An explicit --target keeps the flag off build scripts and proc-macros,
    # which cannot be linked statically.
    RUSTFLAGS="${RUSTFLAGS:-} -C target-feature=+crt-static" \
      "$CARGO" build --profile "$PROFILE" --target "$HOST" >&2
    mkdir -p "$TARGET_DIR/$PROFILE"
    # Replace, not overwrite in place: a running agent may be using the old file.
    cp "$TARGET_DIR/$HOST/$PROFILE/crucible-agent" "$OUT.new"
    mv -f "$OUT.new" "$OUT"
    ;;
  *)
    "$CARGO" build --profile "$PROFILE" >&2
    ;;
esac
echo "$(cd "$(dirname "$OUT")" && pwd)/crucible-agent"
