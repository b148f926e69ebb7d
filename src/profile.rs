//! Profiling hooks: NVTX ranges per (impl, size, phase) and a profiler capture range around one
//! measurement (`--profile-size`), so that
//! `nsys profile --capture-range=cudaProfilerApi -t cuda,nvtx` records exactly that measurement.
//!
//! NVTX calls go to libnvToolsExt, loaded only when a tool has injected itself
//! (`NVTX_INJECTION64_PATH`, set by Nsight Systems); otherwise ranges cost nothing.
use std::ffi::{c_char, c_int, CString};
use std::sync::OnceLock;

struct Nvtx {
    push: unsafe extern "C" fn(*const c_char) -> c_int,
    pop: unsafe extern "C" fn() -> c_int,
    _lib: libloading::Library,
}

static NVTX: OnceLock<Option<Nvtx>> = OnceLock::new();

fn nvtx() -> Option<&'static Nvtx> {
    NVTX.get_or_init(|| {
        std::env::var_os("NVTX_INJECTION64_PATH")?;
        let mut names: Vec<String> = std::env::var("GINBENCH_NVTX_LIB").into_iter().collect();
        names.extend(["libnvToolsExt.so.1".into(), "libnvToolsExt.so".into()]);
        names.extend(crate::nccl::python_package_lib("nvidia.nvtx", "libnvToolsExt.so.1"));
        names.into_iter().find_map(|n| unsafe {
            let lib = libloading::Library::new(&n).ok()?;
            let push = *lib.get::<unsafe extern "C" fn(*const c_char) -> c_int>(b"nvtxRangePushA\0").ok()?;
            let pop = *lib.get::<unsafe extern "C" fn() -> c_int>(b"nvtxRangePop\0").ok()?;
            Some(Nvtx { push, pop, _lib: lib })
        })
    })
    .as_ref()
}

/// An NVTX range, open until dropped.
pub struct Range(bool);

pub fn range(name: impl FnOnce() -> String) -> Range {
    match nvtx() {
        Some(n) => {
            let c = CString::new(name().replace('\0', " ")).unwrap_or_default();
            unsafe { (n.push)(c.as_ptr()) };
            Range(true)
        }
        None => Range(false),
    }
}

impl Drop for Range {
    fn drop(&mut self) {
        if self.0 {
            if let Some(n) = nvtx() {
                unsafe { (n.pop)() };
            }
        }
    }
}

/// cuProfilerStart / cuProfilerStop around `f` (the capture range of `--profile-size`).
pub fn captured<T>(f: impl FnOnce() -> T) -> T {
    unsafe { cudarc::driver::sys::cuProfilerStart() };
    let out = f();
    unsafe { cudarc::driver::sys::cuProfilerStop() };
    out
}
