//! The build script's NCCL version table.
#[allow(dead_code)]
#[path = "../build/nccl.rs"]
mod nccl;

#[test]
fn nccl_version_table() {
    assert!(nccl::instructions(22806).unwrap_err().contains("2.28.6 are older than 2.28.7"));
    assert_eq!(nccl::cfgs_for(22809), Vec::<&str>::new());
    assert_eq!(nccl::cfgs_for(22902), ["nccl_versioned_structs"]);
    assert_eq!(nccl::cfgs_for(22907), ["nccl_versioned_structs", "nccl_gin_connection_type"]);
    assert_eq!(nccl::cfgs_for(23203).len(), nccl::CFGS.len());
    assert_eq!(nccl::release(23203), "2.32.3");
    let lines = nccl::instructions(22907).unwrap();
    for (name, _, _) in nccl::CFGS {
        assert!(lines.contains(&format!("cargo::rustc-check-cfg=cfg({name})")), "{lines:?}");
    }
    let set: Vec<_> = lines.iter().filter(|l| l.starts_with("cargo::rustc-cfg=")).collect();
    assert_eq!(set, ["cargo::rustc-cfg=nccl_versioned_structs", "cargo::rustc-cfg=nccl_gin_connection_type"]);
    // Thresholds ascend, so a newer header set has every older cfg.
    assert!(nccl::CFGS.windows(2).all(|w| w[0].1 < w[1].1));
    assert!(nccl::CFGS.iter().all(|(_, first, _)| *first > nccl::FLOOR));
}
