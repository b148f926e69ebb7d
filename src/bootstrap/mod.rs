//! How ranks find each other: MPI when started by mpirun / srun, else threads of one process.
//! Both offer the same small set of collectives over bytes; NCCL does the data movement.
pub mod check;
pub mod group;
pub mod mpi;
pub mod threads;

pub trait Bootstrap {
    fn rank(&self) -> usize;
    fn size(&self) -> usize;
    /// Every rank's bytes, in rank order.
    fn allgather(&self, mine: &[u8]) -> Vec<Vec<u8>>;

    fn barrier(&self) {
        self.allgather(&[]);
    }

    /// Rank `root`'s bytes on every rank.
    fn broadcast(&self, root: usize, mine: &[u8]) -> Vec<u8> {
        let v = self.allgather(if self.rank() == root { mine } else { &[] });
        v[root].clone()
    }

    /// Every rank's f64 values (same length on all ranks), in rank order.
    fn allgather_f64(&self, mine: &[f64]) -> Vec<Vec<f64>> {
        let bytes: Vec<u8> = mine.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.allgather(&bytes)
            .into_iter()
            .map(|b| b.chunks_exact(8).map(|c| f64::from_le_bytes(c.try_into().unwrap())).collect())
            .collect()
    }

    /// Local rank on this host (ranks of the same host numbered in rank order) and the host name.
    fn local_rank(&self) -> (usize, String) {
        let host = hostname();
        let all = self.allgather(host.as_bytes());
        let local = all[..self.rank()].iter().filter(|h| h.as_slice() == host.as_bytes()).count();
        (local, host)
    }
}

pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .or_else(|_| std::env::var("HOSTNAME"))
        .unwrap_or_else(|_| "localhost".into())
}

/// Was this process started by an MPI launcher (mpirun, mpiexec, srun --mpi=...)?
pub fn launched_by_mpi() -> bool {
    let set = |v: &str| std::env::var_os(v).is_some();
    set("OMPI_COMM_WORLD_SIZE")
        || set("PMIX_RANK")
        || set("PMI_RANK")
        || set("PMI_SIZE")
        || set("MPI_LOCALNRANKS")
        || std::env::var("SLURM_NTASKS").ok().and_then(|n| n.parse::<u32>().ok()).is_some_and(|n| n > 1)
            && set("SLURM_PROCID")
}
