//! The binaries on a machine without GPUs: bad input gets one line and its exit code, never a
//! panic; `--help` documents the flags; no GPU / no NCCL is exit 8.
use std::process::{Command, Output};

fn run(bin: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(bin);
    c.args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("binary runs")
}

const A2A: &str = env!("CARGO_BIN_EXE_alltoall_perf");
const GB: &str = env!("CARGO_BIN_EXE_ginbench");

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn bad_input_is_one_line_and_exit_6() {
    for (args, needle) in [
        (vec!["-b", "2G", "-e", "1G"], "is larger than -e 1073741824"),
        (vec!["-f", "0"], "step factor -f is 0"),
        (vec!["-e", "4Q"], "unknown size suffix 'Q'"),
        (vec!["-D", "teleport"], "unknown implementation 'teleport'"),
        (vec!["-D", "nvl"], "add -R 2"),
        (vec!["-D", "2", "-R", "1"], "add -R 2"),
        (vec!["--bogus"], "--bogus"),
        (vec!["-V", "5000"], "5000 is not in 0..=1024"),
        // A size typo is bounded before anything is allocated (it used to grow without bound).
        (vec!["-e", "99999T"], "(1 TiB) per rank"),
        (vec!["-b", "1", "-e", "1G", "-i", "1"], "points (at most 10000)"),
        // Negative numbers name their flag.
        (vec!["-n", "-1"], "--iters"),
        // What the command line alone decides is checked before any GPU is opened.
        (vec!["-D", "gin-emu", "-R", "2", "--emulate-nodes", "3", "-g", "4"], "--emulate-nodes 3 does not divide 4"),
        (vec!["-J", "/nonexistent/dir/x.json"], "does not exist"),
        (vec!["--csv", "/nonexistent/dir/x.csv"], "does not exist"),
        // GIN knobs with no impl on NCCL's GIN, or out of range.
        (vec!["--gin-contexts", "2"], "--gin-contexts applies to the impls on NCCL's GIN"),
        (vec!["-D", "gin", "-R", "2", "--gin-contexts", "0"], "'--gin-contexts <N>': 0 is not in 1..=1024"),
        // A timeout that would overflow the watchdog's milliseconds.
        (vec!["-T", "18446744073709552"], "--timeout"),
        // An empty -D item; results files that would overwrite each other or a device.
        (vec!["-D", "host,"], "empty item in the implementation list"),
        (vec!["-J", "x.json", "--csv", "x.json"], "-J and --csv both name x.json"),
        (vec!["-J", "/dev/null"], "not a regular file"),
        (vec!["--csv", "-"], "CSV is written to a file"),
        // A sweep whose point count overflowed: a panic in debug builds, unbounded in release.
        (vec!["-b", "0", "-e", "1T", "-f", "1", "-i", "1"], "points (at most 10000)"),
        (vec!["-b", "16T", "-e", "16T"], "is above 1099511627776 bytes (1 TiB) per rank"),
        (vec!["-b", "18446744073709551615", "-e", "18446744073709551615"], "(1 TiB)"),
        // Ranges named as the flag's, not u32's.
        (vec!["-a", "-1"], "-1 is not in 0..=3"),
        (vec!["-D", "gin", "-R", "2", "--gin-contexts", "-1"], "-1 is not in 1..=1024"),
        (vec!["-m", "1000001"], "--agg_iters"),
        // Flags nothing in the run would use.
        (vec!["--require-gin", "-D", "host"], "--require-gin applies to the impls on NCCL's GIN"),
        (vec!["-g", "2", "--emulate-nodes", "2", "-D", "host"], "this run has neither"),
        (vec!["--gin-backend", "loopback"], "--gin-backend loopback carries GIN for gin / hybrid"),
        // Threads of one process are one node to NCCL: only processes (mpirun) split it.
        (
            vec!["-g", "2", "--emulate-nodes", "2", "--gin-backend", "loopback", "-D", "gin"],
            "loopback under mpirun / srun, one process per rank",
        ),
        (vec!["-g", "2", "--emulate-nodes", "2", "--gin-backend", "loopback", "-D", "host"], "this run has neither"),
        // A path ending in /. names a folder though it reads as x.json.
        (vec!["-J", "x.json/."], "names a folder"),
        // A file name the results could never be written under, found before the run.
        (vec!["-J", &"x".repeat(300)], "the file name is over the 255 bytes"),
    ] {
        let o = run(A2A, &args, &[]);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(6), "{args:?}: {e}");
        assert!(e.contains(needle), "{args:?}: {e}");
        assert!(e.starts_with("alltoall_perf: error: "), "{args:?}: {e}");
        assert_eq!(e.trim_end().lines().count(), 1, "{args:?}: {e}");
        assert!(!e.contains("panicked"), "{args:?}: {e}");
        // clap's message only: its usage block and "For more information" stay out of the line.
        assert!(!e.contains("Usage:") && !e.contains("For more information"), "{args:?}: {e}");
    }
}

#[test]
fn under_an_mpi_launcher_its_world_is_checked_before_any_gpu() {
    // As mpirun describes a 4-rank job to its processes: each process is one rank, and the
    // launcher's world size (not -t × -g) is what --emulate-nodes must divide.
    let launcher = [("OMPI_COMM_WORLD_SIZE", "4"), ("OMPI_COMM_WORLD_RANK", "0")];
    for (args, needle) in [
        (vec!["-g", "2"], "under mpirun / srun each process is one rank"),
        (vec!["-D", "gin-emu", "-R", "2", "--emulate-nodes", "3"], "--emulate-nodes 3 does not divide 4"),
    ] {
        let o = run(A2A, &args, &launcher);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(6), "{args:?}: {e}");
        assert!(e.contains(needle) && e.starts_with("alltoall_perf: error: "), "{args:?}: {e}");
        assert_eq!(e.trim_end().lines().count(), 1, "{args:?}: {e}");
    }
}

#[test]
fn every_mpi_launcher_is_recognised_and_a_one_task_slurm_step_is_not() {
    const LAUNCHER_VARS: [&str; 9] = [
        "OMPI_COMM_WORLD_SIZE",
        "OMPI_COMM_WORLD_RANK",
        "PMIX_RANK",
        "PMIX_SIZE",
        "PMI_RANK",
        "PMI_SIZE",
        "MPI_LOCALNRANKS",
        "SLURM_NTASKS",
        "SLURM_PROCID",
    ];
    // Both answers come before any GPU: under a launcher `-g 2` is refused; as one process the
    // two thread-ranks are what --emulate-nodes 3 fails to divide.
    let args = ["-g", "2", "-D", "gin-emu", "-R", "2", "--emulate-nodes", "3"];
    let error_under = |env: &[(&str, &str)]| {
        let mut c = Command::new(A2A);
        c.args(args);
        for v in LAUNCHER_VARS {
            c.env_remove(v);
        }
        c.envs(env.iter().copied());
        let o = c.output().expect("binary runs");
        assert_eq!(o.status.code(), Some(6), "{env:?}: {}", stderr(&o));
        stderr(&o)
    };
    const LAUNCHED: &str = "under mpirun / srun each process is one rank";
    const ONE_PROCESS: &str = "--emulate-nodes 3 does not divide 2";
    // PMIx (Open MPI 5, srun --mpi=pmix), PMI-1/2 (MPICH, Intel MPI, srun --mpi=pmi2), MVAPICH,
    // and a Slurm step of several tasks.
    for env in [
        &[("PMIX_RANK", "0")][..],
        &[("PMI_RANK", "0")],
        &[("PMI_SIZE", "2")],
        &[("MPI_LOCALNRANKS", "2")],
        &[("SLURM_NTASKS", "2"), ("SLURM_PROCID", "0")],
    ] {
        let e = error_under(env);
        assert!(e.contains(LAUNCHED), "{env:?}: {e}");
    }
    // A batch script's own shell, or a one-task step, is one process that runs its ranks as threads.
    for env in [
        &[][..],
        &[("SLURM_NTASKS", "1"), ("SLURM_PROCID", "0")],
        &[("SLURM_NTASKS", "2")],
        &[("SLURM_PROCID", "0")],
        &[("SLURM_NTASKS", "many"), ("SLURM_PROCID", "0")],
    ] {
        let e = error_under(env);
        assert!(e.contains(ONE_PROCESS), "{env:?}: {e}");
    }
}

#[test]
fn arguments_that_are_not_utf8_are_refused_not_a_panic() {
    use std::os::unix::ffi::OsStrExt;
    let bad = std::ffi::OsStr::from_bytes(b"x\xff.json");
    let interference = env!("CARGO_BIN_EXE_interference_perf");
    for (bin, prog) in [(A2A, "alltoall_perf"), (EP, "ep_perf"), (interference, "interference_perf"), (GB, "ginbench")]
    {
        let args = if bin == GB { vec![bad] } else { vec![std::ffi::OsStr::new("-J"), bad] };
        let o = Command::new(bin).args(&args).output().expect("binary runs");
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(6), "{bin}: {e}");
        assert!(e.starts_with(&format!("{prog}: error: ")) && !e.contains("panicked"), "{bin}: {e}");
        assert_eq!(e.trim_end().lines().count(), 1, "{bin}: {e}");
        if bin != GB {
            assert!(e.contains("is not valid UTF-8"), "{bin}: {e}");
        }
    }
}

#[test]
fn help_lists_every_flag_and_exit_codes() {
    let o = run(A2A, &["--help"], &[]);
    assert_eq!(o.status.code(), Some(0));
    let h = String::from_utf8_lossy(&o.stdout);
    for f in [
        "-b", "-e", "-i", "-f", "-n", "-w", "-c", "-d", "-z", "-G", "-a", "-T", "-R", "-D", "-V", "-t", "-g", "-J",
        "-m", "-N", "-C", "-I", "--csv",
    ] {
        assert!(h.contains(&format!("{f} ")) || h.contains(&format!("{f},")), "--help lacks {f}");
    }
    assert!(h.contains("Exit codes"));
    let o = run(A2A, &["--list-impls"], &[]);
    let l = String::from_utf8_lossy(&o.stdout);
    for i in ["host", "nvl-simple", "nvl", "nvl-ll", "nvl-pull", "nvl-ll128", "auto"] {
        assert!(l.contains(i), "{l}");
    }
}

fn no_gpu() -> bool {
    !std::path::Path::new("/dev/nvidia0").exists()
}

#[test]
fn no_gpu_is_exit_8_with_a_reason() {
    if !no_gpu() {
        return; // this test is about machines without GPUs
    }
    let o = run(A2A, &["-b", "8", "-e", "1M"], &[]);
    assert_eq!(o.status.code(), Some(8), "{}", stderr(&o));
    assert!(stderr(&o).contains("no CUDA driver"), "{}", stderr(&o));
    let o = run(GB, &["env", "--json"], &[]);
    assert_eq!(o.status.code(), Some(8));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("env --json prints JSON");
    assert!(v["network"]["kind"].is_string());
    assert!(v["gin"]["reason"].is_string());
    // Why the exit is 8 is on stderr, one line, with the JSON as with the text.
    for args in [&["env", "--json"][..], &["env"][..]] {
        let e = stderr(&run(GB, args, &[]));
        assert!(e.starts_with("ginbench: error: ") && e.contains("no CUDA driver"), "{args:?}: {e}");
        assert_eq!(e.trim_end().lines().count(), 1, "{args:?}: {e}");
    }
}

#[test]
fn nccl_library_is_chosen_deliberately() {
    // An explicit library that cannot be loaded: exit 8 naming it.
    let o = run(A2A, &["-b", "8"], &[("GINBENCH_NCCL_LIB", "/nonexistent/libnccl.so.2")]);
    assert_eq!(o.status.code(), Some(8), "{}", stderr(&o));
    assert!(stderr(&o).contains("GINBENCH_NCCL_LIB=/nonexistent/libnccl.so.2"), "{}", stderr(&o));
    // A library of another version than the headers: refused, naming both versions.
    let Ok(other) = std::env::var("GINBENCH_TEST_OTHER_NCCL") else { return };
    let o = run(A2A, &["-b", "8"], &[("GINBENCH_NCCL_LIB", other.as_str())]);
    assert_eq!(o.status.code(), Some(8), "{}", stderr(&o));
    assert!(stderr(&o).contains("NCCL version mismatch"), "{}", stderr(&o));
}

#[test]
fn nccl_found_and_matching_when_the_toolchain_has_one() {
    // ci/setup keeps the library of the pinned NCCL beside its headers; the loader must find it
    // and report the same version as the headers (ncclGetVersion needs no GPU).
    if std::env::var_os("NCCL_HOME").is_none() {
        return;
    }
    let o = run(GB, &["env", "--json"], &[]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("env --json prints JSON");
    assert_eq!(v["nccl"]["library"], v["nccl"]["header"], "{}", String::from_utf8_lossy(&o.stdout));
    assert!(v["nccl"]["path"].as_str().unwrap().ends_with("libnccl.so.2"));
}

#[test]
fn nccl_library_reported_is_the_file_loaded() {
    // As the test above: ncclGetVersion needs no GPU, only the toolchain's library.
    let built = env!("GINBENCH_NCCL_BUILD_LIB");
    if built.is_empty() {
        return;
    }
    let lib_dir = built.strip_suffix("/libnccl.so.2").expect("the build-time library is a libnccl.so.2");
    for (set, unset) in [
        // Named explicitly, with the version of the headers: taken.
        (vec![("GINBENCH_NCCL_LIB", built)], vec![]),
        // Named by soname: the report names the file the dynamic loader found.
        (vec![("GINBENCH_NCCL_LIB", "libnccl.so.2"), ("LD_LIBRARY_PATH", lib_dir)], vec![]),
        // No NCCL_HOME and nothing on the loader's path: the library beside the build's headers.
        (vec![], vec!["NCCL_HOME", "LD_LIBRARY_PATH", "GINBENCH_NCCL_LIB"]),
    ] {
        let mut c = Command::new(GB);
        c.args(["env", "--json"]).envs(set.iter().copied());
        for k in &unset {
            c.env_remove(k);
        }
        let o = c.output().expect("binary runs");
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("env --json prints JSON");
        assert_eq!(v["nccl"]["library"], v["nccl"]["header"], "{set:?} {unset:?}: {}", stderr(&o));
        assert_eq!(v["nccl"]["path"], built, "{set:?} {unset:?}: {}", stderr(&o));
    }
}

const EP: &str = env!("CARGO_BIN_EXE_ep_perf");

#[test]
fn ep_perf_bad_input_is_one_line_and_exit_6() {
    for (args, needle) in [
        (vec!["--mode", "turbo"], "unknown mode 'turbo'"),
        (vec!["--preset", "gpt-5"], "unknown preset 'gpt-5'"),
        (vec!["--hidden", "1000"], "multiple of 128"),
        (vec!["-b", "0"], "tokens per rank"),
        // Token counts speak of tokens, not bytes.
        (vec!["-b", "-1"], "invalid token count '-1' (fix: give a whole number of tokens per rank"),
        (vec!["-i", "99999999999999G"], "token count '99999999999999G' is too large"),
        (vec!["-d", "int4"], "unknown dispatch dtype"),
        (vec!["--routing", "zipf:-1"], "bad routing"),
        (vec!["-D", "deepep"], "unknown implementation 'deepep'"),
        (vec!["--bogus"], "--bogus"),
        (vec!["--experts", "7", "--topk", "2", "-g", "4"], "--experts 7 does not divide over 4 ranks"),
        (vec!["-f", "0"], "step factor -f is 0"),
        (vec!["-J", "/nonexistent/dir/x.json"], "does not exist"),
        (vec!["-D", "nvl", "--gin-type", "proxy"], "--gin-type"),
    ] {
        let o = run(EP, &args, &[]);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(6), "{args:?}: {e}");
        assert!(e.contains(needle), "{args:?}: {e}");
        assert!(e.starts_with("ep_perf: error: "), "{args:?}: {e}");
        assert_eq!(e.trim_end().lines().count(), 1, "{args:?}: {e}");
    }
}

#[test]
fn ep_perf_help_and_lists() {
    let o = run(EP, &["--help"], &[]);
    assert_eq!(o.status.code(), Some(0));
    let h = String::from_utf8_lossy(&o.stdout);
    for f in
        ["--mode", "--preset", "--hidden", "--topk", "--experts", "--routing", "--masked", "--seed", "-b", "-e", "-d"]
    {
        assert!(h.contains(f), "--help lacks {f}");
    }
    assert!(h.contains("Exit codes"));
    let o = run(EP, &["--list-impls"], &[]);
    let l = String::from_utf8_lossy(&o.stdout);
    for i in ["host", "nvl", "gin", "hybrid", "gin-emu", "hybrid-emu", "deepseek-v3", "qwen3-30b-a3b", "mixtral"] {
        assert!(l.contains(i), "{l}");
    }
    if no_gpu() {
        let o = run(EP, &[], &[]);
        assert_eq!(o.status.code(), Some(8), "{}", stderr(&o));
    }
}

#[test]
fn version_is_long_only_and_names_the_commit() {
    // `-V` is the CTA count (nccl-tests' -V); a debug build used to panic on the clash with
    // clap's `-V` for version.
    for bin in [A2A, EP, GB] {
        let o = run(bin, &["--version"], &[]);
        assert_eq!(o.status.code(), Some(0), "{bin}: {}", stderr(&o));
        let v = String::from_utf8_lossy(&o.stdout);
        assert!(v.contains(env!("CARGO_PKG_VERSION")) && v.contains('('), "{bin}: {v}");
        if bin == GB {
            continue;
        }
        let o = run(bin, &["-V", "8", "--list-impls"], &[]);
        assert_eq!(o.status.code(), Some(0), "{bin}: {}", stderr(&o));
    }
}

#[test]
fn the_benchmarks_share_the_driver_flags() {
    // -N, -I, --require-gin and --profile-size used to exist in alltoall_perf only.
    for bin in [A2A, EP] {
        let h = String::from_utf8_lossy(&run(bin, &["--help"], &[]).stdout).into_owned();
        for f in [
            "-N, --run_cycles",
            "-I, --per_iter_timing",
            "--require-gin",
            "--profile-size",
            "--emulate-nodes",
            "--gin-contexts <N>",
            "--gin-type <TYPE>",
        ] {
            assert!(h.contains(f), "{bin} --help lacks {f}");
        }
    }
}

#[test]
fn ceiling_checks_its_command_line_before_any_gpu() {
    for (args, needle) in [
        (vec!["ceiling", "-b", "0"], "a copy must be 1 B to 64 GiB"),
        // A subcommand's flags are in its own help.
        (vec!["ceiling", "--bogus"], "(fix: see ginbench ceiling --help)"),
        (vec!["ceiling", "-b", "3Q"], "unknown size suffix 'Q'"),
        (vec!["ceiling", "-g", "1"], "--ngpus"),
        (vec!["ceiling", "-n", "0"], "--iters"),
        (vec!["ceiling", "-J", "/nonexistent/dir/c.json"], "does not exist"),
        (vec!["ceiling", "-g", "9"], "--ngpus"),
        (vec!["ceiling", "-g", "-1"], "--ngpus"),
        (vec!["ceiling", "-V", "0"], "--ctas"),
        (vec!["ceiling", "-J", "c.json/"], "names a folder"),
        // The size bound: 64 GiB is allowed (the error is then the -J path's), a byte more is not.
        (vec!["ceiling", "-b", "64G", "-J", "/nonexistent/dir/c.json"], "-J /nonexistent/dir/c.json"),
        (vec!["ceiling", "-b", "68719476737"], "-b 68719476737: a copy must be 1 B to 64 GiB"),
    ] {
        let o = run(GB, &args, &[]);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(6), "{args:?}: {e}");
        assert!(e.contains(needle) && e.starts_with("ginbench: error: "), "{args:?}: {e}");
        assert_eq!(e.trim_end().lines().count(), 1, "{args:?}: {e}");
    }
    if no_gpu() {
        let o = run(GB, &["ceiling"], &[]);
        assert_eq!(o.status.code(), Some(8), "{}", stderr(&o));
    }
}

#[test]
fn ceiling_needs_two_visible_gpus_and_takes_no_more_than_are_visible() {
    if no_gpu() {
        return; // the GPU count is only read where there is a driver
    }
    // One GPU visible, however many the host has: what the ceiling refuses, and why (exit 8).
    for (args, needle) in [
        (&["ceiling"][..], "the ceiling needs 2 or more GPUs: 1 asked, 1 visible"),
        (&["ceiling", "-g", "2"][..], "the ceiling needs 2 or more GPUs: 2 asked, 1 visible"),
        (&["ceiling", "-g", "8"][..], "the ceiling needs 2 or more GPUs: 8 asked, 1 visible"),
    ] {
        let o = run(GB, args, &[("CUDA_VISIBLE_DEVICES", "0")]);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(8), "{args:?}: {e}");
        assert!(e.starts_with("ginbench: error: ") && e.contains(needle), "{args:?}: {e}");
        assert!(o.stdout.is_empty(), "{args:?}: nothing measured");
    }
}

#[test]
fn env_records_the_variables_that_steer_nccl_and_nothing_else() {
    // No GPU visible whatever the host, so this is quick everywhere (and exit 8).
    let set = [
        ("NCCL_DEBUG", "WARN"),
        ("FI_PROVIDER", "efa"),
        ("GINBENCH_TEST_MARK", "1"),
        ("CUDA_VISIBLE_DEVICES", ""),
        ("OFI_NCCL_PROTOCOL", "RDMA"),
        ("XNCCL_NOT_NCCLS", "1"),
    ];
    let o = run(GB, &["env", "--json"], &set);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("env --json prints JSON");
    let vars = v["vars"].as_object().expect("env.vars is an object");
    for (k, value) in &set[..5] {
        assert_eq!(vars.get(*k).and_then(|x| x.as_str()), Some(*value), "{k}: {vars:?}");
    }
    for k in vars.keys() {
        assert!(
            ["NCCL_", "FI_", "GINBENCH_"].iter().any(|p| k.starts_with(p))
                || ["CUDA_VISIBLE_DEVICES", "OFI_NCCL_PROTOCOL"].contains(&k.as_str()),
            "{k} recorded: {vars:?}"
        );
    }
    // GIN as this process sees it: NCCL's own backend, one node.
    assert_eq!((&v["gin"]["backend"], &v["gin"]["nodes"]), (&"nccl".into(), &1.into()), "{}", v["gin"]);
}

/// Runs `bin args` with its stdout going into a pipe whose reader is already gone.
fn to_closed_pipe(bin: &str, args: &[&str]) -> Output {
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    Command::new(bin).args(args).stdout(writer).output().expect("binary runs")
}

#[test]
fn stdout_closed_early_or_full_is_never_a_panic() {
    let golden = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden/run.json");
    let ep = env!("CARGO_BIN_EXE_ep_perf");
    let ifr = env!("CARGO_BIN_EXE_interference_perf");
    // A reader that has gone (`| head`) wants nothing more: the command ends as it would have.
    for (bin, args) in [
        (A2A, vec!["--list-impls"]),
        (ep, vec!["--list-impls"]),
        (ifr, vec!["--list-impls"]),
        (GB, vec!["compare", golden, golden]),
    ] {
        let o = to_closed_pipe(bin, &args);
        assert_eq!((o.status.code(), stderr(&o)), (Some(0), String::new()), "{bin} {args:?}");
    }
    // Any other failure to write is one line and a nonzero exit (compare's: 2), after the files
    // asked for are written.
    let full = || std::fs::OpenOptions::new().write(true).open("/dev/full").expect("/dev/full");
    let dir = std::env::temp_dir().join(format!("ginbench-stdout-full-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let verdict = dir.join("verdict.json");
    let o = Command::new(GB)
        .args(["compare", golden, golden, "--json", verdict.to_str().unwrap()])
        .stdout(full())
        .output()
        .unwrap();
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(
        e.starts_with("ginbench: error: writing to standard output: No space left") && e.lines().count() == 1,
        "{e}"
    );
    assert!(verdict.exists(), "the verdict file is written first");
    // Help and version text too: a help that was never shown is not a success.
    for (bin, args, exit) in [
        (A2A, vec!["--list-impls"], 8),
        (A2A, vec!["--help"], 8),
        (ifr, vec!["--version"], 8),
        (GB, vec!["--help"], 8),
        (GB, vec!["compare", "--help"], 2),
    ] {
        let o = Command::new(bin).args(&args).stdout(full()).output().unwrap();
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(exit), "{bin} {args:?}: {e}");
        assert!(e.contains(": error: writing to standard output") && e.lines().count() == 1, "{e}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
