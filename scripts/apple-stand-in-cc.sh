#!/usr/bin/env sh
# A stand-in C compiler, archiver and linker for `aarch64-apple-darwin`, for the macOS check in
# scripts/check-platforms.sh only: never for a build anyone runs.
#
# Why: `ring` and `blake3` compile C (and assembly) in their build scripts, and a Linux CI machine
# has no Apple SDK or Apple toolchain to compile it with. `cargo clippy`/`cargo check` never link the
# workspace's crates, so their objects are never read: this writes empty files where the real tools
# would write an object (`-o`), an archive (`ar cq`/`ar s`) or a library. The one thing linked in a
# check is the crash-drill layer that `gpu-crash`'s build script cross-builds for the target (its
# `cdylib`): that gets an empty file too, embedded as the (empty) layer of a tool nobody runs.
#
# So the check proves that the Rust code type-checks (and, for the drill layer, compiles) for macOS.
# It proves nothing about the C code, linking, or running on a Mac.
set -eu
out=
prev=
for arg in "$@"; do
  case "$prev" in -o) out=$arg ;; esac
  case "$arg" in -o?*) out=${arg#-o} ;; esac
  prev=$arg
done
if [ -n "$out" ]; then
  : >"$out" # compiler or linker: an empty object or library
elif [ $# -ge 2 ] && case "$1" in -*) false ;; *) true ;; esac && case "$2" in *.a) true ;; *) false ;; esac; then
  # archiver (`ar cq lib.a a.o ...`, `ar s lib.a`): an empty archive, made once
  [ -s "$2" ] || printf '!<arch>\n' >"$2"
fi
# Anything else (`-E` to detect the compiler family, `--version`): no output, success.
