//! Bringing ranks up: one rank per process under mpirun / srun, else one thread per GPU.
use crate::bootstrap::{self, Bootstrap};
use crate::cuda;
use crate::error::{die, Error, Exit, Result};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// This process's GPU under a launcher: of the GPUs it sees, its local rank's, in turn (local rank
/// modulo GPUs), so a launcher that gives each process its own GPU (CUDA_VISIBLE_DEVICES per
/// task) works as well as one that shows every process all of them. Two ranks on one physical GPU
/// are allowed only in different nodes as NCCL sees them (NCCL_HOSTID, which `--emulate-nodes`
/// sets per process): NCCL refuses two ranks of one node on one GPU. That lets a small host run
/// the layout of a larger one (e.g. 2 virtual nodes of 2 ranks on 2 GPUs) to check the
/// multi-node protocols; ranks sharing a GPU take turns on it, so the times mean nothing (the
/// preamble says so).
fn device_of_process(boot: &dyn Bootstrap, ngpus: usize) -> Result<usize> {
    let (local, host) = boot.local_rank();
    let device = local % ngpus;
    let node = std::env::var("NCCL_HOSTID").unwrap_or_else(|_| host.clone());
    let bus = cuda::pci_bus_id_of(device)?;
    let all = boot.allgather(&gpu_key(&host, &bus, &node));
    if let Some((a, b)) = first_shared(&all) {
        return Err(Error::env(
            format!("ranks {a} and {b} would share GPU {bus} of host {host} in one node: {ngpus} GPU(s) visible"),
            "start at most one rank per GPU on each host, or, with --gin-backend loopback, split the ranks into \
             virtual nodes of at most that many ranks with --emulate-nodes",
        ));
    }
    Ok(device)
}

/// What two ranks must not both have: a GPU of a host, in one node.
fn gpu_key(host: &str, bus: &str, node: &str) -> Vec<u8> {
    format!("{host}\0{bus}\0{node}").into_bytes()
}

/// The first two ranks whose `gpu_key`s are equal.
fn first_shared(keys: &[Vec<u8>]) -> Option<(usize, usize)> {
    (0..keys.len()).find_map(|b| (0..b).find(|&a| keys[a] == keys[b]).map(|a| (a, b)))
}

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
        let device = device_of_process(&boot, ngpus)?;
        return rank_main(&boot, device);
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
                    // the process, once rank 0 has written what it has.
                    Err(e) => {
                        let t0 = std::time::Instant::now();
                        let wait_rank0 = |secs| {
                            while !rank0_done.load(Ordering::SeqCst) && t0.elapsed().as_secs_f64() < secs {
                                std::thread::sleep(std::time::Duration::from_millis(50));
                            }
                        };
                        // An error every rank meets is reported once, by rank 0.
                        wait_rank0(1.0);
                        let _reporting = crate::error::exiting();
                        crate::console::err(&format!("{prog}: error: rank {rank}: {e}\n"));
                        wait_rank0(10.0);
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

#[cfg(test)]
mod tests {
    use super::{first_shared, gpu_key};
    #[test]
    fn ranks_may_share_a_gpu_only_across_nodes() {
        let k = gpu_key;
        // 4 ranks, 2 GPUs, 2 virtual nodes of 2: GPU 0 and 1 each serve one rank of each node.
        assert_eq!(
            first_shared(&[k("h", "0:06", "a"), k("h", "0:07", "a"), k("h", "0:06", "b"), k("h", "0:07", "b")]),
            None
        );
        // The same without virtual nodes: ranks 0 and 2 on one GPU of one node.
        let one = [k("h", "0:06", "h"), k("h", "0:07", "h"), k("h", "0:06", "h"), k("h", "0:07", "h")];
        assert_eq!(first_shared(&one), Some((0, 2)));
        // A GPU per process (CUDA_VISIBLE_DEVICES per task): every rank's device 0, different GPUs.
        assert_eq!(first_shared(&[k("h", "0:06", "h"), k("h", "0:07", "h")]), None);
        // Different hosts never collide.
        assert_eq!(first_shared(&[k("h", "0:06", "h"), k("g", "0:06", "g")]), None);
    }
}
