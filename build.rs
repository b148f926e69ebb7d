//! Build script: NCCL bindings (bindgen, dynamic loading) and CUDA kernels (nvcc → fatbin).
//!
//! Inputs come from the environment that `ci/setup` writes (CUDA_HOME, NCCL_HOME, MPICC,
//! LIBCLANG_PATH); standard locations are tried when they are unset.
use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "src/plugins/loopback/build_support.rs"]
mod loopback_build;

fn fail(msg: &str) -> ! {
    eprintln!("\nginbench build: {msg}\n  fix: run `ci/setup` and `source \"$(ci/setup)\"` (or set CUDA_HOME / NCCL_HOME), then build again\n");
    std::process::exit(1);
}

fn cuda_home() -> PathBuf {
    if let Some(h) = env::var_os("CUDA_HOME") {
        return PathBuf::from(h);
    }
    let std_path = Path::new("/usr/local/cuda");
    if std_path.join("bin/nvcc").exists() {
        return std_path.to_path_buf();
    }
    if let Ok(out) = Command::new("sh").args(["-c", "command -v nvcc"]).output() {
        let p = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if !p.is_empty() {
            if let Some(root) = Path::new(&p).parent().and_then(Path::parent) {
                return root.to_path_buf();
            }
        }
    }
    fail("no CUDA toolkit found (CUDA_HOME unset, no /usr/local/cuda, no nvcc on PATH)")
}

fn nccl_home() -> PathBuf {
    match env::var_os("NCCL_HOME") {
        Some(h) if Path::new(&h).join("include/nccl.h").exists() => PathBuf::from(h),
        Some(h) => fail(&format!("NCCL_HOME={} has no include/nccl.h", Path::new(&h).display())),
        None => fail("NCCL_HOME is unset (the NCCL headers the kernels are compiled against)"),
    }
}

/// NCCL_VERSION_CODE from nccl.h (e.g. 22809 for 2.28.9).
fn nccl_version_code(nccl_h: &Path) -> u32 {
    let text = fs::read_to_string(nccl_h).unwrap_or_else(|e| fail(&format!("{}: {e}", nccl_h.display())));
    let field = |name: &str| -> u32 {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("#define {name} ")))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| fail(&format!("{} defines no {name}", nccl_h.display())))
    };
    let (major, minor, patch) = (field("NCCL_MAJOR"), field("NCCL_MINOR"), field("NCCL_PATCH"));
    // NCCL_VERSION(X,Y,Z) for 2.9 onwards: X*10000 + Y*100 + Z.
    major * 10000 + minor * 100 + patch
}

fn main() {
    for v in ["CUDA_HOME", "NCCL_HOME", "LIBCLANG_PATH", "GINBENCH_NVCC_GENCODE", "MPICC"] {
        println!("cargo:rerun-if-env-changed={v}");
    }
    println!("cargo:rerun-if-changed=src/kernels");
    println!("cargo:rerun-if-changed=src/nccl/wrapper.h");
    println!("cargo:rerun-if-changed=src/nccl/initializers.cu");
    println!("cargo::rustc-check-cfg=cfg(nccl_versioned_structs)");
    println!("cargo::rustc-check-cfg=cfg(nccl_gin_connection_type)");
    println!("cargo::rustc-check-cfg=cfg(nccl_gin_signal_requirements)");

    let out = PathBuf::from(env::var("OUT_DIR").unwrap());
    let cuda = cuda_home();
    let nccl = nccl_home();
    let nccl_inc = nccl.join("include");
    let code = nccl_version_code(&nccl_inc.join("nccl.h"));
    if code < 22807 {
        fail(&format!("NCCL headers {code} are older than 2.28.7, the first with the device API and GIN"));
    }
    println!("cargo:rustc-env=GINBENCH_NCCL_HEADER_VERSION={code}");
    // 2.29.2 versioned the device-API structs (size/magic/version, *_INITIALIZER macros).
    if code >= 22902 {
        println!("cargo:rustc-cfg=nccl_versioned_structs");
    }
    // 2.29.7 replaced ginForceEnable with ginConnectionType (FULL / RAIL).
    if code >= 22907 {
        println!("cargo:rustc-cfg=nccl_gin_connection_type");
    }
    // 2.30.5 added ginStrongSignalsRequired / ginVaSignalsRequired (default true).
    if code >= 23005 {
        println!("cargo:rustc-cfg=nccl_gin_signal_requirements");
    }
    let lib = nccl.join("lib/libnccl.so.2");
    println!(
        "cargo:rustc-env=GINBENCH_NCCL_BUILD_LIB={}",
        if lib.exists() { lib.display().to_string() } else { String::new() }
    );

    let git = Command::new("git")
        .args(["describe", "--always", "--dirty", "--abbrev=12"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=GINBENCH_GIT={git}");
    println!("cargo:rerun-if-changed=.git/HEAD");
    println!("cargo:rerun-if-changed=.git/index");

    bindings(&cuda, &nccl_inc, &out);
    kernels(&cuda, &nccl_inc, &out);
    initializers(&cuda, &nccl_inc, &out);
    loopback_build::build(&cuda, &out);
    loopback_build::build_contract_test(&out);
    nvtx(&cuda);
    mpi_rpath();
}

fn bindings(cuda: &Path, nccl_inc: &Path, out: &Path) {
    // (A libclang without resource headers gets stddef.h & co through BINDGEN_EXTRA_CLANG_ARGS,
    // which ci/setup exports.)
    let bindings = bindgen::Builder::default()
        .header("src/nccl/wrapper.h")
        .clang_args(["-x", "c++", "-std=c++17"])
        .clang_arg(format!("-I{}", nccl_inc.display()))
        .clang_arg(format!("-I{}", cuda.join("include").display()))
        .clang_arg(format!("-I{}", cuda.join("include/cccl").display()))
        .allowlist_function("ncclCommQueryProperties")
        .allowlist_type("nccl(CommProperties|CommProperties_t|GinType_t|GinConnectionType_t)")
        .allowlist_function("nccl(GetVersion|GetUniqueId|CommInitRank|CommInitRankConfig|CommDestroy|CommFinalize|CommAbort|CommGetAsyncError|GetErrorString|GetLastError|GroupStart|GroupEnd|Send|Recv|AlltoAll|AllReduce|MemAlloc|MemFree|CommRegister|CommDeregister|CommWindowRegister|CommWindowDeregister|DevCommCreate|DevCommDestroy|CommCount|CommUserRank|CommCuDevice|TeamLsa|TeamWorld)")
        .allowlist_type("nccl(Result_t|DataType_t|RedOp_t|UniqueId|Comm|Comm_t|Window_t|DevComm|DevComm_t|DevCommRequirements|DevCommRequirements_t|Config_t|Team|Team_t)")
        .allowlist_var("NCCL_(MAJOR|MINOR|PATCH|VERSION_CODE|WIN_.*|UNIQUE_ID_BYTES)")
        .opaque_type("ncclDevComm")
        .default_enum_style(bindgen::EnumVariation::NewType { is_bitfield: false, is_global: false })
        .dynamic_library_name("NcclLib")
        .dynamic_link_require_all(false)
        .layout_tests(false)
        .derive_default(true)
        .generate()
        .unwrap_or_else(|e| fail(&format!("bindgen over nccl.h failed: {e}")));
    bindings.write_to_file(out.join("nccl_bindings.rs")).unwrap_or_else(|e| fail(&format!("writing bindings: {e}")));
}

fn kernels(cuda: &Path, nccl_inc: &Path, out: &Path) {
    let nvcc = cuda.join("bin/nvcc");
    let gencode: Vec<String> = match env::var("GINBENCH_NVCC_GENCODE") {
        Ok(g) if !g.trim().is_empty() => g.split_whitespace().map(String::from).collect(),
        // SASS for Hopper and Blackwell, PTX for forward compatibility.
        _ => [
            "-gencode=arch=compute_90,code=sm_90",
            "-gencode=arch=compute_100,code=sm_100",
            "-gencode=arch=compute_100,code=compute_100",
        ]
        .map(String::from)
        .to_vec(),
    };
    let mut sources: Vec<PathBuf> = fs::read_dir("src/kernels")
        .unwrap_or_else(|e| fail(&format!("src/kernels: {e}")))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "cu"))
        .collect();
    sources.sort();
    let mut table = String::from(
        "/// (module name, fatbin) for every src/kernels/*.cu.\npub const FATBINS: &[(&str, &[u8])] = &[\n",
    );
    for src in &sources {
        let stem = src.file_stem().unwrap().to_string_lossy().to_string();
        let fatbin = out.join(format!("{stem}.fatbin"));
        let status = Command::new(&nvcc)
            .args(["-fatbin", "-std=c++17", "-O3", "-lineinfo", "-Xptxas=-warn-spills"])
            .args(&gencode)
            .arg(format!("-I{}", nccl_inc.display()))
            .arg("-Isrc/kernels")
            .arg("-o")
            .arg(&fatbin)
            .arg(src)
            .status()
            .unwrap_or_else(|e| fail(&format!("cannot run {}: {e}", nvcc.display())));
        if !status.success() {
            fail(&format!("nvcc failed on {}", src.display()));
        }
        table.push_str(&format!("    (\"{stem}\", include_bytes!(\"{}\")),\n", fatbin.display()));
    }
    table.push_str("];\n");
    fs::write(out.join("kernels.rs"), table).unwrap();
}

/// Compile and run src/nccl/initializers.cu: NCCL's struct initializers as Rust byte arrays.
fn initializers(cuda: &Path, nccl_inc: &Path, out: &Path) {
    let exe = out.join("nccl_initializers");
    let status = Command::new(cuda.join("bin/nvcc"))
        .args(["-std=c++17", "-O1"])
        .arg(format!("-I{}", nccl_inc.display()))
        .arg(format!("-L{}", cuda.join("lib").display()))
        .arg("-o")
        .arg(&exe)
        .arg("src/nccl/initializers.cu")
        .status()
        .unwrap_or_else(|e| fail(&format!("cannot run nvcc: {e}")));
    if !status.success() {
        fail("nvcc failed on src/nccl/initializers.cu");
    }
    let run = Command::new(&exe).output().unwrap_or_else(|e| fail(&format!("running {}: {e}", exe.display())));
    if !run.status.success() {
        fail("src/nccl/initializers.cu failed to run");
    }
    fs::write(out.join("nccl_initializers.rs"), run.stdout).unwrap();
}

/// The NVTX shim (src/nvtx.c): NVTX v3 is header-only and finds an injected tool (Nsight
/// Systems) by itself, so no libnvToolsExt is needed at run time. Without nvtx3 headers the shim
/// compiles to no-ops.
fn nvtx(cuda: &Path) {
    println!("cargo:rerun-if-changed=src/nvtx.c");
    let inc = cuda.join("include");
    let mut b = cc::Build::new();
    b.file("src/nvtx.c").include(&inc).warnings(false);
    if inc.join("nvtx3/nvToolsExt.h").exists() {
        b.define("GB_HAVE_NVTX3", None);
    } else {
        println!("cargo:warning=no nvtx3 headers under {}: NVTX ranges are disabled", inc.display());
    }
    b.compile("ginbench_nvtx");
    println!("cargo:rustc-link-lib=dl");
}

/// Bake the MPI library directory into RUNPATH so the binaries start without LD_LIBRARY_PATH
/// where they were built; elsewhere the loader falls back to the system's libmpi.
fn mpi_rpath() {
    let mpicc = env::var("MPICC").unwrap_or_else(|_| "mpicc".into());
    let Ok(out) = Command::new(&mpicc).arg("-show").output() else {
        return;
    };
    for tok in String::from_utf8_lossy(&out.stdout).split_whitespace() {
        if let Some(dir) = tok.strip_prefix("-L") {
            println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
        }
    }
}
