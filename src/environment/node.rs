//! `ginbench env`: what this node offers: NCCL (header and library), the CUDA driver, GPUs and
//! their peer-to-peer topology, network devices, GIN availability (asked of NCCL), variables.
use crate::bootstrap::{self, Bootstrap};
use crate::cuda::{self, Gpu};
use crate::error::Result;
use crate::nccl;
use crate::results::{Env, Gin, Gpu as GpuInfo};

pub struct NodeReport {
    pub env: Env,
    /// Problems met while looking (no driver, NCCL mismatch, ...), each one line.
    pub problems: Vec<String>,
    /// p2p[i][j]: GPU i can load/store GPU j's memory.
    pub p2p: Vec<Vec<bool>>,
    /// `nvidia-smi topo -m`, when nvidia-smi is there.
    pub topo: Option<String>,
}

pub fn collect() -> NodeReport {
    let mut problems = vec![];
    let nccl = nccl::load().map_err(|e| problems.push(e.to_string())).ok();
    let mut p2p = vec![];
    let (mut gpus, mut gin) = (vec![], Gin::default());
    match cuda::device_count() {
        Err(e) => problems.push(e.to_string()),
        Ok(0) => problems.push("no GPU visible to CUDA".into()),
        Ok(n) => {
            p2p = peer_matrix(n);
            if nccl.is_some() {
                match probe_node(n) {
                    Ok(found) => (gpus, gin) = found,
                    Err(e) => problems.push(format!("probing GPUs through NCCL: {e}")),
                }
            }
        }
    }
    let env = super::build(gpus, gin, nccl);
    let topo = std::process::Command::new("nvidia-smi")
        .args(["topo", "-m"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned());
    NodeReport { env, problems, p2p, topo }
}

fn peer_matrix(n: usize) -> Vec<Vec<bool>> {
    (0..n)
        .map(|i| {
            (0..n)
                .map(|j| {
                    if i == j {
                        return true;
                    }
                    crate::cuda::can_access_peer(i, j).unwrap_or(false)
                })
                .collect()
        })
        .collect()
}

/// One communicator over every GPU of the node (a thread per GPU): GPU details, and GIN asked of
/// NCCL itself.
fn probe_node(n: usize) -> Result<(Vec<GpuInfo>, Gin)> {
    let handles: Vec<_> = bootstrap::threads::group(n)
        .into_iter()
        .map(|b| {
            // Ok(None): another GPU did not open, and its thread reports why.
            std::thread::spawn(move || -> Result<Option<(GpuInfo, Gin)>> {
                let gpu = Gpu::open(b.rank());
                // Every thread learns whether every GPU opened before any enters NCCL, where the
                // others would wait for the missing one forever.
                let opened = b.allgather(&[gpu.is_ok() as u8]);
                let gpu = gpu?;
                if opened.iter().any(|o| o[0] == 0) {
                    return Ok(None);
                }
                let gin = nccl::probe_gin(&b)?;
                Ok(Some((gpu.describe(b.rank(), &bootstrap::hostname()), gin)))
            })
        })
        .collect();
    let mut gpus = vec![];
    let mut gin = None;
    for h in handles {
        if let Some((g, gi)) = h.join().map_err(|_| crate::error::Error::internal("probe thread panicked"))?? {
            gpus.push(g);
            gin.get_or_insert(gi);
        }
    }
    Ok((gpus, gin.unwrap_or_default()))
}

pub fn render(r: &NodeReport) -> String {
    let e = &r.env;
    let mut s = String::new();
    s += &format!("host          {}\n", e.hosts.join(", "));
    s += &format!(
        "nccl          headers {} (compiled in), library {} ({})\n",
        nccl::version_string(e.nccl.header),
        if e.nccl.library > 0 { nccl::version_string(e.nccl.library) } else { "not loaded".into() },
        if e.nccl.path.is_empty() { "-" } else { &e.nccl.path }
    );
    s += &format!(
        "cuda driver   {} (CUDA {})\n",
        if e.driver.is_empty() { "-" } else { &e.driver },
        if e.cuda.is_empty() { "-" } else { &e.cuda }
    );
    s += &format!("gpus          {}\n", e.gpus.len());
    for g in &e.gpus {
        s += &format!(
            "  [{}] {} {} {:.0} GiB\n",
            g.device,
            g.name,
            g.pci_bus_id,
            g.memory_bytes as f64 / (1u64 << 30) as f64
        );
    }
    if !r.p2p.is_empty() {
        let n = r.p2p.len();
        let all = r.p2p.iter().all(|row| row.iter().all(|&x| x));
        s += &format!(
            "topology      peer access: {}\n",
            if all { format!("all {n} GPUs reach each other (LSA possible)") } else { "partial".into() }
        );
        if !all {
            for (i, row) in r.p2p.iter().enumerate() {
                s += &format!("  GPU{i}: {}\n", row.iter().map(|&x| if x { "Y" } else { "." }).collect::<String>());
            }
        }
    }
    if let Some(t) = &r.topo {
        s += "nvidia-smi topo -m:\n";
        for l in t.lines().filter(|l| !l.trim().is_empty()) {
            s += &format!("  {l}\n");
        }
    }
    s += &format!("network       {}\n", e.network.kind);
    for d in &e.network.devices {
        s += &format!(
            "  {} ({}{})\n",
            d.name,
            d.kind,
            if d.detail.is_empty() { String::new() } else { format!(", {}", d.detail) }
        );
    }
    let connection =
        if e.gin.connection.is_empty() { String::new() } else { format!(" (connection {})", e.gin.connection) };
    s += &format!("gin           {}{connection}: {}\n", e.gin.kind, e.gin.reason);
    s += "variables\n";
    for (k, v) in &e.vars {
        s += &format!("  {k}={v}\n");
    }
    for p in &r.problems {
        s += &format!("problem       {p}\n");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::{GinKind, NcclInfo, NetDevice, Network};

    fn report(p2p: Vec<Vec<bool>>, topo: Option<&str>) -> NodeReport {
        let gpu = |device: usize| GpuInfo {
            device,
            name: "NVIDIA H200".into(),
            pci_bus_id: format!("00000000:{:02x}:00.0", 0x18 + device),
            memory_bytes: 141 << 30,
            ..Default::default()
        };
        let env = Env {
            hosts: vec!["node1".into()],
            gpus: vec![gpu(0), gpu(1)],
            driver: "580.65.06".into(),
            cuda: "13.0".into(),
            nccl: NcclInfo { header: 22809, library: 22809, path: "/opt/nccl/lib/libnccl.so.2".into() },
            gin: Gin { kind: GinKind::None, reason: "no RDMA NIC".into(), ..Default::default() },
            network: Network {
                kind: "ib".into(),
                devices: vec![
                    NetDevice { name: "mlx5_0".into(), kind: "ib".into(), detail: "400 Gb/sec (4X NDR)".into() },
                    NetDevice { name: "eth0".into(), kind: "ethernet".into(), detail: String::new() },
                ],
            },
            vars: [("NCCL_DEBUG".to_string(), "WARN".to_string())].into(),
            ..Default::default()
        };
        NodeReport { env, problems: vec!["GPU 1: busy".into()], p2p, topo: topo.map(String::from) }
    }

    #[test]
    fn the_report_names_what_the_node_offers() {
        let partial = vec![vec![true, false], vec![true, true]];
        let text = render(&report(partial, Some("\tGPU0\tGPU1\nGPU0\t X \tNV18\n\n  \nGPU1\tNV18\t X \n")));
        assert_eq!(
            text,
            "host          node1\n\
             nccl          headers 2.28.9 (compiled in), library 2.28.9 (/opt/nccl/lib/libnccl.so.2)\n\
             cuda driver   580.65.06 (CUDA 13.0)\n\
             gpus          2\n\
             \x20 [0] NVIDIA H200 00000000:18:00.0 141 GiB\n\
             \x20 [1] NVIDIA H200 00000000:19:00.0 141 GiB\n\
             topology      peer access: partial\n\
             \x20 GPU0: Y.\n\
             \x20 GPU1: YY\n\
             nvidia-smi topo -m:\n\
             \x20 \tGPU0\tGPU1\n\
             \x20 GPU0\t X \tNV18\n\
             \x20 GPU1\tNV18\t X \n\
             network       ib\n\
             \x20 mlx5_0 (ib, 400 Gb/sec (4X NDR))\n\
             \x20 eth0 (ethernet)\n\
             gin           none: no RDMA NIC\n\
             variables\n\
             \x20 NCCL_DEBUG=WARN\n\
             problem       GPU 1: busy\n"
        );
    }

    #[test]
    fn full_peer_access_is_one_line_and_no_gpus_no_topology() {
        let text = render(&report(vec![vec![true; 2]; 2], None));
        assert!(text.contains("topology      peer access: all 2 GPUs reach each other (LSA possible)\n"), "{text}");
        assert!(!text.contains("GPU0:") && !text.contains("nvidia-smi"), "{text}");
        let text = render(&report(vec![], None));
        assert!(!text.contains("topology"), "{text}");
    }
}
