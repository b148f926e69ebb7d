//! NCCL: raw bindings (`ffi`), the library loader with its version check, and safe wrappers for
//! communicators, memory and registration. Differences between NCCL API generations live in
//! `compat` only.
pub mod compat;
pub mod config;
pub mod ffi;
mod loader;

pub use loader::{header_version, load, version_string, Nccl};

use crate::error::{Error, Exit, Result};
use std::ffi::{c_void, CStr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// Set when the watchdog aborts the communicators. The abort frees them while rank threads may
/// still hold them (a blocked call returns, then the rank cleans up), so from then on a thread
/// that calls into NCCL waits for the watchdog's exit instead of touching freed state.
static ABORTING: AtomicBool = AtomicBool::new(false);

/// The loaded library; `load` must have succeeded first. Never returns once an abort started.
pub fn lib() -> &'static ffi::NcclLib {
    if ABORTING.load(Ordering::Acquire) {
        loop {
            std::thread::park();
        }
    }
    &loader::get().lib
}

fn err_string(r: ffi::ncclResult_t) -> String {
    unsafe {
        match lib().ncclGetErrorString.as_ref() {
            Ok(f) => CStr::from_ptr(f(r)).to_string_lossy().into_owned(),
            Err(_) => format!("ncclResult {}", r.0),
        }
    }
}

/// NCCL's last error message for `comm` (may be empty).
pub fn last_error(comm: ffi::ncclComm_t) -> String {
    unsafe {
        match lib().ncclGetLastError.as_ref() {
            Ok(f) => {
                let p = f(comm);
                if p.is_null() {
                    String::new()
                } else {
                    // NCCL may rewrite this buffer from another thread while we read it: keep
                    // the text printable.
                    let s = CStr::from_ptr(p).to_string_lossy();
                    s.trim().chars().map(|c| if crate::console::hidden(c) { '?' } else { c }).collect()
                }
            }
            Err(_) => String::new(),
        }
    }
}

/// Turn an ncclResult_t into a Result, with NCCL's own words.
pub fn check(r: ffi::ncclResult_t, what: &str, comm: ffi::ncclComm_t) -> Result<()> {
    if r == ffi::ncclResult_t::ncclSuccess {
        return Ok(());
    }
    let last = last_error(comm);
    let mut msg = format!("{what} failed: {}", err_string(r));
    if !last.is_empty() {
        msg += &format!(" ({last})");
    }
    Err(Error::new(Exit::Nccl, msg))
}

pub struct UniqueId(pub ffi::ncclUniqueId);

impl UniqueId {
    pub fn new() -> Result<UniqueId> {
        let mut id = ffi::ncclUniqueId { internal: [0; ffi::NCCL_UNIQUE_ID_BYTES as usize] };
        check(unsafe { lib().ncclGetUniqueId(&mut id) }, "ncclGetUniqueId", std::ptr::null_mut())?;
        Ok(UniqueId(id))
    }
    pub fn to_bytes(&self) -> Vec<u8> {
        self.0.internal.iter().map(|&c| c as u8).collect()
    }
    pub fn from_bytes(b: &[u8]) -> Result<UniqueId> {
        const BYTES: usize = ffi::NCCL_UNIQUE_ID_BYTES as usize;
        if b.len() != BYTES {
            return Err(Error::internal(format!("ncclUniqueId of {} bytes, expected {BYTES}", b.len())));
        }
        let mut id = ffi::ncclUniqueId { internal: [0; ffi::NCCL_UNIQUE_ID_BYTES as usize] };
        for (d, s) in id.internal.iter_mut().zip(b) {
            *d = *s as std::ffi::c_char;
        }
        Ok(UniqueId(id))
    }
}

/// Communicators alive in this process, for the timeout watchdog.
static LIVE: Mutex<Vec<usize>> = Mutex::new(Vec::new());

/// Abort every live communicator (the watchdog calls this; blocked NCCL calls then return).
pub fn abort_all() {
    // Taken before the flag, which parks every later `lib()`. None when the limit passed before
    // NCCL was loaded (a slow or stuck start): then no communicator exists to abort.
    let nccl = loader::loaded();
    ABORTING.store(true, Ordering::Release);
    let Some(nccl) = nccl else { return };
    let comms: Vec<usize> = LIVE.lock().map(|v| v.clone()).unwrap_or_default();
    for c in comms {
        unsafe {
            let _ = nccl.lib.ncclCommAbort(c as ffi::ncclComm_t);
        }
    }
}

pub struct Comm {
    raw: ffi::ncclComm_t,
    pub rank: usize,
    pub nranks: usize,
}

// A communicator is used by one thread at a time; NCCL allows that from any thread.
unsafe impl Send for Comm {}

impl Comm {
    /// ncclCommInitRank: collective over all `nranks` ranks.
    pub fn init(nranks: usize, id: &UniqueId, rank: usize) -> Result<Comm> {
        let mut raw: ffi::ncclComm_t = std::ptr::null_mut();
        let r = unsafe { lib().ncclCommInitRank(&mut raw, nranks as i32, id.0, rank as i32) };
        check(r, "ncclCommInitRank", raw)?;
        LIVE.lock().unwrap().push(raw as usize);
        Ok(Comm { raw, rank, nranks })
    }

    /// A communicator over every rank of `boot`: rank 0 makes the unique id (single-use), the
    /// bootstrap hands it round, all ranks join.
    pub fn bootstrap(boot: &dyn crate::bootstrap::Bootstrap) -> Result<Comm> {
        let uid = if boot.rank() == 0 { UniqueId::new()?.to_bytes() } else { vec![] };
        let uid = UniqueId::from_bytes(&boot.broadcast(0, &uid))?;
        Comm::init(boot.size(), &uid, boot.rank())
    }

    /// ncclCommSplit: collective over every rank of this communicator. Ranks giving the same
    /// `color` form one new communicator, ordered by `key`; each gets its own `config`.
    pub fn split(&self, color: usize, key: usize, config: &config::CommConfig) -> Result<Comm> {
        let mut keep = None;
        let mut cfg = config.to_ffi(&mut keep);
        let mut raw: ffi::ncclComm_t = std::ptr::null_mut();
        let r = unsafe { lib().ncclCommSplit(self.raw, color as i32, key as i32, &mut raw, &mut cfg) };
        self.check(r, "ncclCommSplit")?;
        if raw.is_null() {
            return Err(Error::internal("ncclCommSplit gave no communicator for a rank with a color"));
        }
        LIVE.lock().unwrap().push(raw as usize);
        let (mut rank, mut nranks) = (0i32, 0i32);
        let mut comm = Comm { raw, rank: 0, nranks: 0 };
        comm.check(unsafe { lib().ncclCommUserRank(raw, &mut rank) }, "ncclCommUserRank")?;
        comm.check(unsafe { lib().ncclCommCount(raw, &mut nranks) }, "ncclCommCount")?;
        (comm.rank, comm.nranks) = (rank as usize, nranks as usize);
        Ok(comm)
    }

    pub fn raw(&self) -> ffi::ncclComm_t {
        self.raw
    }

    pub fn check(&self, r: ffi::ncclResult_t, what: &str) -> Result<()> {
        check(r, what, self.raw)
    }

    /// Errors NCCL raised asynchronously (e.g. a peer failed).
    pub fn async_error(&self) -> Result<()> {
        let mut st = ffi::ncclResult_t::ncclSuccess;
        self.check(unsafe { lib().ncclCommGetAsyncError(self.raw, &mut st) }, "ncclCommGetAsyncError")?;
        self.check(st, "asynchronous NCCL operation")
    }

    /// Register `mem` as a symmetric window (collective). A NULL window (symmetric memory
    /// unsupported here) is an error naming the cause, never silently ignored.
    pub fn window_register(&self, mem: &DevMem) -> Result<ffi::ncclWindow_t> {
        let mut w: ffi::ncclWindow_t = std::ptr::null_mut();
        let r = unsafe {
            lib().ncclCommWindowRegister(self.raw, mem.as_ptr(), mem.bytes, &mut w, ffi::NCCL_WIN_COLL_SYMMETRIC as i32)
        };
        self.check(r, "ncclCommWindowRegister")?;
        if w.is_null() {
            return Err(Error::new(
                Exit::Nccl,
                "ncclCommWindowRegister returned a NULL window: this communicator has no symmetric memory support \
                 (needs CUDA P2P between all local GPUs, cuMem, NCCL_WIN_ENABLE=1, one NVLink domain or GIN)",
            )
            .with_fix(
                "run with -R 0 or -R 1, or check NCCL_WIN_ENABLE / NCCL_CUMEM_ENABLE and nvidia-smi topo -p2p p",
            ));
        }
        Ok(w)
    }

    /// # Safety
    /// `w` must be a window registered on this communicator, not used afterwards.
    pub unsafe fn window_deregister(&self, w: ffi::ncclWindow_t) {
        let _ = lib().ncclCommWindowDeregister(self.raw, w);
    }

    /// Size of the LSA team (ranks reachable by load/store) this rank belongs to.
    pub fn lsa_size(&self) -> usize {
        unsafe { lib().ncclTeamLsa(self.raw).nRanks as usize }
    }

    /// Why kernels that reach every peer over NVLink cannot run on this communicator, if not.
    pub fn not_one_lsa_team(&self) -> Option<String> {
        not_one_lsa_team(self.nranks, self.lsa_size())
    }

    /// ncclAllReduce of `count` elements with `op`.
    ///
    /// # Safety
    /// `send`/`recv` must be device buffers of `count` elements of `dt` on this communicator's
    /// GPU, and `stream` a live stream of that GPU.
    pub unsafe fn all_reduce(
        &self,
        send: u64,
        recv: u64,
        count: usize,
        dt: ffi::ncclDataType_t,
        op: ffi::ncclRedOp_t,
        stream: *mut c_void,
    ) -> Result<()> {
        let r = lib().ncclAllReduce(send as *const c_void, recv as *mut c_void, count, dt, op, self.raw, stream.cast());
        self.check(r, "ncclAllReduce")
    }

    /// `count` elements to and from every peer (ncclAlltoAll, which every supported NCCL has).
    ///
    /// # Safety
    /// `send`/`recv` must be device buffers of `nranks * count` elements of `dt` on this
    /// communicator's GPU, and `stream` a live stream of that GPU.
    pub unsafe fn alltoall(
        &self,
        send: *const c_void,
        recv: *mut c_void,
        count: usize,
        dt: ffi::ncclDataType_t,
        stream: *mut c_void,
    ) -> Result<()> {
        let r = lib().ncclAlltoAll(send, recv, count, dt, self.raw, stream.cast());
        self.check(r, "ncclAlltoAll")
    }
}

/// Why kernels that reach every peer over NVLink cannot run with `ranks` ranks whose LSA team
/// has `lsa`: the team must hold every rank.
pub fn not_one_lsa_team(ranks: usize, lsa: usize) -> Option<String> {
    (lsa != ranks).then(|| {
        format!(
            "needs every rank in one NVLink (LSA) domain; the LSA team has {lsa} of {ranks} ranks (use gin or hybrid across nodes)"
        )
    })
}

impl Drop for Comm {
    fn drop(&mut self) {
        LIVE.lock().unwrap().retain(|&c| c != self.raw as usize);
        unsafe {
            let _ = lib().ncclCommDestroy(self.raw);
        }
    }
}

/// Is GIN usable across these ranks, and if not, why (in NCCL's words)? Asked on a communicator of
/// its own: a refused GIN request leaves NCCL's per-communicator GIN state failed, which would
/// break later window registration on the communicator the benchmark uses. Collective.
pub fn probe_gin(boot: &dyn crate::bootstrap::Bootstrap) -> Result<crate::results::Gin> {
    let comm = Comm::bootstrap(boot)?;
    Ok(compat::probe_gin(&comm))
}

pub fn group_start() -> Result<()> {
    check(unsafe { lib().ncclGroupStart() }, "ncclGroupStart", std::ptr::null_mut())
}

pub fn group_end() -> Result<()> {
    check(unsafe { lib().ncclGroupEnd() }, "ncclGroupEnd", std::ptr::null_mut())
}

/// Device memory from ncclMemAlloc (cuMem-backed, as registration and windows require).
pub struct DevMem {
    pub ptr: u64,
    pub bytes: usize,
}

impl DevMem {
    pub fn alloc(bytes: usize) -> Result<DevMem> {
        let mut p: *mut c_void = std::ptr::null_mut();
        check(unsafe { lib().ncclMemAlloc(&mut p, bytes.max(1)) }, "ncclMemAlloc", std::ptr::null_mut())
            .map_err(|e| Error::new(e.exit, format!("{} ({bytes} bytes)", e.msg)))?;
        Ok(DevMem { ptr: p as u64, bytes })
    }
    pub fn as_ptr(&self) -> *mut c_void {
        self.ptr as *mut c_void
    }
}

impl Drop for DevMem {
    fn drop(&mut self) {
        unsafe {
            let _ = lib().ncclMemFree(self.ptr as *mut c_void);
        }
    }
}

/// A zeroed device buffer registered as a symmetric window, for an impl's own state (staging
/// buffers, signal words). Collective to create; deregistered, then freed, when dropped.
pub struct SymBuffer {
    pub win: ffi::ncclWindow_t,
    comm: ffi::ncclComm_t,
    mem: DevMem,
}

impl SymBuffer {
    pub fn new(comm: &Comm, bytes: usize, stream: &cudarc::driver::CudaStream) -> Result<SymBuffer> {
        let mem = DevMem::alloc(bytes)?;
        unsafe { cudarc::driver::result::memset_d8_async(mem.ptr, 0, mem.bytes, stream.cu_stream()) }?;
        stream.synchronize()?;
        let win = comm.window_register(&mem)?;
        Ok(SymBuffer { win, comm: comm.raw(), mem })
    }

    /// This rank's device address of the buffer.
    pub fn ptr(&self) -> u64 {
        self.mem.ptr
    }
}

impl Drop for SymBuffer {
    fn drop(&mut self) {
        unsafe {
            let _ = lib().ncclCommWindowDeregister(self.comm, self.win);
        }
    }
}

crate::driver::cli::numbered_enum! {
    /// `-R`: how the benchmark's buffers are registered with NCCL, under nccl-tests' numbers
    /// (which the command line takes and the results' `config.local_register` keeps).
    RegisterMode {
        None,
        /// ncclCommRegister
        Buffers,
        /// Symmetric windows
        Window,
    }
}

/// The send and receive buffers as registered (`-R`).
pub enum Registration {
    None,
    /// ncclCommRegister handles.
    Buffers(Vec<*mut c_void>),
    /// Symmetric windows (send, recv).
    Windows(ffi::ncclWindow_t, ffi::ncclWindow_t),
}

impl Registration {
    /// Register `bufs` as `-R mode` asks. A NULL window (symmetric memory unsupported here) is an
    /// error naming the cause, never silently ignored.
    pub fn register(comm: &Comm, mode: RegisterMode, send: &DevMem, recv: &DevMem) -> Result<Registration> {
        match mode {
            RegisterMode::None => Ok(Registration::None),
            RegisterMode::Buffers => {
                let mut hs = vec![];
                for b in [send, recv] {
                    let mut h: *mut c_void = std::ptr::null_mut();
                    let r = unsafe { lib().ncclCommRegister(comm.raw, b.as_ptr(), b.bytes, &mut h) };
                    if let Err(e) = comm.check(r, "ncclCommRegister") {
                        Registration::Buffers(hs).release(comm); // the one registered already
                        return Err(e);
                    }
                    hs.push(h);
                }
                Ok(Registration::Buffers(hs))
            }
            RegisterMode::Window => {
                let sw = comm.window_register(send)?;
                match comm.window_register(recv) {
                    Ok(rw) => Ok(Registration::Windows(sw, rw)),
                    Err(e) => {
                        unsafe { comm.window_deregister(sw) };
                        Err(e)
                    }
                }
            }
        }
    }

    pub fn describe(&self) -> &'static str {
        match self {
            Registration::None => "none",
            Registration::Buffers(_) => "ncclCommRegister",
            Registration::Windows(..) => "symmetric window",
        }
    }

    /// Deregister; must run before the buffers are freed and the communicator destroyed.
    pub fn release(&mut self, comm: &Comm) {
        match std::mem::replace(self, Registration::None) {
            Registration::None => {}
            Registration::Buffers(hs) => {
                for h in hs {
                    unsafe {
                        let _ = lib().ncclCommDeregister(comm.raw, h);
                    }
                }
            }
            Registration::Windows(a, b) => unsafe {
                comm.window_deregister(a);
                comm.window_deregister(b);
            },
        }
    }
}

/// NCCL datatype enum for our dtype.
pub fn datatype(d: crate::dtype::Dtype) -> ffi::ncclDataType_t {
    use crate::dtype::Dtype::*;
    use ffi::ncclDataType_t as T;
    match d {
        Int8 => T::ncclInt8,
        Uint8 => T::ncclUint8,
        Int32 => T::ncclInt32,
        Uint32 => T::ncclUint32,
        Int64 => T::ncclInt64,
        Uint64 => T::ncclUint64,
        Half => T::ncclFloat16,
        Float => T::ncclFloat32,
        Double => T::ncclFloat64,
        Bfloat16 => T::ncclBfloat16,
    }
}
