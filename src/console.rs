//! Standard output and error, without the panics of `print!` and `eprint!`: those abort with a
//! trace when the stream cannot be written (a pipe closed by `| head`, a full disk), and a
//! failure of this tool is one line and a documented exit code.
use crate::error::{Error, Result};
use std::io::Write;

/// Writes `s` to standard output. A reader that has gone (a pipe closed early, as `| head`
/// closes it) wants nothing more, which is not an error; any other failure is.
pub fn out(s: &str) -> Result<()> {
    let mut o = std::io::stdout().lock();
    written(o.write_all(s.as_bytes()).and_then(|()| o.flush()))
}

/// The outcome of a write to standard output: a reader that went away is not an error.
pub fn written(r: std::io::Result<()>) -> Result<()> {
    match r {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(Error::env(
            format!("writing to standard output: {e}"),
            "check where the output goes: free space, or a reader that stays open",
        )),
        _ => Ok(()),
    }
}

/// Writes `s` to standard error. A failure there has nowhere to be told, so it is ignored.
pub fn err(s: &str) {
    let mut e = std::io::stderr().lock();
    let _ = e.write_all(s.as_bytes()).and_then(|()| e.flush());
}

/// `s` on one line: its control characters (a newline or a terminal escape taken from an input
/// file) written as escapes (`\n`, `\u{1b}`), so that a message stays one line and prints as
/// text.
pub fn one_line(s: &str) -> String {
    s.chars().map(|c| if hidden(c) { c.escape_default().to_string() } else { c.to_string() }).collect()
}

/// A character that does not print as itself on one line: a control character, a Unicode line
/// or paragraph separator (U+2028, U+2029: a line break to many terminals and editors), or a
/// bidirectional mark, embedding, override or isolate (U+061C, U+200E-F, U+202A-E, U+2066-9:
/// they reorder the text shown after them).
pub fn hidden(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{2028}' | '\u{2029}' | '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    #[test]
    fn one_line_escapes_what_would_break_or_reorder_the_line() {
        assert_eq!(super::one_line("a\nb\u{1b}[31m"), "a\\nb\\u{1b}[31m");
        assert_eq!(super::one_line("a\u{2028}b\u{85}c\u{202e}d"), "a\\u{2028}b\\u{85}c\\u{202e}d");
        assert_eq!(super::one_line("µs ÷ — ok"), "µs ÷ — ok");
    }
}
