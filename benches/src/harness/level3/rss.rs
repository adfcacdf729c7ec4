//! The process's resident memory now, from `/proc/self/statm` (current
//! resident pages, unlike `getrusage`'s high-water mark, so it can be read
//! before and after).

use std::io;

/// Bytes of this process resident in memory now.
pub(super) fn resident_bytes() -> io::Result<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm")?;
    // SAFETY: sysconf reads a constant of the system; it has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    let page = u64::try_from(page).map_err(|_| io::Error::other("no page size"))?;
    parse_statm(&statm, page).ok_or_else(|| io::Error::other("unreadable /proc/self/statm"))
}

/// The resident set in bytes from a statm line (fields in pages: size,
/// resident, shared, ...).
fn parse_statm(statm: &str, page: u64) -> Option<u64> {
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    pages.checked_mul(page)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_resident_pages_field_is_read_and_scaled_by_the_page_size() {
        assert_eq!(
            parse_statm("2806 1200 900 200 0 500 0\n", 4096),
            Some(1200 * 4096)
        );
        assert_eq!(parse_statm("2806", 4096), None);
        assert_eq!(parse_statm("2806 x 1", 4096), None);
    }

    #[test]
    fn touching_memory_makes_the_process_resident_set_grow_by_about_as_much() {
        let before = resident_bytes().expect("statm");
        assert!(
            before > 1 << 20,
            "a running test process holds over 1 MiB: {before}"
        );
        let size = 64 << 20;
        let touched = std::hint::black_box(vec![1u8; size]);
        let after = resident_bytes().expect("statm");
        assert!(
            after >= before + size as u64 / 2,
            "{before} -> {after} after touching {size} bytes"
        );
        drop(touched);
    }
}
