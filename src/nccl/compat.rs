//! The one place for differences between NCCL device-API generations on the host side.
//!
//! - 2.28.x: unversioned structs (start zeroed, as nccl-tests does); GIN requested with
//!   `ginForceEnable`; no `ncclCommQueryProperties`, so GIN availability is learnt by asking for a
//!   GIN device communicator (on a communicator of its own: see `nccl::probe_gin`).
//! - ≥ 2.29.2: versioned structs, started from `NCCL_*_INITIALIZER`; properties query.
//! - < 2.29.7: destroying a device communicator can leave a freed window behind, which the first
//!   GIN device communicator on that communicator then touches; see [`enable_gin_early`].
//! - ≥ 2.29.7: `ginConnectionType` (FULL) replaces `ginForceEnable`.
//! - ≥ 2.30.5: strong and VA signals are required unless waived; the protocols use neither, and
//!   EFA's GIN backends have neither, so they are waived.
//! - ≥ 2.31.2: `ginType` lets a device communicator pick its GIN backend.
//! - Every generation takes `ginContextCount` as a hint only (2.28 ignores it); `ncclDevComm`'s
//!   own `ginContextCount` (a `uint8_t` up to 2.29.3, `uint32_t` after) is what NCCL granted.
//!
//! The initializers' bytes come from src/nccl/initializers.cu, built and run by build.rs against
//! the same headers, so no default is copied here by hand.
use super::{ffi, lib, Comm};
use crate::error::Result;
use crate::gin_transport::GinRequest;
use crate::results::{Gin, GinKind};

mod init {
    include!(concat!(env!("OUT_DIR"), "/nccl_initializers.rs"));
}

const _: () = assert!(std::mem::size_of::<ffi::ncclDevCommRequirements>() == init::DEV_COMM_REQUIREMENTS.len());
#[cfg(nccl_versioned_structs)]
const _: () = assert!(std::mem::size_of::<ffi::ncclCommProperties>() == init::COMM_PROPERTIES.len());

const _: () = assert!(std::mem::size_of::<ffi::ncclConfig_t>() == init::CONFIG.len());

const _: () = {
    let (offset, size) = init::DEV_COMM_GIN_CONTEXT_COUNT;
    assert!((size == 1 || size == 4) && offset + size <= std::mem::size_of::<ffi::ncclDevComm>());
};

/// Headers of this build let a device communicator choose its GIN backend (`ginType`).
pub const DEV_COMM_GIN_TYPE: bool = cfg!(nccl_dev_comm_gin_type);
/// The first NCCL release that has `ginType`, for the message when older headers are asked for it.
pub const DEV_COMM_GIN_TYPE_SINCE: &str = env!("GINBENCH_NCCL_DEV_COMM_GIN_TYPE_SINCE");

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

/// Ask for GIN connections to every rank (weak, non-VA signals are all the protocols use), with
/// the contexts and backend `want` names (unset: NCCL's defaults). The context count is a hint:
/// [`DevComm::gin_context_count`] says what NCCL granted.
pub fn request_gin(r: &mut ffi::ncclDevCommRequirements, want: &GinRequest) {
    if let Some(n) = want.contexts {
        r.ginContextCount = n as i32;
    }
    // The command line refuses a backend when the headers cannot ask for one (DEV_COMM_GIN_TYPE).
    #[cfg(nccl_dev_comm_gin_type)]
    if let Some(t) = want.gin_type {
        r.ginType = ffi::ncclGinType_t(t.nccl_type() as _);
    }
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

    /// The GIN contexts NCCL gave this device communicator (0 without GIN). Kernels must use
    /// contexts below it: the request was only a hint.
    pub fn gin_context_count(&self) -> u32 {
        gin_context_count(&self.raw)
    }
}

/// `ncclDevComm::ginContextCount`, from its offset and width in these headers (the struct is
/// opaque to bindgen).
fn gin_context_count(raw: &ffi::ncclDevComm) -> u32 {
    let (offset, size) = init::DEV_COMM_GIN_CONTEXT_COUNT;
    // SAFETY: the field lies inside the struct (asserted above at compile time); read unaligned
    // in case the opaque type's alignment differs from the header's.
    unsafe {
        let p = (raw as *const ffi::ncclDevComm).cast::<u8>().add(offset);
        if size == 1 {
            *p as u32
        } else {
            p.cast::<u32>().read_unaligned()
        }
    }
}

impl Drop for DevComm {
    fn drop(&mut self) {
        unsafe {
            let _ = lib().ncclDevCommDestroy(self.comm, &self.raw);
        }
    }
}

/// NCCL before 2.29.7 files a device communicator's resource window (its barriers and signals)
/// under address 0: `symWindowCreate` reads the user address before it fills in the NULL one
/// (src/dev_runtime.cc). Destroying that device communicator then removes a neighbour's entry
/// from the communicator's sorted window list and leaves its own, freed, behind. The device
/// communicator that first enables GIN on the communicator walks that list to update every window
/// and touches the freed one: `alltoall_perf -D nvl,gin` segfaulted as it created gin's device
/// communicator, on one node (where 2.28 enables GIN only when asked; 2.29.2 does so on any
/// number of nodes). Enabling GIN before any device communicator is destroyed keeps the walk on live
/// windows; a request for GIN and nothing else owns no resource window, so it is dropped at once
/// and GIN stays enabled on the communicator. Collective: call it on every rank, before the first
/// device communicator on `comm`, where GIN device communicators will be made on it.
pub fn enable_gin_early(comm: &Comm, gin: &Gin) -> Result<()> {
    if cfg!(nccl_resource_window_keyed) || gin.kind == GinKind::None {
        return Ok(()); // fixed there; nothing to enable here
    }
    let mut reqs = requirements();
    request_gin(&mut reqs, &GinRequest::default());
    DevComm::create(comm, &reqs).map(drop)
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
    request_gin(&mut reqs, &GinRequest::default());
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
        let nccl_default = r.ginContextCount;
        request_gin(&mut r, &GinRequest::default());
        assert_eq!(r.ginContextCount, nccl_default, "no request keeps NCCL's default");
        #[cfg(nccl_gin_connection_type)]
        assert_eq!(r.ginConnectionType, ffi::ncclGinConnectionType_t::NCCL_GIN_CONNECTION_FULL);
        #[cfg(not(nccl_gin_connection_type))]
        assert!(r.ginForceEnable);
        #[cfg(nccl_gin_signal_requirements)]
        assert!(!r.ginStrongSignalsRequired && !r.ginVaSignalsRequired);
    }

    #[test]
    fn a_gin_request_reaches_the_requirements() {
        let mut r = requirements();
        let gin_type = DEV_COMM_GIN_TYPE.then_some(crate::gin_transport::GinType::Gdaki);
        request_gin(&mut r, &GinRequest { contexts: Some(2), gin_type });
        assert_eq!(r.ginContextCount, 2);
        #[cfg(nccl_dev_comm_gin_type)]
        assert_eq!(r.ginType.0, 3, "NCCL_GIN_TYPE_GDAKI");
    }

    #[test]
    fn the_granted_context_count_is_read_at_its_offset_and_width() {
        let (offset, size) = init::DEV_COMM_GIN_CONTEXT_COUNT;
        // 2.29.7 widened it from uint8_t, with the connection types.
        assert_eq!(size, if cfg!(nccl_gin_connection_type) { 4 } else { 1 });
        // Every other byte set: a read too wide or misplaced shows.
        let mut raw: ffi::ncclDevComm = unsafe { std::mem::zeroed() };
        let bytes = unsafe {
            std::slice::from_raw_parts_mut(
                (&mut raw as *mut ffi::ncclDevComm).cast::<u8>(),
                std::mem::size_of_val(&raw),
            )
        };
        bytes.fill(0xff);
        if size == 1 {
            bytes[offset] = 3;
        } else {
            bytes[offset..offset + 4].copy_from_slice(&3u32.to_ne_bytes());
        }
        assert_eq!(gin_context_count(&raw), 3);
    }

    #[test]
    fn gin_type_names() {
        assert_eq!(GinKind::from_nccl_type(3).as_str(), "gdaki");
        assert_eq!(GinKind::from_nccl_type(5).as_str(), "efa-gda");
        assert_eq!(GinKind::from_nccl_type(9).as_str(), "unknown");
    }
}
