//! The MPI bootstrap with real processes (no GPU needed): `mpirun -np 2 ginbench mpi-check`, and -np 1.
use std::process::Command;

#[test]
fn mpi_bootstrap_with_two_processes_and_one() {
    let mpirun = std::env::var("MPICC")
        .ok()
        .and_then(|c| std::path::Path::new(&c).parent().map(|d| d.join("mpirun")))
        .filter(|p| p.exists())
        .unwrap_or_else(|| "mpirun".into());
    let version = Command::new(&mpirun).arg("--version").output();
    let Ok(version) = version else {
        assert!(std::env::var_os("GINBENCH_REQUIRE_MPI").is_none(), "mpirun not found but GINBENCH_REQUIRE_MPI is set");
        return;
    };
    let open_mpi = String::from_utf8_lossy(&version.stdout).contains("Open MPI");
    let host = ginbench::bootstrap::hostname();
    // One process is a world too (MPI_Init of a single rank).
    for np in [2, 1] {
        let mut cmd = Command::new(&mpirun);
        if open_mpi {
            cmd.args(["--allow-run-as-root", "--oversubscribe"]);
        }
        let out = cmd.args(["-np", &np.to_string(), env!("CARGO_BIN_EXE_ginbench"), "mpi-check"]).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{text}\n{}", String::from_utf8_lossy(&out.stderr));
        for r in 0..np {
            let line = format!("rank {r} of {np} on {host} (local rank {r}): allgather, broadcast, reduce ok");
            assert!(text.contains(&line), "{line}\n{text}");
        }
        assert_eq!(text.lines().count(), np, "{text}");
    }
}

/// The README's MPI check as a newcomer types it, from a shell whose PATH has no toolchain in it:
/// `source ci/env` puts mpirun on PATH (and the MPI library folder on LD_LIBRARY_PATH).
#[test]
fn readme_mpi_check_after_source_ci_env() {
    let script = r#"
        source ci/env || exit 97
        command -v mpirun >/dev/null || exit 98
        case ":$LD_LIBRARY_PATH:" in *"$(dirname "$(dirname "$(command -v mpirun)")")"*) ;; *) exit 99 ;; esac
        flags=()
        if mpirun --version 2>/dev/null | grep -q "Open MPI"; then flags=(--allow-run-as-root --oversubscribe); fi
        mpirun "${flags[@]}" -np 2 "$GINBENCH" mpi-check
    "#;
    if std::env::var_os("MPICC").is_none() && std::env::var_os("GINBENCH_REQUIRE_MPI").is_none() {
        // No toolchain set up in this environment: sourcing ci/env would install one.
        return;
    }
    let mut cmd = Command::new("bash");
    cmd.current_dir(env!("CARGO_MANIFEST_DIR")).args(["-c", script]).env_clear();
    cmd.env("PATH", "/usr/bin:/bin").env("GINBENCH", env!("CARGO_BIN_EXE_ginbench"));
    // What ci/setup honours, so that it finds the same toolchain (and installs nothing).
    for v in [
        "HOME",
        "XDG_CACHE_HOME",
        "GINBENCH_TOOLCHAIN",
        "PYTHON",
        "CUDA_HOME",
        "NCCL_HOME",
        "MPICC",
        "MPI_HOME",
        "LIBCLANG_PATH",
    ] {
        if let Some(val) = std::env::var_os(v) {
            cmd.env(v, val);
        }
    }
    let out = cmd.output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    match out.status.code() {
        Some(97) => panic!("source ci/env failed: {err}"),
        Some(98) => panic!("no mpirun on PATH after source ci/env: {err}"),
        Some(99) => panic!("the MPI library folder is not on LD_LIBRARY_PATH after source ci/env"),
        _ => {}
    }
    assert!(out.status.success(), "{text}\n{err}");
    assert_eq!(text.matches("allgather, broadcast, reduce ok").count(), 2, "{text}");
}

/// A process the launcher calls rank 1 of 2 that MPI starts as a world of one (an MPI library not
/// the launcher's, srun without PMI) must stop, not run alone on GPU 0 and write the shared -J.
#[test]
fn a_world_that_contradicts_the_launcher_is_refused() {
    if std::env::var_os("MPICC").is_none() && std::env::var_os("GINBENCH_REQUIRE_MPI").is_none() {
        return;
    }
    let out = Command::new(env!("CARGO_BIN_EXE_ginbench"))
        .arg("mpi-check")
        .env("OMPI_COMM_WORLD_SIZE", "2")
        .env("OMPI_COMM_WORLD_RANK", "1")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(8), "{err}\n{}", String::from_utf8_lossy(&out.stdout));
    assert!(err.contains("MPI says rank 0 of 1, the launcher rank 1 of 2"), "{err}");
}
