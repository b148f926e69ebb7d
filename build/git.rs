//! The git revision baked into the binaries, and the files whose change can change it.
//!
//! Shared by build.rs and tests/build.rs (included with `#[path]`), so it uses std only.
use std::path::{Path, PathBuf};
use std::process::Command;

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git").current_dir(dir).args(args).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// `git describe --always --abbrev=12` of the checkout at `dir`, or "unknown" outside git.
/// No `--dirty`: that answer changes with every edit and `git add`, and keeping it right would
/// rerun the build script on every git command.
pub fn describe(dir: &Path) -> String {
    git(dir, &["describe", "--always", "--abbrev=12"]).unwrap_or_else(|| "unknown".into())
}

/// The git folder of the work tree at `dir` and the folder it shares with other work trees
/// (the same folder in a plain clone; in a `git worktree`, `.git` is a file naming the former),
/// both absolute. None outside git.
pub fn dirs(dir: &Path) -> Option<(PathBuf, PathBuf)> {
    let out = git(dir, &["rev-parse", "--git-dir", "--git-common-dir"])?;
    let mut lines = out.lines();
    let (g, c) = (lines.next()?, lines.next()?);
    Some((dir.join(g), dir.join(c)))
}

/// Files whose change can change `describe()`: this work tree's HEAD, the branch ref it names
/// (a loose ref in the common folder, else the folder where git will write it), packed-refs and
/// the tags. Never the index. Only paths that exist: cargo reruns a build script on every build
/// while one of its rerun-if-changed paths is missing.
pub fn rerun_paths(git_dir: &Path, common: &Path) -> Vec<PathBuf> {
    let head = git_dir.join("HEAD");
    let mut paths = vec![head.clone()];
    if let Ok(text) = std::fs::read_to_string(&head) {
        if let Some(r) = text.trim().strip_prefix("ref: ") {
            let loose = common.join(r);
            if loose.is_file() {
                paths.push(loose);
            } else if let Some(parent) = loose.parent() {
                paths.push(parent.to_path_buf());
            }
        }
    }
    paths.push(common.join("packed-refs"));
    paths.push(common.join("refs/tags"));
    paths.retain(|p| p.exists());
    paths
}
