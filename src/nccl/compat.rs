//! The one place for differences between NCCL device-API generations on the host side.
//!
//! NCCL 2.28.x: unversioned `ncclDevCommRequirements` (zero-initialised, as nccl-tests does), GIN
//! requested with `ginForceEnable`, no `ncclCommQueryProperties` (GIN availability is learnt by
//! asking for a GIN device communicator). NCCL ≥ 2.29 versions its structs through
//! `*_INITIALIZER` macros; the build refuses those headers until that generation is supported here.
use super::{ffi, lib, Comm};
use crate::error::Result;
use crate::report::schema::Gin;

#[cfg(nccl_versioned_structs)]
compile_error!("NCCL >= 2.29 headers are not supported yet: build against nvidia-nccl-cu13 2.28.x");

/// An empty requirements struct (`NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER` of later releases).
pub fn requirements() -> ffi::ncclDevCommRequirements {
    // SAFETY: 2.28's struct is plain data; all-zero is what nccl-tests passes (memset).
    unsafe { std::mem::zeroed() }
}

/// Requirements that ask for GIN with `signals` signals on every peer connection.
pub fn gin_requirements(signals: i32) -> ffi::ncclDevCommRequirements {
    let mut r = requirements();
    r.ginForceEnable = true;
    r.ginSignalCount = signals;
    r
}

/// A device communicator (`ncclDevComm`, passed by value to kernels).
pub struct DevComm {
    pub raw: ffi::ncclDevComm,
    comm: ffi::ncclComm_t,
}

impl DevComm {
    /// ncclDevCommCreate: collective over the communicator.
    pub fn create(comm: &Comm, reqs: &ffi::ncclDevCommRequirements) -> Result<DevComm> {
        let mut raw: ffi::ncclDevComm = unsafe { std::mem::zeroed() };
        comm.check(unsafe { lib().ncclDevCommCreate(comm.raw(), reqs, &mut raw) }, "ncclDevCommCreate")?;
        Ok(DevComm { raw, comm: comm.raw() })
    }
}

impl Drop for DevComm {
    fn drop(&mut self) {
        unsafe {
            let _ = lib().ncclDevCommDestroy(self.comm, &self.raw);
        }
    }
}

/// Is GIN usable on this communicator, and if not, why (in NCCL's words)? Collective.
pub fn probe_gin(comm: &Comm) -> Gin {
    match DevComm::create(comm, &gin_requirements(1)) {
        Ok(_dc) => Gin {
            kind: std::env::var("NCCL_GIN_TYPE")
                .ok()
                .map(|t| gin_type_name(t.parse().unwrap_or(-1)).to_string())
                .unwrap_or_else(|| "available".into()),
            reason: "ncclDevCommCreate with GIN succeeded (NCCL 2.28 cannot report the GIN type; set NCCL_GIN_TYPE to pin it)"
                .into(),
        },
        Err(e) => Gin { kind: "none".into(), reason: e.msg },
    }
}

/// NCCL_GIN_TYPE numbers as NCCL defines them.
pub fn gin_type_name(t: i32) -> &'static str {
    match t {
        0 => "none",
        2 => "proxy",
        3 => "gdaki",
        4 => "gpi",
        5 => "efa-gda",
        _ => "unknown",
    }
}
