//! Ranks as MPI processes (rsmpi). MPI carries only bootstrap bytes and results, never data.
use super::Bootstrap;
use mpi::datatype::PartitionMut;
use mpi::topology::{Communicator, SimpleCommunicator};
use mpi::traits::*;

pub struct MpiRank {
    // Finalizes MPI when dropped: keep it alive until the end of main.
    _universe: mpi::environment::Universe,
    world: SimpleCommunicator,
}

impl MpiRank {
    pub fn init() -> Option<MpiRank> {
        let universe = mpi::initialize()?;
        let world = universe.world();
        Some(MpiRank { _universe: universe, world })
    }
}

impl Bootstrap for MpiRank {
    fn rank(&self) -> usize {
        self.world.rank() as usize
    }
    fn size(&self) -> usize {
        self.world.size() as usize
    }
    fn allgather(&self, mine: &[u8]) -> Vec<Vec<u8>> {
        let n = self.size();
        let mut lens = vec![0i32; n];
        self.world.all_gather_into(&(mine.len() as i32), &mut lens[..]);
        let displs: Vec<i32> = lens
            .iter()
            .scan(0, |acc, &l| {
                let d = *acc;
                *acc += l;
                Some(d)
            })
            .collect();
        let total: i32 = lens.iter().sum();
        let mut buf = vec![0u8; total as usize];
        {
            let mut part = PartitionMut::new(&mut buf[..], &lens[..], &displs[..]);
            self.world.all_gather_varcount_into(mine, &mut part);
        }
        (0..n).map(|i| buf[displs[i] as usize..(displs[i] + lens[i]) as usize].to_vec()).collect()
    }
    fn barrier(&self) {
        self.world.barrier();
    }
}
