//! The background operation: a collective on its own (DP) communicator and stream, with its
//! check (src/kernels/reduce_check.cu). Each timed iteration reduces the same send buffer into
//! the receive buffer; a checked iteration also verifies the result on the background stream and
//! poisons it again, so every checked iteration is verified where it ran (while the foreground
//! ran beside it), not only the last one.
use super::cli::BgOp;
use crate::cuda::{grid_for, Gpu};
use crate::error::Result;
use crate::nccl::{ffi, Comm, DevMem};
use cudarc::driver::{CudaFunction, CudaSlice, PushKernelArg};

/// Bytes per element of the background (float).
pub const ELT: u64 = 4;

pub struct Background {
    pub op: BgOp,
    /// This GPU on the background's stream.
    pub gpu: Gpu,
    pub comm: Comm,
    send: DevMem,
    recv: DevMem,
    /// Elements of the current size.
    pub count: u64,
    fill: CudaFunction,
    poison: CudaFunction,
    verify: CudaFunction,
    wrong: CudaSlice<u64>,
}

impl BgOp {
    /// The element type and reduction it runs with (none: "").
    pub fn dtype(self) -> &'static str {
        match self {
            BgOp::AllReduce => "float",
            BgOp::None => "",
        }
    }

    pub fn redop(self) -> &'static str {
        match self {
            BgOp::AllReduce => "sum",
            BgOp::None => "",
        }
    }

    /// nccl-tests' bus bandwidth (GB/s) of one operation on `bytes` per rank taking `time_us`.
    pub fn busbw(self, bytes: u64, time_us: f64, nranks: u64) -> f64 {
        match self {
            BgOp::AllReduce => allreduce_bw(bytes, time_us, nranks).1,
            BgOp::None => 0.0,
        }
    }
}

/// nccl-tests' all-reduce bandwidths: algbw = bytes / time, busbw = algbw · 2(n-1)/n (GB/s).
pub fn allreduce_bw(bytes: u64, time_us: f64, nranks: u64) -> (f64, f64) {
    if time_us <= 0.0 {
        return (0.0, 0.0);
    }
    let alg = bytes as f64 / 1e3 / time_us;
    (alg, alg * 2.0 * (nranks as f64 - 1.0) / nranks as f64)
}

impl Background {
    /// Buffers for `max_bytes` per rank on `comm`, run on `gpu` (the background's stream).
    pub fn new(op: BgOp, gpu: Gpu, comm: Comm, max_bytes: u64) -> Result<Background> {
        let bytes = max_bytes.next_multiple_of(ELT).max(ELT) as usize;
        let (send, recv) = (DevMem::alloc(bytes)?, DevMem::alloc(bytes)?);
        let wrong = gpu.stream.alloc_zeros::<u64>(1)?;
        let b = Background {
            op,
            fill: gpu.function("reduce_check", "gb_reduce_fill_f32")?,
            poison: gpu.function("reduce_check", "gb_reduce_poison_f32")?,
            verify: gpu.function("reduce_check", "gb_reduce_verify_f32")?,
            gpu,
            comm,
            send,
            recv,
            count: 0,
            wrong,
        };
        Ok(b)
    }

    /// Use `bytes` per rank from now on, with timed data that is a real pattern (seed 0).
    pub fn resize(&mut self, bytes: u64) -> Result<()> {
        self.count = bytes / ELT;
        self.fill_send(0)?;
        self.gpu.stream.synchronize()?;
        Ok(())
    }

    fn fill_send(&self, seed: u32) -> Result<()> {
        let rank = self.comm.rank as u32;
        let mut b = self.gpu.stream.launch_builder(&self.fill);
        b.arg(&self.send.ptr).arg(&self.count).arg(&seed).arg(&rank);
        unsafe { b.launch(grid_for(self.count)) }?;
        Ok(())
    }

    fn poison_recv(&self) -> Result<()> {
        let mut b = self.gpu.stream.launch_builder(&self.poison);
        b.arg(&self.recv.ptr).arg(&self.count);
        unsafe { b.launch(grid_for(self.count)) }?;
        Ok(())
    }

    /// Enqueue one operation (timed iteration).
    pub fn launch(&self) -> Result<()> {
        match self.op {
            BgOp::AllReduce => unsafe {
                self.comm.all_reduce(
                    self.send.ptr,
                    self.recv.ptr,
                    self.count as usize,
                    ffi::ncclDataType_t::ncclFloat32,
                    ffi::ncclRedOp_t::ncclSum,
                    self.gpu.raw_stream(),
                )
            },
            BgOp::None => Ok(()),
        }
    }

    /// Before checked iterations: values for `seed`, a poisoned result, a zero wrong count.
    pub fn start_check(&mut self, seed: u32) -> Result<()> {
        self.fill_send(seed)?;
        self.poison_recv()?;
        self.gpu.stream.memset_zeros(&mut self.wrong)?;
        self.gpu.stream.synchronize()?;
        Ok(())
    }

    /// One checked iteration: the operation, its verification on this stream, poison again.
    pub fn launch_checked(&mut self, seed: u32) -> Result<()> {
        self.launch()?;
        let n = self.comm.nranks as u32;
        let mut b = self.gpu.stream.launch_builder(&self.verify);
        b.arg(&self.recv.ptr).arg(&self.count).arg(&seed).arg(&n).arg(&mut self.wrong);
        unsafe { b.launch(grid_for(self.count)) }?;
        self.poison_recv()
    }

    /// Wrong elements of the checked iterations since `start_check`; restores the timed data.
    pub fn finish_check(&mut self) -> Result<u64> {
        let w = self.gpu.stream.clone_dtoh(&self.wrong)?[0];
        self.fill_send(0)?;
        self.gpu.stream.synchronize()?;
        Ok(w)
    }

    pub fn bytes(&self) -> u64 {
        self.count * ELT
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allreduce_busbw_is_nccl_tests() {
        // 1 GB in 1000 µs: algbw 1000 GB/s... busbw · 2(n-1)/n.
        let (alg, bus) = allreduce_bw(1_000_000_000, 1000.0, 4);
        assert!((alg - 1000.0).abs() < 1e-9);
        assert!((bus - 1500.0).abs() < 1e-9);
        assert_eq!(allreduce_bw(1 << 20, 10.0, 1).1, 0.0, "one rank moves nothing");
        assert_eq!(allreduce_bw(1 << 20, 0.0, 4), (0.0, 0.0));
    }
}
