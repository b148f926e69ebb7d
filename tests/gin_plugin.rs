//! The loopback GIN plugin (src/plugins/loopback), on a machine without GPUs: its CPU contract
//! tests pass, and the library build.rs made opens with dlopen, exports the tables NCCL looks
//! for under the right names and versions, and links neither CUDA nor NCCL.
use std::ffi::{c_char, c_int, CStr};
use std::process::Command;

const PLUGIN: &str = env!("GINBENCH_LOOPBACK_PLUGIN");
const CONTRACT_TEST: &str = env!("GINBENCH_LOOPBACK_CONTRACT_TEST");

/// The fields every table starts with: name, init, devices, getProperties (net v11, GIN v11 and
/// RMA v14 agree up to here).
#[repr(C)]
struct TableHead {
    name: *const c_char,
    init: *const (),
    devices: Option<unsafe extern "C" fn(*mut c_int) -> c_int>,
    get_properties: Option<unsafe extern "C" fn(c_int, *mut u8) -> c_int>,
}

/// What a table says about device 0: (name, devices, ptrSupport, netDeviceType, maxRecvs).
fn describe(lib: &libloading::Library, symbol: &str, props_size: usize) -> (String, i32, i32, i32, i32) {
    // SAFETY: the symbol is a data object laid out as TableHead (checked by the plugin's static
    // asserts against NCCL's headers); the calls match NCCL's signatures.
    unsafe {
        let sym: libloading::Symbol<*const TableHead> =
            lib.get(format!("{symbol}\0").as_bytes()).unwrap_or_else(|e| panic!("{symbol} is not exported: {e}"));
        let table = &**sym;
        let name = CStr::from_ptr(table.name).to_string_lossy().into_owned();
        assert!(!table.init.is_null(), "{symbol}: init is NULL");
        let mut ndev: c_int = -1;
        assert_eq!((table.devices.expect("devices"))(&mut ndev), 0, "{symbol}: devices failed");
        let mut props = vec![0u8; props_size];
        assert_eq!((table.get_properties.expect("getProperties"))(0, props.as_mut_ptr()), 0, "{symbol}: getProperties");
        let int_at = |off: usize| i32::from_ne_bytes(props[off..off + 4].try_into().unwrap());
        // ncclNetProperties_v11/v12: ptrSupport at 24, maxRecvs at 52, netDeviceType at 56.
        (name, ndev, int_at(24), int_at(56), int_at(52))
    }
}

#[test]
fn plugin_library_exports_the_nccl_tables() {
    // SAFETY: loading the plugin runs no code beyond static initialisation of constant tables.
    let lib = unsafe { libloading::Library::new(PLUGIN) }.unwrap_or_else(|e| panic!("dlopen {PLUGIN}: {e}"));
    let (name, ndev, ptr, kind, _) = describe(&lib, "ncclNetPlugin_v11", 112);
    assert_eq!((name.as_str(), ndev, ptr, kind), ("ginbench-loopback", 1, 1, 0), "net v11: host pointers, host type");
    let (name, ndev, ptr, kind, recvs) = describe(&lib, "ncclGinPlugin_v11", 112);
    assert_eq!((name.as_str(), ndev, ptr, kind), ("ginbench-loopback", 1, 3, 2), "GIN v11: HOST|CUDA, GIN_PROXY");
    assert_eq!(recvs, 64, "GIN v11: descriptor queues of 32 x 64 entries per peer (engine.h kGinMaxRecvs)");
    let (name, ndev, ptr, kind, _) = describe(&lib, "ncclRmaPlugin_v14", 128);
    assert_eq!((name.as_str(), ndev, ptr, kind), ("ginbench-loopback", 1, 3, 2), "RMA v14: HOST|CUDA, GIN_PROXY");
    // SAFETY: a NUL-terminated const char array.
    let version = unsafe {
        let sym: libloading::Symbol<*const c_char> = lib.get(b"ginbenchLoopbackVersion\0").expect("version symbol");
        CStr::from_ptr(*sym).to_string_lossy().into_owned()
    };
    assert!(version.starts_with("ginbench-loopback "), "{version}");
    // NCCL probes older table versions too; the plugin offers exactly these.
    // SAFETY: only looks the symbols up.
    unsafe {
        assert!(lib.get::<*const ()>(b"ncclNetPlugin_v10\0").is_err());
        assert!(lib.get::<*const ()>(b"ncclGinPlugin_v12\0").is_err());
    }
}

#[test]
fn plugin_links_neither_cuda_nor_nccl() {
    let out = Command::new("readelf").args(["-d", "-W", PLUGIN]).output().expect("readelf runs");
    assert!(out.status.success());
    let dynamic = String::from_utf8_lossy(&out.stdout);
    let needed: Vec<&str> = dynamic.lines().filter(|l| l.contains("(NEEDED)")).collect();
    assert!(!needed.is_empty(), "no NEEDED entries parsed from:\n{dynamic}");
    for line in &needed {
        assert!(!line.contains("libcuda") && !line.contains("libnccl") && !line.contains("libcudart"), "{line}");
    }
}

#[test]
fn plugin_contract_tests_pass() {
    let list = Command::new(CONTRACT_TEST).arg("--list").output().expect("contract test runs");
    let cases: Vec<String> = String::from_utf8_lossy(&list.stdout).lines().map(String::from).collect();
    assert!(cases.len() >= 14, "{cases:?}");
    let out = Command::new(CONTRACT_TEST).output().expect("contract test runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "contract tests failed:\n{stdout}\n{stderr}");
    for case in &cases {
        assert!(stdout.contains(&format!("case {case} ... ok")), "{case} did not pass:\n{stdout}\n{stderr}");
    }
    assert!(stdout.contains(&format!("{} passed, 0 failed", cases.len())), "{stdout}");
}

#[test]
fn contract_test_rejects_unknown_case() {
    let out = Command::new(CONTRACT_TEST).arg("no_such_case").output().expect("contract test runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no case matches"));
}

/// The GPU smoke test: passes on a GPU host; on a host without a driver it says so and exits 8
/// (the project's "no GPU" code), never anything else.
#[test]
fn gpu_smoke_passes_or_reports_no_gpu() {
    let Some(smoke) = option_env!("GINBENCH_LOOPBACK_GPU_SMOKE") else {
        return; // built without cuda.h
    };
    let out = Command::new(smoke).arg(PLUGIN).output().expect("gpu smoke runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    match out.status.code() {
        Some(0) => assert!(stdout.contains("gpu-smoke: passed"), "{stdout}\n{stderr}"),
        Some(8) => assert!(stderr.contains("skipped"), "{stderr}"),
        other => panic!("gpu smoke exited {other:?}:\n{stdout}\n{stderr}"),
    }
    // Across processes (virtual nodes): one rank per process.
    let out = Command::new(smoke).args([PLUGIN, "--processes", "2"]).output().expect("gpu smoke runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    match out.status.code() {
        Some(0) => assert!(stdout.contains("2 processes: passed"), "{stdout}\n{stderr}"),
        Some(8) => assert!(stderr.contains("skipped"), "{stderr}"),
        other => panic!("gpu smoke --processes exited {other:?}:\n{stdout}\n{stderr}"),
    }
    let usage = Command::new(smoke).output().expect("gpu smoke runs");
    assert_eq!(usage.status.code(), Some(6), "no argument is a usage error");
}
