//! `ginbench mpi-check`: prove the MPI launch works before a long GPU run.
use super::mpi::MpiRank;
use super::Bootstrap;
use crate::error::{Error, Result};

/// `ginbench mpi-check`: under an MPI launcher, `exchange` on this rank, then a barrier.
pub fn run() -> Result<String> {
    if !super::launched_by_mpi() {
        return Err(Error::usage("not started by an MPI launcher", "run it as: mpirun -np 2 ginbench mpi-check"));
    }
    let b = MpiRank::init()?;
    let line = exchange(&b);
    b.barrier();
    line
}

/// Exchange rank-specific bytes with every rank and verify them; one line for this rank.
fn exchange(b: &dyn Bootstrap) -> Result<String> {
    let (rank, n) = (b.rank(), b.size());
    // Variable-length payloads: rank r sends r+1 copies of byte r.
    let all = b.allgather(&vec![rank as u8; rank + 1]);
    let gathered_ok =
        all.len() == n && all.iter().enumerate().all(|(r, v)| v.len() == r + 1 && v.iter().all(|&x| x == r as u8));
    let bcast = b.broadcast(n - 1, format!("from {}", n - 1).as_bytes());
    let bcast_ok = bcast == format!("from {}", n - 1).as_bytes();
    let sums = b.allgather_f64(&[rank as f64]);
    // A value that did not arrive is NaN, which equals nothing: reported, not a panic.
    let sum_ok = sums.iter().map(|v| v.first().copied().unwrap_or(f64::NAN)).sum::<f64>() == (n * (n - 1) / 2) as f64;
    let (local, host) = b.local_rank();
    if gathered_ok && bcast_ok && sum_ok {
        Ok(format!("mpi-check: rank {rank} of {n} on {host} (local rank {local}): allgather, broadcast, reduce ok"))
    } else {
        Err(Error::internal(format!(
            "mpi-check: rank {rank} of {n}: allgather {gathered_ok}, broadcast {bcast_ok}, reduce {sum_ok}"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bootstrap::threads::{self, ThreadRank};
    use std::cell::Cell;

    /// A bootstrap whose `broken`-th exchange delivers every byte inverted.
    struct Faulty {
        inner: ThreadRank,
        broken: Option<usize>,
        calls: Cell<usize>,
    }

    impl Bootstrap for Faulty {
        fn rank(&self) -> usize {
            self.inner.rank()
        }
        fn size(&self) -> usize {
            self.inner.size()
        }
        fn allgather(&self, mine: &[u8]) -> Vec<Vec<u8>> {
            let mut all = self.inner.allgather(mine);
            if Some(self.calls.replace(self.calls.get() + 1)) == self.broken {
                all.iter_mut().flatten().for_each(|b| *b = !*b);
            }
            all
        }
    }

    fn check_on_4_threads(broken: Option<usize>) -> Vec<std::result::Result<String, String>> {
        let handles: Vec<_> = threads::group(4)
            .into_iter()
            .map(|inner| {
                std::thread::spawn(move || exchange(&Faulty { inner, broken, calls: Cell::new(0) }).map_err(|e| e.msg))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    }

    #[test]
    fn an_exchange_that_works_passes_on_every_rank() {
        for (r, line) in check_on_4_threads(None).into_iter().enumerate() {
            let line = line.unwrap();
            assert!(line.starts_with(&format!("mpi-check: rank {r} of 4 on ")), "{line}");
            assert!(line.ends_with(&format!("(local rank {r}): allgather, broadcast, reduce ok")), "{line}");
        }
    }

    #[test]
    fn each_exchange_delivering_wrong_bytes_is_named() {
        // The exchanges in order: allgather, broadcast, the f64 sum.
        for (broken, flags) in [
            (0, "allgather false, broadcast true, reduce true"),
            (1, "allgather true, broadcast false, reduce true"),
            (2, "allgather true, broadcast true, reduce false"),
        ] {
            for (r, line) in check_on_4_threads(Some(broken)).into_iter().enumerate() {
                assert_eq!(line, Err(format!("mpi-check: rank {r} of 4: {flags}")), "exchange {broken} broken");
            }
        }
    }
}
