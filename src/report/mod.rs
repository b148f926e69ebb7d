//! Output formats. Nothing here touches CUDA or NCCL: everything renders from the results types
//! (`crate::results`).
pub mod compare;
pub mod csv;
pub mod json;
pub mod plots;
pub mod sidebyside;
pub mod table;

use crate::results::Run;
use std::io::Write;
use std::path::Path;

/// Write a file atomically: a temporary file in the same folder, flushed, then renamed over the
/// target, so a reader (or a crash) never sees half a results file.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_all_atomic([(path, bytes)])
}

/// Write files together: each into a temporary file of its folder, flushed, and only when every
/// one is written whole, all renamed over their targets. A failure (a full disk) leaves every
/// target as it was, so a folder of files that refer to each other (a report's pages and
/// charts) is never part old and part new.
pub fn write_all_atomic<'a>(files: impl IntoIterator<Item = (&'a Path, &'a [u8])>) -> std::io::Result<()> {
    let mut staged = vec![];
    let res = (|| {
        for (path, bytes) in files {
            let path = resolve_link(path)?;
            if path.exists() && !path.is_file() {
                return Err(std::io::Error::other(format!("{}: exists and is not a regular file", path.display())));
            }
            let (tmp, mut f) = temp_file(folder_of(&path))?;
            staged.push((tmp, path));
            f.write_all(bytes)?;
            f.sync_all()?;
        }
        staged.iter().try_for_each(|(tmp, path)| std::fs::rename(tmp, path))
    })();
    if res.is_err() {
        for (tmp, _) in &staged {
            let _ = std::fs::remove_file(tmp);
        }
    }
    res
}

/// A new file of its own in `dir` (the temporary of an atomic write, or a probe that the folder
/// takes files). Created exclusively, so a file or symbolic link already under the name (left
/// by a crash, or planted) is never written through; the name does not carry the target's, so a
/// target name of any legal length leaves room for it.
pub fn temp_file(dir: &Path) -> std::io::Result<(std::path::PathBuf, std::fs::File)> {
    // Names taken are skipped a bounded number of times, however many files this process made.
    for _ in 0..TEMP_TRIES {
        let tmp = next_temp_name(dir);
        match std::fs::OpenOptions::new().write(true).create_new(true).open(&tmp) {
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            r => return r.map(|f| (tmp, f)),
        }
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::AlreadyExists,
        format!("{TEMP_TRIES} temporary file names in a row were taken in {}", dir.display()),
    ))
}

const TEMP_TRIES: u32 = 1000;
static NEXT_TEMP: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

fn next_temp_name(dir: &Path) -> std::path::PathBuf {
    let n = NEXT_TEMP.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    dir.join(format!(".ginbench-{}-{n}.tmp", std::process::id()))
}

/// The file a path names: a symbolic link's target, followed link by link (so that writing
/// replaces the target, not the link; the target need not exist yet), otherwise the path itself.
pub fn resolve_link(path: &Path) -> std::io::Result<std::path::PathBuf> {
    let mut p = path.to_path_buf();
    for _ in 0..40 {
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => {
                let target = std::fs::read_link(&p)?;
                p = p.parent().unwrap_or(Path::new("")).join(target);
            }
            _ => return Ok(p),
        }
    }
    Err(std::io::Error::other("too many levels of symbolic links"))
}

/// The folder a file path is in (`.` for a bare name).
pub fn folder_of(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// Two paths name one file: the same resolved folder and file name (neither need exist).
pub fn same_file(a: &Path, b: &Path) -> bool {
    let key = |p: &Path| -> Option<(std::path::PathBuf, std::ffi::OsString)> {
        let p = resolve_link(p).ok()?;
        Some((std::fs::canonicalize(folder_of(&p)).ok()?, p.file_name()?.to_os_string()))
    };
    a == b || matches!((key(a), key(b)), (Some(x), Some(y)) if x == y)
}

/// Show table text: on stdout, or on stderr when stdout carries the JSON (`-J -`). A table that
/// cannot be shown does not stop the run: its results files are what it is for.
pub fn print_text(json_stdout: bool, s: &str) {
    if json_stdout {
        crate::console::err(s);
    } else {
        let _ = crate::console::out(s);
    }
}

/// Write a finished run where the flags asked: JSON to `json` (`-` = stdout) and the rows as CSV
/// to `csv`, each atomically. Returns the lines to show under the table.
pub fn write_outputs(run: &Run, json: Option<&Path>, csv: Option<&Path>) -> Result<Vec<String>, String> {
    let mut shown = vec![];
    match json {
        Some(p) if p == Path::new("-") => crate::console::out(&json::to_string(run)).map_err(|e| e.to_string())?,
        Some(p) => {
            json::write(p, run).map_err(|e| format!("writing {}: {e}", p.display()))?;
            shown.push(format!("# Wrote JSON to {}\n", p.display()));
        }
        None => {}
    }
    if let Some(p) = csv {
        csv::write(p, &run.rows).map_err(|e| format!("writing {}: {e}", p.display()))?;
        shown.push(format!("# Wrote CSV to {}\n", p.display()));
    }
    Ok(shown)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_temp_name_taken_is_skipped_however_many_files_came_before() {
        // The limit counts this call's tries, not the files the process has made so far.
        let dir = std::env::temp_dir().join(format!("ginbench-temp-taken-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        NEXT_TEMP.fetch_add(2 * TEMP_TRIES, std::sync::atomic::Ordering::Relaxed);
        let taken: Vec<_> = (0..8).map(|_| next_temp_name(&dir)).collect();
        NEXT_TEMP.fetch_sub(8, std::sync::atomic::Ordering::Relaxed);
        for t in &taken {
            std::fs::write(t, "left by a crash").unwrap();
        }
        let (tmp, _) = temp_file(&dir).unwrap();
        assert!(!taken.contains(&tmp), "{tmp:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_link_is_written_through_and_stays_a_link() {
        let dir = std::env::temp_dir().join(format!("ginbench-link-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let link = dir.join("link.json");
        std::os::unix::fs::symlink("target.json", &link).unwrap();
        // The target does not exist yet.
        write_atomic(&link, b"{}").unwrap();
        assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
        assert_eq!(std::fs::read_to_string(dir.join("target.json")).unwrap(), "{}");
        assert!(same_file(&link, &dir.join("target.json")));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn files_already_under_a_temporary_name_are_never_written_through() {
        let dir = std::env::temp_dir().join(format!("ginbench-planted-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let victim = dir.join("victim");
        std::fs::write(&victim, "keep").unwrap();
        // Links planted under the temporary names this process would take next.
        for n in 0..200 {
            let tmp = dir.join(format!(".ginbench-{}-{n}.tmp", std::process::id()));
            std::os::unix::fs::symlink(&victim, tmp).unwrap();
        }
        write_atomic(&dir.join("out.json"), b"{}").unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
        assert_eq!(std::fs::read_to_string(dir.join("out.json")).unwrap(), "{}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
