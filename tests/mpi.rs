//! The MPI bootstrap with two real processes (no GPU needed): `mpirun -np 2 ginbench mpi-check`.
use std::process::Command;

#[test]
fn two_process_mpi_bootstrap() {
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
    let mut cmd = Command::new(&mpirun);
    if String::from_utf8_lossy(&version.stdout).contains("Open MPI") {
        cmd.args(["--allow-run-as-root", "--oversubscribe"]);
    }
    let out = cmd.args(["-np", "2", env!("CARGO_BIN_EXE_ginbench"), "mpi-check"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}\n{}", String::from_utf8_lossy(&out.stderr));
    for r in 0..2 {
        assert!(text.contains(&format!("rank {r} of 2")), "{text}");
    }
    assert_eq!(text.matches("allgather, broadcast, reduce ok").count(), 2, "{text}");
}
