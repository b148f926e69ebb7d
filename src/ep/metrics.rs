//! What an EP row reports besides time: DeepEP's logical bandwidth, named, and the bytes that
//! really cross links.
use super::reference::Traffic;
use super::shape::{Payload, Shape};

pub use crate::results::{Mode, Phase};

impl Mode {
    pub fn parse(s: &str) -> crate::error::Result<Mode> {
        Mode::from_name(s)
            .ok_or_else(|| crate::error::Error::usage(format!("unknown mode '{s}'"), "use ll, ht or ll,ht"))
    }
    /// Tokens per rank when none are asked for: a decode batch (DeepEP's low-latency tests) or a
    /// prefill / training batch (its normal-mode tests).
    pub fn default_tokens(self) -> usize {
        match self {
            Mode::Ll => 128,
            Mode::Ht => 4096,
        }
    }
}

/// The JSON's `bw_definition` for a mode.
pub fn bw_definition(mode: Mode) -> &'static str {
    match mode {
        Mode::Ll => {
            "deepep-ll: valid top-k selections of the rank's tokens x bytes per selection (dispatch BF16 2H, \
             FP8 H + 4H/128 + 16; combine 2H), self and every peer included, of the rank whose time is shown (mean over ranks with -a 1) / time"
        }
        Mode::Ht => {
            "deepep-ht: tokens the rank receives (once per rank, from itself included) x bytes per token \
             (dispatch BF16 2H, FP8 H + 4H/128; combine 2H), of the rank whose time is shown (mean over ranks with -a 1) / time"
        }
    }
}

/// This rank's bytes under DeepEP's definition for (mode, phase).
pub fn logical_bytes(mode: Mode, phase: Phase, shape: &Shape, payload: Payload, tr: &Traffic) -> u64 {
    let row = match phase {
        Phase::Dispatch => shape.dispatch_row_bytes(payload),
        Phase::Combine => shape.combine_row_bytes(),
    } as u64;
    match mode {
        Mode::Ll => {
            let per = row + if phase == Phase::Dispatch && payload == Payload::Fp8 { 16 } else { 0 };
            tr.selections_to.iter().sum::<usize>() as u64 * per
        }
        Mode::Ht => tr.tokens_from.iter().sum::<usize>() as u64 * row,
    }
}

/// Bytes this rank puts on links, by class, its own rank excluded.
pub use crate::results::WireBytes as Wire;

/// `per_peer[d]` bytes to rank d; `over_net[d]` picks the class. Self is excluded.
pub fn split_wire(me: usize, per_peer: &[u64], over_net: &[bool]) -> Wire {
    let mut w = Wire::default();
    for (d, &b) in per_peer.iter().enumerate() {
        if d == me {
            continue;
        }
        if over_net[d] {
            w.net += b;
        } else {
            w.nvl += b;
        }
    }
    w
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tr() -> Traffic {
        Traffic {
            selections_to: vec![3, 5],
            tokens_to: vec![2, 3],
            selections_from: vec![3, 1],
            tokens_from: vec![2, 1],
        }
    }

    #[test]
    fn deepep_definitions() {
        let s = Shape { hidden: 128, topk: 2, experts: 4 };
        // LL: 8 selections x 256 B (BF16); FP8 adds 4 scale bytes and the 16-byte header.
        assert_eq!(logical_bytes(Mode::Ll, Phase::Dispatch, &s, Payload::Bf16, &tr()), 8 * 256);
        assert_eq!(logical_bytes(Mode::Ll, Phase::Dispatch, &s, Payload::Fp8, &tr()), 8 * (128 + 4 + 16));
        assert_eq!(logical_bytes(Mode::Ll, Phase::Combine, &s, Payload::Fp8, &tr()), 8 * 256);
        // HT: 3 tokens received, self included.
        assert_eq!(logical_bytes(Mode::Ht, Phase::Dispatch, &s, Payload::Fp8, &tr()), 3 * 132);
        assert_eq!(logical_bytes(Mode::Ht, Phase::Combine, &s, Payload::Fp8, &tr()), 3 * 256);
        assert!(bw_definition(Mode::Ht).starts_with("deepep-ht"));
    }

    #[test]
    fn wire_excludes_self_and_splits_by_link() {
        let w = split_wire(1, &[10, 20, 30, 40], &[false, false, true, true]);
        assert_eq!(w, Wire { nvl: 10, net: 70 });
    }
}
