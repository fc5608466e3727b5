#!/usr/bin/env bash
# Players' platforms, checked from Linux (CI runs this after the tests; README "The two commands"):
# 1. the whole workspace, tests and examples included, compiles for Windows (x86_64-pc-windows-gnu)
#    with clippy clean; `gpu-crash` cross-builds with the drill layer as a Windows DLL inside it;
# 2. the core's unit tests run as a Windows program under Wine, so its Windows code paths (file
#    identity, TerminateProcess, %LOCALAPPDATA%, the session file's rewrite) run, not only compile.
# Needs: rustup, the mingw-w64 C toolchain and Wine (apt-get install gcc-mingw-w64-x86-64 wine64).
# macOS is not checked: ring's and blake3's C code need an Apple SDK, which Linux does not have.
set -euo pipefail
cd "$(dirname "$0")/.."
target=x86_64-pc-windows-gnu
rustup target add "$target"
cargo clippy --workspace --all-targets --target "$target" -- -D warnings

# Wine 8 (Debian 12) lacks bcryptprimitives.dll, which Rust's std loads on Windows: a stand-in
# gives its ProcessPrng (scripts/wine/bcryptprimitives.c; CI only, never shipped).
wine=$(command -v wine64 || echo /usr/lib/wine/wine64)
# No Mono or Gecko install prompts: nothing here needs .NET or a browser engine.
export WINEDEBUG=-all WINEPREFIX="${WINEPREFIX:-$PWD/target/wine-prefix}" WINEDLLOVERRIDES="mscoree,mshtml="
"$wine" wineboot --init
test -d "$WINEPREFIX/drive_c/windows/system32" || { echo "no Wine prefix at $WINEPREFIX" >&2; exit 1; }
x86_64-w64-mingw32-gcc -shared -O2 -o "$WINEPREFIX/drive_c/windows/system32/bcryptprimitives.dll" \
  scripts/wine/bcryptprimitives.c -ladvapi32
# Skipped under Wine, each for a measured reason:
# - claim::a_file_deleted_while_waiting_is_not_claimed: Wine reports a file deleted while another
#   handle holds it as neither pending deletion nor without links (Windows says pending deletion),
#   so under Wine (and Proton) the claim cannot see the deletion: a second process may send that
#   envelope again there (Wine 8.0, 2026-12-07; a known limit, not fixed);
# - lifetime::ten_thousand_launches_send_every_report_once: the 10,000-launch simulation, run
#   natively by `cargo test --workspace`; under Wine it had not finished after 11 minutes (2-core dev machine, 2026-12-07).
CARGO_TARGET_X86_64_PC_WINDOWS_GNU_RUNNER="$wine" \
  cargo test -p gpu_crash_core --lib --target "$target" -- \
  --skip deliver::claim::tests::a_file_deleted_while_waiting_is_not_claimed \
  --skip deliver::lifetime::ten_thousand_launches_send_every_report_once
