//! The transports the GIN protocols (alltoall_perf's and ep_perf's) run on: NCCL's GIN, or GIN
//! emulated over NVLink between virtual nodes of one host (`--emulate-nodes N`), each with
//! (`hybrid`) or without (`gin`) NVLink stores inside the node.
use crate::bootstrap::Bootstrap;
use crate::error::{Error, Result};
use crate::nccl::{compat, ffi};
use crate::results::Gin;
use serde::Serialize;

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

    /// Ranks per (virtual) node of `ranks`, once `reqs` asks for GIN (with `want`'s resources)
    /// where the transport is real. Err: why it cannot run here (no GIN; no `--emulate-nodes`, or
    /// not one NVLink domain, for the emulation).
    pub fn node_size(
        self,
        ranks: usize,
        lsa: usize,
        emulate_nodes: Option<usize>,
        gin: &Gin,
        want: &GinRequest,
        reqs: &mut ffi::ncclDevCommRequirements,
    ) -> std::result::Result<usize, String> {
        if self.emulated() {
            let Some(nodes) = emulate_nodes else {
                return Err("needs --emulate-nodes N (virtual nodes on this host)".into());
            };
            if let Some(why) = crate::nccl::not_one_lsa_team(ranks, lsa) {
                return Err(format!("emulation {why}"));
            }
            Ok(ranks / nodes)
        } else {
            if gin.kind == crate::results::GinKind::None {
                return Err(format!("GIN unavailable: {}", gin.reason));
            }
            compat::request_gin(reqs, want);
            Ok(lsa)
        }
    }
}

/// A GIN backend a device communicator may ask for (`ncclGinType_t`; `ginType` from NCCL 2.31.2).
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum GinType {
    Proxy,
    Gdaki,
    Gpi,
    EfaGda,
}

impl GinType {
    /// As on the command line and in the JSON (`efa-gda`).
    pub fn name(self) -> String {
        clap::ValueEnum::to_possible_value(&self).map_or_else(String::new, |v| v.get_name().to_string())
    }

    /// `ncclGinType_t` (the numbers `NCCL_GIN_TYPE` takes).
    pub fn nccl_type(self) -> u32 {
        match self {
            GinType::Proxy => 2,
            GinType::Gdaki => 3,
            GinType::Gpi => 4,
            GinType::EfaGda => 5,
        }
    }
}

/// Most GIN contexts a device communicator may be asked for: one per CTA of the largest `-V`.
pub const MAX_GIN_CONTEXTS: u32 = 1024;

/// The GIN resources asked of the device communicators that the impls on NCCL's GIN (gin, hybrid)
/// create: `--gin-contexts` / `--gin-type`, or interference_perf's `--ep-gin-*` for the
/// foreground. Unset: NCCL's defaults (and its NCCL_GIN_* variables).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct GinRequest {
    /// `ginContextCount`, a hint: what NCCL granted is recorded beside it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub contexts: Option<u32>,
    /// `ginType`: the GIN backend of the device communicator.
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub gin_type: Option<GinType>,
}

impl GinRequest {
    /// Command-line checks (no GPU needed). `flag` prefixes the flags (`--gin`, `--ep-gin`);
    /// `reaches_gin`: some impl of the run is on NCCL's GIN, the only ones the request reaches.
    pub fn validate(&self, flag: &str, reaches_gin: bool) -> Result<()> {
        let given = match (self.contexts, self.gin_type) {
            (Some(_), _) => "contexts",
            (None, Some(_)) => "type",
            (None, None) => return Ok(()),
        };
        if let Some(n) = self.contexts.filter(|n| !(1..=MAX_GIN_CONTEXTS).contains(n)) {
            return Err(Error::usage(
                format!("{flag}-contexts {n} is not in 1..={MAX_GIN_CONTEXTS}"),
                format!("e.g. {flag}-contexts 4, NCCL's default"),
            ));
        }
        if self.gin_type.is_some() && !compat::DEV_COMM_GIN_TYPE {
            return Err(Error::usage(
                format!(
                    "{flag}-type needs NCCL {} or later headers; this build has {}",
                    compat::DEV_COMM_GIN_TYPE_SINCE,
                    crate::nccl::version_string(crate::nccl::header_version())
                ),
                "build with NCCL_HOME at newer NCCL headers, or set NCCL_GIN_TYPE for the whole process",
            ));
        }
        if !reaches_gin {
            return Err(Error::usage(
                format!("{flag}-{given} applies to the impls on NCCL's GIN and none is selected"),
                format!("add gin or hybrid to -D, or drop {flag}-{given}"),
            ));
        }
        Ok(())
    }

    /// The fields set, as "ginContextCount=2 ginType=gdaki" (empty: NCCL's defaults).
    pub fn describe(&self) -> String {
        let mut v = vec![];
        if let Some(n) = self.contexts {
            v.push(format!("ginContextCount={n}"));
        }
        if let Some(t) = self.gin_type {
            v.push(format!("ginType={}", t.name()));
        }
        if v.is_empty() {
            "NCCL defaults".into()
        } else {
            v.join(" ")
        }
    }
}

/// Record in the results' `config`, at JSON pointer `at` (an object), the GIN contexts NCCL
/// granted impl `name`'s device communicator: `granted.<name>`, the fewest over every rank and
/// every device communicator of the impl. Collective: every rank calls it for every impl on
/// NCCL's GIN, with `mine` None where it made none (then nothing is recorded).
pub fn record_granted(boot: &dyn Bootstrap, config: &mut serde_json::Value, at: &str, name: &str, mine: Option<u32>) {
    let all = boot.allgather_f64(&[mine.map_or(-1.0, f64::from)]);
    let fewest = all.iter().map(|v| v[0]).fold(f64::MAX, f64::min);
    let Some(serde_json::Value::Object(m)) = config.pointer_mut(at) else { return };
    if fewest < 0.0 {
        return;
    }
    let granted = m.entry("granted").or_insert_with(|| serde_json::json!({}));
    let fewest = fewest as u64;
    let before = granted.get(name).and_then(serde_json::Value::as_u64).unwrap_or(u64::MAX);
    granted[name] = fewest.min(before).into();
}

/// `--emulate-nodes N` on the command line: at least one node; given whenever an `-emu` impl is
/// named (`-D all` runs them only where it is given); and given only where something uses it: an
/// `-emu` impl, or the loopback backend under mpirun / srun (`nccl_nodes`: its processes become
/// that many nodes to NCCL; threads of one process stay one node).
pub fn check_emulate_nodes(
    nodes: Option<usize>,
    impls_all: bool,
    first_emu: Option<&str>,
    nccl_nodes: bool,
) -> Result<()> {
    match (nodes, impls_all, first_emu) {
        (Some(0), ..) => Err(Error::usage(
            "--emulate-nodes 0: there must be at least one virtual node",
            "e.g. --emulate-nodes 2",
        )),
        (None, false, Some(name)) => Err(Error::usage(
            format!("implementation '{name}' runs on virtual nodes"),
            "add --emulate-nodes N (N divides the number of ranks)",
        )),
        (Some(n), false, None) if !nccl_nodes => Err(Error::usage(
            format!("--emulate-nodes {n} splits the ranks for gin-emu / hybrid-emu (or, with --gin-backend loopback under mpirun / srun, one process per rank, for NCCL), and this run has neither"),
            "drop it, add an -emu impl to -D, or start one process per GPU (mpirun -np <GPUs>)",
        )),
        _ => Ok(()),
    }
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
        assert!(check_emulate_nodes(Some(0), true, None, false).is_err());
        assert!(check_emulate_nodes(None, false, Some("gin-emu"), false).is_err());
        assert!(check_emulate_nodes(None, true, Some("gin-emu"), false).is_ok());
        // Nothing would use the virtual nodes.
        assert!(check_emulate_nodes(Some(2), false, None, false).is_err());
        assert!(check_emulate_nodes(Some(2), false, None, true).is_ok());
        assert!(check_emulate_nodes(Some(2), false, Some("hybrid-emu"), false).is_ok());
        assert!(check_nodes_divide(Some(3), 4).is_err());
        assert!(check_nodes_divide(Some(2), 4).is_ok() && check_nodes_divide(None, 3).is_ok());
    }

    #[test]
    fn gin_types_are_nccls_numbers() {
        // The numbers the environment's GinKind reads back name the same backends.
        for t in [GinType::Proxy, GinType::Gdaki, GinType::Gpi, GinType::EfaGda] {
            assert_eq!(crate::results::GinKind::from_nccl_type(t.nccl_type() as i32).as_str(), t.name());
        }
        assert_eq!(serde_json::to_value(GinType::EfaGda).unwrap(), "efa-gda");
    }

    #[test]
    fn gin_requests_are_checked_on_the_command_line() {
        let req = |contexts, gin_type| GinRequest { contexts, gin_type };
        assert!(req(None, None).validate("--gin", false).is_ok(), "nothing asked: nothing to check");
        assert!(req(Some(1), None).validate("--gin", true).is_ok());
        assert!(req(Some(MAX_GIN_CONTEXTS), None).validate("--gin", true).is_ok());
        assert_eq!(req(Some(2), None).describe(), "ginContextCount=2");
        assert_eq!(req(None, None).describe(), "NCCL defaults");
        let typed = req(Some(2), Some(GinType::Gdaki));
        if compat::DEV_COMM_GIN_TYPE {
            assert!(typed.validate("--gin", true).is_ok());
            assert_eq!(typed.describe(), "ginContextCount=2 ginType=gdaki");
        } else {
            let e = typed.validate("--gin", true).unwrap_err();
            assert!(e.msg.starts_with("--gin-type needs NCCL 2.31.2 or later headers; this build has 2."), "{e}");
        }
        for (r, needle) in [
            (req(Some(0), None), "--ep-gin-contexts 0 is not in 1..=1024"),
            (req(Some(1025), None), "--ep-gin-contexts 1025 is not in 1..=1024"),
        ] {
            let e = r.validate("--ep-gin", true).unwrap_err();
            assert_eq!(e.exit, crate::error::Exit::Usage);
            assert!(e.msg.contains(needle), "{e}");
        }
        for (r, needle) in
            [(req(Some(2), None), "--ep-gin-contexts applies"), (req(None, Some(GinType::Proxy)), "--ep-gin-type")]
        {
            let e = r.validate("--ep-gin", false).unwrap_err();
            assert_eq!(e.exit, crate::error::Exit::Usage);
            assert!(e.msg.starts_with(needle), "{e}");
        }
    }

    #[test]
    fn no_context_granted_is_recorded_as_zero() {
        // A device communicator NCCL gave no GIN context: 0 is an answer, unlike a rank that made
        // none (None).
        let mut c = serde_json::json!({"gin": {"contexts": 4}});
        record_granted(&crate::bootstrap::threads::group(1)[0], &mut c, "/gin", "gin", Some(0));
        assert_eq!(c, serde_json::json!({"gin": {"contexts": 4, "granted": {"gin": 0}}}));
    }

    #[test]
    fn granted_contexts_are_the_fewest_over_ranks_and_device_communicators() {
        let ranks = crate::bootstrap::threads::group(2);
        let configs: Vec<serde_json::Value> = std::thread::scope(|s| {
            let runs: Vec<_> = ranks
                .iter()
                .map(|boot| {
                    s.spawn(move || {
                        let mut c = serde_json::json!({"gin": {"contexts": 4}});
                        let r = boot.rank() as u32;
                        record_granted(boot, &mut c, "/gin", "gin", Some(4 - 2 * r)); // 4 and 2
                        record_granted(boot, &mut c, "/gin", "gin", Some(3)); // a later one: 3
                        record_granted(boot, &mut c, "/gin", "hybrid", (r == 0).then_some(4)); // one rank made none
                        record_granted(boot, &mut c, "/nowhere", "gin", Some(4)); // no such object
                        c
                    })
                })
                .collect();
            runs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for c in configs {
            assert_eq!(c, serde_json::json!({"gin": {"contexts": 4, "granted": {"gin": 2}}}));
        }
    }
}
