//! `--gin-backend`: what choosing a backend does to the process before NCCL loads (its variables),
//! and how the results' `env.gin` then names who carried GIN. A test binary of its own: choosing
//! the loopback backend sets process-wide variables and records the plugin once per process.
use ginbench::gin_backend::{select, Backend, PLUGIN_FILE};
use ginbench::results::Gin;

fn var(k: &str) -> Option<String> {
    std::env::var(k).ok()
}

#[test]
fn the_loopback_backend_points_nccl_at_the_plugin_and_the_results_name_it() {
    // NCCL's own backend: nothing to point NCCL at, no variable touched.
    let before = var("NCCL_NET_PLUGIN");
    assert!(select(Backend::Nccl, Some(2), Some((3, 4))).unwrap().is_none());
    assert_eq!(var("NCCL_NET_PLUGIN"), before);
    assert_eq!(var("NCCL_HOSTID"), None);
    let env = ginbench::environment::build(vec![], Gin::default(), None);
    assert_eq!((env.gin.backend, env.gin.plugin.as_str(), env.gin.nodes), (Backend::Nccl, "", 1));

    // The loopback plugin, rank 3 of 4 made 2 nodes: NCCL is pointed at the plugin as a PROXY GIN
    // backend, and the rank gets the second virtual node's host id.
    let l = select(Backend::Loopback, Some(2), Some((3, 4))).unwrap().expect("the loopback backend is chosen");
    assert!(l.path.ends_with(PLUGIN_FILE) && l.path.is_file(), "{}", l.path.display());
    assert!(l.version.starts_with("ginbench-loopback "), "{}", l.version);
    let path = l.path.display().to_string();
    assert_eq!(var("NCCL_NET_PLUGIN").as_deref(), Some(path.as_str()));
    assert_eq!(var("NCCL_GIN_TYPE").as_deref(), Some("2"), "NCCL_GIN_TYPE 2: PROXY");
    assert_eq!(var("NCCL_NET_PLUGIN_REF_COUNT").as_deref(), Some("1"));
    assert_eq!(var("NCCL_HOSTID").as_deref(), Some("ginbench-vnode-1"));
    assert_eq!(var("NCCL_MNNVL_ENABLE").as_deref(), Some("0"));

    // Recorded, every results file says the plugin carried GIN (and records the variables).
    ginbench::environment::set_gin_plugin(l.clone());
    let env = ginbench::environment::build(vec![], Gin::default(), None);
    assert_eq!(env.gin.backend, Backend::Loopback);
    assert_eq!(env.gin.plugin, format!("{} at {path}", l.version));
    assert_eq!(env.gin.nodes, 1);
    assert_eq!(env.vars.get("NCCL_NET_PLUGIN"), Some(&path));
}
