//! Profiling hooks: NVTX ranges per (impl, size, phase) and a profiler capture range around one
//! measurement (`--profile-size`), so that
//! `nsys profile --capture-range=cudaProfilerApi -t cuda,nvtx` records exactly that measurement.
//!
//! NVTX comes from src/nvtx.c (NVTX v3, header-only): its calls cost nothing unless a tool such
//! as Nsight Systems has injected itself, and no NVTX library is needed at run time.
use std::ffi::{c_char, c_int, CString};

extern "C" {
    fn gb_nvtx_push(name: *const c_char);
    fn gb_nvtx_pop();
    fn gb_nvtx_built() -> c_int;
}

/// Whether a profiler may be listening (Nsight Systems sets this for the processes it records).
fn profiled() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| unsafe { gb_nvtx_built() } != 0 && std::env::var_os("NVTX_INJECTION64_PATH").is_some())
}

/// An NVTX range, open until dropped.
pub struct Range(bool);

/// Open a range; `name` is only formatted when a profiler listens.
pub fn range(name: impl FnOnce() -> String) -> Range {
    if !profiled() {
        return Range(false);
    }
    let c = CString::new(name().replace('\0', " ")).unwrap_or_default();
    unsafe { gb_nvtx_push(c.as_ptr()) };
    Range(true)
}

impl Drop for Range {
    fn drop(&mut self) {
        if self.0 {
            unsafe { gb_nvtx_pop() };
        }
    }
}

/// cuProfilerStart / cuProfilerStop around `f` (the capture range of `--profile-size`).
pub fn captured<T>(f: impl FnOnce() -> T) -> T {
    crate::cuda::profiled(f)
}

#[cfg(test)]
mod tests {
    #[test]
    fn nvtx_is_compiled_in_and_ranges_nest() {
        // ci/setup's toolchain carries the nvtx3 headers; without a profiler ranges are no-ops.
        if std::env::var_os("GINBENCH_TOOLCHAIN").is_some() {
            assert_eq!(unsafe { super::gb_nvtx_built() }, 1, "built without nvtx3 headers");
        }
        let _outer = super::range(|| "outer".into());
        let _inner = super::range(|| "inner".into());
    }

    #[test]
    fn without_a_profiler_a_range_name_is_never_formatted() {
        // Ranges sit in measured loops: with no profiler attached they must cost no formatting.
        if std::env::var_os("NVTX_INJECTION64_PATH").is_some() {
            return;
        }
        let _r = super::range(|| unreachable!("a range name formatted with no profiler listening"));
    }
}
