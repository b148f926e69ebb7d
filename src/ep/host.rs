//! `host`: the Megatron-style dispatcher. A permute kernel orders each token's selections by
//! expert, counts go round with ncclAllToAll, the host reads them (a host sync, so no CUDA
//! graph), then NCCL grouped send/recv moves the rows; combine mirrors it and an unpermute
//! kernel reduces with the top-k weights.
use super::device::{Buf, ExpertSel, Inputs, LayoutBufs, RowSet};
use super::metrics::Phase;
use super::reference::{undesc, Layout, Traffic};
use super::{Ctx, EpImpl, Received};
use crate::cuda::grid;
use crate::error::{Error, Result};
use crate::nccl::{self, ffi};
use cudarc::driver::{CudaFunction, PushKernelArg};
use std::cell::RefCell;

/// CTAs of the permute kernels (NCCL's own kernels pick their channels).
const CTAS: u32 = 132;

pub struct Host {
    layout: LayoutBufs,
    permute: CudaFunction,
    unpermute: CudaFunction,
    /// Rows in expert order, sent.
    perm: Buf,
    /// Rows received, per source rank then local expert.
    recv: Buf,
    recv_counts: Buf,
    /// Expert output in `recv`'s order, and the same rows back in `perm`'s order.
    y: Buf,
    y_back: Buf,
    /// Rows to and from each rank, from the last dispatch's count exchange.
    rows: RefCell<(Vec<usize>, Vec<usize>)>,
}

impl Host {
    pub fn new(c: &Ctx) -> Result<Host> {
        let a = c.args(c.max_tokens);
        let (t, k, r, l, h) = (c.max_tokens, a.topk as usize, a.ranks as usize, a.local as usize, a.hidden as usize);
        // Worst case: every selection of every rank lands here.
        let worst = r * t * k;
        Ok(Host {
            layout: LayoutBufs::new(c.gpu, &a)?,
            permute: c.gpu.function("ep", "gb_ep_permute")?,
            unpermute: c.gpu.function("ep", "gb_ep_unpermute")?,
            perm: Buf::zeros(c.gpu, t * k * a.row as usize)?,
            recv: Buf::zeros(c.gpu, worst * a.row as usize)?,
            recv_counts: Buf::zeros(c.gpu, r * l * 4)?,
            y: Buf::zeros(c.gpu, worst * 2 * h)?,
            y_back: Buf::zeros(c.gpu, t * k * 2 * h)?,
            rows: RefCell::new((vec![0; r], vec![0; r])),
        })
    }

    /// One NCCL group: `to[d]` rows of `row` bytes from `send` (consecutive per rank) and
    /// `from[s]` rows into `recv`.
    fn exchange(c: &Ctx, send: u64, to: &[usize], recv: u64, from: &[usize], row: usize) -> Result<()> {
        let l = nccl::lib();
        let stream = c.gpu.raw_stream().cast();
        nccl::group_start()?;
        let (mut so, mut ro) = (0usize, 0usize);
        for p in 0..to.len() {
            let (sb, rb) = (to[p] * row, from[p] * row);
            let r = unsafe {
                l.ncclSend(
                    (send + so as u64) as *const _,
                    sb,
                    ffi::ncclDataType_t::ncclUint8,
                    p as i32,
                    c.comm.raw(),
                    stream,
                )
            };
            c.comm.check(r, "ncclSend")?;
            let r = unsafe {
                l.ncclRecv(
                    (recv + ro as u64) as *mut _,
                    rb,
                    ffi::ncclDataType_t::ncclUint8,
                    p as i32,
                    c.comm.raw(),
                    stream,
                )
            };
            c.comm.check(r, "ncclRecv")?;
            so += sb;
            ro += rb;
        }
        nccl::group_end()
    }
}

impl EpImpl for Host {
    fn dispatch(&self, c: &Ctx, inp: &Inputs) -> Result<()> {
        let a = inp.args;
        let (r, l) = (a.ranks as usize, a.local as usize);
        self.layout.launch(c.gpu, &a, inp.idx.ptr, CTAS)?;
        let lay = &self.layout;
        let mut b = c.gpu.stream.launch_builder(&self.permute);
        b.arg(&a).arg(&inp.idx.ptr).arg(&inp.rows).arg(&lay.sel_local.ptr).arg(&lay.chunk_base.ptr);
        b.arg(&lay.expert_off.ptr).arg(&self.perm.ptr);
        unsafe { b.launch(grid(CTAS, 0)) }?;
        // Counts per expert, contiguous per owner rank: an alltoall of L counts.
        unsafe {
            c.comm.alltoall(
                lay.totals.ptr as *const _,
                self.recv_counts.ptr as *mut _,
                l,
                ffi::ncclDataType_t::ncclInt32,
                c.gpu.raw_stream(),
            )
        }?;
        let totals = lay.totals.read::<i32>(c.gpu, a.experts as usize)?;
        let counts = self.recv_counts.read::<i32>(c.gpu, r * l)?;
        let sum = |v: &[i32]| v.iter().map(|&x| x.max(0) as usize).sum::<usize>();
        let to: Vec<usize> = (0..r).map(|d| sum(&totals[d * l..(d + 1) * l])).collect();
        let from: Vec<usize> = (0..r).map(|s| sum(&counts[s * l..(s + 1) * l])).collect();
        if from.iter().sum::<usize>() * a.row as usize > self.recv.bytes {
            return Err(Error::internal("host: received rows exceed the receive buffer"));
        }
        Host::exchange(c, self.perm.ptr, &to, self.recv.ptr, &from, a.row as usize)?;
        *self.rows.borrow_mut() = (to, from);
        Ok(())
    }

    fn combine(&self, c: &Ctx, inp: &Inputs) -> Result<()> {
        let a = inp.args;
        let (to, from) = self.rows.borrow().clone();
        // Back the way the rows came: what came from s returns to s.
        Host::exchange(c, self.y.ptr, &from, self.y_back.ptr, &to, 2 * a.hidden as usize)?;
        let lay = &self.layout;
        let mut b = c.gpu.stream.launch_builder(&self.unpermute);
        b.arg(&a).arg(&inp.idx.ptr).arg(&inp.weight.ptr).arg(&lay.sel_local.ptr).arg(&lay.chunk_base.ptr);
        b.arg(&lay.expert_off.ptr).arg(&self.y_back.ptr).arg(&inp.out.ptr);
        unsafe { b.launch(grid(CTAS, 0)) }?;
        Ok(())
    }

    fn received(&self, c: &Ctx, _inp: &Inputs, layout: &Layout) -> Result<Received> {
        // No descriptors travel with the rows: the order is deterministic, so the reference's
        // order is what every row is checked against.
        let want = layout.host_rows(c.boot.rank());
        let sel: Vec<ExpertSel> =
            want.iter().map(|&d| ExpertSel { expert: layout.expert_of(d), weight: 1.0 }).collect();
        let (descs, sel) = (Buf::upload(c.gpu, &want)?, Buf::upload(c.gpu, &sel)?);
        Ok(Received {
            rows: self.recv.ptr,
            desc: descs.ptr,
            set: RowSet { groups: 1, counts: 0, count0: want.len() as i32, group_rows: want.len().max(1) as u64 },
            y: self.y.ptr,
            sel: sel.ptr,
            per_row: 1,
            keep: vec![descs, sel],
        })
    }

    /// Rows to and from each rank, and the received counts per (source, local expert): what an
    /// expert's grouped GEMM would size its work by.
    fn check_layout(&self, c: &Ctx, inp: &Inputs, layout: &Layout) -> Result<u64> {
        let (me, l) = (c.boot.rank(), inp.args.local as usize);
        let tr = layout.traffic(me);
        let (to, from) = self.rows.borrow().clone();
        let bad = |got: &[usize], want: &[usize]| got.iter().zip(want).map(|(g, w)| g.abs_diff(*w) as u64).sum::<u64>();
        let mut per_expert = vec![0usize; c.boot.size() * l];
        for (le, rows) in layout.expert_rows(me).iter().enumerate() {
            for &d in rows {
                per_expert[undesc(d).0 * l + le] += 1;
            }
        }
        let got = self.recv_counts.read::<i32>(c.gpu, per_expert.len())?;
        let bad_counts = got.iter().zip(&per_expert).map(|(&g, &w)| (g as i64 - w as i64).unsigned_abs()).sum::<u64>();
        Ok(bad(&to, &tr.selections_to) + bad(&from, &tr.selections_from) + bad_counts)
    }

    fn not_capturable(&self) -> Option<&'static str> {
        Some("the host reads the exchanged counts before NCCL moves the rows (a host sync)")
    }

    fn sms(&self) -> Option<u32> {
        None
    }

    fn bytes_to(&self, c: &Ctx, phase: Phase, tr: &Traffic) -> Vec<u64> {
        let a = c.args(c.max_tokens);
        (0..c.boot.size())
            .map(|d| match phase {
                Phase::Dispatch => tr.selections_to[d] as u64 * a.row as u64 + 4 * a.local as u64,
                Phase::Combine => tr.selections_from[d] as u64 * 2 * a.hidden as u64,
            })
            .collect()
    }
}
