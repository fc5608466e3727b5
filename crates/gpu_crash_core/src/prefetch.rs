//! A cache-line prefetch hint, for the index's tables and the ring's slots: folding a batch, the index
//! asks for what a record will touch a few records ahead, so the cache (and TLB) misses of tables far
//! larger than the cache overlap instead of adding up.

/// Asks the CPU to start loading the cache line at `p` (`PREFETCHT0`): a hint with no effect on what
/// the program computes.
#[inline(always)]
pub(crate) fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: PREFETCHT0 never faults, whatever the address (an invalid one is simply not fetched),
    // and changes no state the program can observe; SSE is part of the x86_64 baseline.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(p.cast())
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
