//! Expert-parallel (MoE) dispatch and combine: the layer shape, seeded routing, the host
//! reference of the layout, the metrics, and the `ep_perf` benchmark with its implementations
//! (one file each; kernels in src/kernels/ep.cu).
pub mod bench;
pub mod cli;
pub mod device;
pub mod gin;
pub mod host;
pub mod layout;
pub mod metrics;
pub mod nvl;
pub mod reference;
pub mod registry;
pub mod routing;
pub mod shape;

use crate::bootstrap::Bootstrap;
use crate::cuda::Gpu;
use crate::error::Result;
use crate::gin_transport::GinRequest;
use crate::nccl::Comm;
use device::{Args, Buf, Inputs, RowSet};
use metrics::{Mode, Phase};
use reference::{Layout, Traffic};
use shape::{Payload, Shape};

/// What an impl is built for: one rank, one mode, one dispatch payload.
pub struct Ctx<'a> {
    pub boot: &'a dyn Bootstrap,
    pub gpu: &'a Gpu,
    pub comm: &'a Comm,
    pub shape: Shape,
    pub payload: Payload,
    pub mode: Mode,
    /// CTAs (= SMs) of the device kernels.
    pub ctas: u32,
    /// Largest tokens per rank of the sweep (buffers are sized for it).
    pub max_tokens: usize,
    /// `--emulate-nodes N`: virtual nodes for gin-emu / hybrid-emu.
    pub emulate_nodes: Option<usize>,
    /// What gin and hybrid ask of their device communicators (`--gin-*`).
    pub gin_request: GinRequest,
}

impl Ctx<'_> {
    pub fn args(&self, tokens: usize) -> Args {
        Args::new(&self.shape, self.payload, self.boot.size(), self.boot.rank(), tokens, self.max_tokens)
    }

    /// Why the device kernels cannot run this many ranks in this mode, if not.
    pub fn too_many_ranks(&self) -> Option<String> {
        let n = self.boot.size();
        match self.mode {
            Mode::Ll if n > 32 => Some(format!("LL packing keeps one source rank per lane; {n} ranks > 32")),
            Mode::Ht if n > 64 => Some(format!("HT keeps a 64-bit rank mask per token; {n} ranks > 64")),
            _ => None,
        }
    }
}

/// Refuses `-V ctas` above the GPU's SM count: the device kernels run one CTA per SM (their
/// shared memory keeps them so) and wait on each other, so every CTA must be resident.
/// (Before NCCL starts.)
pub fn check_ctas(gpu: &Gpu, ctas: u32) -> Result<()> {
    let sms = gpu.sm_count()?;
    if ctas > sms {
        return Err(crate::error::Error::usage(
            format!("-V {ctas} asks for more CTAs than the GPU's {sms} SMs (the kernels need every CTA resident)"),
            format!("use -V 1..{sms}"),
        ));
    }
    Ok(())
}

/// The dispatch output as the checks and the expert see it.
pub struct Received {
    /// Received rows (dispatch payload layout).
    pub rows: u64,
    /// One descriptor per row (reference::desc).
    pub desc: u64,
    pub set: RowSet,
    /// Where the expert output (combine input) goes.
    pub y: u64,
    /// The checks' expert's selections, `per_row` per row (device::ExpertSel; per_row 0: the
    /// row's group is its local expert, as LL packs them).
    pub sel: u64,
    pub per_row: i32,
    /// Buffers the pointers above live in.
    pub keep: Vec<Buf>,
}

/// A dispatch/combine implementation, set up for one rank, mode and payload.
pub trait EpImpl {
    /// Enqueue one dispatch of `inp`'s tokens.
    fn dispatch(&self, c: &Ctx, inp: &Inputs) -> Result<()>;
    /// Enqueue one combine of the expert output (`Received::y`) into `inp.out`, for the layout of
    /// the last dispatch.
    fn combine(&self, c: &Ctx, inp: &Inputs) -> Result<()>;
    /// After a dispatch: the received rows.
    fn received(&self, c: &Ctx, inp: &Inputs, layout: &Layout) -> Result<Received>;
    /// Misplaced, missing or extra rows (and wrong metadata) against the reference.
    fn check_layout(&self, c: &Ctx, inp: &Inputs, layout: &Layout) -> Result<u64>;
    /// Why it cannot be captured in a CUDA graph (None: it can).
    fn not_capturable(&self) -> Option<&'static str> {
        None
    }
    /// Whether its LL dispatch quantizes BF16 tokens to FP8 itself (else the timed dispatch
    /// runs the quantize kernel first).
    fn quantizes_ll(&self) -> bool {
        false
    }
    /// SMs its kernels occupy; None when NCCL's kernels do the moving.
    fn sms(&self) -> Option<u32>;
    /// Bytes this rank puts on the wire to each rank in one `phase`.
    fn bytes_to(&self, c: &Ctx, phase: Phase, tr: &Traffic) -> Vec<u64>;
    /// Which ranks it reaches over the network (wire class `net`); None: those on other hosts.
    fn over_network(&self, _c: &Ctx) -> Option<Vec<bool>> {
        None
    }
    /// The GIN contexts NCCL granted its device communicator (None: it does not use NCCL's GIN).
    fn gin_contexts(&self) -> Option<u32> {
        None
    }
}
