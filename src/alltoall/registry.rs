//! The alltoall implementations: `-D` takes a number (nccl-tests compatible) or a name.
use super::{auto, ce, gin, host, nvl, Impl, Rank};
use crate::cuda::Gpu;
use crate::error::{Error, Result};
use crate::gin_transport::GinTransport;
use crate::nccl::RegisterMode;

/// An impl set up on one rank, or why it cannot run here.
pub type Made = Result<std::result::Result<Box<dyn Impl>, String>>;

pub struct ImplInfo {
    pub id: u32,
    pub name: &'static str,
    /// Runs on symmetric windows (needs -R 2).
    pub needs_window: bool,
    /// The GIN transport it runs on, if any.
    pub gin: Option<GinTransport>,
    /// Its kernels whose CTAs wait on each other: `-V` may not exceed what the GPU runs at once.
    pub all_resident: &'static [nvl::Kind],
    pub about: &'static str,
    /// Set it up on one rank (collective: every rank calls it for the same impl).
    pub make: fn(&Rank) -> Made,
}

impl std::fmt::Debug for ImplInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

impl crate::driver::cli::Entry for ImplInfo {
    fn name(&self) -> &'static str {
        self.name
    }
    fn gin(&self) -> Option<GinTransport> {
        self.gin
    }
}

fn boxed<T: Impl + 'static>(made: Result<std::result::Result<T, String>>) -> Made {
    made.map(|i| i.map(|i| Box::new(i) as Box<dyn Impl>))
}

/// The impl that runs one of the others per size (the report sets it against the best of them).
pub const AUTO: &str = "auto";
/// The impls `auto` picks from: it names the one it ran on each row.
pub const NVL: &str = "nvl";
pub const NVL_LL: &str = "nvl-ll";
pub const NVL_LL128: &str = "nvl-ll128";
pub const NVL_CE: &str = "nvl-ce";

/// Every implementation, in `-D all` order. Adding one means: a Rust file in src/alltoall/,
/// its kernels in src/kernels/, and an entry here.
pub const IMPLS: &[ImplInfo] = &[
    ImplInfo {
        id: 0,
        name: "host",
        needs_window: false,
        gin: None,
        all_resident: &[],
        about: "ncclAlltoAll (NCCL host API)",
        make: |_| Ok(Ok(Box::new(host::Host))),
    },
    ImplInfo {
        id: 1,
        name: "nvl-simple",
        needs_window: true,
        gin: None,
        all_resident: &[],
        about: "NVLink (LSA) 4-byte stores between LSA barriers (nccl-tests -D 1)",
        make: |r| boxed(nvl::Nvl::new(nvl::Kind::Simple, r)),
    },
    ImplInfo {
        id: 2,
        name: NVL,
        needs_window: true,
        gin: None,
        all_resident: &[],
        about: "NVLink (LSA) 16-byte vectors, unrolled, warps spread over peers (nccl-tests -D 2)",
        make: |r| boxed(nvl::Nvl::new(nvl::Kind::Vector, r)),
    },
    ImplInfo {
        id: 3,
        name: "gin",
        needs_window: true,
        gin: Some(GinTransport::Gin),
        all_resident: &[],
        about: "GIN: every peer by GIN put + signal (NIC loopback inside the node); skipped without GIN",
        make: |r| boxed(gin::GinA2a::new(GinTransport::Gin, r)),
    },
    ImplInfo {
        id: 4,
        name: "hybrid",
        needs_window: true,
        gin: Some(GinTransport::Hybrid),
        all_resident: &[],
        about: "NVLink (LSA) stores inside the node, GIN put + signal across nodes; skipped without GIN",
        make: |r| boxed(gin::GinA2a::new(GinTransport::Hybrid, r)),
    },
    ImplInfo {
        id: 5,
        name: NVL_LL,
        needs_window: true,
        gin: None,
        all_resident: &[nvl::Kind::LowLatency],
        about: "NVLink low latency: flag-in-data 16-byte stores, no barrier, double-buffered",
        make: |r| boxed(nvl::Nvl::new(nvl::Kind::LowLatency, r)),
    },
    ImplInfo {
        id: 7,
        name: "nvl-pull",
        needs_window: true,
        gin: None,
        all_resident: &[],
        about: "NVLink (LSA) pull: 16-byte vector loads from peers' send windows",
        make: |r| boxed(nvl::Nvl::new(nvl::Kind::Pull, r)),
    },
    ImplInfo {
        id: 8,
        name: NVL_CE,
        needs_window: true,
        gin: None,
        all_resident: &[],
        about: "NVLink by the copy engines: one async copy per peer into its window, between LSA barriers",
        make: |r| boxed(ce::Ce::new(r)),
    },
    ImplInfo {
        id: 9,
        name: "gin-emu",
        needs_window: true,
        gin: Some(GinTransport::GinEmu),
        all_resident: &[],
        about: "the gin protocol on GIN emulated over NVLink between --emulate-nodes virtual nodes",
        make: |r| boxed(gin::GinA2a::new(GinTransport::GinEmu, r)),
    },
    ImplInfo {
        id: 10,
        name: "hybrid-emu",
        needs_window: true,
        gin: Some(GinTransport::HybridEmu),
        all_resident: &[],
        about: "the hybrid protocol on --emulate-nodes virtual nodes (emulated GIN between them)",
        make: |r| boxed(gin::GinA2a::new(GinTransport::HybridEmu, r)),
    },
    ImplInfo {
        id: 11,
        name: NVL_LL128,
        needs_window: true,
        gin: None,
        all_resident: &[nvl::Kind::LowLatency128],
        about: "NVLink mid sizes, no barrier: 128-byte lines of 120 data bytes and a flag (as NCCL's LL128)",
        make: |r| boxed(nvl::Nvl::new(nvl::Kind::LowLatency128, r)),
    },
    ImplInfo {
        id: 6,
        name: AUTO,
        needs_window: true,
        gin: None,
        all_resident: &[nvl::Kind::LowLatency, nvl::Kind::LowLatency128],
        about: "per size: nvl-ll for small blocks, nvl-ll128 for mid sizes, nvl for large (nvl-ce from 256 MB with one peer)",
        make: |r| boxed(auto::Auto::new(r)),
    },
];

/// Refuses `-V ctas` (0: the impls' defaults, which fit) where one of `impls` would wait forever:
/// its CTAs wait on each other and the GPU cannot run them all at once. (Before NCCL starts.)
pub fn check_resident(impls: &[&ImplInfo], gpu: &Gpu, ctas: u32) -> Result<()> {
    if ctas == 0 {
        return Ok(());
    }
    for i in impls {
        for &kind in i.all_resident {
            let most = nvl::most_resident(gpu, kind)?;
            if ctas > most {
                return Err(Error::usage(
                    format!(
                        "-V {ctas} is more CTAs than this GPU runs at once ({most}) for '{}', whose CTAs wait on each other",
                        i.name
                    ),
                    format!("use -V 1..{most}, or 0 for its default"),
                ));
            }
        }
    }
    Ok(())
}

/// `-R`: impls on windows need symmetric windows (2).
pub fn check_registration(register: RegisterMode, impls: &[&ImplInfo]) -> Result<()> {
    if register != RegisterMode::Window {
        if let Some(i) = impls.iter().find(|i| i.needs_window) {
            return Err(Error::usage(
                format!("implementation '{}' (-D {}) runs on symmetric windows", i.name, i.id),
                "add -R 2",
            ));
        }
    }
    Ok(())
}

/// Resolve a `-D` value: comma-separated numbers or names (each kept once), or `all`.
pub fn resolve(spec: &str) -> Result<Vec<&'static ImplInfo>> {
    crate::driver::cli::resolve_impls(spec, IMPLS, |i, item| i.name == item || i.id.to_string() == item, &list())
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
        assert!(resolve(",").unwrap_err().msg.contains("empty item in the implementation list"));
        let unknown = resolve("nope").unwrap_err();
        assert_eq!(unknown.msg, "unknown implementation 'nope'");
        let fix = unknown.fix.unwrap();
        assert!(fix.starts_with("use -D all or one of 0 host, 1 nvl-simple, 2 nvl, 3 gin, 4 hybrid, "), "{fix}");
        assert!(fix.ends_with(", 11 nvl-ll128, 6 auto"), "{fix}");
    }
}
