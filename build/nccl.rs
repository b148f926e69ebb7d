//! The NCCL header versions that change what ginbench compiles.
//!
//! Shared by build.rs and tests/build.rs (included with `#[path]`), so it uses std only.

/// The oldest headers ginbench builds against: 2.28.7, the first with the device API and GIN.
pub const FLOOR: u32 = 22807;

/// The one table of NCCL-version differences: (cfg name, first NCCL_VERSION_CODE that has it,
/// what changed there). build.rs declares every cfg to rustc (`rustc-check-cfg`), sets those the
/// headers reach (`rustc-cfg`), and hands each to nvcc as `GB_<CFG>` = 0 or 1, so the Rust code,
/// the kernels and the initializer dump branch on the same names and never on a version number.
pub const CFGS: &[(&str, u32, &str)] = &[
    (
        "nccl_versioned_structs",
        22902,
        "2.29.2 versioned the device-API structs (size/magic/version, *_INITIALIZER macros)",
    ),
    ("nccl_gin_connection_type", 22907, "2.29.7 replaced ginForceEnable with ginConnectionType (FULL / RAIL)"),
    (
        "nccl_resource_window_keyed",
        22907,
        "2.29.7 files a device communicator's resource window under its own address (before, under 0)",
    ),
    ("nccl_gin_barrier_per_peer", 23000, "2.30.0 reworked GIN barriers: a signal per peer, no epoch"),
    (
        "nccl_gin_signal_requirements",
        23005,
        "2.30.5 added ginStrongSignalsRequired / ginVaSignalsRequired (default true)",
    ),
    (
        "nccl_gin_weak_signals",
        23005,
        "2.30.5 split the GIN signal actions into strong and weak (ncclGin_WeakSignalInc / Add)",
    ),
    (
        "nccl_dev_comm_gin_type",
        23102,
        "2.31.2 added ncclDevCommRequirements.ginType (each device communicator picks its GIN backend)",
    ),
];

/// The cfgs set for headers of version `code`.
pub fn cfgs_for(code: u32) -> Vec<&'static str> {
    CFGS.iter().filter(|(_, first, _)| code >= *first).map(|(name, _, _)| *name).collect()
}

/// NCCL_VERSION_CODE as a release: 22809 → "2.28.9" (the X*10000 + Y*100 + Z form of 2.9 onwards).
pub fn release(code: u32) -> String {
    format!("{}.{}.{}", code / 10000, code / 100 % 100, code % 100)
}

/// The nvcc flags for headers of version `code`: `-DGB_<CFG>=1` for each cfg they reach, `=0` for
/// the others, and `GB_NCCL_CFGS=1` so a source compiled without them can refuse to build.
pub fn nvcc_defines(code: u32) -> Vec<String> {
    let set = cfgs_for(code);
    let mut v: Vec<String> = CFGS
        .iter()
        .map(|(name, _, _)| format!("-DGB_{}={}", name.to_uppercase(), u8::from(set.contains(name))))
        .collect();
    v.push("-DGB_NCCL_CFGS=1".into());
    v
}

/// The cargo instructions for headers of version `code`, or why they are too old.
pub fn instructions(code: u32) -> Result<Vec<String>, String> {
    if code < FLOOR {
        return Err(format!(
            "NCCL headers {} are older than {}, the first with the device API and GIN",
            release(code),
            release(FLOOR)
        ));
    }
    let mut v: Vec<String> = CFGS.iter().map(|(name, _, _)| format!("cargo::rustc-check-cfg=cfg({name})")).collect();
    v.extend(cfgs_for(code).into_iter().map(|name| format!("cargo::rustc-cfg={name}")));
    // Each cfg's first release, for messages naming the NCCL a feature needs (GINBENCH_<CFG>_SINCE).
    v.extend(CFGS.iter().map(|(name, first, _)| {
        format!("cargo::rustc-env=GINBENCH_{}_SINCE={}", name.to_uppercase(), release(*first))
    }));
    Ok(v)
}
