//! Ranks as threads of one process: exchanges go through shared memory.
use super::Bootstrap;
use std::sync::{Arc, Barrier, Mutex};

pub struct Shared {
    slots: Mutex<Vec<Vec<u8>>>,
    barrier: Barrier,
    n: usize,
}

pub struct ThreadRank {
    rank: usize,
    shared: Arc<Shared>,
}

/// One bootstrap handle per thread-rank.
pub fn group(n: usize) -> Vec<ThreadRank> {
    let shared = Arc::new(Shared { slots: Mutex::new(vec![vec![]; n]), barrier: Barrier::new(n), n });
    (0..n).map(|rank| ThreadRank { rank, shared: shared.clone() }).collect()
}

impl Bootstrap for ThreadRank {
    fn rank(&self) -> usize {
        self.rank
    }
    fn size(&self) -> usize {
        self.shared.n
    }
    fn allgather(&self, mine: &[u8]) -> Vec<Vec<u8>> {
        // Write, wait for all writers, read, wait for all readers before anyone writes again.
        self.shared.slots.lock().unwrap()[self.rank] = mine.to_vec();
        self.shared.barrier.wait();
        let all = self.shared.slots.lock().unwrap().clone();
        self.shared.barrier.wait();
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn allgather_and_broadcast_across_threads() {
        let handles: Vec<_> = group(4)
            .into_iter()
            .map(|b| {
                std::thread::spawn(move || {
                    let r = b.rank() as u8;
                    assert_eq!(b.size(), 4);
                    let all = b.allgather(&[r, r]);
                    assert_eq!(all, (0..4u8).map(|i| vec![i, i]).collect::<Vec<_>>());
                    for round in 0..50u8 {
                        assert_eq!(b.broadcast(2, &[round, r]), vec![round, 2]);
                    }
                    let f = b.allgather_f64(&[r as f64 * 0.5]);
                    assert_eq!(f[3], vec![1.5]);
                    b.local_rank().0
                })
            })
            .collect();
        let locals: Vec<usize> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        assert_eq!(locals, vec![0, 1, 2, 3]);
    }

    #[test]
    fn nobody_leaves_a_barrier_before_everyone_reached_it() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let arrived = Arc::new(AtomicUsize::new(0));
        let handles: Vec<_> = group(4)
            .into_iter()
            .map(|b| {
                let arrived = arrived.clone();
                std::thread::spawn(move || {
                    // Arrive in turn, rank 3 last, well apart.
                    std::thread::sleep(std::time::Duration::from_millis(30 * b.rank() as u64));
                    arrived.fetch_add(1, Ordering::SeqCst);
                    b.barrier();
                    arrived.load(Ordering::SeqCst)
                })
            })
            .collect();
        let seen: Vec<usize> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        assert_eq!(seen, vec![4; 4]);
    }
}
