//! One error type for the whole suite; every error maps to a documented process exit code.
use std::fmt;

/// Process exit codes (README "Exit codes"). They follow nccl-tests' `testResult_t`, whose 5
/// (not implemented) is never returned: what an impl cannot run is a skipped row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i32)]
pub enum Exit {
    Ok = 0,
    Internal = 1,
    Cuda = 2,
    Nccl = 3,
    Timeout = 4,
    Usage = 6,
    WrongData = 7,
    /// The machine cannot run the benchmark: no GPU or driver, no (matching) NCCL.
    Environment = 8,
}

#[derive(Debug, Clone)]
pub struct Error {
    pub exit: Exit,
    pub msg: String,
    /// How to fix it, when we know.
    pub fix: Option<String>,
}

impl Error {
    pub fn new(exit: Exit, msg: impl Into<String>) -> Self {
        Error { exit, msg: msg.into(), fix: None }
    }
    pub fn usage(msg: impl Into<String>, fix: impl Into<String>) -> Self {
        Error { exit: Exit::Usage, msg: msg.into(), fix: Some(fix.into()) }
    }
    pub fn env(msg: impl Into<String>, fix: impl Into<String>) -> Self {
        Error { exit: Exit::Environment, msg: msg.into(), fix: Some(fix.into()) }
    }
    pub fn internal(msg: impl Into<String>) -> Self {
        Error::new(Exit::Internal, msg)
    }
    pub fn with_fix(mut self, fix: impl Into<String>) -> Self {
        self.fix = Some(fix.into());
        self
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.msg)?;
        if let Some(fix) = &self.fix {
            write!(f, " (fix: {fix})")?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {}

impl From<cudarc::driver::DriverError> for Error {
    fn from(e: cudarc::driver::DriverError) -> Self {
        Error::new(Exit::Cuda, format!("CUDA driver error: {e}"))
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::new(Exit::Internal, format!("I/O error: {e}"))
    }
}

pub type Result<T> = std::result::Result<T, Error>;

/// Print `prog: error: ...` on one line and exit with the error's code. Only the first thread to
/// fail reports: see [`exiting`].
pub fn die(prog: &str, e: &Error) -> ! {
    let _reporting = exiting();
    crate::console::err(&format!("{prog}: error: {}\n", crate::console::one_line(&e.to_string())));
    std::process::exit(e.exit as i32)
}

/// Taken by the thread that reports the process's failure and held until the process exits, so
/// that threads failing meanwhile (every rank hitting the same error, ranks torn down by the
/// exit or an abort) wait instead of adding lines of their own: a failure is one line.
pub fn exiting() -> std::sync::MutexGuard<'static, ()> {
    static REPORTER: std::sync::Mutex<()> = std::sync::Mutex::new(());
    REPORTER.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The process's arguments, refusing (not panicking on) one that is not UTF-8.
pub fn utf8_args() -> Result<Vec<String>> {
    std::env::args_os()
        .enumerate()
        .map(|(i, a)| {
            a.into_string().map_err(|a| {
                Error::usage(
                    format!("argument {i} ({}) is not valid UTF-8", a.to_string_lossy()),
                    "name files and values in UTF-8",
                )
            })
        })
        .collect()
}

/// Parse `prog`'s argv: help and version print and exit 0; errors are one line, exit 6.
pub fn parse_args<A: clap::Parser>(prog: &str, argv: Vec<String>) -> Result<A> {
    A::try_parse_from(&argv).map_err(|e| {
        use clap::error::ErrorKind::*;
        if matches!(e.kind(), DisplayHelp | DisplayVersion | DisplayHelpOnMissingArgumentOrSubcommand) {
            show(prog, &e, Exit::Environment as i32);
        }
        Error { exit: Exit::Usage, msg: clap_one_line(&e), fix: Some(format!("see {prog} --help")) }
    })
}

/// Prints clap's help or version text and exits 0, or, where standard output cannot be written
/// (a full disk), says so in one line and exits `unwritable`.
pub fn show(prog: &str, e: &clap::Error, unwritable: i32) -> ! {
    let printed = e.print().and_then(|()| std::io::Write::flush(&mut std::io::stdout()));
    if let Err(e) = crate::console::written(printed) {
        crate::console::err(&format!("{prog}: error: {e}\n"));
        std::process::exit(unwritable)
    }
    std::process::exit(0)
}

/// clap's error text as one line: its message lines up to the usage block, joined.
pub fn clap_one_line(e: &clap::Error) -> String {
    let text = e.to_string();
    let lines: Vec<&str> = text
        .lines()
        .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more information"))
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let joined = lines.join(" ");
    joined.trim_start_matches("error: ").to_string()
}
