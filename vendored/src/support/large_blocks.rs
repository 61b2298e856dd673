//! Large blocks of memory go back to the system when they are freed.
//!
//! glibc serves a block of 128 KiB or more with a mapping of its own, and
//! unmaps it when it is freed, until the first such block is freed: then it
//! raises that threshold to the block's size (up to 32 MiB), and the next
//! blocks that size come from the heap, where a freed one stays resident
//! behind smaller live ones. A server that read one wide body (a 1 MiB input
//! is copied a few times on its way to the store) then keeps that memory,
//! and the next wide request adds to it: the peak grew by 14 MiB for a
//! 0.93 MiB input, 10 MiB with the threshold fixed (tollgate issue 41, the
//! `memory` bench). Setting the threshold fixes it at glibc's default and
//! turns the raising off; small blocks, which every ordinary request uses,
//! are not affected. Other allocators (musl's) return large blocks anyway.

/// Fix glibc's mmap threshold at 128 KiB (see the module). Once, at start.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn return_to_the_system_when_freed() {
    // SAFETY: mallopt only sets a malloc parameter; called before the
    // runtime's threads start.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024);
    }
}

/// Nothing to do for allocators that return large blocks anyway.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn return_to_the_system_when_freed() {}
