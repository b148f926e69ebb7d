//! `auto` (-D 6): the best NVLink impl per size, as measured: nvl-ll for small blocks; on one
//! or two GPUs nvl-ll128 for mid sizes and the copy engines (nvl-ce) for the largest; nvl for
//! the rest. In place, where nvl and nvl-ce cannot run, nvl-ll128 takes the sizes it can.
use super::ce::Ce;
use super::nvl::{Kind, Nvl};
use super::registry;
use super::{Impl, InPlace, Rank};
use crate::error::Result;

/// nvl-ll up to this block per peer: it is bound by latency. On 4×H200 it takes 4.7 µs for
/// 32 KB per peer where nvl's two barriers alone cost more (results/h200x4/README.md).
const LL_MAX_BYTES_PER_PEER: u64 = 64 << 10;
/// nvl-ll128 up to this many bytes leaving the GPU (with one peer or none, the block), nvl above:
/// nvl-ll128 saves the barriers but moves data more slowly. On 2×H200 it is ahead up to 1 MB
/// per peer, level at 2 MB and behind at 4 MB (results/h200x2/ll128/); on one GPU ahead of nvl
/// to 2 MB (results/h200x1/gpu-test-829c739/). With more peers it has not been measured against
/// nvl, so there nvl keeps these sizes.
const LL128_MAX_EGRESS: u64 = 2 << 20;
/// With a single peer (or none), the copy engines from this block size: there they reach the link
/// ceiling (2×H200: 387 GB/s busbw at 1 GB per peer, 378 at 256 MB, against nvl's 366 and 362;
/// behind it at 64 MB; one H200: 4 % ahead of nvl at 512 MB, level at 128 MB), while in the
/// all-to-all pattern of more GPUs they reach half of it (results/h200x2/nvl-mix/,
/// results/h200x4/ceiling.json).
const CE_MIN_BYTES_ONE_PEER: u64 = 256 << 20;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Tier {
    Ll,
    Ll128,
    Push,
    CopyEngines,
}

impl Tier {
    /// The registry's name of the impl the tier runs.
    fn impl_name(self) -> &'static str {
        match self {
            Tier::Ll => registry::NVL_LL,
            Tier::Ll128 => registry::NVL_LL128,
            Tier::Push => registry::NVL,
            Tier::CopyEngines => registry::NVL_CE,
        }
    }
}

pub struct Auto {
    ll: Nvl,
    ll128: Nvl,
    push: Nvl,
    /// Made only with one peer or none.
    ce: Option<Ce>,
    remote_peers: u64,
}

impl Auto {
    pub fn new(r: &Rank) -> Result<std::result::Result<Auto, String>> {
        // Every rank gets the same answers (one LSA team or not, the rank count), so all make the
        // same impls or skip together.
        let make = |kind| Nvl::new(kind, r);
        let (ll, ll128, push) = match (make(Kind::LowLatency)?, make(Kind::LowLatency128)?, make(Kind::Vector)?) {
            (Ok(ll), Ok(ll128), Ok(push)) => (ll, ll128, push),
            (Err(why), ..) | (_, Err(why), _) | (_, _, Err(why)) => return Ok(Err(why)),
        };
        let remote_peers = (r.boot.size() as u64).saturating_sub(1);
        let ce = match remote_peers {
            0 | 1 => Some(Ce::new(r)?.map_err(crate::error::Error::internal)?),
            _ => None,
        };
        Ok(Ok(Auto { ll, ll128, push, ce, remote_peers }))
    }

    fn pick(&self, bytes_per_peer: u64, in_place: bool) -> &dyn Impl {
        // `ce` is made for every rank count whose tiers include the copy engines.
        match (tier(bytes_per_peer, self.remote_peers, in_place), &self.ce) {
            (Tier::Ll, _) => &self.ll,
            (Tier::Ll128, _) => &self.ll128,
            (Tier::CopyEngines, Some(ce)) => ce,
            _ => &self.push,
        }
    }
}

/// The tier auto sends `bytes_per_peer` with, to each of `remote_peers`, in place or not.
fn tier(bytes_per_peer: u64, remote_peers: u64, in_place: bool) -> Tier {
    let ll128_fits = bytes_per_peer <= Kind::LowLatency128.max_bytes_per_peer();
    if bytes_per_peer <= LL_MAX_BYTES_PER_PEER.min(Kind::LowLatency.max_bytes_per_peer()) {
        Tier::Ll
    } else if ll128_fits && remote_peers <= 1 && bytes_per_peer <= LL128_MAX_EGRESS {
        Tier::Ll128
    } else if ll128_fits && in_place {
        // Neither nvl nor the copy engines run in place.
        Tier::Ll128
    } else if remote_peers <= 1 && bytes_per_peer >= CE_MIN_BYTES_ONE_PEER {
        Tier::CopyEngines
    } else {
        Tier::Push
    }
}

impl Impl for Auto {
    fn in_place(&self, bytes_per_peer: u64) -> InPlace {
        self.pick(bytes_per_peer, true).in_place(bytes_per_peer)
    }

    fn launch(&self, r: &Rank, send: u64, recv: u64, count: u64) -> Result<()> {
        self.pick(count * r.dtype.size(), send == recv).launch(r, send, recv, count)
    }

    fn ran(&self, bytes_per_peer: u64, in_place: bool) -> Option<&'static str> {
        Some(tier(bytes_per_peer, self.remote_peers, in_place).impl_name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn tiers_follow_block_egress_and_peers() {
        let out = |b, peers| tier(b, peers, false);
        assert_eq!(out(8, 3), Tier::Ll);
        assert_eq!(out(64 << 10, 7), Tier::Ll);
        assert_eq!(out((64 << 10) + 16, 1), Tier::Ll128);
        // 2 MB leaving the GPU to one peer; on one GPU, 2 MB blocks.
        assert_eq!(out(2 << 20, 1), Tier::Ll128);
        assert_eq!(out((2 << 20) + 16, 1), Tier::Push);
        assert_eq!(out(2 << 20, 0), Tier::Ll128);
        assert_eq!(out(4 << 20, 0), Tier::Push);
        // nvl-ll128 is measured against nvl on one and two GPUs only.
        assert_eq!(out(512 << 10, 3), Tier::Push);
        assert_eq!(out(1 << 20, 3), Tier::Push);
        // The copy engines only for one peer or none, and large blocks.
        assert_eq!(out((256 << 20) - 16, 1), Tier::Push);
        assert_eq!(out(256 << 20, 1), Tier::CopyEngines);
        assert_eq!(out(512 << 20, 0), Tier::CopyEngines);
        assert_eq!(out(1 << 30, 3), Tier::Push);
    }

    #[test]
    fn in_place_takes_ll128_where_nvl_cannot_run() {
        let ll128_max = Kind::LowLatency128.max_bytes_per_peer();
        // 2 GPUs, 8 MB per rank: nvl out of place, nvl-ll128 in place.
        assert_eq!(tier(4 << 20, 1, false), Tier::Push);
        assert_eq!(tier(4 << 20, 1, true), Tier::Ll128);
        assert_eq!(tier(1 << 20, 3, true), Tier::Ll128);
        assert_eq!(tier(ll128_max, 7, true), Tier::Ll128);
        // Beyond nvl-ll128's reach nothing runs in place: the row is skipped, as before.
        assert_eq!(tier(ll128_max + 16, 1, true), Tier::Push);
        assert_eq!(tier(8, 3, true), Tier::Ll);
    }

    #[test]
    fn tiers_name_registry_impls() {
        let names: Vec<&str> = crate::alltoall::registry::IMPLS.iter().map(|i| i.name).collect();
        for t in [Tier::Ll, Tier::Ll128, Tier::Push, Tier::CopyEngines] {
            assert!(names.contains(&t.impl_name()), "{t:?}");
        }
    }
}
