//! Random values from the kernel: session ids, SSRCs, nonce keys.

/// Fills `buf` from the kernel's random number generator with getrandom(2),
/// which waits until the generator is seeded and, while it waits, has the
/// kernel gather entropy itself (about a second). The getrandom crate in a
/// static binary cannot find the libc function and instead polls
/// /dev/random, which only waits: on the emulated Pi, whose hardware RNG
/// seeds nothing, the first DESCRIBE after boot held the event loop for
/// over 45 s that way.
pub fn random_fill(buf: &mut [u8]) {
    let mut done = 0;
    while let Some(rest) = buf.get_mut(done..).filter(|r| !r.is_empty()) {
        // SAFETY: the pointer and length describe `rest`, which the kernel
        // only writes into.
        let n = unsafe { libc::getrandom(rest.as_mut_ptr().cast(), rest.len(), 0) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            assert!(
                e.kind() == std::io::ErrorKind::Interrupted,
                "getrandom: {e}"
            );
            continue;
        }
        done += n as usize;
    }
}

pub fn random_u64() -> u64 {
    let mut b = [0u8; 8];
    random_fill(&mut b);
    u64::from_ne_bytes(b)
}
