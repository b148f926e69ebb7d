//! Bringing ranks up: one rank per process under mpirun / srun, else one thread per GPU.
use crate::bootstrap::{self, Bootstrap};
use crate::cuda;
use crate::error::{die, Error, Exit, Result};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Run `rank_main(boot, device)` on every rank (`local_ranks` threads without MPI); returns
/// rank 0's exit code. An error on another rank stops the process, after giving rank 0 a moment
/// to write its results.
pub fn run<F>(prog: &'static str, local_ranks: usize, rank_main: F) -> Result<Exit>
where
    F: Fn(&dyn Bootstrap, usize) -> Result<Exit> + Send + Sync + 'static,
{
    crate::nccl::load()?;
    let ngpus = cuda::device_count()?;
    if ngpus == 0 {
        return Err(Error::env("no GPU visible to CUDA", "run on a GPU machine, or check CUDA_VISIBLE_DEVICES"));
    }
    // (Under a launcher the command line was checked for one rank per process: driver::cli.)
    if bootstrap::launched_by_mpi() {
        let boot = bootstrap::mpi::MpiRank::init()?;
        let (local, _) = boot.local_rank();
        return rank_main(&boot, local);
    }
    if local_ranks > ngpus {
        return Err(Error::env(
            format!("-t × -g asks for {local_ranks} GPUs but {ngpus} are visible"),
            format!("use at most {ngpus} ranks in one process, e.g. -g {ngpus}"),
        ));
    }
    // Set when rank 0's thread has finished (written its results).
    let rank0_done = Arc::new(AtomicBool::new(false));
    let rank_main = Arc::new(rank_main);
    let handles: Vec<_> = bootstrap::threads::group(local_ranks)
        .into_iter()
        .map(|b| {
            let (rank_main, rank0_done) = (rank_main.clone(), rank0_done.clone());
            std::thread::spawn(move || {
                let rank = b.rank();
                let res = rank_main(&b, rank);
                if rank == 0 {
                    rank0_done.store(true, Ordering::SeqCst);
                }
                match res {
                    Ok(code) => code,
                    // Rank 0 has written what it has; the other ranks may be stuck: stop here.
                    Err(e) if rank == 0 => die(prog, &e),
                    // Another rank failing would leave the rest waiting in a collective: stop
                    // the process.
                    Err(e) => {
                        eprintln!("{prog}: error: rank {rank}: {e}");
                        let t0 = std::time::Instant::now();
                        while !rank0_done.load(Ordering::SeqCst) && t0.elapsed().as_secs() < 10 {
                            std::thread::sleep(std::time::Duration::from_millis(50));
                        }
                        std::process::exit(e.exit as i32)
                    }
                }
            })
        })
        .collect();
    let mut code = Exit::Ok;
    for (i, h) in handles.into_iter().enumerate() {
        let c = h.join().map_err(|_| Error::internal("a rank thread panicked"))?;
        if i == 0 {
            code = c;
        }
    }
    Ok(code)
}
