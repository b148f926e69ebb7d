//! `nvl`: dispatch and combine over NVLink through NCCL's device API (LSA), both modes.
//! LL: fixed per-(expert, source) slots, no host sync, CUDA-graph capturable; HT: count
//! exchange, then each token once per destination rank, straight to its final row. Both combines
//! read each token's rows in place from the ranks' expert output (a symmetric window).
use super::device::{dynamic_smem, one_cta_per_sm, Args, Buf, Inputs, LayoutBufs};
use super::layout::{self, ht_meta_bytes, ht_meta_offset};
use super::metrics::{Mode, Phase};
use super::reference::{Layout, Traffic};
use super::{Ctx, EpImpl, Received};
use crate::cuda::grid;
use crate::error::Result;
use crate::nccl::{compat, compat::DevComm, SymBuffer};
use cudarc::driver::{CudaFunction, PushKernelArg};

struct Kernel {
    f: CudaFunction,
    smem: u32,
}

impl Kernel {
    fn new(c: &Ctx, name: &str) -> Result<Kernel> {
        let f = c.gpu.function("ep", name)?;
        // The LL kernels' per-expert prefix or per-source counts.
        let a = c.args(c.max_tokens);
        let smem = one_cta_per_sm(c.gpu, &f, 4 * (a.local + 2 * a.ranks + 2) as u32)?;
        Ok(Kernel { f, smem })
    }
}

/// Per-launch state of a signalling kernel: arrivals, then one epoch per CTA.
fn state(c: &Ctx) -> Result<Buf> {
    Buf::zeros(c.gpu, 4 * (1 + c.ctas as usize))
}

enum Parts {
    Ll {
        stage: SymBuffer,
        dispatch: Kernel,
        combine: Kernel,
        sent: Buf,
        /// Slot each selection of this rank claimed at its expert's rank.
        sel_slot: Buf,
        out: Buf,
        src_info: Buf,
        recv_count: Buf,
    },
    Ht {
        recv: SymBuffer,
        layout: Box<LayoutBufs>,
        notify: Kernel,
        dispatch: Kernel,
        combine: Kernel,
        nstate: Buf,
        offs: Buf,
        recv_per_expert: Buf,
    },
}

pub struct Nvl {
    mode: Mode,
    ctas: u32,
    parts: Parts,
    ctrl: SymBuffer,
    dstate: Buf,
    cstate: Buf,
    /// Expert output (combine input), in the dispatch output's layout; a window, since combine
    /// reads it from every rank.
    y: SymBuffer,
    // Dropped last: the windows above belong to kernels using it.
    dev: DevComm,
}

impl Nvl {
    /// Collective. Skips (inner Err) unless every rank is in one LSA team.
    pub fn new(c: &Ctx) -> Result<std::result::Result<Nvl, String>> {
        let n = c.boot.size();
        if let Some(why) = c.comm.not_one_lsa_team().or_else(|| c.too_many_ranks()) {
            return Ok(Err(why));
        }
        let mut reqs = compat::requirements();
        reqs.lsaBarrierCount = 0;
        let dev = DevComm::create(c.comm, &reqs)?;
        let a = c.args(c.max_tokens);
        let (l, r, k, h, t) = (a.local as usize, n, a.topk as usize, a.hidden as usize, c.max_tokens);
        let row = a.row as usize;
        let stream = &c.gpu.stream;
        let ctrl = SymBuffer::new(c.comm, ctrl_layout(c.mode, l, r).1, stream)?;
        let (parts, y_rows) = match c.mode {
            Mode::Ll => {
                let cap = r * t;
                (
                    Parts::Ll {
                        // Rows per (source, token), then descriptors per (expert, source, slot).
                        stage: SymBuffer::new(c.comm, 2 * r * t * row + 2 * l * cap * 4, stream)?,
                        dispatch: Kernel::new(c, "gb_ep_ll_dispatch")?,
                        combine: Kernel::new(c, "gb_ep_ll_combine")?,
                        sent: Buf::zeros(c.gpu, 4 * a.experts as usize)?,
                        sel_slot: Buf::zeros(c.gpu, 4 * t * k)?,
                        out: Buf::zeros(c.gpu, l * cap * row)?,
                        src_info: Buf::zeros(c.gpu, l * cap * 4)?,
                        recv_count: Buf::zeros(c.gpu, l * 4)?,
                    },
                    l * cap,
                )
            }
            Mode::Ht => (
                Parts::Ht {
                    recv: SymBuffer::new(c.comm, r * t * (row + ht_meta_bytes(k)), stream)?,
                    layout: Box::new(LayoutBufs::new(c.gpu, &a)?),
                    notify: {
                        // One CTA holding the count matrix, ranks x (ranks + local experts) words.
                        let f = c.gpu.function("ep", "gb_ep_ht_notify")?;
                        let smem = dynamic_smem(c.gpu, &f, (4 * r * (r + l)) as u32, "the HT notify kernel")?;
                        Kernel { f, smem }
                    },
                    dispatch: Kernel::new(c, "gb_ep_ht_dispatch")?,
                    combine: Kernel::new(c, "gb_ep_ht_combine")?,
                    nstate: Buf::zeros(c.gpu, 4)?,
                    offs: Buf::zeros(c.gpu, 4 * (2 * r + 2))?,
                    recv_per_expert: Buf::zeros(c.gpu, 4 * l)?,
                },
                r * t,
            ),
        };
        Ok(Ok(Nvl {
            mode: c.mode,
            ctas: c.ctas,
            parts,
            ctrl,
            dstate: state(c)?,
            cstate: state(c)?,
            y: SymBuffer::new(c.comm, y_rows * 2 * h, stream)?,
            dev,
        }))
    }

    /// Offsets of the control window's three regions.
    fn ctrl_offsets(&self, a: &Args) -> (usize, usize, usize) {
        ctrl_layout(self.mode, a.local as usize, a.ranks as usize).0
    }
}

/// The control window for `local` experts a rank on `ranks` ranks: the offsets of its three
/// regions, and its size in bytes. LL: counts, combine flags, ranges (written by the experts'
/// ranks, read by the combine). HT: count matrix, dispatch flags, combine flags.
fn ctrl_layout(mode: Mode, local: usize, ranks: usize) -> ((usize, usize, usize), usize) {
    let (l, r) = (local, ranks);
    let [a, b, c] = match mode {
        Mode::Ll => [2 * l * r * 8, 2 * r * 8, l * r * 8],
        Mode::Ht => [2 * r * (r + l) * 8, 2 * r * 8, 2 * r * 8],
    };
    ((0, a, a + b), a + b + c)
}

impl EpImpl for Nvl {
    fn dispatch(&self, c: &Ctx, inp: &Inputs) -> Result<()> {
        let a = inp.args;
        let s = &c.gpu.stream;
        let (o0, o1, o2) = self.ctrl_offsets(&a);
        let ctrl = self.ctrl.win as u64;
        match &self.parts {
            Parts::Ll { stage, dispatch, sent, sel_slot, out, src_info, recv_count, .. } => {
                let (stage, counts, ranges) = (stage.win as u64, o0 as u64, o2 as u64);
                let mut b = s.launch_builder(&dispatch.f);
                b.arg(&a).arg(&inp.idx.ptr).arg(&inp.x.ptr).arg(&stage).arg(&ctrl).arg(&counts);
                b.arg(&self.dstate.ptr).arg(&sent.ptr).arg(&sel_slot.ptr).arg(&out.ptr).arg(&src_info.ptr);
                b.arg(&recv_count.ptr).arg(&ranges).arg(&self.dev.raw);
                unsafe { b.launch(grid(self.ctas, dispatch.smem)) }?;
            }
            Parts::Ht { recv, layout, notify, dispatch, nstate, offs, recv_per_expert, .. } => {
                layout.launch(c.gpu, &a, inp.idx.ptr, self.ctas)?;
                let mat = o0 as u64;
                let mut b = s.launch_builder(&notify.f);
                b.arg(&a).arg(&layout.totals.ptr).arg(&ctrl).arg(&mat).arg(&nstate.ptr);
                b.arg(&offs.ptr).arg(&recv_per_expert.ptr).arg(&self.dev.raw);
                unsafe { b.launch(grid(1, notify.smem)) }?;
                let meta_off = ht_meta_offset(c, &a);
                let meta_bytes = ht_meta_bytes(a.topk as usize) as i32;
                let (recv, flags) = (recv.win as u64, o1 as u64);
                let mut b = s.launch_builder(&dispatch.f);
                b.arg(&a).arg(&inp.idx.ptr).arg(&inp.weight.ptr).arg(&inp.rows).arg(&layout.tok_local.ptr);
                b.arg(&layout.chunk_base.ptr).arg(&offs.ptr).arg(&recv).arg(&meta_off).arg(&meta_bytes);
                b.arg(&ctrl).arg(&flags).arg(&self.dstate.ptr).arg(&self.dev.raw);
                unsafe { b.launch(grid(self.ctas, dispatch.smem)) }?;
            }
        }
        Ok(())
    }

    fn combine(&self, c: &Ctx, inp: &Inputs) -> Result<()> {
        let a = inp.args;
        let s = &c.gpu.stream;
        let (_, o1, o2) = self.ctrl_offsets(&a);
        let ctrl = self.ctrl.win as u64;
        match &self.parts {
            Parts::Ll { combine, sel_slot, .. } => {
                let (y, ranges, ready) = (self.y.win as u64, o2 as u64, o1 as u64);
                let mut b = s.launch_builder(&combine.f);
                b.arg(&a).arg(&y).arg(&ctrl).arg(&ranges).arg(&ready).arg(&sel_slot.ptr).arg(&inp.idx.ptr);
                b.arg(&inp.weight.ptr).arg(&inp.out.ptr).arg(&self.cstate.ptr).arg(&self.dev.raw);
                unsafe { b.launch(grid(self.ctas, combine.smem)) }?;
            }
            Parts::Ht { combine, offs, layout, .. } => {
                let (y, ready) = (self.y.win as u64, o2 as u64);
                let mut b = s.launch_builder(&combine.f);
                b.arg(&a).arg(&y).arg(&offs.ptr).arg(&layout.tok_local.ptr).arg(&layout.chunk_base.ptr).arg(&ctrl);
                b.arg(&ready).arg(&inp.idx.ptr).arg(&inp.out.ptr).arg(&self.cstate.ptr).arg(&self.dev.raw);
                unsafe { b.launch(grid(self.ctas, combine.smem)) }?;
            }
        }
        Ok(())
    }

    fn received(&self, c: &Ctx, inp: &Inputs, layout: &Layout) -> Result<Received> {
        Ok(match &self.parts {
            Parts::Ll { out, src_info, recv_count, .. } => {
                layout::ll_received(c, &inp.args, out, src_info, recv_count, self.y.ptr())
            }
            Parts::Ht { recv, .. } => layout::ht_received(c, layout, recv.ptr(), self.y.ptr())?,
        })
    }

    fn check_layout(&self, c: &Ctx, inp: &Inputs, layout: &Layout) -> Result<u64> {
        match &self.parts {
            Parts::Ll { src_info, recv_count, .. } => {
                layout::ll_check(c, &inp.args, layout, src_info, recv_count, None)
            }
            Parts::Ht { recv, offs, recv_per_expert, .. } => {
                layout::ht_check(c, &inp.args, layout, offs, recv_per_expert, recv.ptr())
            }
        }
    }

    fn quantizes_ll(&self) -> bool {
        true
    }

    fn sms(&self) -> Option<u32> {
        Some(self.ctas)
    }

    fn bytes_to(&self, c: &Ctx, phase: Phase, tr: &Traffic) -> Vec<u64> {
        let a = c.args(c.max_tokens);
        let (row, h2) = (a.row as u64, 2 * a.hidden as u64);
        let (l, r) = (a.local as u64, a.ranks as u64);
        let meta = ht_meta_bytes(a.topk as usize) as u64;
        (0..c.boot.size())
            .map(|d| match (self.mode, phase) {
                // A row per token bound for d, a 4-byte descriptor per selection, the counts to d
                // and the ranges of d's segments here.
                (Mode::Ll, Phase::Dispatch) => tr.tokens_to[d] as u64 * row + tr.selections_to[d] as u64 * 4 + 16 * l,
                // Pulled by d: the rows cross the link towards d; the ready flag.
                (Mode::Ll, Phase::Combine) => tr.selections_from[d] as u64 * h2 + 8,
                (Mode::Ht, Phase::Dispatch) => tr.tokens_to[d] as u64 * (row + meta) + 8 * (r + l) + 8,
                // Pulled by d: the rows this rank holds for d cross the link towards d.
                (Mode::Ht, Phase::Combine) => tr.tokens_from[d] as u64 * h2 + 8,
            })
            .collect()
    }
}
