//! The one place for differences between NCCL device-API generations on the host side.
//!
//! - 2.28.x: unversioned structs (start zeroed, as nccl-tests does); GIN requested with
//!   `ginForceEnable`; no `ncclCommQueryProperties`, so GIN availability is learnt by asking for a
//!   GIN device communicator (on a communicator of its own: see `nccl::probe_gin`).
//! - ≥ 2.29.2: versioned structs, started from `NCCL_*_INITIALIZER`; properties query.
//! - ≥ 2.29.7: `ginConnectionType` (FULL) replaces `ginForceEnable`.
//! - ≥ 2.30.5: strong and VA signals are required unless waived; the protocols use neither, and
//!   EFA's GIN backends have neither, so they are waived.
//!
//! The initializers' bytes come from src/nccl/initializers.cu, built and run by build.rs against
//! the same headers, so no default is copied here by hand.
use super::{ffi, lib, Comm};
use crate::error::Result;
use crate::results::{Gin, GinKind};

mod init {
    include!(concat!(env!("OUT_DIR"), "/nccl_initializers.rs"));
}

const _: () = assert!(std::mem::size_of::<ffi::ncclDevCommRequirements>() == init::DEV_COMM_REQUIREMENTS.len());
#[cfg(nccl_versioned_structs)]
const _: () = assert!(std::mem::size_of::<ffi::ncclCommProperties>() == init::COMM_PROPERTIES.len());

const _: () = assert!(std::mem::size_of::<ffi::ncclConfig_t>() == init::CONFIG.len());

/// `NCCL_CONFIG_INITIALIZER` (every generation has one; its fields differ: 2.28 ends at
/// `nvlinkCentricSched`, 2.31 adds RMA / graph fields. ginbench sets only fields both have).
pub fn config() -> ffi::ncclConfig_t {
    // SAFETY: same size (asserted above), plain data written by NCCL's own initializer.
    unsafe { std::ptr::read_unaligned(init::CONFIG.as_ptr().cast()) }
}

/// `NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER` (zeroed on 2.28).
pub fn requirements() -> ffi::ncclDevCommRequirements {
    // SAFETY: same size (asserted above), plain data written by NCCL's own initializer.
    unsafe { std::ptr::read_unaligned(init::DEV_COMM_REQUIREMENTS.as_ptr().cast()) }
}

/// Ask for GIN connections to every rank (weak, non-VA signals are all the protocols use).
pub fn request_gin(r: &mut ffi::ncclDevCommRequirements) {
    #[cfg(nccl_gin_signal_requirements)]
    {
        r.ginStrongSignalsRequired = false;
        r.ginVaSignalsRequired = false;
    }
    #[cfg(nccl_gin_connection_type)]
    {
        r.ginConnectionType = ffi::ncclGinConnectionType_t::NCCL_GIN_CONNECTION_FULL;
    }
    #[cfg(not(nccl_gin_connection_type))]
    {
        r.ginForceEnable = true;
    }
}

// Kernels take the device communicator by value: a plain struct NCCL filled in.
unsafe impl cudarc::driver::DeviceRepr for ffi::ncclDevComm {}

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
#[cfg(nccl_versioned_structs)]
pub fn probe_gin(comm: &Comm) -> Gin {
    let mut p: ffi::ncclCommProperties = unsafe { std::ptr::read_unaligned(init::COMM_PROPERTIES.as_ptr().cast()) };
    if let Err(e) = comm.check(unsafe { lib().ncclCommQueryProperties(comm.raw(), &mut p) }, "ncclCommQueryProperties")
    {
        return Gin { kind: GinKind::None, reason: e.msg, connection: "none".into(), ..Default::default() };
    }
    let (full, railed) = (p.ginType.0 as i32, p.railedGinType.0 as i32);
    match (full, railed) {
        (0, 0) => Gin {
            kind: GinKind::None,
            reason: "ncclCommQueryProperties: no GIN backend on every rank (ginType NONE)".into(),
            connection: "none".into(),
            ..Default::default()
        },
        (0, t) => Gin {
            kind: GinKind::from_nccl_type(t),
            reason: "GIN only between ranks of the same rail (no cross-rail connectivity)".into(),
            connection: "rail".into(),
            ..Default::default()
        },
        (t, _) => Gin {
            kind: GinKind::from_nccl_type(t),
            reason: "ncclCommQueryProperties".into(),
            connection: "full".into(),
            ..Default::default()
        },
    }
}

/// Is GIN usable on this communicator, and if not, why (in NCCL's words)? Collective. A refused
/// request leaves the communicator's GIN state failed: use a communicator of its own.
#[cfg(not(nccl_versioned_structs))]
pub fn probe_gin(comm: &Comm) -> Gin {
    let mut reqs = requirements();
    request_gin(&mut reqs);
    reqs.ginSignalCount = 1;
    match DevComm::create(comm, &reqs) {
        Ok(_dc) => Gin {
            kind: std::env::var("NCCL_GIN_TYPE")
                .ok()
                .map(|t| GinKind::from_nccl_type(t.parse().unwrap_or(-1)))
                .unwrap_or(GinKind::Available),
            reason: "ncclDevCommCreate with GIN succeeded (NCCL 2.28 cannot name the GIN type; NCCL_GIN_TYPE pins it)"
                .into(),
            connection: "full".into(),
            ..Default::default()
        },
        Err(e) => Gin { kind: GinKind::None, reason: e.msg, connection: "none".into(), ..Default::default() },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requirements_start_from_nccls_initializer_and_ask_for_gin() {
        let mut r = requirements();
        assert_eq!(r.lsaBarrierCount, 0);
        assert_eq!(r.ginSignalCount, 0);
        assert!(!r.lsaMultimem, "multicast must never be requested");
        #[cfg(nccl_versioned_structs)]
        {
            assert_eq!(r.size, std::mem::size_of::<ffi::ncclDevCommRequirements>());
            assert_eq!(r.magic, 0xcafebeef);
            assert_eq!(r.version, crate::nccl::header_version());
        }
        request_gin(&mut r);
        #[cfg(nccl_gin_connection_type)]
        assert_eq!(r.ginConnectionType, ffi::ncclGinConnectionType_t::NCCL_GIN_CONNECTION_FULL);
        #[cfg(not(nccl_gin_connection_type))]
        assert!(r.ginForceEnable);
        #[cfg(nccl_gin_signal_requirements)]
        assert!(!r.ginStrongSignalsRequired && !r.ginVaSignalsRequired);
    }

    #[test]
    fn gin_type_names() {
        assert_eq!(GinKind::from_nccl_type(3).as_str(), "gdaki");
        assert_eq!(GinKind::from_nccl_type(5).as_str(), "efa-gda");
        assert_eq!(GinKind::from_nccl_type(9).as_str(), "unknown");
    }
}
