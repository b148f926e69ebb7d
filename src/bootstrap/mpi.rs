//! Ranks as MPI processes. MPI carries only bootstrap bytes and results, never data.
//!
//! The binaries do not link libmpi, so that they start on machines without MPI: build.rs compiles
//! `mpi_shim.c` with the MPI compiler wrapper into a small shared library that is embedded here,
//! and [`MpiRank::init`] (called only under an MPI launcher) writes it to an anonymous file and
//! loads it, which loads the MPI library.
use super::Bootstrap;
use crate::error::{Error, Exit, Result};
use std::ffi::{c_char, c_int, c_uint, c_void};
use std::sync::atomic::{AtomicBool, Ordering};

/// The shim built against the build machine's MPI; empty when the build found no MPI compiler.
const SHIM: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/ginbench_mpi.so"));

const FIX: &str = "source ci/env, or set LD_LIBRARY_PATH to your MPI's lib folder";

#[derive(Clone, Copy)]
struct Shim {
    init: unsafe extern "C" fn(*mut c_int, *mut c_int) -> c_int,
    allgather_int: unsafe extern "C" fn(c_int, *mut c_int) -> c_int,
    allgatherv_bytes: unsafe extern "C" fn(*const c_void, c_int, *mut c_void, *const c_int, *const c_int) -> c_int,
    barrier: unsafe extern "C" fn() -> c_int,
    finalize: unsafe extern "C" fn() -> c_int,
    abort: unsafe extern "C" fn(c_int) -> c_int,
    error_string: unsafe extern "C" fn(c_int, *mut c_char, c_int),
}

impl Shim {
    fn error_text(&self, code: c_int) -> String {
        let mut buf = vec![0u8; 512];
        unsafe { (self.error_string)(code, buf.as_mut_ptr().cast(), buf.len() as c_int) };
        let end = buf.iter().position(|&b| b == 0).unwrap_or(0);
        let text = String::from_utf8_lossy(&buf[..end]).trim().to_string();
        if text.is_empty() {
            format!("MPI error {code}")
        } else {
            text
        }
    }
}

extern "C" {
    fn memfd_create(name: *const c_char, flags: c_uint) -> c_int;
}

/// The shim as a file the dynamic loader can open: an anonymous memory file, or else a temporary
/// file, removed when this is dropped (once the library is loaded).
enum ShimFile {
    Memory(#[allow(dead_code)] std::fs::File),
    Temporary(std::path::PathBuf),
}

impl Drop for ShimFile {
    fn drop(&mut self) {
        if let ShimFile::Temporary(p) = self {
            let _ = std::fs::remove_file(p);
        }
    }
}

fn shim_file() -> Result<(String, ShimFile)> {
    use std::io::Write;
    use std::os::fd::FromRawFd;
    const MFD_CLOEXEC: c_uint = 1;
    let fd = unsafe { memfd_create(c"ginbench_mpi".as_ptr(), MFD_CLOEXEC) };
    if fd >= 0 {
        let mut f = unsafe { std::fs::File::from_raw_fd(fd) };
        f.write_all(SHIM)?;
        return Ok((format!("/proc/self/fd/{fd}"), ShimFile::Memory(f)));
    }
    let path = std::env::temp_dir().join(format!("ginbench_mpi.{}.so", std::process::id()));
    std::fs::write(&path, SHIM)?;
    Ok((path.to_string_lossy().into_owned(), ShimFile::Temporary(path)))
}

/// Load the shim and, through it, the MPI library. The library stays loaded until the process
/// ends (MPI cannot be unloaded).
fn load() -> Result<Shim> {
    if SHIM.is_empty() {
        return Err(Error::env(
            "this build has no MPI support: no MPI compiler wrapper (mpicc) was found when it was built",
            "install MPI or run ci/setup, then rebuild; or run without mpirun (one process, -g GPUs)",
        ));
    }
    use libloading::os::unix::{Library, RTLD_GLOBAL, RTLD_NOW};
    let (path, guard) = shim_file()?;
    // RTLD_GLOBAL: MPI's own plugins expect libmpi's symbols to be global.
    let lib = unsafe { Library::open(Some(&path), RTLD_NOW | RTLD_GLOBAL) }.map_err(|e| {
        let text = e.to_string();
        let detail = text.strip_prefix(&format!("{path}: ")).unwrap_or(&text).to_string();
        Error::env(format!("cannot load the MPI library ({detail})"), FIX)
    })?;
    drop(guard);
    macro_rules! sym {
        ($name:literal) => {
            *unsafe { lib.get(concat!($name, "\0").as_bytes()) }
                .map_err(|e| Error::internal(format!("the MPI shim lacks {}: {e}", $name)))?
        };
    }
    let shim = Shim {
        init: sym!("gb_mpi_init"),
        allgather_int: sym!("gb_mpi_allgather_int"),
        allgatherv_bytes: sym!("gb_mpi_allgatherv_bytes"),
        barrier: sym!("gb_mpi_barrier"),
        finalize: sym!("gb_mpi_finalize"),
        abort: sym!("gb_mpi_abort"),
        error_string: sym!("gb_mpi_error_string"),
    };
    std::mem::forget(lib);
    Ok(shim)
}

static INITIALISED: AtomicBool = AtomicBool::new(false);

/// This process as one rank of MPI_COMM_WORLD. Finalizes MPI when dropped: keep it alive until
/// the end of main.
pub struct MpiRank {
    shim: Shim,
    rank: usize,
    size: usize,
}

impl MpiRank {
    /// Load MPI and initialise it (once per process). Exit 8 ("environment") when the MPI library
    /// cannot be loaded or initialised.
    pub fn init() -> Result<MpiRank> {
        if INITIALISED.swap(true, Ordering::SeqCst) {
            return Err(Error::internal("MPI was already initialised"));
        }
        let shim = load()?;
        let (mut rank, mut size) = (0, 0);
        let rc = unsafe { (shim.init)(&mut rank, &mut size) };
        if rc != 0 || rank < 0 || size < 1 {
            return Err(Error::env(
                format!("MPI initialisation failed: {}", shim.error_text(rc)),
                "start it with the mpirun of the MPI it loads (source ci/env), and check with `mpirun -np 2 ginbench mpi-check`",
            ));
        }
        let (rank, size) = (rank as usize, size as usize);
        // An MPI library that is not the launcher's (or srun without PMI) makes every process a
        // world of one: each would run alone on GPU 0 and write the same results file.
        if let Some((lrank, lsize)) = crate::driver::cli::launcher_rank().filter(|&l| l != (rank, size)) {
            return Err(Error::env(
                format!("MPI says rank {rank} of {size}, the launcher rank {lrank} of {lsize}"),
                "start it with the mpirun of the MPI it loads (source ci/env, or put that MPI's lib folder on \
                 LD_LIBRARY_PATH), or with srun --mpi=pmix (in a batch script too, not directly); check with \
                 `mpirun -np 2 ginbench mpi-check`",
            ));
        }
        Ok(MpiRank { shim, rank, size })
    }

    /// A failed MPI call: one line, then stop every rank (the others may wait in a collective).
    fn check(&self, what: &str, rc: c_int) {
        if rc != 0 {
            self.fail(&format!("{what} failed: {}", self.shim.error_text(rc)));
        }
    }

    fn fail(&self, msg: &str) -> ! {
        let prog = std::env::args_os().next().unwrap_or_default();
        let prog = std::path::Path::new(&prog).file_name().map(|s| s.to_string_lossy().into_owned());
        crate::console::err(&format!(
            "{}: error: rank {}: {msg}\n",
            prog.unwrap_or_else(|| "ginbench".into()),
            self.rank
        ));
        unsafe { (self.shim.abort)(Exit::Internal as c_int) };
        std::process::exit(Exit::Internal as i32)
    }
}

impl Drop for MpiRank {
    fn drop(&mut self) {
        unsafe { (self.shim.finalize)() };
    }
}

impl Bootstrap for MpiRank {
    fn rank(&self) -> usize {
        self.rank
    }
    fn size(&self) -> usize {
        self.size
    }
    fn allgather(&self, mine: &[u8]) -> Vec<Vec<u8>> {
        let n = self.size;
        const TOO_BIG: &str = "allgather of more than 2 GiB (bootstrap messages are small)";
        let len = c_int::try_from(mine.len()).unwrap_or_else(|_| self.fail(TOO_BIG));
        let mut lens = vec![0 as c_int; n];
        self.check("MPI_Allgather", unsafe { (self.shim.allgather_int)(len, lens.as_mut_ptr()) });
        let mut displs = Vec::with_capacity(n);
        let mut total: usize = 0;
        for &l in &lens {
            displs.push(total as c_int);
            total += l as usize;
        }
        if c_int::try_from(total).is_err() {
            self.fail(TOO_BIG);
        }
        let mut buf = vec![0u8; total];
        self.check("MPI_Allgatherv", unsafe {
            (self.shim.allgatherv_bytes)(
                mine.as_ptr().cast(),
                len,
                buf.as_mut_ptr().cast(),
                lens.as_ptr(),
                displs.as_ptr(),
            )
        });
        (0..n).map(|i| buf[displs[i] as usize..displs[i] as usize + lens[i] as usize].to_vec()).collect()
    }
    fn barrier(&self) {
        self.check("MPI_Barrier", unsafe { (self.shim.barrier)() });
    }
}

#[cfg(test)]
mod tests {
    /// MPI's own words for a failed call, read before MPI_Init (valid error classes may be named
    /// then; Open MPI aborts on an invalid one, so only a real class is asked for).
    #[test]
    fn a_failed_call_is_named_in_mpis_own_words() {
        let shim = match super::load() {
            Ok(shim) => shim,
            Err(e) => {
                assert!(std::env::var_os("GINBENCH_REQUIRE_MPI").is_none(), "{}", e.msg);
                return;
            }
        };
        const MPI_ERR_COMM: i32 = 5; // the same in Open MPI and MPICH
        let text = shim.error_text(MPI_ERR_COMM);
        assert!(text.to_lowercase().contains("invalid communicator"), "{text}");
    }
}
