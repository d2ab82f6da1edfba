//! The PMI-1 wire format: one line per message, `key=value` words separated
//! by spaces, the first `cmd=…`. Replies come from another process (the
//! launcher), so every line is checked: a missing `cmd`, a word without
//! `=`, a repeated key, a line cut short or longer than any reply can be is
//! an error that says what was wrong, never a panic.

use std::fmt;
use std::io::BufRead;

/// The longest line read: hydra's `vallen_max` is 1024 and a `get` reply
/// carries one value beside a few short words.
pub const MAX_LINE: usize = 4096;

/// Why a PMI exchange failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PmiError {
    /// The launcher's environment names no PMI connection or a bad one.
    Env(String),
    /// Reading or writing the connection failed.
    Io(String),
    /// The launcher sent nothing, or not the rest of a line, within the
    /// connection's read timeout ([`crate::pmi::TIMEOUT_ENV`]).
    Timeout,
    /// The connection closed, or a reply ended without its newline.
    Truncated(String),
    /// A reply longer than [`MAX_LINE`].
    TooLong,
    /// A reply that is not `key=value` words starting with `cmd`.
    Malformed(String),
    /// A reply to another command than the one sent.
    Unexpected { expected: &'static str, got: String },
    /// The launcher refused: its `rc` and `msg`.
    Failed { rc: String, msg: String },
    /// A key or value the protocol cannot carry (spaces, `=`, newline, too long).
    BadArgument(String),
}

impl fmt::Display for PmiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PmiError::Env(s) => write!(f, "PMI environment: {s}"),
            PmiError::Io(s) => write!(f, "PMI connection: {s}"),
            PmiError::Timeout => write!(
                f,
                "the launcher sent no complete PMI reply within the timeout \
                 (it stalled or died); set {} (seconds) for launchers slower to start a job",
                crate::pmi::TIMEOUT_ENV
            ),
            PmiError::Truncated(s) => write!(f, "PMI reply cut short: {s:?}"),
            PmiError::TooLong => write!(f, "PMI reply longer than {MAX_LINE} bytes"),
            PmiError::Malformed(s) => write!(f, "malformed PMI reply: {s:?}"),
            PmiError::Unexpected { expected, got } => {
                write!(f, "PMI replied {got:?} where {expected:?} was due")
            }
            PmiError::Failed { rc, msg } => write!(f, "the launcher refused (rc={rc}): {msg}"),
            PmiError::BadArgument(s) => write!(f, "cannot send over PMI: {s}"),
        }
    }
}

impl std::error::Error for PmiError {}

/// One parsed message: its words in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    words: Vec<(String, String)>,
}

impl Message {
    /// Parses one line (without its newline).
    pub fn parse(line: &str) -> Result<Message, PmiError> {
        let mut words: Vec<(String, String)> = Vec::new();
        for w in line.split(' ').filter(|w| !w.is_empty()) {
            let (k, v) = w
                .split_once('=')
                .ok_or_else(|| PmiError::Malformed(line.to_string()))?;
            if k.is_empty() || words.iter().any(|(seen, _)| seen == k) {
                return Err(PmiError::Malformed(line.to_string()));
            }
            words.push((k.to_string(), v.to_string()));
        }
        match words.first() {
            Some((k, _)) if k == "cmd" => Ok(Message { words }),
            _ => Err(PmiError::Malformed(line.to_string())),
        }
    }

    pub fn cmd(&self) -> &str {
        &self.words[0].1
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.words
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The reply `expected`, with `rc=0` where it carries an `rc`.
    pub fn expect(self, expected: &'static str) -> Result<Message, PmiError> {
        if self.cmd() != expected {
            return Err(PmiError::Unexpected {
                expected,
                got: self.cmd().to_string(),
            });
        }
        match self.get("rc") {
            None | Some("0") => Ok(self),
            Some(rc) => Err(PmiError::Failed {
                rc: rc.to_string(),
                msg: self.get("msg").unwrap_or("").to_string(),
            }),
        }
    }

    /// The value of `key`, which the reply must carry.
    pub fn required(&self, key: &str) -> Result<&str, PmiError> {
        self.get(key)
            .ok_or_else(|| PmiError::Malformed(format!("{} without {key}", self.cmd())))
    }
}

/// Reads one reply line from `r`.
pub fn read_message<R: BufRead>(r: &mut R) -> Result<Message, PmiError> {
    let mut line = Vec::new();
    let mut limited = std::io::Read::take(&mut *r, MAX_LINE as u64 + 1);
    let n = limited
        .read_until(b'\n', &mut line)
        .map_err(|e| match e.kind() {
            // A read timeout (`SO_RCVTIMEO`) expired: a stalled launcher.
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => PmiError::Timeout,
            _ => PmiError::Io(e.to_string()),
        })?;
    if line.last() != Some(&b'\n') {
        if n > MAX_LINE {
            return Err(PmiError::TooLong);
        }
        return Err(PmiError::Truncated(String::from_utf8_lossy(&line).into()));
    }
    line.pop();
    let text = std::str::from_utf8(&line)
        .map_err(|_| PmiError::Malformed(String::from_utf8_lossy(&line).into()))?;
    Message::parse(text.trim_end_matches('\r'))
}

/// A word the protocol can carry: no space, `=` or control character, at
/// most `max` bytes, not empty.
pub fn check_word(what: &str, s: &str, max: usize) -> Result<(), PmiError> {
    let bad = s.is_empty()
        || s.len() > max
        || s.bytes()
            .any(|b| b == b' ' || b == b'=' || b.is_ascii_control());
    if bad {
        return Err(PmiError::BadArgument(format!(
            "{what} {s:?} (1 to {max} bytes, no spaces, '=' or control characters)"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(bytes: &[u8]) -> Result<Message, PmiError> {
        read_message(&mut std::io::BufReader::new(bytes))
    }

    #[test]
    fn a_reply_is_parsed_into_its_words() {
        let m = read(b"cmd=get_result rc=0 msg=success value=ab12\n").unwrap();
        assert_eq!(m.cmd(), "get_result");
        assert_eq!(m.get("value"), Some("ab12"));
        assert_eq!(m.get("nothing"), None);
        let m = m.expect("get_result").unwrap();
        assert_eq!(m.required("msg"), Ok("success"));
        // Extra spaces and a CR before the newline are tolerated; an empty value too.
        let m = read(b"cmd=barrier_out  x= \r\n").unwrap();
        assert_eq!((m.cmd(), m.get("x")), ("barrier_out", Some("")));
    }

    #[test]
    fn bad_and_truncated_replies_are_errors_that_say_so() {
        assert!(matches!(read(b""), Err(PmiError::Truncated(_))));
        assert!(matches!(
            read(b"cmd=barrier_o"),
            Err(PmiError::Truncated(_))
        ));
        for bad in [
            &b"\n"[..],
            b"barrier_out\n",
            b"rc=0 cmd=put_result\n",
            b"cmd=get_result value\n",
            b"cmd=x =y\n",
            b"cmd=x a=1 a=2\n",
            b"cmd=x v=\xff\n",
        ] {
            assert!(matches!(read(bad), Err(PmiError::Malformed(_))), "{bad:?}");
        }
        let long = [b"cmd=x v=".as_slice(), &[b'a'; MAX_LINE], b"\n"].concat();
        assert_eq!(read(&long), Err(PmiError::TooLong));
        let m = read(b"cmd=get_result rc=-1 msg=key_k_not_found value=unknown\n").unwrap();
        assert_eq!(
            m.expect("get_result"),
            Err(PmiError::Failed {
                rc: "-1".into(),
                msg: "key_k_not_found".into()
            })
        );
        let m = read(b"cmd=barrier_out\n").unwrap();
        assert!(matches!(
            m.clone().expect("get_result"),
            Err(PmiError::Unexpected { .. })
        ));
        assert!(matches!(m.required("value"), Err(PmiError::Malformed(_))));
    }

    #[test]
    fn only_words_the_protocol_carries_are_sent() {
        assert!(check_word("key", "addr-3", 64).is_ok());
        for bad in ["", "a b", "a=b", "a\nb", &"x".repeat(65)] {
            assert!(check_word("key", bad, 64).is_err(), "{bad:?}");
        }
    }
}
