//! The binaries start without MPI: none of them links libmpi; `ginbench` works with the MPI
//! library out of reach; under an MPI launcher, a missing MPI library is one line and exit 8.
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const BINS: [&str; 3] =
    [env!("CARGO_BIN_EXE_ginbench"), env!("CARGO_BIN_EXE_alltoall_perf"), env!("CARGO_BIN_EXE_ep_perf")];
const GB: &str = env!("CARGO_BIN_EXE_ginbench");

/// The DT_NEEDED names and the DT_RUNPATH / DT_RPATH strings of a 64-bit little-endian ELF file,
/// read from its section headers.
fn dynamic_strings(path: &str) -> (Vec<String>, Vec<String>) {
    let f = std::fs::read(path).unwrap();
    assert!(f.len() > 64 && &f[..4] == b"\x7fELF" && f[4] == 2 && f[5] == 1, "{path}: not a 64-bit LE ELF file");
    let u16_at = |o: usize| u16::from_le_bytes(f[o..o + 2].try_into().unwrap()) as usize;
    let u32_at = |o: usize| u32::from_le_bytes(f[o..o + 4].try_into().unwrap()) as usize;
    let u64_at = |o: usize| u64::from_le_bytes(f[o..o + 8].try_into().unwrap()) as usize;
    let (shoff, shentsize, shnum) = (u64_at(0x28), u16_at(0x3a), u16_at(0x3c));
    let section = |i: usize| shoff + i * shentsize;
    let (mut needed, mut runpaths) = (vec![], vec![]);
    for i in 0..shnum {
        let sh = section(i);
        const SHT_DYNAMIC: usize = 6;
        if u32_at(sh + 4) != SHT_DYNAMIC {
            continue;
        }
        let (off, size, link) = (u64_at(sh + 24), u64_at(sh + 32), u32_at(sh + 40));
        let strtab = u64_at(section(link) + 24);
        let string = |at: usize| {
            let s = &f[strtab + at..];
            String::from_utf8_lossy(&s[..s.iter().position(|&b| b == 0).unwrap()]).into_owned()
        };
        for e in (off..off + size).step_by(16) {
            match u64_at(e) {
                0 => break,
                1 => needed.push(string(u64_at(e + 8))),
                15 | 29 => runpaths.push(string(u64_at(e + 8))),
                _ => {}
            }
        }
    }
    (needed, runpaths)
}

#[test]
fn no_binary_links_mpi() {
    for bin in BINS {
        let (needed, runpaths) = dynamic_strings(bin);
        assert!(needed.iter().any(|n| n.starts_with("libc.so")), "{bin}: the dynamic section was not read: {needed:?}");
        assert!(!needed.iter().any(|n| n.contains("mpi")), "{bin} needs {needed:?}");
        assert!(!runpaths.iter().any(|r| r.contains("mpi")), "{bin} has RUNPATH {runpaths:?}");
    }
}

/// The lib folders of the MPI the build used (from `$MPICC -show`), which the MPI shim's
/// RUNPATH names.
fn mpi_lib_dirs() -> Vec<PathBuf> {
    let mpicc = std::env::var("MPICC").unwrap_or_else(|_| "mpicc".into());
    let Ok(out) = Command::new(mpicc).arg("-show").output() else { return vec![] };
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .filter_map(|t| t.strip_prefix("-L"))
        .map(PathBuf::from)
        .filter(|p| p.is_dir())
        .collect()
}

/// Run `bin args` with LD_LIBRARY_PATH unset and an empty folder mounted over each of `hide`
/// (in a private mount namespace: `unshare -rm`). None where such namespaces are not allowed.
fn run_hiding(hide: &[PathBuf], bin: &str, args: &[&str], env: &[(&str, &str)]) -> Option<Output> {
    let probe = Command::new("unshare").args(["-rm", "true"]).output().ok()?;
    if !probe.status.success() {
        return None;
    }
    let mut script = String::from("set -e\n");
    for (i, _) in hide.iter().enumerate() {
        script.push_str(&format!("mount -t tmpfs none \"$H{i}\"\n"));
    }
    script.push_str("exec \"$@\"\n");
    let mut c = Command::new("unshare");
    c.args(["-rm", "sh", "-c", &script, "sh", bin]).args(args).env_remove("LD_LIBRARY_PATH");
    for (i, h) in hide.iter().enumerate() {
        c.env(format!("H{i}"), h);
    }
    for (k, v) in env {
        c.env(k, v);
    }
    Some(c.output().unwrap())
}

fn golden_run() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/run.json").display().to_string()
}

#[test]
fn ginbench_runs_with_no_mpi_library_in_reach() {
    let hide = mpi_lib_dirs();
    let run = golden_run();
    let out_dir = std::env::temp_dir().join(format!("ginbench-startup-report-{}", std::process::id()));
    let out = out_dir.display().to_string();
    let cases: [(&[&str], i32); 4] = [
        (&["--help"], 0),
        (&["compare", &run, &run], 0),
        (&["compare", "/nonexistent/a.json", &run], 2),
        (&["report", &run, "-o", &out], 0),
    ];
    for (args, code) in cases {
        let o = match run_hiding(&hide, GB, args, &[]) {
            Some(o) => o,
            None => {
                eprintln!("(no private mount namespaces here: only LD_LIBRARY_PATH is cleared)");
                Command::new(GB).args(args).env_remove("LD_LIBRARY_PATH").output().unwrap()
            }
        };
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(code), "ginbench {args:?}: {err}");
        assert!(!err.contains("error while loading shared libraries"), "ginbench {args:?}: {err}");
    }
    assert!(out_dir.join("report.md").exists());
    let _ = std::fs::remove_dir_all(out_dir);
}

#[test]
fn mpi_launch_without_the_mpi_library_is_one_line_and_exit_8() {
    let hide = mpi_lib_dirs();
    if hide.is_empty() {
        eprintln!("skipped: no MPI compiler wrapper here (the build has no MPI to hide)");
        return;
    }
    // A system MPI (ldconfig) would still be found: then this machine cannot show the error.
    let system_mpi = Command::new("sh").args(["-c", "ldconfig -p | grep -q 'libmpi\\.so'"]).status();
    if system_mpi.is_ok_and(|s| s.success()) {
        eprintln!("skipped: a system MPI library is on the loader's path");
        return;
    }
    // An Open MPI launch as mpirun describes it to its processes.
    let launcher = [("OMPI_COMM_WORLD_SIZE", "2"), ("OMPI_COMM_WORLD_RANK", "0")];
    let Some(o) = run_hiding(&hide, GB, &["mpi-check"], &launcher) else {
        eprintln!("skipped: no private mount namespaces here to hide the MPI library");
        return;
    };
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(8), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.starts_with("ginbench: error: cannot load the MPI library (libmpi"), "{err}");
    assert!(err.contains("(fix: source ci/env, or set LD_LIBRARY_PATH to your MPI's lib folder)"), "{err}");
}
