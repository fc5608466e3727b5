/* Wine 8 (Debian 12) has no bcryptprimitives.dll, whose ProcessPrng Rust's standard library calls
 * on Windows for random bytes (hash-map seeds): every Rust test program for Windows fails to load
 * under it ("bcryptprimitives.dll not found", status c0000135). This stand-in, for running the
 * Windows builds of the unit tests under Wine in CI only (never shipped), gives ProcessPrng from
 * advapi32's RtlGenRandom. Build: x86_64-w64-mingw32-gcc -shared -O2 -o bcryptprimitives.dll
 * bcryptprimitives.c -ladvapi32, then copy it into the Wine prefix's windows/system32. */
#include <windows.h>
#include <ntsecapi.h>

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T size) {
    while (size > 0) {
        ULONG chunk = size > 0x10000000 ? 0x10000000 : (ULONG)size;
        if (!RtlGenRandom(data, chunk)) {
            return FALSE;
        }
        data += chunk;
        size -= chunk;
    }
    return TRUE;
}
