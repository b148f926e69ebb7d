//! Which GIN backend NCCL drives: its own (a NIC's: IB, RoCE, EFA), or the loopback plugin built
//! with ginbench (src/plugins/loopback), a software plugin of NCCL's PROXY kind that moves GIN puts
//! and signals between the GPUs of one host. With it the real `gin` / `hybrid` kernels run through
//! NCCL's own GIN device API, queues and proxy thread on any GPU host.
//!
//! NCCL reads its variables once, when the library initialises, so [`select`] runs before NCCL
//! is loaded and before any rank thread starts.
use crate::error::{Error, Result};
use std::path::{Path, PathBuf};

/// The plugin's file name: NCCL_NET_PLUGIN takes its path.
pub const PLUGIN_FILE: &str = "libnccl-net-ginbench.so";

crate::results::named_enum! {
    /// Who carries GIN: `--gin-backend`, and the results' `env.gin.backend`.
    #[derive(clap::ValueEnum)]
    Backend {
        /// Whatever NCCL finds (its own IB / RoCE backends, or a net plugin such as aws-ofi-nccl)
        #[default]
        Nccl = "nccl",
        /// The loopback plugin: GIN between the GPUs of this host, no NIC needed
        Loopback = "loopback",
    }
}

/// The loopback plugin NCCL was pointed at.
#[derive(Debug, Clone)]
pub struct Loopback {
    pub path: PathBuf,
    /// The plugin's name and version, as it reports them.
    pub version: String,
}

/// The plugin: next to the running binary (an installed or copied set), else where this build
/// left it.
pub fn plugin_path() -> Result<PathBuf> {
    let beside = std::env::current_exe().ok().and_then(|e| e.parent().map(|d| d.join(PLUGIN_FILE)));
    let built = PathBuf::from(option_env!("GINBENCH_LOOPBACK_PLUGIN").unwrap_or(""));
    beside.into_iter().chain([built]).find(|p| p.is_file()).ok_or_else(|| {
        Error::env(
            format!("the loopback GIN plugin {PLUGIN_FILE} is neither beside the binary nor in the build tree"),
            "build with cargo build --release (it builds the plugin), or copy it next to the binary",
        )
    })
}

/// The plugin's name and version (its `ginbenchLoopbackVersion` symbol).
fn plugin_version(path: &Path) -> Result<String> {
    let fail = |e: &dyn std::fmt::Display| {
        Error::env(format!("cannot load the loopback GIN plugin {}: {e}", path.display()), "rebuild ginbench")
    };
    // SAFETY: the plugin's constructors only read environment variables.
    let lib = unsafe { libloading::Library::new(path) }.map_err(|e| fail(&e))?;
    // SAFETY: the symbol is a NUL-terminated const char array.
    let text = unsafe {
        let sym: libloading::Symbol<*const std::ffi::c_char> =
            lib.get(b"ginbenchLoopbackVersion\0").map_err(|e| fail(&e))?;
        std::ffi::CStr::from_ptr(*sym).to_string_lossy().into_owned()
    };
    Ok(text)
}

/// The host id NCCL gives rank `rank` of `ranks` on `nodes` virtual nodes: consecutive ranks
/// share a node, as on a cluster.
pub fn virtual_host_id(rank: usize, ranks: usize, nodes: usize) -> String {
    format!("ginbench-vnode-{}", rank / (ranks / nodes).max(1))
}

/// Point NCCL at the chosen backend (before NCCL loads). With the loopback backend under an MPI
/// launcher, `--emulate-nodes N` makes the processes N nodes to NCCL: each gets its virtual
/// node's host id (NCCL_HOSTID), and MNNVL detection is off so NVLink does not merge them again.
/// `launcher` is (rank, ranks) from the MPI launcher's variables.
pub fn select(
    backend: Backend,
    emulate_nodes: Option<usize>,
    launcher: Option<(usize, usize)>,
) -> Result<Option<Loopback>> {
    if backend == Backend::Nccl {
        return Ok(None);
    }
    let path = plugin_path()?;
    let version = plugin_version(&path)?;
    // NCCL_GIN_TYPE PROXY, the kind the plugin is: pinning it also names it in the results
    // (NCCL 2.28 cannot be asked which GIN type it chose).
    // NCCL_NET_PLUGIN_REF_COUNT=1: NCCL 2.28.9 unloads an external net plugin (and forgets its
    // name) when the last communicator using it is destroyed, so every later communicator
    // (ginbench's GIN probe comes first) would fall back to the socket net, without GIN.
    let mut vars = vec![
        ("NCCL_NET_PLUGIN".to_string(), path.display().to_string()),
        ("NCCL_GIN_TYPE".to_string(), crate::gin_transport::GinType::Proxy.nccl_type().to_string()),
        ("NCCL_NET_PLUGIN_REF_COUNT".to_string(), "1".to_string()),
    ];
    // ginbench's kernels never reset a GIN signal, so the plugin may trust its shadow of each
    // signal instead of reading it back from the GPU before writing (3× fewer CUDA calls per op).
    if std::env::var_os("GINBENCH_LOOPBACK_SIGNAL_READBACK").is_none() {
        vars.push(("GINBENCH_LOOPBACK_SIGNAL_READBACK".into(), "never".into()));
    }
    // Every CUDA stream of a process runs on one of CUDA_DEVICE_MAX_CONNECTIONS hardware queues
    // per GPU (8 by default). Where the plugin's copy or signal stream shares a queue with a GIN
    // kernel's stream, its work waits behind the kernel that waits for it: measured as a stall
    // of the virtual-node gin alltoall at its third size with 8 queues, none with 32.
    if std::env::var_os("CUDA_DEVICE_MAX_CONNECTIONS").is_none() {
        vars.push(("CUDA_DEVICE_MAX_CONNECTIONS".into(), "32".into()));
    }
    if let (Some(nodes), Some((rank, ranks))) = (emulate_nodes, launcher) {
        vars.push(("NCCL_HOSTID".into(), virtual_host_id(rank, ranks, nodes)));
        vars.push(("NCCL_MNNVL_ENABLE".into(), "0".into()));
    }
    for (k, v) in vars {
        // Before any thread starts (driver::main calls this first): nothing reads the
        // environment concurrently.
        std::env::set_var(k, v);
    }
    Ok(Some(Loopback { path, version }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_backend_has_one_name_on_the_command_line_in_the_results_and_in_messages() {
        use clap::ValueEnum;
        for b in Backend::value_variants() {
            let flag = b.to_possible_value().unwrap();
            assert_eq!(flag.get_name(), b.as_str());
            assert_eq!(serde_json::to_value(b).unwrap(), b.as_str());
        }
    }

    #[test]
    fn the_built_plugin_is_found_and_names_itself() {
        let p = plugin_path().expect("the build leaves the plugin in the build tree");
        assert!(p.ends_with(PLUGIN_FILE), "{}", p.display());
        assert!(plugin_version(&p).unwrap().starts_with("ginbench-loopback "));
    }

    #[test]
    fn virtual_nodes_are_consecutive_ranks() {
        let ids: Vec<String> = (0..4).map(|r| virtual_host_id(r, 4, 2)).collect();
        assert_eq!(ids[0], ids[1]);
        assert_eq!(ids[2], ids[3]);
        assert_ne!(ids[1], ids[2]);
        assert_eq!(virtual_host_id(3, 4, 1), virtual_host_id(0, 4, 1));
    }
}
