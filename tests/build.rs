//! The build script: it reruns only when the git revision can change (never on `git add`), its
//! nvcc / bindgen outputs are content-addressed and reused, and the NCCL version table.
#[allow(dead_code)]
#[path = "../build/cache.rs"]
mod cache;
#[allow(dead_code)]
#[path = "../build/git.rs"]
mod git;
#[allow(dead_code)]
#[path = "../build/nccl.rs"]
mod nccl;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

fn temp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ginbench-build-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&d);
    fs::create_dir_all(&d).unwrap();
    d
}

fn sh(dir: &Path, cmd: &str) {
    let o = Command::new("sh").current_dir(dir).args(["-c", cmd]).output().unwrap();
    assert!(o.status.success(), "{cmd}: {}", String::from_utf8_lossy(&o.stderr));
}

/// What cargo recorded of this build's build script run: `OUT_DIR/../output` holds its stdout.
fn rerun_if_changed() -> Vec<String> {
    let output = Path::new(env!("OUT_DIR")).parent().unwrap().join("output");
    let text = fs::read_to_string(&output).unwrap_or_else(|e| panic!("{}: {e}", output.display()));
    text.lines().filter_map(|l| l.strip_prefix("cargo:rerun-if-changed=")).map(String::from).collect()
}

#[test]
fn this_build_reruns_on_head_not_on_the_index() {
    let paths = rerun_if_changed();
    assert!(!paths.iter().any(|p| p.ends_with("index")), "a git command reruns the build script: {paths:?}");
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    if let Some((git_dir, _)) = git::dirs(here) {
        let head = git_dir.join("HEAD").display().to_string();
        assert!(paths.contains(&head), "{head} not among {paths:?}");
    }
    // The kernel sources are watched (their content decides what nvcc compiles again).
    assert!(paths.iter().any(|p| p == "src/kernels"), "{paths:?}");
}

#[test]
fn this_build_compiled_or_reused_every_kernel() {
    let steps = fs::read_to_string(concat!(env!("OUT_DIR"), "/build-steps.txt")).unwrap();
    let mut n = 0;
    for e in fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/kernels")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "cu") {
            let name = format!("nvcc src/kernels/{}: ", p.file_name().unwrap().to_string_lossy());
            assert!(
                steps.lines().any(|l| l.starts_with(&name) && (l.contains(": compiled ") || l.contains(": reused "))),
                "{name} not in\n{steps}"
            );
            n += 1;
        }
    }
    assert!(n >= 5, "{n} kernels");
}

#[test]
fn rerun_paths_follow_head_and_its_branch_in_clones_and_worktrees() {
    let d = temp("git");
    let repo = d.join("repo");
    fs::create_dir_all(&repo).unwrap();
    sh(
        &repo,
        "git init -q -b main . && git -c user.name=t -c user.email=t@t commit -q --allow-empty -m one \
         && git worktree add -q -b side ../wt",
    );
    for (dir, branch) in [(repo.clone(), "main"), (d.join("wt"), "side")] {
        let (git_dir, common) = git::dirs(&dir).unwrap();
        let paths = git::rerun_paths(&git_dir, &common);
        let head = git_dir.join("HEAD");
        assert!(paths.contains(&head), "{paths:?}");
        assert!(paths.contains(&common.join("refs/heads").join(branch)), "{branch}: {paths:?}");
        assert!(!paths.iter().any(|p| p.ends_with("index")), "{paths:?}");
        assert!(paths.iter().all(|p| p.exists()), "{paths:?}");
        // describe() answers the commit, with no -dirty however the tree is.
        fs::write(dir.join("new"), "x").unwrap();
        sh(&dir, "git add new");
        let rev = git::describe(&dir);
        assert_eq!(rev.len(), 12, "{rev}");
        assert!(!rev.contains("dirty"), "{rev}");
    }
    // Outside git: no paths, "unknown".
    let plain = d.join("plain");
    fs::create_dir_all(&plain).unwrap();
    if git::dirs(&plain).is_none() {
        assert_eq!(git::describe(&plain), "unknown");
    }
    let _ = fs::remove_dir_all(d);
}

#[test]
fn cache_keys_change_with_every_input_and_only_then() {
    let d = temp("key");
    let f = d.join("k.cu");
    fs::write(&f, "kernel A").unwrap();
    let key = |flags: &[&str]| {
        let mut k = cache::Key::new("kernel");
        for a in flags {
            k.add_str(a);
        }
        k.add_file(&f).unwrap();
        k.hex()
    };
    let a = key(&["-O3"]);
    assert_eq!(a, key(&["-O3"]), "same inputs, same key");
    assert_eq!(a.len(), 32);
    assert_ne!(a, key(&["-O2"]), "flags");
    assert_ne!(key(&["-O3", "x"]), key(&["-O3x"]), "inputs are delimited");
    fs::write(&f, "kernel B").unwrap();
    assert_ne!(a, key(&["-O3"]), "source");
    // A folder: names and contents, in a fixed order.
    fs::create_dir_all(d.join("inc/sub")).unwrap();
    fs::write(d.join("inc/a.h"), "1").unwrap();
    fs::write(d.join("inc/sub/b.h"), "2").unwrap();
    let tree = || cache::Key::new("t").add_tree(&d.join("inc")).unwrap().hex();
    let t = tree();
    assert_eq!(t, tree());
    fs::write(d.join("inc/sub/b.h"), "3").unwrap();
    assert_ne!(t, tree());
    let _ = fs::remove_dir_all(d);
}

#[test]
fn cached_outputs_are_made_once_and_reused() {
    let d = temp("cache");
    let mut key = cache::Key::new("kernel");
    key.add_str("ce.cu v1");
    let made = std::cell::Cell::new(0);
    let make = |dir: &Path| {
        made.set(made.get() + 1);
        fs::write(dir.join("ce.fatbin"), b"fatbin").map_err(|e| e.to_string())
    };
    let (entry, hit) = cache::get_or_make(&d, &key, &["ce.fatbin"], make).unwrap();
    assert!(!hit);
    assert_eq!(fs::read(entry.join("ce.fatbin")).unwrap(), b"fatbin");
    let (again, hit) = cache::get_or_make(&d, &key, &["ce.fatbin"], make).unwrap();
    assert!(hit);
    assert_eq!(again, entry);
    assert_eq!(made.get(), 1, "the second build must not compile again");

    // A failed step leaves nothing behind, and so does one that forgot an output.
    let mut k2 = cache::Key::new("kernel");
    k2.add_str("ce.cu v2");
    let err = cache::get_or_make(&d, &k2, &["ce.fatbin"], |_| Err("nvcc failed".into())).unwrap_err();
    assert_eq!(err, "nvcc failed");
    let err = cache::get_or_make(&d, &k2, &["ce.fatbin"], |_| Ok(())).unwrap_err();
    assert!(err.contains("ce.fatbin"), "{err}");
    assert_eq!(fs::read_dir(&d).unwrap().count(), 1, "only the good entry");

    // An entry that lost its file is made again.
    fs::remove_file(entry.join("ce.fatbin")).unwrap();
    let (_, hit) = cache::get_or_make(&d, &key, &["ce.fatbin"], make).unwrap();
    assert!(!hit);
    assert_eq!(made.get(), 2);

    // prune keeps the most recently used.
    std::thread::sleep(std::time::Duration::from_millis(20));
    cache::get_or_make(&d, &k2, &["x"], |dir| fs::write(dir.join("x"), b"").map_err(|e| e.to_string())).unwrap();
    cache::prune(&d, 1);
    let left: Vec<_> = fs::read_dir(&d).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    assert_eq!(left, vec![k2.hex()]);
    let _ = fs::remove_dir_all(d);
}

#[test]
fn the_cache_is_shared_by_the_profiles() {
    let debug = cache::default_dir(Path::new("/t/target/debug/build/ginbench-0123/out"));
    let release = cache::default_dir(Path::new("/t/target/release/build/ginbench-4567/out"));
    assert_eq!(debug, release);
    assert_eq!(release, Path::new("/t/target/ginbench-cache"));
    // An unexpected layout keeps it in OUT_DIR.
    assert_eq!(cache::default_dir(Path::new("/x/out")), Path::new("/x/out/ginbench-cache"));
}

#[test]
fn nccl_version_table() {
    assert!(nccl::instructions(22806).unwrap_err().contains("2.28.6 are older than 2.28.7"));
    assert_eq!(nccl::cfgs_for(22809), Vec::<&str>::new());
    assert_eq!(nccl::cfgs_for(22902), ["nccl_versioned_structs"]);
    assert_eq!(
        nccl::cfgs_for(22907),
        ["nccl_versioned_structs", "nccl_gin_connection_type", "nccl_resource_window_keyed"]
    );
    assert!(!nccl::cfgs_for(23007).contains(&"nccl_dev_comm_gin_type"));
    assert!(nccl::cfgs_for(23102).contains(&"nccl_dev_comm_gin_type"));
    assert_eq!(nccl::cfgs_for(23203).len(), nccl::CFGS.len());
    assert_eq!(nccl::release(23203), "2.32.3");
    let lines = nccl::instructions(22907).unwrap();
    for (name, _, _) in nccl::CFGS {
        assert!(lines.contains(&format!("cargo::rustc-check-cfg=cfg({name})")), "{lines:?}");
    }
    assert!(lines.contains(&"cargo::rustc-env=GINBENCH_NCCL_DEV_COMM_GIN_TYPE_SINCE=2.31.2".to_string()), "{lines:?}");
    let set: Vec<_> = lines.iter().filter(|l| l.starts_with("cargo::rustc-cfg=")).collect();
    assert_eq!(
        set,
        [
            "cargo::rustc-cfg=nccl_versioned_structs",
            "cargo::rustc-cfg=nccl_gin_connection_type",
            "cargo::rustc-cfg=nccl_resource_window_keyed"
        ]
    );
    // Thresholds ascend, so a newer header set has every older cfg.
    assert!(nccl::CFGS.windows(2).all(|w| w[0].1 <= w[1].1));
    assert!(nccl::CFGS.iter().all(|(_, first, _)| *first > nccl::FLOOR));
}

#[test]
fn nvcc_gets_every_cfg_as_a_zero_or_one_define() {
    let d = nccl::nvcc_defines(23000);
    assert_eq!(d.len(), nccl::CFGS.len() + 1);
    assert!(d.contains(&"-DGB_NCCL_GIN_BARRIER_PER_PEER=1".to_string()), "{d:?}");
    assert!(d.contains(&"-DGB_NCCL_GIN_SIGNAL_REQUIREMENTS=0".to_string()), "{d:?}");
    assert!(d.contains(&"-DGB_NCCL_CFGS=1".to_string()), "{d:?}");
    assert!(nccl::nvcc_defines(nccl::FLOOR).iter().all(|f| f.ends_with("=0") || f == "-DGB_NCCL_CFGS=1"));
}

/// Every file under `dir` (recursively) whose name ends in one of `exts`.
fn sources(dir: &Path, exts: &[&str], into: &mut Vec<PathBuf>) {
    for e in fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            sources(&p, exts, into);
        } else if exts.iter().any(|x| p.to_string_lossy().ends_with(x)) {
            into.push(p);
        }
    }
}

/// The version table is the only place that knows NCCL version numbers: CUDA sources branch on
/// GB_NCCL_* names it defines (each one spelt as in the table, since `#if` reads an unknown name
/// as 0), and Rust code on its cfgs, never on NCCL_VERSION_CODE or header_version().
#[test]
fn nccl_versions_are_branched_on_only_through_the_table() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let known: Vec<String> = nccl::CFGS
        .iter()
        .map(|(n, _, _)| format!("GB_{}", n.to_uppercase()))
        .chain(["GB_NCCL_CFGS".to_string()])
        .collect();
    let mut cuda = vec![];
    sources(&root.join("src"), &[".cu", ".cuh"], &mut cuda);
    assert!(cuda.len() > 3, "{cuda:?}");
    for f in &cuda {
        let text = fs::read_to_string(f).unwrap();
        for own in ["NCCL_VERSION(", "NCCL_VERSION_CODE", "#ifdef GB_NCCL_", "defined(GB_NCCL_"] {
            assert!(!text.contains(own), "{}: {own}: NCCL versions are told apart by the table", f.display());
        }
        // Every flag is defined (0 or 1), so only the marker of a build through build.rs is
        // tested for being defined.
        let ifndefs = text.matches("#ifndef GB_NCCL_").count();
        assert_eq!(ifndefs, text.matches("#ifndef GB_NCCL_CFGS").count(), "{}", f.display());
        for (i, _) in text.match_indices("GB_NCCL_") {
            let name: String = text[i..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            // (A bare "GB_NCCL_*" is prose, naming them all.)
            assert!(name == "GB_NCCL_" || known.contains(&name), "{}: {name} is not in build/nccl.rs", f.display());
        }
    }
    let mut rust = vec![];
    sources(&root.join("src"), &[".rs"], &mut rust);
    for f in &rust {
        let text = fs::read_to_string(f).unwrap();
        for line in text.lines().filter(|l| l.contains("header_version()")) {
            let compares = line.replace("->", "").contains(['<', '>']);
            assert!(!compares, "{}: {line}: NCCL versions are told apart by the table", f.display());
        }
    }
}
