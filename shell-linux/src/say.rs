//! Lines for the user on standard error, each written whole in one
//! `write`: `eprintln!` writes a formatted line in pieces, and a launcher
//! that kills a job as one of its processes exits may keep only the
//! first piece ("rmx: rank ").

use std::io::Write;

/// Writes `rmx: {line}` and a newline to standard error in one write.
pub fn say(line: impl std::fmt::Display) {
    let whole = format!("rmx: {line}\n");
    let _ = std::io::stderr().lock().write_all(whole.as_bytes());
}

/// What a panic said (its message, if it was a string).
pub fn panic_words(payload: &(dyn std::any::Any + Send)) -> &str {
    payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied())
        .unwrap_or("a panic")
}

/// `why`, which a rank's own error may already begin with `rank R: `,
/// prefixed with that rank once.
pub fn for_rank(rank: &str, why: &str) -> String {
    match why.strip_prefix(rank).and_then(|w| w.strip_prefix(": ")) {
        Some(_) => why.to_string(),
        None => format!("{rank}: {why}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rank_is_named_once() {
        assert_eq!(
            for_rank("rank 0", "rank 0: rank 1 has no eth address"),
            "rank 0: rank 1 has no eth address"
        );
        assert_eq!(for_rank("rank 0", "no port"), "rank 0: no port");
        assert_eq!(for_rank("rank 1", "rank 10: x"), "rank 1: rank 10: x");
    }
}
