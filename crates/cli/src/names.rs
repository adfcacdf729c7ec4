//! File names from the network: a sender chooses the name, and a hostile
//! one must not reach outside the receiver's directory.

/// Longest name kept, in bytes (file systems allow 255; room is left for
/// the temporary name's prefix and suffix).
const MAX_NAME_BYTES: usize = 200;

/// The name a received file is stored under: the last component of what
/// the sender said (after `/` or `\`), without control characters, at
/// most 200 bytes; refused if nothing usable is left (empty, `.`, `..`).
pub(crate) fn sanitize(offered: &str) -> Result<String, String> {
    let last = offered.rsplit(['/', '\\']).next().unwrap_or_default();
    let mut name = String::with_capacity(last.len().min(MAX_NAME_BYTES));
    for c in last.chars().filter(|c| !c.is_control()) {
        if name.len() + c.len_utf8() > MAX_NAME_BYTES {
            break;
        }
        name.push(c);
    }
    let name = name.trim().to_owned();
    if name.is_empty() || name.chars().all(|c| c == '.') {
        return Err(format!("{:?} is not a usable file name", shown(offered)));
    }
    Ok(name)
}

/// A name as it may be shown in a message: cut short, control characters
/// escaped by `{:?}`.
fn shown(name: &str) -> String {
    name.chars().take(80).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn paths_lose_their_directories() {
        assert_eq!(sanitize("report.pdf").as_deref(), Ok("report.pdf"));
        assert_eq!(sanitize("../../etc/passwd").as_deref(), Ok("passwd"));
        assert_eq!(sanitize("/etc/shadow").as_deref(), Ok("shadow"));
        assert_eq!(sanitize("..\\..\\boot.ini").as_deref(), Ok("boot.ini"));
        assert_eq!(sanitize("a\u{0}b\nc").as_deref(), Ok("abc"));
        assert_eq!(sanitize(".hidden").as_deref(), Ok(".hidden"));
    }

    #[test]
    fn nothing_usable_is_refused() {
        for bad in ["", ".", "..", "...", "dir/", "a/..", " ", "\u{7}", "x/\n"] {
            assert!(sanitize(bad).is_err(), "{bad:?}");
        }
    }

    proptest! {
        #[test]
        fn a_sanitized_name_stays_in_its_directory(offered in "\\PC{0,300}|[./\\\\a]{0,12}") {
            if let Ok(name) = sanitize(&offered) {
                prop_assert!(!name.is_empty() && name.len() <= MAX_NAME_BYTES);
                prop_assert!(!name.contains(['/', '\\', '\0']));
                prop_assert!(!name.chars().any(char::is_control));
                prop_assert!(name != "." && name != "..");
                let path = std::path::Path::new("/out").join(&name);
                prop_assert_eq!(path.parent(), Some(std::path::Path::new("/out")));
            }
        }
    }
}
