//! Process groups: ranks arranged as EP × DP the way Megatron orders them (expert parallelism
//! innermost), so EP groups are blocks of consecutive ranks (one NVLink domain when EP fits a
//! node) and DP groups take one rank of each EP group. On 4 ranks, EP 2 × DP 2 gives EP groups
//! {0,1},{2,3} and DP groups {0,2},{1,3}. DP may instead span every rank (`--dp` = ranks), so
//! both communicators cover the same ranks (EP 4 with DP 4 on 4 ranks).
use crate::error::{Error, Result};
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Layout {
    pub ranks: usize,
    /// Ranks per EP group (the foreground's communicator).
    pub ep: usize,
    /// Ranks per DP group (the background's communicator).
    pub dp: usize,
}

/// One rank's group: the `color` handed to ncclCommSplit and the world ranks in it, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    pub color: usize,
    pub members: Vec<usize>,
}

impl Layout {
    /// The layout for `ranks` ranks; `ep` defaults to every rank, `dp` to ranks / ep (EP × DP).
    pub fn new(ranks: usize, ep: Option<usize>, dp: Option<usize>) -> Result<Layout> {
        let ep = ep.unwrap_or(ranks);
        if ep == 0 || !ranks.is_multiple_of(ep) {
            return Err(Error::usage(
                format!("--ep {ep} does not divide the {ranks} ranks into EP groups"),
                format!("use an --ep that divides {ranks} (EP groups are blocks of consecutive ranks)"),
            ));
        }
        let dp = dp.unwrap_or(ranks / ep);
        if dp != ranks / ep && dp != ranks {
            // With --ep 1, EP × DP is every rank: one choice, named once.
            let fix = if ep == 1 {
                format!("use --dp {ranks} (DP over every rank)")
            } else {
                format!("use --dp {} (one rank of each EP group) or --dp {ranks} (DP over every rank)", ranks / ep)
            };
            return Err(Error::usage(
                format!(
                    "--dp {dp} with --ep {ep} on {ranks} ranks is neither EP × DP ({}) nor every rank ({ranks})",
                    ranks / ep
                ),
                fix,
            ));
        }
        Ok(Layout { ranks, ep, dp })
    }

    /// The EP group of world rank `rank`: a block of `ep` consecutive ranks.
    pub fn ep_group(&self, rank: usize) -> Group {
        let color = rank / self.ep;
        Group { color, members: (color * self.ep..(color + 1) * self.ep).collect() }
    }

    /// The DP group of world rank `rank`: the ranks at the same place of every EP group, or every
    /// rank when DP spans the world.
    pub fn dp_group(&self, rank: usize) -> Group {
        if self.dp == self.ranks {
            return Group { color: 0, members: (0..self.ranks).collect() };
        }
        let color = rank % self.ep;
        Group { color, members: (0..self.dp).map(|i| color + i * self.ep).collect() }
    }

    /// "EP 2 x DP 2: EP {0,1} {2,3}, DP {0,2} {1,3}".
    pub fn describe(&self) -> String {
        let groups = |f: &dyn Fn(usize) -> Group| {
            let mut seen: Vec<Group> = vec![];
            for r in 0..self.ranks {
                let g = f(r);
                if !seen.contains(&g) {
                    seen.push(g);
                }
            }
            seen.iter()
                .map(|g| format!("{{{}}}", g.members.iter().map(|m| m.to_string()).collect::<Vec<_>>().join(",")))
                .collect::<Vec<_>>()
                .join(" ")
        };
        format!(
            "EP {} x DP {}: EP groups {}; DP groups {}",
            self.ep,
            self.dp,
            groups(&|r| self.ep_group(r)),
            groups(&|r| self.dp_group(r))
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ep2_dp2_on_4_ranks_is_megatrons_layout() {
        let l = Layout::new(4, Some(2), None).unwrap();
        assert_eq!(l.dp, 2);
        let ep: Vec<_> = (0..4).map(|r| l.ep_group(r).members).collect();
        assert_eq!(ep, vec![vec![0, 1], vec![0, 1], vec![2, 3], vec![2, 3]]);
        let dp: Vec<_> = (0..4).map(|r| l.dp_group(r).members).collect();
        assert_eq!(dp, vec![vec![0, 2], vec![1, 3], vec![0, 2], vec![1, 3]]);
        assert_eq!(l.dp_group(3).color, 1);
        assert_eq!(l.describe(), "EP 2 x DP 2: EP groups {0,1} {2,3}; DP groups {0,2} {1,3}");
    }

    #[test]
    fn ep4_gives_dp1_or_both_over_every_rank() {
        let l = Layout::new(4, Some(4), None).unwrap();
        assert_eq!(l.dp, 1);
        assert_eq!(l.dp_group(2).members, vec![2]);
        assert_eq!(l.ep_group(2).members, vec![0, 1, 2, 3]);
        let l = Layout::new(4, None, Some(4)).unwrap();
        assert_eq!((l.ep, l.dp), (4, 4));
        for r in 0..4 {
            assert_eq!(l.ep_group(r), l.dp_group(r), "both communicators over the same ranks");
        }
        // EP 2 with DP over every rank: DP groups overlap both EP groups.
        let l = Layout::new(4, Some(2), Some(4)).unwrap();
        assert_eq!(l.dp_group(1).members, vec![0, 1, 2, 3]);
    }

    #[test]
    fn every_rank_is_in_exactly_one_group_of_each_kind() {
        for (n, ep) in [(8, 2), (8, 4), (16, 8), (6, 3), (1, 1)] {
            let l = Layout::new(n, Some(ep), None).unwrap();
            for r in 0..n {
                let (e, d) = (l.ep_group(r), l.dp_group(r));
                assert!(e.members.contains(&r) && d.members.contains(&r));
                assert_eq!(e.members.len() * d.members.len(), n);
                // An EP group and a DP group share exactly this rank.
                assert_eq!(e.members.iter().filter(|m| d.members.contains(m)).count(), 1);
            }
        }
    }

    #[test]
    fn layouts_that_do_not_fit_are_usage_errors() {
        for (n, ep, dp, needle) in [
            (4, Some(3), None, "--ep 3 does not divide the 4 ranks"),
            (4, Some(0), None, "--ep 0"),
            (4, Some(2), Some(3), "--dp 3 with --ep 2 on 4 ranks"),
            (8, Some(2), Some(2), "neither EP × DP (4)"),
        ] {
            let e = Layout::new(n, ep, dp).unwrap_err();
            assert_eq!(e.exit, crate::error::Exit::Usage);
            assert!(e.msg.contains(needle), "{e}");
            assert!(!e.to_string().contains('\n'));
        }
        // With --ep 1 the two suggestions would be one: it is named once.
        let e = Layout::new(4, Some(1), Some(1)).unwrap_err();
        assert_eq!(e.fix.as_deref(), Some("use --dp 4 (DP over every rank)"));
    }
}
