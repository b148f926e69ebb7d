//! Build script: NCCL bindings (bindgen, dynamic loading), CUDA kernels (nvcc → fatbin), the NVTX
//! shim and the MPI shim.
//!
//! Inputs come from the environment that `ci/setup` writes (CUDA_HOME, NCCL_HOME, MPICC,
//! LIBCLANG_PATH); standard locations are tried when they are unset.
//!
//! The nvcc and bindgen outputs are content-addressed (build/cache.rs): they are kept in
//! `<target>/ginbench-cache/<key>/`, shared by the debug and release builds, and made again only
//! when something they are made from changes (sources, headers, compiler, flags), not whenever
//! this script reruns (e.g. after a commit, for the git revision). `OUT_DIR/build-steps.txt` lists
//! what the last run compiled and what it reused.
#[path = "build/cache.rs"]
mod cache;
#[path = "build/git.rs"]
mod git;
#[path = "build/nccl.rs"]
mod nccl;

use cache::Key;
use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

#[path = "src/plugins/loopback/build_support.rs"]
mod loopback_build;

fn fail(msg: &str) -> ! {
    eprintln!("\nginbench build: {msg}\n  fix: run `source ci/env` (or set CUDA_HOME / NCCL_HOME / MPICC), then build again\n");
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

/// What the cached steps depend on besides their own sources, computed once.
struct Inputs {
    cuda: PathBuf,
    nccl_inc: PathBuf,
    out: PathBuf,
    cache: PathBuf,
    /// nvcc's path and `--version` and the NCCL headers (every file): a key part every cached
    /// step shares.
    toolchain: String,
    /// What this run did, one line a step (OUT_DIR/build-steps.txt).
    steps: Mutex<Vec<String>>,
    /// `-DGB_NCCL_*` for every nvcc step: the version table's answers for these headers.
    nccl_defines: Vec<String>,
}

impl Inputs {
    fn key(&self, kind: &str) -> Key {
        let mut k = Key::new(kind);
        k.add_str(&self.toolchain);
        k
    }

    /// A key for a step configured in this script (bindgen, the initializers): the script is
    /// part of it. (The kernels' key names their flags instead, so that editing this script does
    /// not recompile them.)
    fn key_with_script(&self, kind: &str) -> Key {
        let mut k = self.key(kind);
        for f in ["build.rs", "build/cache.rs", "build/nccl.rs"] {
            k.add_file(Path::new(f)).unwrap_or_else(|e| fail(&format!("{f}: {e}")));
        }
        k
    }

    /// Outputs `names` of `key` from the cache, made by `produce` on a miss, copied into OUT_DIR.
    fn cached(&self, what: &str, key: &Key, names: &[&str], produce: impl FnOnce(&Path) -> Result<(), String>) {
        let (dir, hit) =
            cache::get_or_make(&self.cache, key, names, produce).unwrap_or_else(|e| fail(&format!("{what}: {e}")));
        for n in names {
            fs::copy(dir.join(n), self.out.join(n)).unwrap_or_else(|e| fail(&format!("{what}: copying {n}: {e}")));
        }
        let verb = if hit { "reused" } else { "compiled" };
        self.steps.lock().unwrap().push(format!("{what}: {verb} {}", key.hex()));
    }
}

fn main() {
    for v in [
        "CUDA_HOME",
        "NCCL_HOME",
        "LIBCLANG_PATH",
        "BINDGEN_EXTRA_CLANG_ARGS",
        "GINBENCH_NVCC_GENCODE",
        "MPICC",
        "GINBENCH_BUILD_CACHE",
    ] {
        println!("cargo:rerun-if-env-changed={v}");
    }
    for p in ["src/kernels", "src/nccl/wrapper.h", "src/nccl/initializers.cu", "src/nvtx.c", "src/bootstrap/mpi_shim.c"]
    {
        println!("cargo:rerun-if-changed={p}");
    }

    let out = PathBuf::from(env::var("OUT_DIR").unwrap());
    let cuda = cuda_home();
    let nccl = nccl_home();
    let nccl_inc = nccl.join("include");
    let code = nccl_version_code(&nccl_inc.join("nccl.h"));
    for line in nccl::instructions(code).unwrap_or_else(|e| fail(&e)) {
        println!("{line}");
    }
    println!("cargo:rustc-env=GINBENCH_NCCL_HEADER_VERSION={code}");
    let lib = nccl.join("lib/libnccl.so.2");
    println!(
        "cargo:rustc-env=GINBENCH_NCCL_BUILD_LIB={}",
        if lib.exists() { lib.display().to_string() } else { String::new() }
    );

    // The git revision; rerun only when it can change (HEAD, the branch's ref), not on every
    // `git add` (the index).
    let here = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    println!("cargo:rustc-env=GINBENCH_GIT={}", git::describe(&here));
    if let Some((git_dir, common)) = git::dirs(&here) {
        for p in git::rerun_paths(&git_dir, &common) {
            println!("cargo:rerun-if-changed={}", p.display());
        }
    }

    let cache = env::var_os("GINBENCH_BUILD_CACHE").map(PathBuf::from).unwrap_or_else(|| cache::default_dir(&out));
    fs::create_dir_all(&cache).unwrap_or_else(|e| fail(&format!("{}: {e}", cache.display())));
    let nvcc = cuda.join("bin/nvcc");
    let mut toolchain = Key::new("toolchain");
    toolchain.add_str(&nvcc.display().to_string());
    let version = Command::new(&nvcc)
        .arg("--version")
        .output()
        .unwrap_or_else(|e| fail(&format!("cannot run {}: {e}", nvcc.display())));
    toolchain.add(&version.stdout);
    toolchain.add_tree(&nccl_inc).unwrap_or_else(|e| fail(&format!("{}: {e}", nccl_inc.display())));
    let nccl_defines = nccl::nvcc_defines(code);
    let inputs =
        Inputs { cuda, nccl_inc, out, cache, toolchain: toolchain.hex(), steps: Mutex::new(vec![]), nccl_defines };

    bindings(&inputs);
    kernels(&inputs);
    initializers(&inputs);
    nvtx(&inputs.cuda);
    mpi_shim(&inputs);
    loopback_plugin(&inputs.cuda, &inputs.out);

    cache::prune(&inputs.cache, 64);
    let steps = inputs.steps.into_inner().unwrap().join("\n");
    fs::write(inputs.out.join("build-steps.txt"), steps + "\n")
        .unwrap_or_else(|e| fail(&format!("build-steps.txt: {e}")));
}

/// The loopback GIN plugin (src/plugins/loopback) and its CPU contract tests; the plugin (and the
/// GPU smoke test, where it was built) is also copied beside the binaries (`target/<profile>/`),
/// where `--gin-backend loopback` and `ci/gpu-test` look, so a copied set of binaries carries it
/// along.
fn loopback_plugin(cuda: &Path, out: &Path) {
    let lib = loopback_build::build(cuda, out);
    loopback_build::build_contract_test(out);
    let smoke = out.join(loopback_build::GPU_SMOKE);
    // OUT_DIR is <target>/<profile>/build/ginbench-<hash>/out.
    let Some(profile_dir) = out.ancestors().nth(3) else { return };
    for file in std::iter::once(lib).chain(smoke.exists().then_some(smoke)) {
        let beside = profile_dir.join(file.file_name().unwrap());
        let tmp = beside.with_extension("tmp");
        fs::copy(&file, &tmp)
            .and_then(|_| fs::rename(&tmp, &beside))
            .unwrap_or_else(|e| fail(&format!("copying {} to {}: {e}", file.display(), beside.display())));
    }
}

fn bindings(inp: &Inputs) {
    let mut key = inp.key_with_script("nccl-bindings");
    key.add_file(Path::new("src/nccl/wrapper.h")).unwrap_or_else(|e| fail(&format!("src/nccl/wrapper.h: {e}")));
    for v in ["LIBCLANG_PATH", "BINDGEN_EXTRA_CLANG_ARGS"] {
        key.add_str(&env::var(v).unwrap_or_default());
    }
    // bindgen's version.
    key.add_file(Path::new("Cargo.lock")).ok();
    inp.cached("bindgen nccl.h", &key, &["nccl_bindings.rs"], |dir| {
        // (A libclang without resource headers gets stddef.h & co through BINDGEN_EXTRA_CLANG_ARGS,
        // which ci/setup exports.)
        let bindings = bindgen::Builder::default()
            .header("src/nccl/wrapper.h")
            .clang_args(["-x", "c++", "-std=c++17"])
            .clang_arg(format!("-I{}", inp.nccl_inc.display()))
            .clang_arg(format!("-I{}", inp.cuda.join("include").display()))
            .clang_arg(format!("-I{}", inp.cuda.join("include/cccl").display()))
            .allowlist_function("ncclCommQueryProperties")
            .allowlist_type("nccl(CommProperties|CommProperties_t|GinType_t|GinConnectionType_t)")
            .allowlist_function("nccl(GetVersion|GetUniqueId|CommInitRank|CommSplit|CommDestroy|CommAbort|CommGetAsyncError|GetErrorString|GetLastError|GroupStart|GroupEnd|Send|Recv|AlltoAll|AllReduce|MemAlloc|MemFree|CommRegister|CommDeregister|CommWindowRegister|CommWindowDeregister|DevCommCreate|DevCommDestroy|CommCount|CommUserRank|TeamLsa)")
            .allowlist_type("nccl(Result_t|DataType_t|RedOp_t|UniqueId|Comm|Comm_t|Window_t|DevComm|DevComm_t|DevCommRequirements|DevCommRequirements_t|Config_t|Team|Team_t)")
            .allowlist_var("NCCL_(MAJOR|MINOR|PATCH|VERSION_CODE|WIN_.*|UNIQUE_ID_BYTES)")
            .opaque_type("ncclDevComm")
            .default_enum_style(bindgen::EnumVariation::NewType { is_bitfield: false, is_global: false })
            .dynamic_library_name("NcclLib")
            .dynamic_link_require_all(false)
            .layout_tests(false)
            .derive_default(true)
            .generate()
            .map_err(|e| format!("bindgen over nccl.h failed: {e}"))?;
        bindings.write_to_file(dir.join("nccl_bindings.rs")).map_err(|e| format!("writing bindings: {e}"))
    });

    // The constants the kernels and the Rust side share (src/kernels/config.h).
    let mut key = inp.key_with_script("kernel-config");
    key.add_file(Path::new(KERNEL_CONFIG)).unwrap_or_else(|e| fail(&format!("{KERNEL_CONFIG}: {e}")));
    for v in ["LIBCLANG_PATH", "BINDGEN_EXTRA_CLANG_ARGS"] {
        key.add_str(&env::var(v).unwrap_or_default());
    }
    key.add_file(Path::new("Cargo.lock")).ok();
    inp.cached("bindgen config.h", &key, &["kernel_config.rs"], |dir| {
        bindgen::Builder::default()
            .header(KERNEL_CONFIG)
            .allowlist_var("GB_.*")
            .generate()
            .map_err(|e| format!("bindgen over {KERNEL_CONFIG} failed: {e}"))?
            .write_to_file(dir.join("kernel_config.rs"))
            .map_err(|e| format!("writing kernel_config.rs: {e}"))
    });
}

const KERNEL_CONFIG: &str = "src/kernels/config.h";

/// Every src/kernels/*.cu into a fatbin (one nvcc per file, NUM_JOBS at a time), and
/// OUT_DIR/kernels.rs, the table that embeds them.
fn kernels(inp: &Inputs) {
    let nvcc = inp.cuda.join("bin/nvcc");
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
    // The targets, for the message of a GPU that cannot load the kernels.
    let targets: Vec<&str> = gencode.iter().filter_map(|g| g.rsplit_once("code=").map(|(_, c)| c)).collect();
    println!("cargo:rustc-env=GINBENCH_KERNEL_TARGETS={}", targets.join(" "));
    let mut args: Vec<String> =
        ["-fatbin", "-std=c++17", "-O3", "-lineinfo", "-Xptxas=-warn-spills"].map(String::from).to_vec();
    args.extend(gencode);
    args.extend(inp.nccl_defines.iter().cloned());
    args.push(format!("-I{}", inp.nccl_inc.display()));
    args.push("-Isrc/kernels".into());

    let mut files: Vec<PathBuf> = fs::read_dir("src/kernels")
        .unwrap_or_else(|e| fail(&format!("src/kernels: {e}")))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    files.sort();
    let sources: Vec<&PathBuf> = files.iter().filter(|p| p.extension().is_some_and(|x| x == "cu")).collect();
    // A kernel is made from its .cu, the headers beside it (any of them: cheap and safe), the
    // flags and the toolchain.
    let mut shared = inp.key("kernel");
    for a in &args {
        shared.add_str(a);
    }
    for h in files.iter().filter(|p| p.extension().is_none_or(|x| x != "cu")) {
        shared.add_file(h).unwrap_or_else(|e| fail(&format!("{}: {e}", h.display())));
    }
    let shared = shared.hex();

    let jobs = env::var("NUM_JOBS")
        .ok()
        .and_then(|n| n.parse::<usize>().ok())
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .clamp(1, sources.len().max(1));
    let next = Mutex::new(sources.iter());
    std::thread::scope(|s| {
        for _ in 0..jobs {
            s.spawn(|| loop {
                let Some(src) = next.lock().unwrap().next() else { break };
                let stem = src.file_stem().unwrap().to_string_lossy().to_string();
                let fatbin = format!("{stem}.fatbin");
                let mut key = Key::new("kernel-file");
                key.add_str(&shared);
                key.add_file(src).unwrap_or_else(|e| fail(&format!("{}: {e}", src.display())));
                inp.cached(&format!("nvcc {}", src.display()), &key, &[fatbin.as_str()], |dir| {
                    let out = Command::new(&nvcc)
                        .args(&args)
                        .arg("-o")
                        .arg(dir.join(&fatbin))
                        .arg(src)
                        .output()
                        .map_err(|e| format!("cannot run {}: {e}", nvcc.display()))?;
                    // nvcc's warnings (spills) for `cargo build -vv`.
                    eprint!("{}", String::from_utf8_lossy(&out.stderr));
                    if out.status.success() {
                        Ok(())
                    } else {
                        Err(format!("nvcc failed:\n{}", String::from_utf8_lossy(&out.stderr)))
                    }
                });
            });
        }
    });

    let mut table = String::from(
        "/// (module name, fatbin) for every src/kernels/*.cu.\npub const FATBINS: &[(&str, &[u8])] = &[\n",
    );
    for src in &sources {
        let stem = src.file_stem().unwrap().to_string_lossy().to_string();
        let fatbin = inp.out.join(format!("{stem}.fatbin"));
        table.push_str(&format!("    (\"{stem}\", include_bytes!(\"{}\")),\n", fatbin.display()));
    }
    table.push_str("];\n");
    fs::write(inp.out.join("kernels.rs"), table).unwrap();
}

/// Compile and run src/nccl/initializers.cu: NCCL's struct initializers as Rust byte arrays.
fn initializers(inp: &Inputs) {
    let src = Path::new("src/nccl/initializers.cu");
    let mut key = inp.key_with_script("nccl-initializers");
    key.add_file(src).unwrap_or_else(|e| fail(&format!("{}: {e}", src.display())));
    inp.cached("nvcc src/nccl/initializers.cu", &key, &["nccl_initializers.rs"], |dir| {
        let exe = dir.join("nccl_initializers");
        let status = Command::new(inp.cuda.join("bin/nvcc"))
            .args(["-std=c++17", "-O1"])
            .args(&inp.nccl_defines)
            .arg(format!("-I{}", inp.nccl_inc.display()))
            .arg(format!("-L{}", inp.cuda.join("lib").display()))
            .arg("-o")
            .arg(&exe)
            .arg(src)
            .status()
            .map_err(|e| format!("cannot run nvcc: {e}"))?;
        if !status.success() {
            return Err("nvcc failed".into());
        }
        let run = Command::new(&exe).output().map_err(|e| format!("running {}: {e}", exe.display()))?;
        if !run.status.success() {
            return Err("it failed to run".into());
        }
        let _ = fs::remove_file(&exe);
        fs::write(dir.join("nccl_initializers.rs"), run.stdout).map_err(|e| e.to_string())
    });
}

/// The NVTX shim (src/nvtx.c): NVTX v3 is header-only and finds an injected tool (Nsight
/// Systems) by itself, so no libnvToolsExt is needed at run time. Without nvtx3 headers the shim
/// compiles to no-ops.
fn nvtx(cuda: &Path) {
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

/// The MPI shim (src/bootstrap/mpi_shim.c) as a shared library, OUT_DIR/ginbench_mpi.so, which
/// src/bootstrap/mpi.rs embeds and loads only under an MPI launcher: the binaries themselves do
/// not link libmpi. Its RUNPATH (from the wrapper) names this machine's MPI; elsewhere the loader
/// finds the system's. Without any MPI compiler the file is empty and MPI launches report it.
fn mpi_shim(inp: &Inputs) {
    let so = inp.out.join("ginbench_mpi.so");
    let explicit = env::var("MPICC").ok().filter(|c| !c.is_empty());
    let mpicc = explicit.clone().unwrap_or_else(|| "mpicc".into());
    let run =
        Command::new(&mpicc).args(["-shared", "-fPIC", "-O2", "-o"]).arg(&so).arg("src/bootstrap/mpi_shim.c").output();
    match run {
        Ok(o) if o.status.success() => {
            inp.steps.lock().unwrap().push(format!("{mpicc} src/bootstrap/mpi_shim.c: compiled"))
        }
        Ok(o) => fail(&format!("{mpicc} failed on src/bootstrap/mpi_shim.c:\n{}", String::from_utf8_lossy(&o.stderr))),
        Err(e) if explicit.is_some() => fail(&format!("cannot run MPICC={mpicc}: {e}")),
        Err(_) => {
            println!("cargo:warning=no MPI compiler (mpicc) found: the binaries will not run under mpirun / srun (source ci/env, or set MPICC, to build with MPI)");
            fs::write(&so, b"").unwrap_or_else(|e| fail(&format!("{}: {e}", so.display())));
            inp.steps.lock().unwrap().push("mpi shim: none (no mpicc)".into());
        }
    }
}
