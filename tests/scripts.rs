//! The GPU scripts (`ci/gpu-*`) cannot run here, but they must parse, refuse bad usage before
//! they look for a GPU, and stop with one line on a node without one, never start a benchmark.
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// A folder whose `nvidia-smi` lists no GPU, to put first on PATH: the scripts then take this
/// machine for one without GPUs even where it has some.
fn no_gpu_path(tag: &str) -> (PathBuf, String) {
    let dir = std::env::temp_dir().join(format!("ginbench-nogpu-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let smi = dir.join("nvidia-smi");
    std::fs::write(&smi, "#!/bin/sh\nexit 9\n").unwrap();
    std::fs::set_permissions(&smi, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", dir.display(), std::env::var("PATH").unwrap_or_default());
    (dir, path)
}

fn script(name: &str, args: &[&str], path: &str) -> Output {
    Command::new(Path::new(ROOT).join("ci").join(name)).args(args).env("PATH", path).output().unwrap()
}

#[test]
fn gpu_scripts_parse() {
    for s in ["gpu-test", "gpu-bench", "gpu-regression", "gpu-lib.sh"] {
        let o = Command::new("bash").arg("-n").arg(Path::new(ROOT).join("ci").join(s)).output().unwrap();
        assert!(o.status.success(), "{s}: {}", String::from_utf8_lossy(&o.stderr));
    }
}

#[test]
fn gpu_bench_refuses_bad_usage_and_a_node_without_gpus() {
    let (dir, path) = no_gpu_path("bench");
    let out = dir.join("out");
    let o = script("gpu-bench", &[], &path);
    assert_eq!(o.status.code(), Some(6));
    assert!(String::from_utf8_lossy(&o.stderr).starts_with("usage: ci/gpu-bench OUTDIR"));
    let o = script("gpu-bench", &[out.to_str().unwrap(), "ep", "bogus"], &path);
    assert_eq!(o.status.code(), Some(6));
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown part 'bogus'"));
    // A valid request on a node without GPUs: one line, exit 8, nothing written.
    for (name, args) in [("gpu-bench", vec![out.to_str().unwrap(), "ep"]), ("gpu-test", vec![out.to_str().unwrap()])] {
        let o = script(name, &args, &path);
        assert_eq!(o.status.code(), Some(8), "{name}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(err.trim_end(), format!("{name}: no GPU found"));
        assert!(!out.exists(), "{name} wrote {}", out.display());
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
