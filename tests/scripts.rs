//! The GPU scripts (`ci/gpu-*`, `ci/alltoall-node`) cannot run their benchmarks here, but they must
//! parse, refuse bad usage before they look for a GPU, and stop with one line on a node without
//! one, never start a benchmark; on a fake one-GPU node, `ci/gpu-regression` shows what it runs
//! and `ci/gpu-fuzz` what it generates. `ci/sanitize-plugin` (CPU, run by `ci/test`) answers usage
//! the same way. The Slurm scripts (`ci/slurm/`), under a fake `srun` and `nsys`, hand every
//! binary flags it takes and run every step.
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// An executable script at `path` (a fake command to put on PATH).
fn write_exe(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
}

/// PATH with `dir` first.
fn path_with(dir: &Path) -> String {
    format!("{}:{}", dir.display(), std::env::var("PATH").unwrap_or_default())
}

/// A folder whose `nvidia-smi` lists no GPU, to put first on PATH: the scripts then take this
/// machine for one without GPUs even where it has some.
fn no_gpu_path(tag: &str) -> (PathBuf, String) {
    let dir = std::env::temp_dir().join(format!("ginbench-nogpu-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    write_exe(&dir.join("nvidia-smi"), "#!/bin/sh\nexit 9\n");
    let path = path_with(&dir);
    (dir, path)
}

fn script(name: &str, args: &[&str], path: &str) -> Output {
    Command::new(Path::new(ROOT).join("ci").join(name)).args(args).env("PATH", path).output().unwrap()
}

#[test]
fn gpu_scripts_parse() {
    for s in ["gpu-test", "gpu-bench", "gpu-regression", "gpu-lib.sh", "alltoall-node"] {
        let o = Command::new("bash").arg("-n").arg(Path::new(ROOT).join("ci").join(s)).output().unwrap();
        assert!(o.status.success(), "{s}: {}", String::from_utf8_lossy(&o.stderr));
    }
    let parse = "import ast, sys; ast.parse(open(sys.argv[1]).read())";
    let o = Command::new("python3").args(["-c", parse]).arg(Path::new(ROOT).join("ci/gpu-fuzz")).output().unwrap();
    assert!(o.status.success(), "gpu-fuzz: {}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn help_and_bad_usage_come_before_the_gpu_search() {
    let (dir, path) = no_gpu_path("usage");
    for (name, bad_exit) in
        [("gpu-test", 6), ("gpu-bench", 6), ("gpu-regression", 2), ("sanitize-plugin", 6), ("gpu-fuzz", 6)]
    {
        let o = script(name, &["--help"], &path);
        assert_eq!(o.status.code(), Some(0), "{name}");
        assert!(String::from_utf8_lossy(&o.stdout).starts_with(&format!("usage: ci/{name}")), "{name}");
        let o = script(name, &["--bogus"], &path);
        assert_eq!(o.status.code(), Some(bad_exit), "{name}");
        assert!(String::from_utf8_lossy(&o.stderr).starts_with(&format!("usage: ci/{name}")), "{name}");
    }
    for args in [&[][..], &["--record"]] {
        let o = script("gpu-regression", args, &path);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(String::from_utf8_lossy(&o.stderr).starts_with("usage: ci/gpu-regression"), "{args:?}");
    }
    assert!(!dir.join("--help").exists() && !Path::new(ROOT).join("ci/--help").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn gpu_bench_refuses_bad_usage_and_a_node_without_gpus() {
    let (dir, path) = no_gpu_path("bench");
    let out = dir.join("out");
    let o = script("gpu-bench", &[], &path);
    assert_eq!(o.status.code(), Some(6));
    assert!(String::from_utf8_lossy(&o.stderr).starts_with("usage: ci/gpu-bench OUTDIR"));
    for name in ["gpu-bench", "gpu-test"] {
        let o = script(name, &[out.to_str().unwrap(), "ep", "bogus"], &path);
        assert_eq!(o.status.code(), Some(6), "{name}");
        assert!(String::from_utf8_lossy(&o.stderr).contains("unknown part 'bogus'"), "{name}");
    }
    // A valid request on a node without GPUs: one line, exit 8, nothing written.
    let o = script("gpu-fuzz", &[out.to_str().unwrap(), "ten"], &path);
    assert_eq!(o.status.code(), Some(6));
    assert!(String::from_utf8_lossy(&o.stderr).ends_with("ci/gpu-fuzz: SECONDS and SEED are numbers\n"));
    let valid = [
        ("gpu-bench", vec![out.to_str().unwrap(), "ep"]),
        ("gpu-test", vec![out.to_str().unwrap()]),
        ("gpu-test", vec![out.to_str().unwrap(), "loopback", "mpi"]),
        ("gpu-fuzz", vec![out.to_str().unwrap(), "10", "3"]),
    ];
    for (name, args) in valid {
        let o = script(name, &args, &path);
        assert_eq!(o.status.code(), Some(8), "{name}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(err.trim_end(), format!("{name}: no GPU found"));
        assert!(!out.exists(), "{name} wrote {}", out.display());
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A scratch folder with an `nvidia-smi` that lists one GPU and fake binaries in `bin/` that log
/// their arguments to `log`: `alltoall_perf` writes `{}` to its `-J` file (or, with `FAKE_RC`
/// set, exits with it); `ginbench compare` exits 2 on a baseline whose text says "bad" or on
/// `--threshold foo`, else 0.
fn fake_gpu_node(tag: &str) -> (PathBuf, String) {
    let dir = std::env::temp_dir().join(format!("ginbench-fakegpu-{tag}-{}", std::process::id()));
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let log = dir.join("log");
    write_exe(&dir.join("nvidia-smi"), "#!/bin/sh\necho 'GPU 0: Fake GPU (UUID: GPU-0)'\n");
    let l = log.display();
    write_exe(
        &bin.join("alltoall_perf"),
        &format!("#!/bin/sh\necho \"alltoall_perf $*\" >> {l}\n[ -n \"$FAKE_RC\" ] && exit $FAKE_RC\nwhile [ $# -gt 0 ]; do [ \"$1\" = -J ] && echo '{{}}' > \"$2\"; shift; done\n"),
    );
    write_exe(
        &bin.join("ginbench"),
        &format!(
            "#!/bin/sh\necho \"ginbench $*\" >> {l}\n[ \"$1\" = compare ] && grep -q bad \"$2\" && exit 2\ncase \"$*\" in *--threshold\\ foo*) exit 2 ;; esac\nexit 0\n"
        ),
    );
    let path = path_with(&dir);
    (dir, path)
}

#[test]
fn gpu_regression_takes_paths_from_where_it_starts_and_checks_the_baseline_first() {
    let (dir, path) = fake_gpu_node("regression");
    std::fs::write(dir.join("base.json"), "good").unwrap();
    std::fs::write(dir.join("broken.json"), "bad").unwrap();
    let gate_rc = |args: &[&str], suite_rc: &str| {
        let _ = std::fs::remove_file(dir.join("log"));
        let o = Command::new(Path::new(ROOT).join("ci/gpu-regression"))
            .args(args)
            .current_dir(&dir)
            .env("PATH", &path)
            .env("FAKE_RC", suite_rc)
            .env("GINBENCH_BIN", "bin") // relative: from where the script starts
            .output()
            .unwrap();
        (o, std::fs::read_to_string(dir.join("log")).unwrap_or_default())
    };
    let gate = |args: &[&str]| gate_rc(args, "");
    // Compare flags without OUTDIR: the default folder, and the flags go to compare.
    let (o, log) = gate(&["base.json", "--threshold", "5%"]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let d = dir.display();
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines[0], format!("ginbench compare {d}/base.json {d}/base.json --threshold 5%"), "{log}");
    assert!(
        lines[1].starts_with("alltoall_perf ") && lines[1].ends_with(&format!("-J {d}/gate-results/candidate.json"))
    );
    assert!(lines[2].ends_with("--threshold 5%"), "{log}");
    assert!(dir.join("gate-results/candidate.json").exists() && !dir.join("--threshold").exists());
    // An OUTDIR, relative to the caller.
    let (o, _) = gate(&["base.json", "out", "--threshold", "5%"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(dir.join("out/compare.txt").exists());
    // A baseline the gate cannot use: exit 2 before the suite runs, nothing written.
    let (o, log) = gate(&["broken.json", "never"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("the baseline or the compare flags are unusable"));
    assert!(!log.contains("alltoall_perf") && !dir.join("never").exists(), "{log}");
    // ... and so do compare flags that compare refuses, the outputs the script names itself, and
    // a baseline the suite would overwrite (whose run would then pass against itself).
    for args in [
        &["base.json", "never", "--threshold", "foo"][..],
        &["base.json", "never", "--json", "mine.json"],
        &["base.json", "never", "--junit=mine.xml"],
    ] {
        let (o, log) = gate(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(!log.contains("alltoall_perf") && !dir.join("never").exists(), "{args:?}: {log}");
        assert!(!dir.join("mine.json").exists() && !dir.join("mine.xml").exists(), "{args:?}");
    }
    for f in ["candidate.json", "suite.txt", "compare.json"] {
        std::fs::copy(dir.join("base.json"), dir.join("out").join(f)).unwrap();
        let (o, log) = gate(&[&format!("out/{f}"), "out"]);
        assert_eq!(o.status.code(), Some(2), "{f}");
        assert!(String::from_utf8_lossy(&o.stderr).contains(&format!("the baseline is OUTDIR/{f}")), "{f}");
        assert!(!log.contains("alltoall_perf") && dir.join("out").join(f).exists(), "{f}: {log}");
    }
    // A failed suite exits with its code; the earlier verdict is gone, and the comparison runs
    // (against a candidate that ended in error, or none), so the new one fails.
    std::fs::write(dir.join("out/junit.xml"), "an earlier PASS").unwrap();
    let (o, log) = gate_rc(&["base.json", "out"], "7");
    assert_eq!(o.status.code(), Some(7));
    assert!(String::from_utf8_lossy(&o.stderr).contains("the suite failed (exit 7)"));
    let lines: Vec<&str> = log.lines().collect();
    assert!(lines.len() == 3 && lines[2].starts_with("ginbench compare "), "{log}");
    assert!(!dir.join("out/junit.xml").exists() && !dir.join("out/candidate.json").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn alltoall_node_stops_on_a_node_without_gpus_before_it_builds() {
    let (dir, path) = no_gpu_path("node");
    let o = script("alltoall-node", &["-J", "node.json"], &path);
    assert_eq!(o.status.code(), Some(8));
    assert_eq!(
        String::from_utf8_lossy(&o.stderr).trim_end(),
        "ci/alltoall-node: no GPU found (nvidia-smi -L lists none)"
    );
    assert!(o.stdout.is_empty(), "it built: {}", String::from_utf8_lossy(&o.stdout));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `ci/gpu-fuzz` on a fake one-GPU node whose benchmarks see no GPU: each run it generates either
/// passes the command line's checks (and stops at exit 8, no GPU: a finding, as any unexpected exit
/// is) or is refused as bad input on one line (exit 6: fine). Most must pass them, or the generator
/// has fallen behind the flags and tests little.
#[test]
fn gpu_fuzz_generates_mostly_valid_runs_and_reports_findings() {
    let (dir, path) = fake_gpu_node("fuzz");
    let bin = Path::new(env!("CARGO_BIN_EXE_alltoall_perf")).parent().unwrap();
    let out = dir.join("out");
    let o = Command::new(Path::new(ROOT).join("ci/gpu-fuzz"))
        .args([out.to_str().unwrap(), "3", "7"])
        .env("PATH", &path)
        .env("GINBENCH_BIN", bin)
        .env("CUDA_VISIBLE_DEVICES", "")
        .output()
        .unwrap();
    let runs = std::fs::read_to_string(out.join("runs.txt")).unwrap();
    let lines: Vec<&str> = runs.lines().skip(1).collect();
    assert_eq!(o.status.code(), Some(1), "{runs}");
    assert!(lines.len() >= 10, "{runs}");
    let refused = lines.iter().filter(|l| l.starts_with("ok; exit 6;")).count();
    let no_gpu = lines.iter().filter(|l| l.starts_with("FINDING: exit 8; exit 8;")).count();
    assert_eq!(refused + no_gpu, lines.len(), "{runs}");
    assert!(no_gpu * 2 > lines.len(), "{refused} of {} runs refused as bad input:\n{runs}", lines.len());
    let findings = std::fs::read_to_string(out.join("findings.txt")).unwrap();
    assert_eq!(findings.lines().filter(|l| l.starts_with("FINDING")).count(), no_gpu);
    // Each with its output: here the benchmark's one line saying why it stopped.
    assert_eq!(findings.matches("\n  stderr: ").count(), no_gpu, "{findings}");
    assert_eq!(findings.matches(": error: ").count(), no_gpu, "{findings}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `ci/slurm/{efa,ib}.sbatch` under a fake `srun` (drops its own options, answers `mpi-check`,
/// runs the rest as rank 0 of 16 on 2 nodes of 8, with no GPU visible) and a fake `nsys` (logs its
/// options, runs the program): every binary must take its flags (a refused flag is exit 6; with
/// them taken it stops at exit 8, no GPU), every step must run and be named as failed, and
/// efa's capture must sample the NIC counters.
#[test]
fn slurm_scripts_hand_the_binaries_flags_they_take() {
    let dir = std::env::temp_dir().join(format!("ginbench-slurm-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    write_exe(
        &dir.join("srun"),
        "#!/bin/bash\nwhile [ $# -gt 0 ]; do case $1 in -N|-n) shift 2 ;; -*) shift ;; *) break ;; esac; done\n\
         [ \"$2\" = mpi-check ] && exit 0\n\
         SLURM_PROCID=0 SLURM_LOCALID=0 CUDA_VISIBLE_DEVICES= \"$@\"\n",
    );
    write_exe(
        &dir.join("nsys"),
        "#!/bin/bash\necho \"nsys $*\" >> \"$NSYS_LOG\"\nshift\n\
         while [ $# -gt 0 ]; do case $1 in -t|-o|--force-overwrite|--enable) shift 2 ;; -*) shift ;; *) break ;; esac; done\n\
         exec \"$@\"\n",
    );
    let bin = Path::new(env!("CARGO_BIN_EXE_alltoall_perf")).parent().unwrap();
    let path = path_with(&dir);
    let steps = ["alltoall", "ep", "ep-node", "interference-shared", "interference-socket", "interference-node"];
    for (script, ib_sl, tc) in [("efa", None, false), ("ib", None, true), ("ib", Some("3"), false)] {
        let out = dir.join(format!("out-{script}-{tc}"));
        let nsys_log = dir.join(format!("nsys-{script}-{tc}.log"));
        let mut cmd = Command::new("bash");
        cmd.arg(Path::new(ROOT).join(format!("ci/slurm/{script}.sbatch")))
            .current_dir(ROOT)
            .env("PATH", &path)
            .env("SLURM_SUBMIT_DIR", ROOT)
            .env("SLURM_JOB_ID", "7")
            .env("SLURM_NTASKS", "16")
            .env("SLURM_NTASKS_PER_NODE", "8(x2)")
            .env("SLURM_JOB_NUM_NODES", "2")
            .env("GINBENCH_BIN", bin)
            .env("GB_OUT", &out)
            .env("GB_PROFILE_SIZE", "64M")
            .env("NSYS_LOG", &nsys_log)
            .env_remove("NCCL_IB_TC");
        match ib_sl {
            Some(sl) => cmd.env("NCCL_IB_SL", sl),
            None => cmd.env_remove("NCCL_IB_SL"),
        };
        let o = cmd.output().unwrap();
        let (stdout, stderr) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
        assert_eq!(o.status.code(), Some(1), "{script}: {stdout}\n{stderr}");
        let mut want: Vec<&str> = steps.to_vec();
        if tc {
            want.push("interference-tc");
        }
        want.push("profile");
        for step in &want {
            assert!(stdout.contains(&format!("== {step}: exit 8\n")), "{script}: step {step}: {stdout}\n{stderr}");
        }
        assert_eq!(stdout.matches(": exit ").count(), want.len(), "{script}: {stdout}");
        assert_eq!(stderr.matches("no CUDA driver").count(), want.len() + 1, "{script} (env included): {stderr}");
        let failed = stderr.lines().find(|l| l.starts_with("ci/slurm: failed steps: env ")).unwrap_or_default();
        assert!(failed.contains("profile"), "{script}: {stderr}");
        // A failed `ginbench env` leaves no file, whole or partial.
        assert!(!out.join("env.json").exists() && !out.join("env.json.tmp").exists(), "{script}");
        let nsys = std::fs::read_to_string(&nsys_log).unwrap();
        assert_eq!(nsys.contains("--enable efa_metrics"), script == "efa", "{nsys}");
        assert!(nsys.contains("--capture-range=cudaProfilerApi --capture-range-end=repeat"), "{nsys}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
