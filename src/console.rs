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
    s.chars().map(|c| if c.is_control() { c.escape_default().to_string() } else { c.to_string() }).collect()
}
