//! `auto` (-D 6): the best NVLink impl per size: nvl-ll for small blocks, nvl-ll128 for mid
//! sizes, nvl for large.
use super::nvl::{Kind, Nvl};
use super::{Impl, InPlace, Rank};
use crate::error::Result;

/// nvl-ll up to this block per peer: it is bound by latency. On 4×H200 it takes 4.7 µs for
/// 32 KB per peer where nvl's two barriers alone cost more (results/h200x4/README.md).
const LL_MAX_BYTES_PER_PEER: u64 = 64 << 10;
/// nvl-ll128 up to this many bytes leaving the GPU (block per peer × remote peers), nvl above:
/// nvl-ll128 saves the barriers but moves data more slowly. On 2×H200 it is ahead up to 1 MB
/// per peer, level at 2 MB and behind at 4 MB (results/h200x2/ll128/).
const LL128_MAX_EGRESS: u64 = 2 << 20;

pub struct Auto {
    ll: Nvl,
    ll128: Nvl,
    big: Nvl,
    remote_peers: u64,
}

impl Auto {
    pub fn new(r: &Rank) -> Result<std::result::Result<Auto, String>> {
        // Every rank gets the same answers (one LSA team or not), so all skip together.
        let make = |kind| Nvl::new(kind, r);
        let (ll, ll128, big) = match (make(Kind::LowLatency)?, make(Kind::LowLatency128)?, make(Kind::Vector)?) {
            (Ok(ll), Ok(ll128), Ok(big)) => (ll, ll128, big),
            (Err(why), ..) | (_, Err(why), _) | (_, _, Err(why)) => return Ok(Err(why)),
        };
        Ok(Ok(Auto { ll, ll128, big, remote_peers: (r.boot.size() as u64).saturating_sub(1) }))
    }

    fn pick(&self, bytes_per_peer: u64) -> &Nvl {
        match tier(bytes_per_peer, self.remote_peers) {
            Kind::LowLatency => &self.ll,
            Kind::LowLatency128 => &self.ll128,
            _ => &self.big,
        }
    }
}

/// The kind auto sends `bytes_per_peer` with, to each of `remote_peers`.
fn tier(bytes_per_peer: u64, remote_peers: u64) -> Kind {
    if bytes_per_peer <= LL_MAX_BYTES_PER_PEER.min(Kind::LowLatency.max_bytes_per_peer()) {
        Kind::LowLatency
    } else if bytes_per_peer * remote_peers <= LL128_MAX_EGRESS
        && bytes_per_peer <= Kind::LowLatency128.max_bytes_per_peer()
    {
        Kind::LowLatency128
    } else {
        Kind::Vector
    }
}

impl Impl for Auto {
    fn in_place(&self, bytes_per_peer: u64) -> InPlace {
        self.pick(bytes_per_peer).in_place(bytes_per_peer)
    }

    fn launch(&self, r: &Rank, send: u64, recv: u64, count: u64) -> Result<()> {
        self.pick(count * r.dtype.size()).launch(r, send, recv, count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn tiers_follow_block_and_egress() {
        assert_eq!(tier(8, 3), Kind::LowLatency);
        assert_eq!(tier(64 << 10, 7), Kind::LowLatency);
        assert_eq!(tier((64 << 10) + 16, 1), Kind::LowLatency128);
        // 2 MB leaving the GPU: 2 MB to one peer, 682 KB to each of three.
        assert_eq!(tier(2 << 20, 1), Kind::LowLatency128);
        assert_eq!(tier((2 << 20) + 16, 1), Kind::Vector);
        assert_eq!(tier(512 << 10, 3), Kind::LowLatency128);
        assert_eq!(tier(1 << 20, 3), Kind::Vector);
        assert_eq!(tier(1 << 30, 3), Kind::Vector);
    }
}
