//! The host reference of a dispatch: from every rank's routing, what each rank must receive, in
//! which layout, and how many bytes each pair of ranks exchanges.
use super::routing::Routing;
use crate::cuda::config::{GB_EP_DESC_SLOT_BITS as SLOT_BITS, GB_EP_DESC_TOKEN_BITS as TOKEN_BITS};

/// Receive descriptor of one row: source rank, source token, top-k slot. The kernels write the
/// same encoding (src/kernels/ep_common.cuh `gb_ep_desc`).
pub fn desc(src: usize, token: usize, k: usize) -> u32 {
    ((src as u32) << (TOKEN_BITS + SLOT_BITS)) | ((token as u32) << SLOT_BITS) | k as u32
}

pub fn undesc(d: u32) -> (usize, usize, usize) {
    let field = |shift: u32, bits: u32| ((d >> shift) & ((1 << bits) - 1)) as usize;
    ((d >> (TOKEN_BITS + SLOT_BITS)) as usize, field(SLOT_BITS, TOKEN_BITS), field(0, SLOT_BITS))
}

/// Every rank's routing, as any rank can rebuild it.
pub struct Layout<'a> {
    pub routing: &'a [Routing],
    pub local_experts: usize,
}

impl Layout<'_> {
    fn ranks(&self) -> usize {
        self.routing.len()
    }

    fn owner(&self, e: i32) -> Option<usize> {
        (e >= 0).then(|| e as usize / self.local_experts)
    }

    /// The expert a receive descriptor's selection chose.
    pub fn expert_of(&self, d: u32) -> i32 {
        let (s, t, k) = undesc(d);
        self.routing[s].get(t, k)
    }

    /// Does token `t` of `src` go to rank `d` (at least one selected expert there)?
    pub fn token_goes(&self, src: usize, t: usize, d: usize) -> bool {
        let r = &self.routing[src];
        (0..r.topk).any(|k| self.owner(r.get(t, k)) == Some(d))
    }

    /// Per-expert receive lists of rank `me`: for each local expert, the (src, token, k) rows in
    /// (src, token) order. Low-latency kernels fill each (expert, src) segment in arrival order,
    /// so compare them sorted.
    pub fn expert_rows(&self, me: usize) -> Vec<Vec<u32>> {
        let l = self.local_experts;
        let mut out = vec![vec![]; l];
        for (s, r) in self.routing.iter().enumerate() {
            for t in 0..r.tokens {
                for k in 0..r.topk {
                    let e = r.get(t, k);
                    if self.owner(e) == Some(me) {
                        out[e as usize - me * l].push(desc(s, t, k));
                    }
                }
            }
        }
        out
    }

    /// Rows of rank `me` in the host (Megatron-style) layout: per source rank, per local expert,
    /// tokens in order.
    pub fn host_rows(&self, me: usize) -> Vec<u32> {
        let l = self.local_experts;
        let mut out = vec![];
        for (s, r) in self.routing.iter().enumerate() {
            for le in 0..l {
                let e = (me * l + le) as i32;
                for t in 0..r.tokens {
                    if let Some(k) = (0..r.topk).find(|&k| r.get(t, k) == e) {
                        out.push(desc(s, t, k));
                    }
                }
            }
        }
        out
    }

    /// Rows of rank `me` in the high-throughput layout: every token that selected at least one of
    /// `me`'s experts, once, ordered by (source rank, token). Each row also carries its top-k
    /// slots as local expert indices (-1 where the expert is elsewhere) and weights.
    pub fn ht_rows(&self, me: usize) -> Vec<HtRow> {
        let l = self.local_experts as i32;
        let mut out = vec![];
        for (s, r) in self.routing.iter().enumerate() {
            for t in 0..r.tokens {
                if !self.token_goes(s, t, me) {
                    continue;
                }
                let mut row = HtRow { desc: desc(s, t, 0), local_idx: vec![], weight: vec![] };
                for k in 0..r.topk {
                    let e = r.get(t, k);
                    let here = self.owner(e) == Some(me);
                    row.local_idx.push(if here { e - me as i32 * l } else { -1 });
                    row.weight.push(if here { r.weight[t * r.topk + k] } else { 0.0 });
                }
                out.push(row);
            }
        }
        out
    }

    /// The HT notify's offsets at rank `me` (`ht_offsets` in src/kernels/ep_common.cuh): where
    /// its rows start at each destination (after every lower source's), its received rows, where
    /// each source's rows start among them, and its received rows again.
    pub fn ht_offsets(&self, me: usize) -> Vec<i32> {
        let n = self.ranks();
        // tokens[s][d]: tokens of s bound for d, in one pass over the routing.
        let mut tokens = vec![vec![0i32; n]; n];
        for (s, r) in self.routing.iter().enumerate() {
            for t in 0..r.tokens {
                let mut to: Vec<usize> = (0..r.topk).filter_map(|k| self.owner(r.get(t, k))).collect();
                to.sort_unstable();
                to.dedup();
                to.iter().for_each(|&d| tokens[s][d] += 1);
            }
        }
        let mut offs = vec![0i32; 2 * n + 2];
        for (d, o) in offs[..n].iter_mut().enumerate() {
            *o = tokens[..me].iter().map(|row| row[d]).sum();
        }
        let mut at = 0;
        for (s, row) in tokens.iter().enumerate() {
            offs[n + 1 + s] = at;
            at += row[me];
        }
        (offs[n], offs[2 * n + 1]) = (at, at);
        offs
    }

    /// What rank `me` sends to and receives from each rank.
    pub fn traffic(&self, me: usize) -> Traffic {
        let n = self.ranks();
        let mut tr = Traffic {
            selections_to: vec![0; n],
            tokens_to: vec![0; n],
            selections_from: vec![0; n],
            tokens_from: vec![0; n],
        };
        for (s, r) in self.routing.iter().enumerate() {
            for t in 0..r.tokens {
                let mut seen = vec![false; n];
                for k in 0..r.topk {
                    if let Some(d) = self.owner(r.get(t, k)) {
                        if s == me {
                            tr.selections_to[d] += 1;
                        }
                        if d == me {
                            tr.selections_from[s] += 1;
                        }
                        seen[d] = true;
                    }
                }
                for (d, _) in seen.iter().enumerate().filter(|(_, &went)| went) {
                    if s == me {
                        tr.tokens_to[d] += 1;
                    }
                    if d == me {
                        tr.tokens_from[s] += 1;
                    }
                }
            }
        }
        tr
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct HtRow {
    pub desc: u32,
    pub local_idx: Vec<i32>,
    pub weight: Vec<f32>,
}

/// Counts of one rank's exchange with every rank (itself included).
#[derive(Debug, Clone, PartialEq)]
pub struct Traffic {
    /// Valid (expert) selections of my tokens that land on rank d.
    pub selections_to: Vec<usize>,
    /// My tokens with at least one expert on rank d.
    pub tokens_to: Vec<usize>,
    pub selections_from: Vec<usize>,
    pub tokens_from: Vec<usize>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two ranks, 2 experts each, top-2, 3 tokens.
    fn tiny() -> Vec<Routing> {
        let r0 =
            Routing { tokens: 3, topk: 2, idx: vec![0, 2, 1, 0, 3, -1], weight: vec![0.5, 0.25, 1.0, 2.0, 4.0, 8.0] };
        let r1 = Routing { tokens: 3, topk: 2, idx: vec![3, 2, 0, 3, -1, -1], weight: vec![1.0; 6] };
        vec![r0, r1]
    }

    #[test]
    fn descriptors_round_trip() {
        for (s, t, k) in [(0, 0, 0), (4095, 65535, 15), (3, 4096, 7)] {
            assert_eq!(undesc(desc(s, t, k)), (s, t, k));
        }
    }

    #[test]
    fn expert_rows_per_local_expert() {
        let rt = tiny();
        let l = Layout { routing: &rt, local_experts: 2 };
        // Rank 0 owns experts 0 and 1.
        assert_eq!(l.expert_rows(0), vec![vec![desc(0, 0, 0), desc(0, 1, 1), desc(1, 1, 0)], vec![desc(0, 1, 0)]]);
        // Rank 1 owns 2 and 3; token 2 of rank 1 is fully masked and goes nowhere.
        assert_eq!(
            l.expert_rows(1),
            vec![vec![desc(0, 0, 1), desc(1, 0, 1)], vec![desc(0, 2, 0), desc(1, 0, 0), desc(1, 1, 1)]]
        );
    }

    #[test]
    fn a_descriptor_names_its_selections_expert() {
        let rt = tiny();
        let l = Layout { routing: &rt, local_experts: 2 };
        assert_eq!(l.expert_of(desc(0, 1, 1)), 0);
        assert_eq!(l.expert_of(desc(1, 0, 0)), 3);
        assert_eq!(l.expert_of(desc(0, 2, 1)), -1, "masked");
    }

    #[test]
    fn host_rows_by_source_then_expert() {
        let rt = tiny();
        let l = Layout { routing: &rt, local_experts: 2 };
        assert_eq!(l.host_rows(0), vec![desc(0, 0, 0), desc(0, 1, 1), desc(0, 1, 0), desc(1, 1, 0)]);
    }

    #[test]
    fn ht_rows_once_per_token_with_local_slots() {
        let rt = tiny();
        let l = Layout { routing: &rt, local_experts: 2 };
        let rows = l.ht_rows(0);
        assert_eq!(rows.iter().map(|r| r.desc).collect::<Vec<_>>(), vec![desc(0, 0, 0), desc(0, 1, 0), desc(1, 1, 0)]);
        assert_eq!(rows[1].local_idx, vec![1, 0]);
        assert_eq!(rows[1].weight, vec![1.0, 2.0]);
        assert_eq!(rows[0].local_idx, vec![0, -1]);
        assert_eq!(rows[0].weight, vec![0.5, 0.0]);
    }

    #[test]
    fn ht_offsets_as_the_notify_writes_them() {
        let rt = tiny();
        let l = Layout { routing: &rt, local_experts: 2 };
        // Tokens from s to d: 0->0 2, 0->1 2, 1->0 1, 1->1 2 (rank 1's token 2 goes nowhere).
        assert_eq!(l.ht_offsets(0), vec![0, 0, 3, 0, 2, 3]);
        assert_eq!(l.ht_offsets(1), vec![2, 2, 4, 0, 2, 4]);
    }

    #[test]
    fn ranks_may_route_uneven_token_counts() {
        // Rank 1's token 2 goes nowhere: without it (rank 1 routes 2 tokens, rank 0 three) every
        // rank's reference is the same.
        let even = tiny();
        let mut uneven = tiny();
        uneven[1] =
            Routing { tokens: 2, topk: 2, idx: even[1].idx[..4].to_vec(), weight: even[1].weight[..4].to_vec() };
        let (a, b) = (Layout { routing: &even, local_experts: 2 }, Layout { routing: &uneven, local_experts: 2 });
        for me in 0..2 {
            assert_eq!(a.expert_rows(me), b.expert_rows(me));
            assert_eq!(a.host_rows(me), b.host_rows(me));
            assert_eq!(a.ht_offsets(me), b.ht_offsets(me));
            assert_eq!(a.traffic(me), b.traffic(me));
        }
    }

    #[test]
    fn a_rank_past_the_first_gets_its_own_experts_as_local_slots() {
        // Rank 1 owns experts 2 and 3: the host layout lists those, and the HT rows' local
        // slots count from its first expert (2 -> 0, 3 -> 1), as rank 0's do from 0.
        let rt = tiny();
        let l = Layout { routing: &rt, local_experts: 2 };
        assert_eq!(l.host_rows(1), vec![desc(0, 0, 1), desc(0, 2, 0), desc(1, 0, 1), desc(1, 0, 0), desc(1, 1, 1)]);
        let rows = l.ht_rows(1);
        assert_eq!(
            rows.iter().map(|r| r.desc).collect::<Vec<_>>(),
            vec![desc(0, 0, 0), desc(0, 2, 0), desc(1, 0, 0), desc(1, 1, 0)]
        );
        let slots: Vec<Vec<i32>> = rows.iter().map(|r| r.local_idx.clone()).collect();
        assert_eq!(slots, vec![vec![-1, 0], vec![1, -1], vec![1, 0], vec![-1, 1]]);
        assert_eq!(rows[0].weight, vec![0.0, 0.25]);
        assert_eq!(rows[1].weight, vec![4.0, 0.0]);
    }

    #[test]
    fn ht_offsets_of_one_rank() {
        // The received-rows totals sit at n and 2n + 1 for every n, not only for two ranks:
        // one rank with every expert receives its own 3 routed tokens.
        let rt = tiny();
        let l = Layout { routing: &rt[..1], local_experts: 4 };
        assert_eq!(l.ht_offsets(0), vec![0, 3, 0, 3]);
    }

    #[test]
    fn traffic_counts() {
        let rt = tiny();
        let l = Layout { routing: &rt, local_experts: 2 };
        let t = l.traffic(0);
        assert_eq!(t.selections_to, vec![3, 2]);
        assert_eq!(t.tokens_to, vec![2, 2]);
        assert_eq!(t.selections_from, vec![3, 1]);
        assert_eq!(t.tokens_from, vec![2, 1]);
        // Every selection sent arrives somewhere.
        let t1 = l.traffic(1);
        assert_eq!(t.selections_to[1], t1.selections_from[0]);
        assert_eq!(t1.tokens_to[0], t.tokens_from[1]);
    }
}
