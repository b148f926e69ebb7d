//! JSON output (schema ginbench/1) and loading.
use crate::results::{Run, SCHEMA};
use std::path::Path;

pub fn to_string(run: &Run) -> String {
    let mut s = serde_json::to_string_pretty(run).expect("a Run always serializes");
    s.push('\n');
    s
}

pub fn write(path: &Path, run: &Run) -> std::io::Result<()> {
    super::write_atomic(path, to_string(run).as_bytes())
}

/// Parse a results document; a foreign or malformed file is an error with a reason, never a panic.
/// A leading UTF-8 byte-order mark (some editors write one) is skipped.
pub fn parse(text: &str) -> Result<Run, String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    match v.get("schema").and_then(|s| s.as_str()) {
        Some(SCHEMA) => {}
        Some(other) => return Err(format!("schema '{other}' is not {SCHEMA}")),
        None => return Err(format!("no \"schema\" field: not a ginbench results file ({SCHEMA})")),
    }
    // From the text, not the value: serde then says where (line and column) a field is wrong.
    serde_json::from_str(text).map_err(|e| format!("invalid {SCHEMA} document: {e}"))
}
