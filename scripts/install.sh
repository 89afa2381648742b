#!/usr/bin/env bash
# Build libufutex and install it under a prefix:
#   PREFIX/include/ufutex.h
#   PREFIX/lib/libufutex.so, PREFIX/lib/libufutex.a
#   PREFIX/lib/pkgconfig/ufutex.pc
#   PREFIX/lib/libufutex_preload.so (LD_PRELOAD it to run a program's futex calls on ufutex)
#
# Usage: scripts/install.sh PREFIX     (e.g. scripts/install.sh /usr/local, or $HOME/.local)
# Env:   LIBDIR=lib64 to change the library directory name; UFUTEX_NO_BUILD=1 to install what
#        target/dist already holds (the `dist` profile: release with fat LTO); DESTDIR for staged installs (packaging);
#        UFUTEX_CARGO_FLAGS for extra cargo build flags (e.g. "--features fallback-parker"),
#        with CARGO_TARGET_DIR to keep that build apart.
set -euo pipefail
if [ $# -ne 1 ] || [ -z "$1" ]; then
  echo "usage: $0 PREFIX" >&2
  exit 2
fi
prefix=$1
case $prefix in /*) ;; *) prefix="$(pwd)/$prefix" ;; esac
root="$(cd "$(dirname "$0")/.." && pwd)"
libdir=${LIBDIR:-lib}
dest="${DESTDIR:-}$prefix"

if [ -z "${UFUTEX_NO_BUILD:-}" ]; then
  # shellcheck disable=SC2086 # the flags are words
  (cd "$root" && cargo build --profile dist -p ufutex-c -p ufutex-preload ${UFUTEX_CARGO_FLAGS:-})
fi
target_dir=${CARGO_TARGET_DIR:-$root/target}
case $target_dir in /*) ;; *) target_dir="$root/$target_dir" ;; esac
target="$target_dir/dist"
for f in libufutex.so libufutex.a libufutex_preload.so; do
  [ -f "$target/$f" ] || { echo "$0: $target/$f is missing (build first)" >&2; exit 1; }
done
version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$root/crates/ufutex/Cargo.toml" | head -n1)

install -d "$dest/include" "$dest/$libdir/pkgconfig"
install -m 0644 "$root/include/ufutex.h" "$dest/include/ufutex.h"
install -m 0755 "$target/libufutex.so" "$dest/$libdir/libufutex.so"
install -m 0644 "$target/libufutex.a" "$dest/$libdir/libufutex.a"
install -m 0755 "$target/libufutex_preload.so" "$dest/$libdir/libufutex_preload.so"
sed -e "s|@PREFIX@|$prefix|g" -e "s|@LIBDIR@|$libdir|g" -e "s|@VERSION@|$version|g" \
  "$root/scripts/ufutex.pc.in" > "$dest/$libdir/pkgconfig/ufutex.pc"
chmod 0644 "$dest/$libdir/pkgconfig/ufutex.pc"
echo "installed ufutex $version under $dest (header, libufutex.so, libufutex.a, libufutex_preload.so, pkgconfig/ufutex.pc)"
