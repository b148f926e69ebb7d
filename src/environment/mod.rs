//! What the machine is: network devices, relevant variables, GIN hints, and the `env` object of
//! every results file, built in one place ([`build`]) for the benchmarks ([`gather`]) and for
//! `ginbench env` ([`node`]).
pub mod node;

use crate::gin_backend::Backend;
use crate::results::{Env, Gin, GinKind, Gpu as GpuInfo, NcclInfo, NetDevice, Network};
use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

/// RDMA devices (/sys/class/infiniband: IB, RoCE, EFA) and Ethernet interfaces.
pub fn network() -> Network {
    network_in(Path::new("/sys/class"))
}

pub fn network_in(sys_class: &Path) -> Network {
    let mut devices = vec![];
    for name in sorted_entries(&sys_class.join("infiniband")) {
        let dev = sys_class.join("infiniband").join(&name);
        let driver = fs::read_link(dev.join("device/driver"))
            .ok()
            .and_then(|p| p.file_name().map(|f| f.to_string_lossy().into_owned()))
            .unwrap_or_default();
        let link = fs::read_to_string(dev.join("ports/1/link_layer")).unwrap_or_default().trim().to_string();
        let kind = if driver == "efa" || name.starts_with("efa") || name.starts_with("rdmap") {
            "efa"
        } else if link == "Ethernet" {
            "roce"
        } else {
            "ib"
        };
        let rate = fs::read_to_string(dev.join("ports/1/rate")).unwrap_or_default().trim().to_string();
        devices.push(NetDevice { name, kind: kind.into(), detail: rate });
    }
    for name in sorted_entries(&sys_class.join("net")) {
        if name == "lo" || name.starts_with("docker") || name.starts_with("veth") {
            continue;
        }
        devices.push(NetDevice { name, kind: "ethernet".into(), detail: String::new() });
    }
    let has = |k: &str| devices.iter().any(|d| d.kind == k);
    let kind =
        ["efa", "ib", "roce"].into_iter().find(|k| has(k)).unwrap_or(if has("ethernet") { "socket" } else { "none" });
    Network { kind: kind.into(), devices }
}

fn sorted_entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned())).collect())
        .unwrap_or_default();
    v.sort();
    v
}

/// Why GIN cannot work here, judged from the network alone ("" when an RDMA NIC is present).
pub fn gin_network_hint(net: &Network) -> String {
    match net.kind.as_str() {
        "efa" | "ib" | "roce" => String::new(),
        _ => "no RDMA NIC (no IB, RoCE or EFA device under /sys/class/infiniband): GIN needs one".into(),
    }
}

/// NCCL's answer about GIN, completed by what the network says when GIN is unavailable.
pub fn gin_with_hint(mut gin: Gin, net: &Network) -> Gin {
    let hint = gin_network_hint(net);
    if gin.kind == GinKind::None && !hint.is_empty() {
        gin.reason = if gin.reason.is_empty() { hint } else { format!("{}; {hint}", gin.reason) };
    }
    gin
}

/// Prefixes of the variables that change NCCL's, libfabric's, aws-ofi-nccl's and ginbench's
/// behaviour.
const SETTING_PREFIXES: [&str; 4] = ["NCCL_", "FI_", "OFI_", "GINBENCH_"];

/// Whether `name` is one of those variables.
pub fn is_setting(name: &str) -> bool {
    SETTING_PREFIXES.iter().any(|p| name.starts_with(p))
}

/// Those variables and CUDA_VISIBLE_DEVICES, recorded with every run.
pub fn vars() -> BTreeMap<String, String> {
    std::env::vars().filter(|(k, _)| is_setting(k) || k == "CUDA_VISIBLE_DEVICES").collect()
}

static LOOPBACK: std::sync::OnceLock<crate::gin_backend::Loopback> = std::sync::OnceLock::new();

/// Record that NCCL was pointed at the loopback GIN plugin (`gin_backend::select`), so every
/// results file says who carried GIN.
pub fn set_gin_plugin(l: crate::gin_backend::Loopback) {
    let _ = LOOPBACK.set(l);
}

/// The `env` object: what every rank found (`gpus`), GIN as NCCL answered, and what this process
/// sees (network, variables, driver, the NCCL library when one was loaded).
pub fn build(gpus: Vec<GpuInfo>, gin: Gin, nccl: Option<&crate::nccl::Nccl>) -> Env {
    let network = network();
    Env {
        ranks: gpus.len(),
        hosts: if gpus.is_empty() { vec![crate::bootstrap::hostname()] } else { unique_hosts(&gpus) },
        gpus,
        driver: crate::cuda::kernel_driver_version(),
        cuda: crate::cuda::driver_cuda_version().unwrap_or_default(),
        nccl: NcclInfo {
            header: crate::nccl::header_version(),
            library: nccl.map(|l| l.version).unwrap_or(0),
            path: nccl.map(|l| l.path.clone()).unwrap_or_default(),
        },
        gin: Gin {
            backend: if LOOPBACK.get().is_some() { Backend::Loopback } else { Backend::Nccl },
            plugin: LOOPBACK.get().map(|l| format!("{} at {}", l.version, l.path.display())).unwrap_or_default(),
            nodes: 1,
            ..gin_with_hint(gin, &network)
        },
        network,
        vars: vars(),
    }
}

/// The results file's `env`, gathered from every rank (collective).
pub fn gather(boot: &dyn crate::bootstrap::Bootstrap, gpu: &crate::cuda::Gpu, gin: Gin) -> crate::error::Result<Env> {
    let me = gpu.describe(boot.rank(), &crate::bootstrap::hostname());
    let gpus: Vec<GpuInfo> = boot
        .allgather(&serde_json::to_vec(&me).unwrap())
        .iter()
        .map(|b| serde_json::from_slice(b).map_err(|e| crate::error::Error::internal(format!("gpu info: {e}"))))
        .collect::<crate::error::Result<_>>()?;
    let mut env = build(gpus, gin, Some(crate::nccl::load()?));
    // Nodes as NCCL counts them: distinct host ids (NCCL_HOSTID where set, else the host name).
    let id = std::env::var("NCCL_HOSTID").unwrap_or_else(|_| crate::bootstrap::hostname());
    let mut ids = boot.allgather(id.as_bytes());
    ids.sort();
    ids.dedup();
    env.gin.nodes = ids.len();
    Ok(env)
}

/// Host names in rank order, each once.
pub fn unique_hosts(gpus: &[GpuInfo]) -> Vec<String> {
    let mut h: Vec<String> = vec![];
    for g in gpus {
        if !h.contains(&g.host) {
            h.push(g.host.clone());
        }
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_once_in_rank_order() {
        let g = |h: &str| GpuInfo { host: h.into(), ..Default::default() };
        assert_eq!(unique_hosts(&[g("b"), g("a"), g("b")]), vec!["b".to_string(), "a".to_string()]);
    }

    #[test]
    fn classifies_network_devices() {
        let d = std::env::temp_dir().join(format!("ginbench-sys-{}", std::process::id()));
        let ib = d.join("infiniband/mlx5_0/ports/1");
        fs::create_dir_all(&ib).unwrap();
        fs::write(ib.join("link_layer"), "InfiniBand\n").unwrap();
        fs::write(ib.join("rate"), "400 Gb/sec (4X NDR)\n").unwrap();
        let roce = d.join("infiniband/mlx5_1/ports/1");
        fs::create_dir_all(&roce).unwrap();
        fs::write(roce.join("link_layer"), "Ethernet\n").unwrap();
        fs::create_dir_all(d.join("net/eth0")).unwrap();
        fs::create_dir_all(d.join("net/lo")).unwrap();
        let n = network_in(&d);
        assert_eq!(n.kind, "ib");
        let kinds: Vec<_> = n.devices.iter().map(|x| (x.name.as_str(), x.kind.as_str())).collect();
        assert_eq!(kinds, vec![("mlx5_0", "ib"), ("mlx5_1", "roce"), ("eth0", "ethernet")]);
        assert_eq!(gin_network_hint(&n), "");

        fs::create_dir_all(d.join("infiniband/rdmap16s27/ports/1")).unwrap();
        assert_eq!(network_in(&d).kind, "efa");

        let empty = d.join("nothing");
        assert_eq!(network_in(&empty).kind, "none");
        let _ = fs::remove_dir_all(&d);
        let sock = Network { kind: "socket".into(), devices: vec![] };
        assert!(gin_network_hint(&sock).contains("no RDMA NIC"));
    }

    #[test]
    fn efa_by_name_or_driver_and_container_interfaces_are_not_the_network() {
        let d = std::env::temp_dir().join(format!("ginbench-sys-efa-{}", std::process::id()));
        // An EFA device named efa*, with no driver link to tell.
        fs::create_dir_all(d.join("infiniband/efa0/ports/1")).unwrap();
        // One named otherwise, whose driver is efa.
        let other = d.join("infiniband/nic7");
        fs::create_dir_all(other.join("device")).unwrap();
        std::os::unix::fs::symlink("/sys/bus/pci/drivers/efa", other.join("device/driver")).unwrap();
        for n in ["docker0", "veth1a2b", "lo", "ens5"] {
            fs::create_dir_all(d.join("net").join(n)).unwrap();
        }
        let n = network_in(&d);
        let kinds: Vec<_> = n.devices.iter().map(|x| (x.name.as_str(), x.kind.as_str())).collect();
        let _ = fs::remove_dir_all(&d);
        assert_eq!(kinds, vec![("efa0", "efa"), ("nic7", "efa"), ("ens5", "ethernet")]);
        assert_eq!(n.kind, "efa");
    }

    #[test]
    fn this_machines_network_is_named() {
        let n = network();
        assert!(["efa", "ib", "roce", "socket", "none"].contains(&n.kind.as_str()), "{n:?}");
    }

    #[test]
    fn unavailable_gin_is_explained_by_the_network_too() {
        let sock = Network { kind: "socket".into(), devices: vec![] };
        let ib = Network { kind: "ib".into(), devices: vec![] };
        let gin = |kind, reason: &str| Gin { kind, reason: reason.into(), nodes: 3, ..Default::default() };
        let hint = gin_network_hint(&sock);
        // NCCL said nothing: the network's reason.
        assert_eq!(
            gin_with_hint(gin(GinKind::None, ""), &sock),
            Gin { reason: hint.clone(), ..gin(GinKind::None, "") }
        );
        // NCCL's reason first, then the network's.
        let both = gin_with_hint(gin(GinKind::None, "ncclGinType not supported"), &sock);
        assert_eq!(both.reason, format!("ncclGinType not supported; {hint}"));
        // GIN up, or an RDMA NIC present: NCCL's answer as it was.
        assert_eq!(gin_with_hint(gin(GinKind::Proxy, ""), &sock), gin(GinKind::Proxy, ""));
        assert_eq!(gin_with_hint(gin(GinKind::None, "no plugin"), &ib), gin(GinKind::None, "no plugin"));
    }
}
