//! The alltoall implementations: `-D` takes a number (nccl-tests compatible) or a name.
use crate::error::{Error, Result};

#[derive(Debug)]
pub struct ImplInfo {
    pub id: u32,
    pub name: &'static str,
    /// Runs on symmetric windows (needs -R 2).
    pub needs_window: bool,
    pub about: &'static str,
}

/// Every implementation, in `-D all` order. Adding one means: a Rust file in src/alltoall/,
/// its kernels in src/kernels/, and a line here plus one in `alltoall::make`.
pub const IMPLS: &[ImplInfo] = &[
    ImplInfo { id: 0, name: "host", needs_window: false, about: "ncclAlltoAll (NCCL host API)" },
    ImplInfo {
        id: 1,
        name: "nvl-simple",
        needs_window: true,
        about: "NVLink (LSA) 4-byte stores between LSA barriers (nccl-tests -D 1)",
    },
    ImplInfo {
        id: 2,
        name: "nvl",
        needs_window: true,
        about: "NVLink (LSA) 16-byte vectors, unrolled, warps spread over peers (nccl-tests -D 2)",
    },
    ImplInfo {
        id: 3,
        name: "gin",
        needs_window: true,
        about: "GIN: every peer by GIN put + signal (NIC loopback inside the node); skipped without GIN",
    },
    ImplInfo {
        id: 4,
        name: "hybrid",
        needs_window: true,
        about: "NVLink (LSA) stores inside the node, GIN put + signal across nodes; skipped without GIN",
    },
    ImplInfo {
        id: 5,
        name: "nvl-ll",
        needs_window: true,
        about: "NVLink low latency: flag-in-data 16-byte stores, no barrier, double-buffered",
    },
    ImplInfo {
        id: 7,
        name: "nvl-pull",
        needs_window: true,
        about: "NVLink (LSA) pull: 16-byte vector loads from peers' send windows",
    },
    ImplInfo {
        id: 8,
        name: "nvl-ce",
        needs_window: true,
        about: "NVLink by the copy engines: one async copy per peer into its window, between LSA barriers",
    },
    ImplInfo {
        id: 9,
        name: "gin-emu",
        needs_window: true,
        about: "the gin protocol on GIN emulated over NVLink between --emulate-nodes virtual nodes",
    },
    ImplInfo {
        id: 10,
        name: "hybrid-emu",
        needs_window: true,
        about: "the hybrid protocol on --emulate-nodes virtual nodes (emulated GIN between them)",
    },
    ImplInfo { id: 6, name: "auto", needs_window: true, about: "per size: nvl-ll for small blocks, nvl for large" },
];

/// Resolve a `-D` value: comma-separated numbers or names, or `all`.
pub fn resolve(spec: &str) -> Result<Vec<&'static ImplInfo>> {
    if spec.trim() == "all" {
        return Ok(IMPLS.iter().collect());
    }
    let mut out: Vec<&'static ImplInfo> = vec![];
    for tok in spec.split(',').map(str::trim) {
        let found = IMPLS.iter().find(|i| i.name == tok || i.id.to_string() == tok).ok_or_else(|| {
            Error::usage(format!("unknown implementation '{tok}'"), format!("use -D all or one of {}", list()))
        })?;
        if !out.iter().any(|i| i.id == found.id) {
            out.push(found);
        }
    }
    Ok(out)
}

/// "0 host, 1 nvl-simple, ..." for messages and --list-impls.
pub fn list() -> String {
    IMPLS.iter().map(|i| format!("{} {}", i.id, i.name)).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn resolves_numbers_names_and_all() {
        assert_eq!(resolve("0").unwrap()[0].name, "host");
        assert_eq!(resolve("host").unwrap()[0].id, 0);
        assert_eq!(resolve("all").unwrap().len(), IMPLS.len());
        assert_eq!(resolve("0,host").unwrap().len(), 1);
        assert!(resolve("nope").is_err());
    }
}
