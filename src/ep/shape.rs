//! The MoE layer an EP run models: presets, overrides, and the bytes one token carries.
use crate::cuda::config;
use crate::error::{Error, Result};

/// Hidden size, top-k, experts; fixed for a run. Tokens per rank are swept.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shape {
    pub hidden: usize,
    pub topk: usize,
    pub experts: usize,
}

/// (name, hidden, top-k, experts) of the layers the presets name.
pub const PRESETS: &[(&str, Shape)] = &[
    ("deepseek-v3", Shape { hidden: 7168, topk: 8, experts: 256 }),
    ("qwen3-30b-a3b", Shape { hidden: 2048, topk: 8, experts: 128 }),
    ("mixtral", Shape { hidden: 4096, topk: 2, experts: 8 }),
];

pub fn preset(name: &str) -> Result<Shape> {
    PRESETS.iter().find(|(n, _)| *n == name).map(|(_, s)| *s).ok_or_else(|| {
        let names: Vec<&str> = PRESETS.iter().map(|(n, _)| *n).collect();
        Error::usage(format!("unknown preset '{name}'"), format!("use one of: {}", names.join(", ")))
    })
}

/// The preset with `--hidden` / `--topk` / `--experts` overrides applied.
pub fn resolve(preset_name: &str, hidden: Option<usize>, topk: Option<usize>, experts: Option<usize>) -> Result<Shape> {
    let p = preset(preset_name)?;
    Ok(Shape {
        hidden: hidden.unwrap_or(p.hidden),
        topk: topk.unwrap_or(p.topk),
        experts: experts.unwrap_or(p.experts),
    })
}

/// Tokens per rank must fit the descriptor (`MAX_TOKENS`); `example` is the fix shown.
pub fn check_tokens(t: u64, example: &str) -> Result<usize> {
    if t == 0 || t as usize > MAX_TOKENS {
        return Err(Error::usage(format!("tokens per rank {t} is not in 1..={MAX_TOKENS}"), example));
    }
    Ok(t as usize)
}

crate::results::named_enum! {
    /// Dispatch payload: BF16 rows, or FP8 e4m3 with one f32 scale per 128 channels.
    Payload { #[default] Bf16 = "bf16", Fp8 = "fp8" }
}

impl Payload {
    /// Its name, or the element type's own (bfloat16, e4m3).
    pub fn parse(s: &str) -> Result<Payload> {
        match s {
            "bfloat16" => Ok(Payload::Bf16),
            "e4m3" => Ok(Payload::Fp8),
            _ => Payload::from_name(s)
                .ok_or_else(|| Error::usage(format!("unknown dispatch dtype '{s}'"), "use bf16 or fp8")),
        }
    }
}

/// Channels sharing one FP8 scale.
pub const FP8_GROUP: usize = config::GB_EP_FP8_GROUP as usize;
/// Largest hidden size: above the largest layers in use (DeepSeek-V3's is 7168), and small enough
/// that a row's bytes times the tokens stay far from overflow.
pub const MAX_HIDDEN: usize = 65536;
/// Largest top-k and tokens per rank: what the receive descriptor's fields hold.
pub const MAX_TOPK: usize = (1 << config::GB_EP_DESC_SLOT_BITS) - 1;
pub const MAX_TOKENS: usize = (1 << config::GB_EP_DESC_TOKEN_BITS) - 1;
/// Most experts: the layout kernel keeps a 4-byte mask per expert in shared memory.
pub const MAX_EXPERTS: usize = 16384;

impl Shape {
    /// Check the shape against `ranks`: experts split evenly, hidden in whole FP8 groups.
    pub fn validate(&self, ranks: usize) -> Result<()> {
        let bad = |m: String, f: &str| Err(Error::usage(m, f));
        if self.hidden == 0 || !self.hidden.is_multiple_of(FP8_GROUP) {
            return bad(
                format!("--hidden {} is not a positive multiple of {FP8_GROUP}", self.hidden),
                "e.g. --hidden 7168",
            );
        }
        if self.hidden > MAX_HIDDEN {
            return bad(format!("--hidden {} exceeds {MAX_HIDDEN}", self.hidden), "e.g. --hidden 7168");
        }
        if self.experts == 0 {
            return bad("--experts 0: a layer needs at least one expert".into(), "e.g. --experts 256");
        }
        if self.topk == 0 || self.topk > MAX_TOPK {
            return bad(format!("--topk {} is not in 1..={MAX_TOPK}", self.topk), "e.g. --topk 8");
        }
        if self.topk > self.experts {
            return bad(format!("--topk {} exceeds --experts {}", self.topk, self.experts), "choose topk <= experts");
        }
        if self.experts > MAX_EXPERTS {
            return bad(format!("--experts {} exceeds {MAX_EXPERTS}", self.experts), "use fewer experts");
        }
        if ranks > 0 && !self.experts.is_multiple_of(ranks) {
            return bad(
                format!("--experts {} does not divide over {ranks} ranks", self.experts),
                "use a multiple of the number of ranks",
            );
        }
        Ok(())
    }

    pub fn local_experts(&self, ranks: usize) -> usize {
        self.experts / ranks
    }

    /// Bytes of one dispatched token row: BF16 2H; FP8 H bytes then H/128 f32 scales.
    pub fn dispatch_row_bytes(&self, p: Payload) -> usize {
        match p {
            Payload::Bf16 => 2 * self.hidden,
            Payload::Fp8 => self.hidden + 4 * self.hidden / FP8_GROUP,
        }
    }

    /// Bytes of one combined (BF16) row.
    pub fn combine_row_bytes(&self) -> usize {
        2 * self.hidden
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_and_row_sizes() {
        let d = preset("deepseek-v3").unwrap();
        assert_eq!((d.hidden, d.topk, d.experts), (7168, 8, 256));
        assert_eq!(d.dispatch_row_bytes(Payload::Bf16), 14336);
        // DeepEP's fp8 factor (1 + 4/128) / 2 of the BF16 bytes.
        assert_eq!(d.dispatch_row_bytes(Payload::Fp8), 7168 + 224);
        assert_eq!(d.dispatch_row_bytes(Payload::Fp8) as f64, 14336.0 * (1.0 + 4.0 / 128.0) / 2.0);
        assert_eq!(preset("mixtral").unwrap().topk, 2);
        assert!(preset("gpt-9").unwrap_err().to_string().contains("deepseek-v3"));
    }

    #[test]
    fn validation() {
        let d = preset("deepseek-v3").unwrap();
        assert!(d.validate(4).is_ok());
        assert!(d.validate(3).unwrap_err().to_string().contains("does not divide"));
        assert!(Shape { hidden: 100, ..d }.validate(4).is_err());
        assert!(Shape { topk: 16, ..d }.validate(4).is_err());
        assert!(Shape { topk: 9, experts: 8, hidden: 128 }.validate(1).is_err());
        assert!(Shape { experts: MAX_EXPERTS + 1, ..d }.validate(1).is_err());
        assert!(Shape { experts: MAX_EXPERTS, ..d }.validate(1).is_ok());
        assert_eq!(d.local_experts(4), 64);
    }

    #[test]
    fn the_limits_themselves_are_accepted() {
        let d = preset("deepseek-v3").unwrap();
        assert!(Shape { hidden: MAX_HIDDEN, ..d }.validate(4).is_ok());
        let e = Shape { hidden: MAX_HIDDEN + FP8_GROUP, ..d }.validate(4).unwrap_err();
        assert!(e.msg.contains("--hidden 65664 exceeds 65536"), "{e}");
        assert!(Shape { topk: MAX_TOPK, ..d }.validate(4).is_ok());
        assert!(Shape { topk: 8, experts: 8, hidden: 128 }.validate(1).is_ok(), "top-k may equal the experts");
        // Ranks unknown until MPI tells (0): only the rank count's own check waits for it.
        assert!(Shape { experts: 7, topk: 2, ..d }.validate(0).is_ok());
        assert!(Shape { hidden: 100, ..d }.validate(0).is_err());
        assert_eq!(check_tokens(MAX_TOKENS as u64, "").unwrap(), MAX_TOKENS);
        assert_eq!(check_tokens(1, "").unwrap(), 1);
        for t in [0, MAX_TOKENS as u64 + 1] {
            let e = check_tokens(t, "e.g. -b 1").unwrap_err();
            assert!(e.msg.contains(&format!("tokens per rank {t} is not in 1..=65535")), "{e}");
        }
    }
}
