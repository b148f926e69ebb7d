//! `ginbench mpi-check`: prove the MPI launch works before a long GPU run.
use super::mpi::MpiRank;
use super::Bootstrap;
use crate::error::{Error, Result};

/// Exchange rank-specific bytes with every rank and verify them; one line per rank.
pub fn run() -> Result<String> {
    if !super::launched_by_mpi() {
        return Err(Error::usage("not started by an MPI launcher", "run it as: mpirun -np 2 ginbench mpi-check"));
    }
    let b = MpiRank::init()?;
    let (rank, n) = (b.rank(), b.size());
    // Variable-length payloads: rank r sends r+1 copies of byte r.
    let all = b.allgather(&vec![rank as u8; rank + 1]);
    let gathered_ok = all.iter().enumerate().all(|(r, v)| v.len() == r + 1 && v.iter().all(|&x| x == r as u8));
    let bcast = b.broadcast(n - 1, format!("from {}", n - 1).as_bytes());
    let bcast_ok = bcast == format!("from {}", n - 1).as_bytes();
    let sums = b.allgather_f64(&[rank as f64]);
    let sum_ok = sums.iter().map(|v| v[0]).sum::<f64>() == (n * (n - 1) / 2) as f64;
    let (local, host) = b.local_rank();
    b.barrier();
    if gathered_ok && bcast_ok && sum_ok {
        Ok(format!("mpi-check: rank {rank} of {n} on {host} (local rank {local}): allgather, broadcast, reduce ok"))
    } else {
        Err(Error::internal(format!(
            "mpi-check: rank {rank} of {n}: allgather {gathered_ok}, broadcast {bcast_ok}, reduce {sum_ok}"
        )))
    }
}
