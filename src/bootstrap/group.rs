//! A process group inside the world: the bootstrap a benchmark sees when it runs on a subset of
//! the ranks (an EP group of an EP × DP layout). Every exchange goes through the world, and each
//! rank keeps its group's part. That needs every rank of the world to make the same sequence of
//! exchanges, which holds because every group runs the same program with the same settings; in
//! exchange the groups need no communicator of their own.
use super::Bootstrap;

pub struct Group<'a> {
    world: &'a dyn Bootstrap,
    /// World ranks of the group, in group-rank order.
    members: Vec<usize>,
    rank: usize,
}

impl<'a> Group<'a> {
    /// The group of `world`'s rank made of `members` (world ranks, which must include it).
    pub fn new(world: &'a dyn Bootstrap, members: Vec<usize>) -> Group<'a> {
        let rank = members.iter().position(|&m| m == world.rank()).expect("a rank is a member of its own group");
        Group { world, members, rank }
    }
}

impl Bootstrap for Group<'_> {
    fn rank(&self) -> usize {
        self.rank
    }
    fn size(&self) -> usize {
        self.members.len()
    }
    fn allgather(&self, mine: &[u8]) -> Vec<Vec<u8>> {
        let mut all = self.world.allgather(mine);
        self.members.iter().map(|&m| std::mem::take(&mut all[m])).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_sees_its_members_only() {
        let world = crate::bootstrap::threads::group(4);
        let handles: Vec<_> = world
            .into_iter()
            .map(|w| {
                std::thread::spawn(move || {
                    // DP groups of EP 2 x DP 2: {0, 2} and {1, 3}.
                    let members = if w.rank() % 2 == 0 { vec![0, 2] } else { vec![1, 3] };
                    let g = Group::new(&w, members.clone());
                    let got = g.allgather(&[w.rank() as u8]);
                    g.barrier();
                    (g.rank(), g.size(), got, members)
                })
            })
            .collect();
        for (i, h) in handles.into_iter().enumerate() {
            let (rank, size, got, members) = h.join().unwrap();
            assert_eq!((rank, size), (i / 2, 2));
            assert_eq!(got, members.iter().map(|&m| vec![m as u8]).collect::<Vec<_>>());
        }
    }
}
