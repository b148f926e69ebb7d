//! `auto` (-D 6): the best NVLink impl per size, nvl-ll for small blocks, nvl for large.
use super::nvl::{Kind, Nvl};
use super::{Impl, InPlace, Rank};
use crate::error::Result;

/// Largest block per peer sent with nvl-ll; above it, nvl. On 4×H200 nvl-ll takes 4.7 µs for
/// 32 KB per peer where nvl's two barriers alone cost more (results/h200x4/README.md).
const CROSSOVER_BYTES_PER_PEER: u64 = 64 << 10;

pub struct Auto {
    ll: Nvl,
    big: Nvl,
}

impl Auto {
    pub fn new(r: &Rank) -> Result<std::result::Result<Auto, String>> {
        let ll = match Nvl::new(Kind::LowLatency, r)? {
            Ok(i) => i,
            Err(why) => return Ok(Err(why)),
        };
        let big = match Nvl::new(Kind::Vector, r)? {
            Ok(i) => i,
            Err(why) => return Ok(Err(why)),
        };
        Ok(Ok(Auto { ll, big }))
    }

    fn pick(&self, bytes_per_peer: u64) -> &Nvl {
        if bytes_per_peer <= CROSSOVER_BYTES_PER_PEER.min(Nvl::ll_max_bytes_per_peer()) {
            &self.ll
        } else {
            &self.big
        }
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
