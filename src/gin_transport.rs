//! The transports the GIN protocols (alltoall_perf's and ep_perf's) run on: NCCL's GIN, or GIN
//! emulated over NVLink between virtual nodes of one host (`--emulate-nodes N`), each with
//! (`hybrid`) or without (`gin`) NVLink stores inside the node.
use crate::error::{Error, Result};
use crate::nccl::{compat, ffi};
use crate::results::Gin;

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum GinTransport {
    Gin,
    Hybrid,
    GinEmu,
    HybridEmu,
}

impl GinTransport {
    /// The kernels' name part: `gb_<symbol>` (alltoall), `gb_ep_<symbol>_<kernel>` (EP).
    pub fn symbol(self) -> &'static str {
        match self {
            GinTransport::Gin => "gin",
            GinTransport::Hybrid => "hybrid",
            GinTransport::GinEmu => "gin_emu",
            GinTransport::HybridEmu => "hybrid_emu",
        }
    }

    pub fn emulated(self) -> bool {
        matches!(self, GinTransport::GinEmu | GinTransport::HybridEmu)
    }

    pub fn hybrid(self) -> bool {
        matches!(self, GinTransport::Hybrid | GinTransport::HybridEmu)
    }

    /// Ranks per (virtual) node of `ranks`, once `reqs` asks for GIN where the transport is real.
    /// Err: why it cannot run here (no GIN; no `--emulate-nodes`, or not one NVLink domain, for
    /// the emulation).
    pub fn node_size(
        self,
        ranks: usize,
        lsa: usize,
        emulate_nodes: Option<usize>,
        gin: &Gin,
        reqs: &mut ffi::ncclDevCommRequirements,
    ) -> std::result::Result<usize, String> {
        if self.emulated() {
            let Some(nodes) = emulate_nodes else {
                return Err("needs --emulate-nodes N (virtual nodes on this host)".into());
            };
            if lsa != ranks {
                return Err(format!(
                    "emulation needs every rank in one NVLink (LSA) domain; the LSA team has {lsa} of {ranks} ranks (use gin or hybrid across nodes)"
                ));
            }
            Ok(ranks / nodes)
        } else {
            if gin.kind == crate::results::GinKind::None {
                return Err(format!("GIN unavailable: {}", gin.reason));
            }
            compat::request_gin(reqs);
            Ok(lsa)
        }
    }
}

/// `--emulate-nodes N` on the command line: at least one node, and given whenever an `-emu` impl
/// is named (`-D all` runs them only where it is given).
pub fn check_emulate_nodes(nodes: Option<usize>, impls_all: bool, first_emu: Option<&str>) -> Result<()> {
    if nodes == Some(0) {
        return Err(Error::usage("--emulate-nodes 0", "give at least 1 virtual node, e.g. --emulate-nodes 2"));
    }
    if let (None, false, Some(name)) = (nodes, impls_all, first_emu) {
        return Err(Error::usage(
            format!("implementation '{name}' runs on virtual nodes"),
            "add --emulate-nodes N (N divides the number of ranks)",
        ));
    }
    Ok(())
}

/// `--emulate-nodes N` once the ranks are known: N virtual nodes of equal size.
pub fn check_nodes_divide(nodes: Option<usize>, ranks: usize) -> Result<()> {
    match nodes {
        Some(n) if !ranks.is_multiple_of(n) => Err(Error::usage(
            format!("--emulate-nodes {n} does not divide {ranks} ranks into equal virtual nodes"),
            "use a divisor of the number of ranks",
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_emulation_flags() {
        let symbols = [GinTransport::Gin, GinTransport::Hybrid, GinTransport::GinEmu, GinTransport::HybridEmu]
            .map(GinTransport::symbol);
        assert_eq!(symbols, ["gin", "hybrid", "gin_emu", "hybrid_emu"]);
        assert!(GinTransport::GinEmu.emulated() && !GinTransport::GinEmu.hybrid() && GinTransport::Hybrid.hybrid());
        assert!(check_emulate_nodes(Some(0), true, None).is_err());
        assert!(check_emulate_nodes(None, false, Some("gin-emu")).is_err());
        assert!(check_emulate_nodes(None, true, Some("gin-emu")).is_ok());
        assert!(check_nodes_divide(Some(3), 4).is_err());
        assert!(check_nodes_divide(Some(2), 4).is_ok() && check_nodes_divide(None, 3).is_ok());
    }
}
