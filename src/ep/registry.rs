//! The EP implementations: `-D` takes names, comma-separated, or `all`. An entry is the
//! implementation: its constructor and its properties.
use super::{gin, host, nvl, Ctx, EpImpl};
use crate::error::Result;
use crate::gin_transport::GinTransport;
use crate::results::Gin;

/// An impl set up for one rank, mode and payload, or why it cannot run here.
pub type Made = Result<std::result::Result<Box<dyn EpImpl>, String>>;

pub struct EpImplInfo {
    pub name: &'static str,
    pub about: &'static str,
    /// The GIN transport it runs on, if any.
    pub gin: Option<GinTransport>,
    /// The order its dispatch leaves the received rows in (the check follows it; the results'
    /// `config.order` records it).
    pub order: &'static str,
    /// Set it up (collective). `gin` is NCCL's answer about GIN on these ranks.
    pub make: fn(&Ctx, &Gin) -> Made,
}

impl std::fmt::Debug for EpImplInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

impl crate::driver::cli::Entry for EpImplInfo {
    fn name(&self) -> &'static str {
        self.name
    }
    fn gin(&self) -> Option<GinTransport> {
        self.gin
    }
}

fn boxed<T: EpImpl + 'static>(made: Result<std::result::Result<T, String>>) -> Made {
    made.map(|i| i.map(|i| Box::new(i) as Box<dyn EpImpl>))
}

/// nvl's order, which gin and hybrid (and their -emu forms) keep: they run its protocols.
const NVL_ORDER: &str = "LL: per local expert, source ranks in order; inside one (expert, source) segment rows are \
                         in arrival order (not deterministic), checked as sets. HT: deterministic, (source rank, \
                         token) order";

fn over_gin(t: GinTransport, c: &Ctx, gin: &Gin) -> Made {
    boxed(gin::Gin::new(t, c, gin))
}

/// Every implementation, in `-D all` order. Adding one means: a Rust file in src/ep/, its
/// kernels in src/kernels/, and an entry here.
pub const IMPLS: &[EpImplInfo] = &[
    EpImplInfo {
        name: "host",
        about: "Megatron-style: permute kernel, count exchange, NCCL grouped send/recv; combine mirrored",
        gin: None,
        order: "deterministic: per source rank, per local expert, tokens in order",
        make: |c, _| Ok(Ok(Box::new(host::Host::new(c)?))),
    },
    EpImplInfo {
        name: "nvl",
        about: "NVLink (LSA) device kernels: LL per-expert slots, HT rows once per destination rank",
        gin: None,
        order: NVL_ORDER,
        make: |c, _| boxed(nvl::Nvl::new(c)),
    },
    EpImplInfo {
        name: "gin",
        about: "the nvl dispatch with every row put through GIN, combine pushed back; skipped where GIN is unavailable",
        gin: Some(GinTransport::Gin),
        order: NVL_ORDER,
        make: |c, g| over_gin(GinTransport::Gin, c, g),
    },
    EpImplInfo {
        name: "hybrid",
        about: "as gin, with NVLink stores inside the node; skipped where GIN is unavailable",
        gin: Some(GinTransport::Hybrid),
        order: NVL_ORDER,
        make: |c, g| over_gin(GinTransport::Hybrid, c, g),
    },
    EpImplInfo {
        name: "gin-emu",
        about: "gin on --emulate-nodes virtual nodes (GIN emulated over NVLink)",
        gin: Some(GinTransport::GinEmu),
        order: NVL_ORDER,
        make: |c, g| over_gin(GinTransport::GinEmu, c, g),
    },
    EpImplInfo {
        name: "hybrid-emu",
        about: "hybrid on --emulate-nodes virtual nodes (GIN emulated over NVLink between them)",
        gin: Some(GinTransport::HybridEmu),
        order: NVL_ORDER,
        make: |c, g| over_gin(GinTransport::HybridEmu, c, g),
    },
];

/// Resolve a `-D` value: comma-separated names (each kept once), or `all`.
pub fn resolve(spec: &str) -> Result<Vec<&'static EpImplInfo>> {
    let names = IMPLS.iter().map(|i| i.name).collect::<Vec<_>>().join(", ");
    crate::driver::cli::resolve_impls(spec, IMPLS, |i, item| i.name == item, &names)
}
