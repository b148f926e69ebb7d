//! `gin`, `hybrid` and their emulated forms `gin-emu`, `hybrid-emu`: the nvl dispatch protocols
//! (both modes) with every transfer to a rank outside the node put through GIN, and combines that
//! push rows back to the token's rank (src/kernels/ep_gin.cu). gin puts to every rank; hybrid
//! stores into its node's ranks over NVLink and puts to the rest.
//! The emulated forms run the same kernels on GIN emulated over NVLink between virtual nodes of
//! one host (`--emulate-nodes N`), so the protocols are checked on any NVLink host.
use super::device::{dynamic_smem, one_cta_per_sm, Args, Buf, Inputs, LayoutBufs};
use super::layout::{self, ht_meta_bytes, ht_meta_offset};
use super::metrics::{Mode, Phase};
use super::reference::{Layout, Traffic};
use super::{Ctx, EpImpl, Received};
use crate::cuda::grid;
use crate::error::Result;
use crate::gin_transport::GinTransport;
use crate::nccl::compat::{self, DevComm};
use crate::nccl::{ffi, SymBuffer};
use cudarc::driver::{CudaFunction, DeviceRepr, PushKernelArg};

/// Signals the kernels use (ep_gin.cu: LL 2 count + 2L row + 2 combine, HT 6).
fn signals(mode: Mode, local: usize) -> usize {
    match mode {
        Mode::Ll => 4 + 2 * local,
        Mode::Ht => 6,
    }
}

/// Bytes of a row of `n` i32 counts as put (16-aligned, ep_gin.cu counts_row).
fn counts_row(n: usize) -> usize {
    (4 * n).next_multiple_of(16)
}

/// Mirrors `EpIo` in src/kernels/ep_gin.cu.
#[repr(C)]
#[derive(Clone, Copy)]
struct Io {
    idx: u64,
    w: u64,
    x: u64,
    out: u64,
}
unsafe impl DeviceRepr for Io {}
const _: () = assert!(std::mem::size_of::<Io>() == 32); // ep_gin.cu asserts the same

/// Mirrors `EpGinBufs` in src/kernels/ep_gin.cu.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct GinBufs {
    recv: u64,
    send: u64,
    y: u64,
    cbuf: u64,
    ctrl: u64,
    sigwin: u64,
    node_size: i32,
    meta_bytes: i32,
    meta_off: u64,
    send_meta_off: u64,
    lsa_counts: u64,
    flags: u64,
    cflags: u64,
    net_counts: u64,
    out_counts: u64,
    state: u64,
    cstate: u64,
    nstate: u64,
    sent: u64,
    out: u64,
    src_info: u64,
    recv_count: u64,
    ranges: u64,
    offs: u64,
    recv_per_expert: u64,
    tok_local: u64,
    chunk_base: u64,
    totals: u64,
    sigbase: u64,
}
unsafe impl DeviceRepr for GinBufs {}
const _: () = assert!(std::mem::size_of::<GinBufs>() == 224); // ep_gin.cu asserts the same

struct Kernel {
    f: CudaFunction,
    smem: u32,
}

/// Device buffers the kernels' pointers refer to (kept alive with the impl).
struct Owned {
    keep: Vec<Buf>,
    layout: Option<Box<LayoutBufs>>,
    /// HT: the notify's offsets and rows per local expert.
    ht: Option<[Buf; 2]>,
    ll: Option<[Buf; 4]>,
}

pub struct Gin {
    kind: GinTransport,
    mode: Mode,
    ctas: u32,
    node_size: usize,
    kernels: Vec<Kernel>,
    b: GinBufs,
    owned: Owned,
    // Windows, dropped before `dev` (field order).
    wins: Vec<SymBuffer>,
    dev: DevComm,
}

impl Gin {
    /// Collective. Skips (inner Err) where the transport is missing: GIN for gin / hybrid,
    /// `--emulate-nodes` and one NVLink domain for the emulated forms.
    pub fn new(kind: GinTransport, c: &Ctx, gin: &crate::results::Gin) -> Result<std::result::Result<Gin, String>> {
        let n = c.boot.size();
        let mut reqs = compat::requirements();
        reqs.lsaBarrierCount = 0;
        let a = c.args(c.max_tokens);
        let (l, r, k, h, t) = (a.local as usize, n, a.topk as usize, a.hidden as usize, c.max_tokens);
        let node_size = match kind.node_size(n, c.comm.lsa_size(), c.emulate_nodes, gin, &c.gin_request, &mut reqs) {
            Ok(size) => size,
            Err(why) => return Ok(Err(why)),
        };
        if !kind.emulated() {
            reqs.ginSignalCount = signals(c.mode, l) as i32;
        }
        if let Some(why) = c.too_many_ranks() {
            return Ok(Err(why));
        }
        let dev = DevComm::create(c.comm, &reqs)?;
        let stream = &c.gpu.stream;
        let row = a.row as usize;
        let mb = ht_meta_bytes(k);
        let w = r + l; // HT count-matrix row
        let win = |bytes: usize| SymBuffer::new(c.comm, bytes, stream);
        // Control window: NVLink counts and flags, then counts received and to put.
        let (lsa_counts, per_row) = match c.mode {
            Mode::Ll => (2 * l * r * 8, counts_row(l)),
            Mode::Ht => (2 * r * w * 8, counts_row(w)),
        };
        let flags = lsa_counts;
        let cflags = flags + 2 * r * 8;
        let net_counts = cflags + 2 * r * 8;
        let out_counts = net_counts + 2 * r * per_row;
        let ctrl = win(out_counts + r * per_row)?;
        let (recv, send, y, cbuf) = match c.mode {
            Mode::Ll => {
                let slot = 16 + row;
                (win(2 * l * r * t * slot)?, win(t * k * slot)?, win(l * r * t * 2 * h)?, win(2 * k * t * 2 * h)?)
            }
            Mode::Ht => {
                (win(r * t * (row + mb))?, win(r * t * (row + mb))?, win(r * t * 2 * h)?, win(2 * r * t * 2 * h)?)
            }
        };
        let sig = if kind.emulated() { Some(win(signals(c.mode, l) * 8)?) } else { None };
        let state = |c: &Ctx| Buf::zeros(c.gpu, 4 * (1 + c.ctas as usize));
        let (st, cst, nst) = (state(c)?, state(c)?, Buf::zeros(c.gpu, 4)?);
        let mut b = GinBufs {
            recv: recv.win as u64,
            send: send.win as u64,
            y: y.win as u64,
            cbuf: cbuf.win as u64,
            ctrl: ctrl.win as u64,
            sigwin: sig.as_ref().map_or(0, |s| s.win as u64),
            node_size: node_size as i32,
            meta_bytes: mb as i32,
            meta_off: ht_meta_offset(c, &a),
            send_meta_off: (r * t * row) as u64,
            lsa_counts: 0,
            flags: flags as u64,
            cflags: cflags as u64,
            net_counts: net_counts as u64,
            out_counts: out_counts as u64,
            state: st.ptr,
            cstate: cst.ptr,
            nstate: nst.ptr,
            ..Default::default()
        };
        let mut owned = Owned { keep: vec![st, cst, nst], layout: None, ht: None, ll: None };
        let names: &[&str] = match c.mode {
            Mode::Ll => {
                let (sent, out) = (Buf::zeros(c.gpu, 4 * a.experts as usize)?, Buf::zeros(c.gpu, l * r * t * row)?);
                let (src_info, recv_count) = (Buf::zeros(c.gpu, l * r * t * 4)?, Buf::zeros(c.gpu, l * 4)?);
                let ranges = Buf::zeros(c.gpu, l * r * 8)?;
                (b.sent, b.out, b.src_info, b.recv_count, b.ranges) =
                    (sent.ptr, out.ptr, src_info.ptr, recv_count.ptr, ranges.ptr);
                owned.keep.push(sent);
                owned.ll = Some([out, src_info, recv_count, ranges]);
                &["ll_dispatch", "ll_combine"]
            }
            Mode::Ht => {
                let layout = Box::new(LayoutBufs::new(c.gpu, &a)?);
                let (offs, rpe) = (Buf::zeros(c.gpu, 4 * (2 * r + 2))?, Buf::zeros(c.gpu, 4 * l)?);
                (b.offs, b.recv_per_expert) = (offs.ptr, rpe.ptr);
                (b.tok_local, b.chunk_base, b.totals) =
                    (layout.tok_local.ptr, layout.chunk_base.ptr, layout.totals.ptr);
                owned.ht = Some([offs, rpe]);
                owned.layout = Some(layout);
                &["ht_notify", "ht_dispatch", "ht_combine"]
            }
        };
        let kernels = names
            .iter()
            .map(|name| {
                let f = c.gpu.function("ep_gin", &format!("gb_ep_{}_{name}", kind.symbol()))?;
                let smem = if *name == "ht_notify" {
                    dynamic_smem(c.gpu, &f, (r * w * 4) as u32, "the HT notify kernel")?
                } else {
                    one_cta_per_sm(c.gpu, &f, 4 * (l as u32 + 1))?
                };
                Ok(Kernel { f, smem })
            })
            .collect::<Result<Vec<_>>>()?;
        if !kind.emulated() {
            owned.keep.push(Self::signal_base(c, &dev, &mut b, signals(c.mode, l))?);
        }
        let mut wins = vec![recv, send, y, cbuf, ctrl]; // recv_ptr / y_ptr know this order
        wins.extend(sig);
        Ok(Ok(Gin { kind, mode: c.mode, ctas: c.ctas, node_size, kernels, b, owned, wins, dev }))
    }

    /// Collective. Records where each of the `n` GIN signals starts: NCCL may hand this device
    /// communicator signals an earlier one left non-zero, and the protocols count from zero
    /// (gin_net.cuh GinNet). The barrier keeps every peer from signalling before all have read.
    fn signal_base(c: &Ctx, dev: &DevComm, b: &mut GinBufs, n: usize) -> Result<Buf> {
        let base = Buf::zeros(c.gpu, 8 * n)?;
        b.sigbase = base.ptr;
        let f = c.gpu.function("ep_gin", "gb_ep_gin_signal_base")?;
        let raw: &ffi::ncclDevComm = &dev.raw;
        let count = n as i32;
        let mut l = c.gpu.stream.launch_builder(&f);
        l.arg(&*b).arg(raw).arg(&count);
        unsafe { l.launch(grid(1, 0)) }?;
        c.gpu.stream.synchronize()?;
        c.boot.barrier();
        Ok(base)
    }

    fn io(inp: &Inputs) -> Io {
        Io { idx: inp.idx.ptr, w: inp.weight.ptr, x: inp.rows, out: inp.out.ptr }
    }

    fn launch(&self, c: &Ctx, k: &Kernel, a: &Args, io: &Io, ctas: u32) -> Result<()> {
        let dev: &ffi::ncclDevComm = &self.dev.raw;
        let mut l = c.gpu.stream.launch_builder(&k.f);
        l.arg(a).arg(io).arg(&self.b).arg(dev);
        unsafe { l.launch(grid(ctas, k.smem)) }?;
        Ok(())
    }

    /// Whether rank `d` is reached over the (emulated) network rather than NVLink.
    fn over_net(&self, me: usize, d: usize) -> bool {
        !self.kind.hybrid() || me / self.node_size != d / self.node_size
    }

    /// The receive window (dispatch output) and the expert output.
    fn recv_ptr(&self) -> u64 {
        self.wins[0].ptr()
    }
    fn y_ptr(&self) -> u64 {
        self.wins[2].ptr()
    }
}

impl EpImpl for Gin {
    fn dispatch(&self, c: &Ctx, inp: &Inputs) -> Result<()> {
        let (a, io) = (inp.args, Gin::io(inp));
        match self.mode {
            Mode::Ll => self.launch(c, &self.kernels[0], &a, &io, self.ctas),
            Mode::Ht => {
                self.owned.layout.as_ref().unwrap().launch(c.gpu, &a, inp.idx.ptr, self.ctas)?;
                self.launch(c, &self.kernels[0], &a, &io, 1)?;
                self.launch(c, &self.kernels[1], &a, &io, self.ctas)
            }
        }
    }

    fn combine(&self, c: &Ctx, inp: &Inputs) -> Result<()> {
        let k = self.kernels.last().unwrap();
        self.launch(c, k, &inp.args, &Gin::io(inp), self.ctas)
    }

    fn received(&self, c: &Ctx, inp: &Inputs, layout: &Layout) -> Result<Received> {
        match &self.owned.ll {
            Some([out, src_info, recv_count, _]) => {
                Ok(layout::ll_received(c, &inp.args, out, src_info, recv_count, self.y_ptr()))
            }
            None => layout::ht_received(c, layout, self.recv_ptr(), self.y_ptr()),
        }
    }

    fn check_layout(&self, c: &Ctx, inp: &Inputs, layout: &Layout) -> Result<u64> {
        match (&self.owned.ll, &self.owned.ht) {
            (Some([_, src_info, recv_count, ranges]), _) => {
                layout::ll_check(c, &inp.args, layout, src_info, recv_count, Some(ranges))
            }
            (None, Some([offs, per_expert])) => {
                layout::ht_check(c, &inp.args, layout, offs, per_expert, self.recv_ptr())
            }
            (None, None) => unreachable!("an HT impl has its offsets"),
        }
    }

    fn sms(&self) -> Option<u32> {
        Some(self.ctas)
    }

    fn gin_contexts(&self) -> Option<u32> {
        (!self.kind.emulated()).then(|| self.dev.gin_context_count())
    }

    /// Data bytes: rows (with their LL header or HT metadata), counts and NVLink flags. Signal
    /// additions are not counted.
    fn bytes_to(&self, c: &Ctx, phase: Phase, tr: &Traffic) -> Vec<u64> {
        let a = c.args(c.max_tokens);
        let (row, h2) = (a.row as u64, 2 * a.hidden as u64);
        let (l, r) = (a.local as usize, a.ranks as usize);
        let meta = ht_meta_bytes(a.topk as usize) as u64;
        let me = c.boot.rank();
        (0..c.boot.size())
            .map(|d| {
                let net = self.over_net(me, d);
                let (counts, flag) = match self.mode {
                    Mode::Ll if net => (counts_row(l) as u64, 0),
                    Mode::Ll => (8 * l as u64, 8),
                    Mode::Ht if net => (counts_row(r + l) as u64, 0),
                    Mode::Ht => (8 * (r + l) as u64, 8),
                };
                match (self.mode, phase) {
                    (Mode::Ll, Phase::Dispatch) => tr.selections_to[d] as u64 * (16 + row) + counts,
                    (Mode::Ll, Phase::Combine) => tr.selections_from[d] as u64 * h2 + flag,
                    (Mode::Ht, Phase::Dispatch) => tr.tokens_to[d] as u64 * (row + meta) + counts + flag,
                    (Mode::Ht, Phase::Combine) => tr.tokens_from[d] as u64 * h2 + flag,
                }
            })
            .collect()
    }

    fn over_network(&self, c: &Ctx) -> Option<Vec<bool>> {
        let me = c.boot.rank();
        Some((0..c.boot.size()).map(|d| self.over_net(me, d)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_and_count_rows() {
        assert_eq!(signals(Mode::Ll, 64), 132);
        assert_eq!(signals(Mode::Ht, 64), 6);
        assert_eq!(counts_row(64), 256);
        assert_eq!(counts_row(68), 272);
        assert_eq!(counts_row(5), 32);
    }
}
