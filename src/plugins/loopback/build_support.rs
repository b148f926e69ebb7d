//! Build support for the loopback GIN plugin (src/plugins/loopback), included by build.rs.
//!
//! The plugin is C++17 built with the system C++ compiler (`$CXX`, else `c++`, else `g++`): it is
//! loaded by NCCL with dlopen, not linked into the Rust binaries, and needs neither CUDA nor NCCL
//! at build time (it declares the ABI it implements and loads the CUDA driver at run time).
//! [`build`] makes `OUT_DIR/libnccl-net-ginbench.so`; [`build_contract_test`] links the same
//! objects with the CPU contract tests. Both export their paths to the crate as
//! `GINBENCH_LOOPBACK_PLUGIN` / `GINBENCH_LOOPBACK_CONTRACT_TEST` (tests/gin_plugin.rs runs them),
//! and `GINBENCH_LOOPBACK_GPU_SMOKE` for the GPU smoke test where cuda.h is available.
use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

const SRC_DIR: &str = "src/plugins/loopback";
const LIBRARY: &str = "libnccl-net-ginbench.so";
const CONTRACT_TEST: &str = "ginbench-loopback-contract-test";
pub const GPU_SMOKE: &str = "ginbench-loopback-gpu-smoke";

fn fail(msg: &str) -> ! {
    eprintln!("\nginbench build: loopback GIN plugin: {msg}\n");
    std::process::exit(1);
}

fn compiler() -> String {
    if let Ok(cxx) = env::var("CXX") {
        if !cxx.trim().is_empty() {
            return cxx;
        }
    }
    for candidate in ["c++", "g++"] {
        let found = Command::new(candidate)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if found {
            return candidate.to_string();
        }
    }
    fail("no C++ compiler (set CXX, or install g++)")
}

const CXXFLAGS: &[&str] =
    &["-std=c++17", "-O2", "-g", "-fPIC", "-fvisibility=hidden", "-fno-strict-aliasing", "-Wall", "-Wextra"];

/// The plugin's sources: every `*.cc` of the plugin folder (not its tests).
fn plugin_sources() -> Vec<PathBuf> {
    let dir = Path::new(SRC_DIR);
    let mut sources: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap_or_else(|e| fail(&format!("{}: {e}", dir.display())))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "cc"))
        .collect();
    sources.sort();
    sources
}

/// Compiles `sources` into `obj_dir`, one compiler process per file, in parallel.
fn compile_all(cxx: &str, sources: Vec<PathBuf>, obj_dir: &Path) -> Vec<PathBuf> {
    fs::create_dir_all(obj_dir).unwrap_or_else(|e| fail(&format!("{}: {e}", obj_dir.display())));
    let jobs: Vec<(PathBuf, PathBuf, std::process::Child)> = sources
        .into_iter()
        .map(|src| {
            let obj = obj_dir.join(format!("{}.o", src.file_stem().unwrap().to_string_lossy()));
            let child = Command::new(cxx)
                .args(CXXFLAGS)
                .arg("-c")
                .arg(&src)
                .arg("-o")
                .arg(&obj)
                .spawn()
                .unwrap_or_else(|e| fail(&format!("cannot run {cxx}: {e}")));
            (src, obj, child)
        })
        .collect();
    let mut objects = Vec::new();
    let mut failed = Vec::new();
    for (src, obj, mut child) in jobs {
        match child.wait() {
            Ok(s) if s.success() => objects.push(obj),
            _ => failed.push(src.display().to_string()),
        }
    }
    if !failed.is_empty() {
        fail(&format!("{cxx} failed on {} (see the compiler output above)", failed.join(", ")));
    }
    objects
}

fn link(cxx: &str, args: &[String], objects: &[PathBuf], output: &Path) {
    let run = |static_runtime: bool| {
        let mut c = Command::new(cxx);
        c.args(args).args(objects).arg("-o").arg(output);
        if static_runtime {
            // The plugin lives inside NCCL's process: keep its C++ runtime private to it.
            c.args(["-static-libstdc++", "-static-libgcc", "-Wl,--exclude-libs,ALL"]);
        }
        c.args(["-ldl", "-lpthread"]).status().is_ok_and(|s| s.success())
    };
    // A toolchain without a static libstdc++ still gets a working (dynamically linked) plugin.
    if !run(true) && !run(false) {
        fail(&format!("linking {} failed (see the linker output above)", output.display()));
    }
}

/// The compiler and the plugin's objects, compiled once per build-script run.
fn objects(out_dir: &Path) -> &'static (String, Vec<PathBuf>) {
    static OBJECTS: OnceLock<(String, Vec<PathBuf>)> = OnceLock::new();
    OBJECTS.get_or_init(|| {
        println!("cargo:rerun-if-changed={SRC_DIR}");
        println!("cargo:rerun-if-env-changed=CXX");
        let cxx = compiler();
        let objs = compile_all(&cxx, plugin_sources(), &out_dir.join("loopback-obj"));
        (cxx, objs)
    })
}

/// Checks the CUDA driver declarations of cuda_api.h against the toolkit's cuda.h, where there is
/// one (the plugin itself never includes cuda.h).
fn check_cuda_abi(cxx: &str, cuda_home: &Path) {
    let inc = cuda_home.join("include");
    if !inc.join("cuda.h").exists() {
        println!(
            "cargo:warning=no cuda.h under {}: the plugin's CUDA declarations are not cross-checked",
            inc.display()
        );
        return;
    }
    let ok = Command::new(cxx)
        .args(["-std=c++17", "-fsyntax-only"])
        .arg(format!("-I{}", inc.display()))
        .arg(Path::new(SRC_DIR).join("tests/cuda_abi_check.cc"))
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        fail("the CUDA driver declarations in cuda_api.h disagree with cuda.h (see above)");
    }
}

/// The GPU smoke test (tests/gpu_smoke.cc: the device path under a kernel that holds every SM),
/// built where cuda.h is; it loads the driver at run time, so it links no CUDA library either.
fn build_gpu_smoke(cxx: &str, cuda_home: &Path, out_dir: &Path) {
    let inc = cuda_home.join("include");
    if !inc.join("cuda.h").exists() {
        return;
    }
    let exe = out_dir.join(GPU_SMOKE);
    let ok = Command::new(cxx)
        .args(CXXFLAGS)
        .arg(format!("-I{}", inc.display()))
        .arg(Path::new(SRC_DIR).join("tests/gpu_smoke.cc"))
        .arg("-o")
        .arg(&exe)
        .args(["-ldl", "-lpthread"])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        fail("compiling tests/gpu_smoke.cc failed (see above)");
    }
    println!("cargo:rustc-env=GINBENCH_LOOPBACK_GPU_SMOKE={}", exe.display());
}

/// Builds `out_dir/libnccl-net-ginbench.so` and returns its path (and, where cuda.h is, the GPU
/// smoke test beside it).
pub fn build(cuda_home: &Path, out_dir: &Path) -> PathBuf {
    let (cxx, objs) = objects(out_dir);
    check_cuda_abi(cxx, cuda_home);
    build_gpu_smoke(cxx, cuda_home, out_dir);
    let lib = out_dir.join(LIBRARY);
    let args: Vec<String> =
        ["-shared", "-Wl,--no-undefined", "-Wl,-soname,libnccl-net-ginbench.so"].map(String::from).to_vec();
    link(cxx, &args, objs, &lib);
    println!("cargo:rustc-env=GINBENCH_LOOPBACK_PLUGIN={}", lib.display());
    lib
}

/// Builds the CPU contract-test executable (the plugin's objects + tests/contract_test.cc and
/// tests/multiprocess.cc) and
/// returns its path.
pub fn build_contract_test(out_dir: &Path) -> PathBuf {
    let (cxx, plugin) = objects(out_dir);
    let mut objs = plugin.clone();
    let tests = ["tests/contract_test.cc", "tests/multiprocess.cc"].map(|t| Path::new(SRC_DIR).join(t)).to_vec();
    objs.extend(compile_all(cxx, tests, &out_dir.join("loopback-test-obj")));
    let exe = out_dir.join(CONTRACT_TEST);
    link(cxx, &[], &objs, &exe);
    println!("cargo:rustc-env=GINBENCH_LOOPBACK_CONTRACT_TEST={}", exe.display());
    exe
}
