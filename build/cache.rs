//! Content-addressed outputs of the build script's slow steps (nvcc, bindgen): an output is
//! rebuilt only when something it is made from changes, not whenever the build script reruns.
//!
//! Shared by build.rs and tests/build.rs (included with `#[path]`), so it uses std only.
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// 128-bit FNV-1a: stable across Rust releases (unlike `DefaultHasher`), enough for cache keys.
pub struct Key(u128);

impl Key {
    const OFFSET: u128 = 0x6c62272e07bb014262b821756295c58d;
    const PRIME: u128 = 0x0000000001000000000000000000013b;

    /// A key for one kind of output; `kind` keeps different steps apart.
    pub fn new(kind: &str) -> Key {
        let mut k = Key(Self::OFFSET);
        k.add(kind.as_bytes());
        k
    }

    fn raw(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= b as u128;
            self.0 = self.0.wrapping_mul(Self::PRIME);
        }
    }

    /// One input; its length goes first so that ("ab", "c") and ("a", "bc") differ.
    pub fn add(&mut self, bytes: &[u8]) -> &mut Key {
        self.raw(&(bytes.len() as u64).to_le_bytes());
        self.raw(bytes);
        self
    }

    pub fn add_str(&mut self, s: &str) -> &mut Key {
        self.add(s.as_bytes())
    }

    /// A file's name (as given) and contents.
    pub fn add_file(&mut self, path: &Path) -> io::Result<&mut Key> {
        let bytes = fs::read(path)?;
        self.add_str(&path.to_string_lossy());
        Ok(self.add(&bytes))
    }

    /// Every file under `dir`, by path relative to `dir` in sorted order, with its contents.
    pub fn add_tree(&mut self, dir: &Path) -> io::Result<&mut Key> {
        let mut files = vec![];
        walk(dir, dir, &mut files)?;
        files.sort();
        for rel in files {
            let bytes = fs::read(dir.join(&rel))?;
            self.add_str(&rel.to_string_lossy());
            self.add(&bytes);
        }
        Ok(self)
    }

    pub fn hex(&self) -> String {
        format!("{:032x}", self.0)
    }
}

fn walk(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) -> io::Result<()> {
    for e in fs::read_dir(dir)? {
        let p = e?.path();
        if p.is_dir() {
            walk(root, &p, out)?;
        } else {
            out.push(p.strip_prefix(root).unwrap_or(&p).to_path_buf());
        }
    }
    Ok(())
}

/// The cache folder for a build whose OUT_DIR is `out_dir`: `<target>/ginbench-cache`, shared by
/// the debug and release profiles (OUT_DIR is `<target>/<profile>/build/<pkg>-<hash>/out`).
/// Falls back to OUT_DIR itself if the layout is not the one expected.
pub fn default_dir(out_dir: &Path) -> PathBuf {
    let up: Vec<&Path> = out_dir.ancestors().take(5).collect();
    match up.as_slice() {
        [_, _, build, _, target] if build.file_name().is_some_and(|n| n == "build") => target.join("ginbench-cache"),
        _ => out_dir.join("ginbench-cache"),
    }
}

/// Where the outputs of `key` (files named `outputs`) live: `cache/<key>/`. If that folder has
/// them they are reused (returns `(folder, true)`); otherwise `produce` writes them into a fresh
/// folder, which is then renamed into place, so that a failed or interrupted step leaves no entry.
pub fn get_or_make(
    cache: &Path,
    key: &Key,
    outputs: &[&str],
    produce: impl FnOnce(&Path) -> Result<(), String>,
) -> Result<(PathBuf, bool), String> {
    let entry = cache.join(key.hex());
    if entry.is_dir() && !outputs.iter().all(|o| entry.join(o).is_file()) {
        let _ = fs::remove_dir_all(&entry);
    }
    if entry.is_dir() {
        // Mark it used, for prune() (rewriting the file sets its modification time).
        let _ = fs::write(entry.join(".used"), b"");
        return Ok((entry, true));
    }
    let tmp = cache.join(format!("{}.tmp-{}", key.hex(), std::process::id()));
    let _ = fs::remove_dir_all(&tmp);
    fs::create_dir_all(&tmp).map_err(|e| format!("{}: {e}", tmp.display()))?;
    if let Err(e) = produce(&tmp) {
        let _ = fs::remove_dir_all(&tmp);
        return Err(e);
    }
    if let Some(o) = outputs.iter().find(|o| !tmp.join(o).is_file()) {
        let _ = fs::remove_dir_all(&tmp);
        return Err(format!("the step wrote no {o}"));
    }
    fs::write(tmp.join(".used"), b"").map_err(|e| format!("{}: {e}", tmp.display()))?;
    if let Err(e) = fs::rename(&tmp, &entry) {
        // Another build made the same entry meanwhile: use theirs.
        let _ = fs::remove_dir_all(&tmp);
        if !entry.is_dir() {
            return Err(format!("{} -> {}: {e}", tmp.display(), entry.display()));
        }
    }
    Ok((entry, false))
}

/// Keep the `keep` most recently used entries of `cache`, remove the rest, and temporaries older
/// than an hour (left by an interrupted build; younger ones may belong to a build under way).
pub fn prune(cache: &Path, keep: usize) {
    let Ok(rd) = fs::read_dir(cache) else { return };
    let (tmps, entries): (Vec<PathBuf>, Vec<PathBuf>) = rd
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .partition(|p| p.file_name().is_some_and(|n| n.to_string_lossy().contains(".tmp-")));
    for t in tmps {
        let age = fs::metadata(&t).and_then(|m| m.modified()).ok().and_then(|m| m.elapsed().ok());
        if age.is_some_and(|a| a.as_secs() > 3600) {
            let _ = fs::remove_dir_all(t);
        }
    }
    let mut entries: Vec<(std::time::SystemTime, PathBuf)> = entries
        .into_iter()
        .map(|p| {
            let used = fs::metadata(p.join(".used")).and_then(|m| m.modified()).unwrap_or(std::time::UNIX_EPOCH);
            (used, p)
        })
        .collect();
    entries.sort_by_key(|e| std::cmp::Reverse(e.0));
    for (_, p) in entries.into_iter().skip(keep) {
        let _ = fs::remove_dir_all(p);
    }
}
