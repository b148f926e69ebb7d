//! Finding and loading `libnccl.so.2` deliberately: the library must be the version whose headers
//! the kernels were compiled against (the device API has no ABI guarantee across releases).
//!
//! Candidates, in order: `GINBENCH_NCCL_LIB` (a file), `$NCCL_HOME/lib`, the library beside the
//! headers used at build time, the `nvidia.nccl` Python package (PyTorch's NCCL), and finally the
//! dynamic loader's own search (`LD_LIBRARY_PATH`, ldconfig). The first whose `ncclGetVersion()`
//! equals the header version wins; an explicit `GINBENCH_NCCL_LIB` of another version is an error.
use super::ffi::NcclLib;
use crate::error::{Error, Result};
use std::sync::OnceLock;

pub struct Nccl {
    pub lib: NcclLib,
    pub path: String,
    pub version: u32,
}

static NCCL: OnceLock<Nccl> = OnceLock::new();

pub fn header_version() -> u32 {
    env!("GINBENCH_NCCL_HEADER_VERSION").parse().unwrap()
}

pub use crate::results::version_string;

pub(super) fn get() -> &'static Nccl {
    loaded().expect("nccl::load() must succeed before NCCL is used")
}

/// The library, if [`load`] has succeeded.
pub(super) fn loaded() -> Option<&'static Nccl> {
    NCCL.get()
}

fn candidates() -> Vec<(String, &'static str)> {
    let mut c = vec![];
    if let Some(h) = std::env::var_os("NCCL_HOME") {
        c.push((format!("{}/lib/libnccl.so.2", h.to_string_lossy()), "NCCL_HOME"));
    }
    let built = env!("GINBENCH_NCCL_BUILD_LIB");
    if !built.is_empty() {
        c.push((built.to_string(), "build-time NCCL_HOME"));
    }
    c.retain(|(p, _)| std::path::Path::new(p).exists());
    if let Some(p) = python_nccl() {
        c.push((p, "python nvidia.nccl"));
    }
    c.push(("libnccl.so.2".to_string(), "dynamic loader search"));
    c
}

/// The NCCL inside the Python environment (PyTorch's), if `python3` has one.
fn python_nccl() -> Option<String> {
    let out = std::process::Command::new("python3")
        .args(["-c", "import nvidia.nccl as m; print(list(m.__path__)[0])"])
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    let dir = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let p = format!("{dir}/lib/libnccl.so.2");
    (out.status.success() && std::path::Path::new(&p).exists()).then_some(p)
}

fn open(path: &str) -> std::result::Result<(NcclLib, u32), String> {
    let lib = unsafe { NcclLib::new(path) }.map_err(|e| e.to_string())?;
    let get = lib.ncclGetVersion.as_ref().map_err(|_| "no ncclGetVersion".to_string())?;
    let mut v = 0i32;
    unsafe { get(&mut v) };
    Ok((lib, v as u32))
}

/// Resolved path of a library loaded by soname, for reporting.
fn resolved_path(lib: &NcclLib, fallback: &str) -> String {
    let Ok(f) = lib.ncclGetVersion.as_ref() else {
        return fallback.to_string();
    };
    unsafe {
        let mut info: libc_dl::DlInfo = std::mem::zeroed();
        if libc_dl::dladdr(*f as *const std::ffi::c_void, &mut info) != 0 && !info.fname.is_null() {
            return std::ffi::CStr::from_ptr(info.fname).to_string_lossy().into_owned();
        }
    }
    fallback.to_string()
}

mod libc_dl {
    #[repr(C)]
    pub struct DlInfo {
        pub fname: *const std::ffi::c_char,
        pub fbase: *mut std::ffi::c_void,
        pub sname: *const std::ffi::c_char,
        pub saddr: *mut std::ffi::c_void,
    }
    extern "C" {
        pub fn dladdr(addr: *const std::ffi::c_void, info: *mut DlInfo) -> i32;
    }
}

/// Load the NCCL library matching the headers, once per process.
pub fn load() -> Result<&'static Nccl> {
    if let Some(n) = NCCL.get() {
        return Ok(n);
    }
    let want = header_version();
    if let Some(p) = std::env::var_os("GINBENCH_NCCL_LIB") {
        let p = p.to_string_lossy().to_string();
        // dlopen("") is the program itself, which has no ncclGetVersion.
        if p.is_empty() {
            return Err(Error::env("GINBENCH_NCCL_LIB is set but empty", "unset it, or point it at a libnccl.so.2"));
        }
        let (lib, v) = open(&p).map_err(|e| {
            Error::env(format!("cannot load GINBENCH_NCCL_LIB={p}: {e}"), "point it at an existing libnccl.so.2")
        })?;
        if v != want {
            return Err(Error::env(
                format!(
                    "NCCL version mismatch: the kernels were compiled against NCCL {} headers but GINBENCH_NCCL_LIB={p} is NCCL {}",
                    version_string(want),
                    version_string(v)
                ),
                mismatch_fix(want),
            ));
        }
        let path = resolved_path(&lib, &p);
        return Ok(NCCL.get_or_init(|| Nccl { lib, path, version: v }));
    }
    let mut found = vec![];
    for (path, origin) in candidates() {
        if let Ok((lib, v)) = open(&path) {
            let resolved = resolved_path(&lib, &path);
            if v == want {
                return Ok(NCCL.get_or_init(|| Nccl { lib, path: resolved, version: v }));
            }
            found.push((resolved, origin, v));
        }
    }
    Err(no_match(want, &found))
}

/// The error when no candidate has the header version: none found at all, or which were found.
fn no_match(want: u32, found: &[(String, &str, u32)]) -> Error {
    if found.is_empty() {
        return Error::env(
            "no libnccl.so.2 found (GINBENCH_NCCL_LIB, NCCL_HOME/lib, the build-time NCCL, python nvidia.nccl, LD_LIBRARY_PATH)",
            "pip install nvidia-nccl-cu13 or set GINBENCH_NCCL_LIB=/path/to/libnccl.so.2",
        );
    }
    // NCCL_HOME, the build-time NCCL and Python's are often one file: name each file once.
    let file = |p: &str| std::fs::canonicalize(p).unwrap_or_else(|_| p.into());
    let mut files = vec![];
    let mut seen = vec![];
    for (p, origin, v) in found {
        let f = file(p);
        if !files.contains(&f) {
            files.push(f);
            seen.push(format!("{p} = NCCL {} ({origin})", version_string(*v)));
        }
    }
    Error::env(
        format!(
            "NCCL version mismatch: the kernels were compiled against NCCL {} headers; found only {}",
            version_string(want),
            seen.join("; ")
        ),
        mismatch_fix(want),
    )
}

fn mismatch_fix(want: u32) -> String {
    format!(
        "set GINBENCH_NCCL_LIB to a libnccl.so.2 of NCCL {}, or rebuild with NCCL_HOME pointing at the NCCL you run",
        version_string(want)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_and_mismatch_messages() {
        assert_eq!(version_string(22809), "2.28.9");
        assert_eq!(version_string(23203), "2.32.3");
        let e = no_match(22809, &[("/usr/lib/libnccl.so.2".into(), "dynamic loader search", 22803)]);
        assert_eq!(e.exit, crate::error::Exit::Environment);
        assert!(e.msg.contains("NCCL version mismatch"), "{e}");
        assert!(e.msg.contains("2.28.9 headers"), "{e}");
        assert!(e.msg.contains("/usr/lib/libnccl.so.2 = NCCL 2.28.3"), "{e}");
        assert!(e.fix.unwrap().contains("GINBENCH_NCCL_LIB"));
        assert!(no_match(22809, &[]).msg.contains("no libnccl.so.2 found"));
    }

    #[test]
    fn a_file_found_twice_is_named_once() {
        let dir = std::env::temp_dir().join(format!("ginbench-loader-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("lib")).unwrap();
        let real = dir.join("lib/libnccl.so.2.28.3");
        std::fs::write(&real, b"").unwrap();
        let link = dir.join("lib/libnccl.so.2");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let (real, link) = (real.to_string_lossy().into_owned(), link.to_string_lossy().into_owned());
        let e = no_match(
            22809,
            &[
                (link.clone(), "NCCL_HOME", 22803),
                (link.clone(), "build-time NCCL_HOME", 22803),
                (real.clone(), "python nvidia.nccl", 22803),
                ("/elsewhere/libnccl.so.2".into(), "dynamic loader search", 22807),
            ],
        );
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(e.msg.matches("= NCCL 2.28.3").count(), 1, "{e}");
        assert!(e.msg.contains(&format!("{link} = NCCL 2.28.3 (NCCL_HOME)")), "{e}");
        assert!(e.msg.contains("/elsewhere/libnccl.so.2 = NCCL 2.28.7"), "{e}");
    }

    #[test]
    fn python_nccl_is_an_existing_library_or_none() {
        if let Some(p) = python_nccl() {
            assert!(p.ends_with("/lib/libnccl.so.2") && std::path::Path::new(&p).is_file(), "{p}");
        }
    }
}
