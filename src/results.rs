//! The results document, schema `ginbench/1` (README "Output"). Required fields are plain struct
//! fields; extra fields are welcome and ignored by readers that do not know them.
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A results enum: serialised as its names, with `as_str` and `Display` from the same list, so
/// the names are written once. (Attributes before the name go on the enum: a flag's enum adds
/// `#[derive(clap::ValueEnum)]`, whose names are the variants' in kebab case.)
macro_rules! named_enum {
    ($(#[$m:meta])* $name:ident { $($(#[$vm:meta])* $v:ident = $s:literal),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
        pub enum $name {
            $($(#[$vm])* #[serde(rename = $s)] $v),+
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$v),+];

            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$v => $s),+
                }
            }
            /// The value named `s`, if any.
            pub fn from_name(s: &str) -> Option<Self> {
                match s {
                    $($s => Some($name::$v),)+
                    _ => None,
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

pub(crate) use named_enum;

pub const SCHEMA: &str = "ginbench/1";

named_enum! {
    /// What a results file measured (its `benchmark`): the benchmarks' `KIND`s and `ginbench ceiling`.
    Kind { #[default] Alltoall = "alltoall", Ep = "ep", Interference = "interference", Ceiling = "ceiling" }
}

named_enum! {
    /// EP rows: low-latency (decode) or high-throughput (prefill, training) kernels.
    Mode { #[default] Ll = "ll", Ht = "ht" }
}

named_enum! {
    /// EP rows: which half of the layer's exchange.
    Phase { #[default] Dispatch = "dispatch", Combine = "combine" }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Run {
    pub schema: String,
    pub benchmark: Kind,
    pub tool: Tool,
    pub command: String,
    pub started_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
    pub env: Env,
    /// The run's settings (flags after defaults), for humans and for `compare`.
    #[serde(default)]
    pub config: serde_json::Value,
    pub rows: Vec<Row>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<Summary>,
}

impl Run {
    /// A run of `benchmark` starting now: no rows yet.
    pub fn start(benchmark: Kind, command: &str, started_at: String, env: Env, config: serde_json::Value) -> Run {
        Run {
            schema: SCHEMA.into(),
            benchmark,
            tool: Tool {
                version: env!("CARGO_PKG_VERSION").into(),
                git: env!("GINBENCH_GIT").into(),
                build: BUILD.into(),
            },
            command: command.into(),
            started_at,
            finished_at: None,
            env,
            config,
            rows: vec![],
            summary: None,
        }
    }

    /// The dispatch dtype of each row: its `dispatch_dtype`, else its own dtype, and for a combine
    /// without one (files from before the field) that of the dispatch it followed (ep_perf and
    /// interference_perf write each combine right after its dispatch: same impl, mode, tokens,
    /// cycle and background). A combine's own dtype is always bf16, so this is what tells the
    /// combine after an FP8 dispatch from the one after a BF16 dispatch.
    pub fn dispatch_dtypes(&self) -> Vec<&str> {
        type At<'a> = (&'a str, Option<Mode>, Option<u64>, u32, Option<u64>);
        let mut last: std::collections::HashMap<At, &str> = Default::default();
        self.rows
            .iter()
            .map(|r| {
                let at = (r.impl_name.as_str(), r.mode, r.tokens, r.cycle, r.background.as_ref().map(|b| b.size_bytes));
                if let Some(d) = &r.dispatch_dtype {
                    d
                } else if r.phase == Some(Phase::Combine) {
                    last.get(&at).copied().unwrap_or(&r.dtype)
                } else {
                    last.insert(at, &r.dtype);
                    &r.dtype
                }
            })
            .collect()
    }

    /// The error that ended the run early, if any.
    pub fn error(&self) -> Option<&str> {
        // An empty message still ended the run; shown, it must say something.
        self.config.get("error").and_then(|e| e.as_str()).map(|e| if e.trim().is_empty() { "(no message)" } else { e })
    }

    /// The run's end: its rows and summary, the time, and the error that ended it (in
    /// `config.error`), if any.
    pub fn finish(&mut self, rows: Vec<Row>, summary: Summary, error: Option<String>) {
        self.rows = rows;
        self.summary = Some(summary);
        self.finished_at = Some(now_rfc3339());
        if let (Some(e), serde_json::Value::Object(m)) = (error, &mut self.config) {
            m.insert("error".into(), e.into());
        }
    }
}

/// The cargo profile of this binary. A debug build's host code launches kernels more slowly, so
/// its launch-bound times can read high (on one H100, rows under 20 µs up to 2.3× the release
/// build's; README, "Regression gate and reports").
pub const BUILD: &str = if cfg!(debug_assertions) { "debug" } else { "release" };

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Tool {
    pub version: String,
    pub git: String,
    /// [`BUILD`] of the binary that wrote the run; empty in files written before it was recorded.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub build: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Env {
    pub ranks: usize,
    pub hosts: Vec<String>,
    pub gpus: Vec<Gpu>,
    pub driver: String,
    pub cuda: String,
    pub nccl: NcclInfo,
    pub gin: Gin,
    pub network: Network,
    pub vars: BTreeMap<String, String>,
}

impl Env {
    /// Ranks that share their GPU with another rank (same host and bus id): they take turns on
    /// it, so their rows check correctness but their times mean nothing.
    pub fn ranks_sharing_a_gpu(&self) -> usize {
        let mut per_gpu = std::collections::HashMap::new();
        for id in self.gpus.iter().filter_map(Gpu::physical) {
            *per_gpu.entry(id).or_insert(0usize) += 1;
        }
        per_gpu.values().filter(|&&n| n > 1).sum()
    }

    /// The GPUs by model, in order of first appearance: "4× NVIDIA H200", or "3× NVIDIA H200 +
    /// 1× NVIDIA H100" where they differ (every GPU counts, not only the first). Each GPU once:
    /// ranks that share one (virtual nodes on a smaller host) count it once; a file without bus
    /// ids counts every rank's.
    pub fn gpu_summary(&self) -> String {
        let mut models: Vec<(&str, usize)> = vec![];
        let mut seen = std::collections::HashSet::new();
        for g in self.gpus.iter().filter(|g| g.physical().is_none_or(|id| seen.insert(id))) {
            match models.iter_mut().find(|(m, _)| *m == g.name) {
                Some((_, n)) => *n += 1,
                None => models.push((&g.name, 1)),
            }
        }
        models.iter().map(|(m, n)| format!("{n}× {m}")).collect::<Vec<_>>().join(" + ")
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Gpu {
    pub rank: usize,
    pub name: String,
    pub host: String,
    #[serde(default)]
    pub device: usize,
    #[serde(default)]
    pub pci_bus_id: String,
    #[serde(default)]
    pub memory_bytes: u64,
    /// CPUs the rank's process may run on (its affinity mask and CPU quota); 0: unknown.
    #[serde(default)]
    pub cpus: usize,
}

impl Gpu {
    /// The physical GPU: its host and bus id (None in files that recorded no bus id).
    fn physical(&self) -> Option<(&str, &str)> {
        (!self.pci_bus_id.is_empty()).then_some((self.host.as_str(), self.pci_bus_id.as_str()))
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct NcclInfo {
    /// NCCL_VERSION_CODE of the headers the kernels were compiled against.
    pub header: u32,
    /// ncclGetVersion() of the library loaded.
    pub library: u32,
    /// The library file loaded.
    pub path: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Gin {
    #[serde(rename = "type")]
    pub kind: GinKind,
    pub reason: String,
    /// full (every rank) | rail (same rail only) | none
    #[serde(default)]
    pub connection: String,
    /// Who carries GIN: "nccl" (NCCL's own backends or a NIC's plugin) or "loopback" (ginbench's
    /// plugin moving GIN between the GPUs of one host: not a network).
    #[serde(default, deserialize_with = "backend_or_empty")]
    pub backend: crate::gin_backend::Backend,
    /// The loopback plugin's name and version ("" otherwise).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub plugin: String,
    /// Nodes as NCCL sees them (distinct host ids; virtual nodes count as nodes).
    #[serde(default)]
    pub nodes: usize,
}

/// `env.gin.backend`, where early files wrote "" for NCCL's own.
fn backend_or_empty<'de, D: serde::Deserializer<'de>>(d: D) -> Result<crate::gin_backend::Backend, D::Error> {
    let s = String::deserialize(d)?;
    if s.is_empty() {
        return Ok(crate::gin_backend::Backend::Nccl);
    }
    crate::gin_backend::Backend::deserialize(serde::de::value::StrDeserializer::new(&s))
}

named_enum! {
    /// The GIN backend type NCCL offers (`NCCL_GIN_TYPE` numbers), `none`, or `available` where
    /// NCCL 2.28 says GIN works but cannot name the type.
    GinKind {
        #[default]
        None = "none",
        Proxy = "proxy",
        Gdaki = "gdaki",
        Gpi = "gpi",
        EfaGda = "efa-gda",
        Emulated = "emulated",
        Available = "available",
        Unknown = "unknown",
    }
}

impl GinKind {
    /// From NCCL's `NCCL_GIN_TYPE` / `ncclGinType_t` number (0 is none; the others are
    /// [`GinType::nccl_type`](crate::gin_transport::GinType::nccl_type)'s).
    pub fn from_nccl_type(t: i32) -> GinKind {
        use clap::ValueEnum;
        if t == 0 {
            return GinKind::None;
        }
        let of_type = crate::gin_transport::GinType::value_variants().iter().find(|g| g.nccl_type() as i32 == t);
        of_type.and_then(|g| GinKind::from_name(&g.name())).unwrap_or(GinKind::Unknown)
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Network {
    /// none | ib | roce | efa | socket
    pub kind: String,
    pub devices: Vec<NetDevice>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct NetDevice {
    pub name: String,
    /// ib | roce | efa | ethernet
    pub kind: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Row {
    #[serde(rename = "impl")]
    pub impl_name: String,
    pub size_bytes: u64,
    pub count: u64,
    pub dtype: String,
    pub placement: Placement,
    /// Mean time per operation (µs), reduced over ranks per `-a`; host enqueue time with `-C 1`.
    pub time_us: Option<f64>,
    pub p50_us: Option<f64>,
    pub p99_us: Option<f64>,
    pub algbw_gbps: Option<f64>,
    pub busbw_gbps: Option<f64>,
    /// Wrong elements summed over ranks; null when not checked.
    pub wrong: Option<u64>,
    pub status: Status,
    pub reason: Option<String>,
    /// Sweep repetition (`-N`), from 0.
    #[serde(default)]
    pub cycle: u32,
    /// EP rows: ll | ht.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<Mode>,
    /// EP rows: dispatch | combine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<Phase>,
    /// EP rows: the dispatch's payload (bf16 | fp8); on a combine row, that of the dispatch it
    /// followed (the combine's own `dtype` is always bf16). Absent in files written before it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dispatch_dtype: Option<String>,
    /// EP rows: tokens per rank.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
    /// EP rows: the layer's hidden size, top-k and experts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hidden: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topk: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub experts: Option<u64>,
    /// EP rows: bandwidth under `bw_definition` (DeepEP's logical bytes / time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bw_gbps: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bw_definition: Option<String>,
    /// EP rows: bytes one rank puts on links per operation (mean over ranks), self excluded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wire_bytes: Option<WireBytes>,
    /// EP rows: SMs the impl's kernels occupy (one CTA per SM); null for NCCL's own kernels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sms: Option<u32>,
    /// Interference rows: the foreground's time per operation alone and while the background
    /// runs (µs, reduced over ranks per `-a`); `time_us` is `together_us` (what the gate compares)
    /// or, without a background, `alone_us`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alone_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub together_us: Option<f64>,
    /// Interference rows: together_us / alone_us.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slowdown: Option<f64>,
    /// Interference rows: the fraction of the foreground's timed window during which the
    /// background ran (CUDA events on both streams; the smallest over ranks). Below 1 the row's
    /// `reason` says the overlap was incomplete.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overlap: Option<f64>,
    /// Interference rows: the background operation and how it fared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub background: Option<Background>,
    /// Interference rows: the foreground operations in each of the row's timed loops, alone and
    /// together (-n, or more where the background's window needed more to be covered).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fg_iters: Option<u32>,
    /// alltoall `auto` rows: the impl it ran (or would have run, on a skipped row) at this size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ran: Option<String>,
}

impl Row {
    /// Its check counted wrong elements.
    pub fn is_wrong(&self) -> bool {
        self.wrong.unwrap_or(0) > 0
    }
}

/// Wrong elements over rows (saturating: counts may come from files).
pub fn wrong_total<'a>(rows: impl IntoIterator<Item = &'a Row>) -> u64 {
    rows.into_iter().filter_map(|r| r.wrong).fold(0, u64::saturating_add)
}

named_enum! {
    /// The background collective (`--bg`, and an interference row's `background.op`). Adding
    /// one (reduce-scatter, all-gather): a value here, its type, reduction and busbw in
    /// interference/background.rs, and its launch there.
    #[derive(clap::ValueEnum)]
    BgOp {
        /// ncclAllReduce, float, sum (a data-parallel gradient reduction)
        #[value(name = "allreduce")]
        AllReduce = "allreduce",
        /// no background: the foreground alone (the standalone benchmark's figure)
        #[default]
        #[value(name = "none")]
        None = "none",
    }
}

/// The background of an interference row: a collective on its own communicator and stream.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Background {
    pub op: BgOp,
    /// Bytes per rank (the all-reduce's buffer), its elements, type and reduction.
    pub size_bytes: u64,
    pub count: u64,
    pub dtype: String,
    pub redop: String,
    /// Ranks of the background's communicator (a DP group).
    pub ranks: u64,
    /// Time per operation alone and while the foreground runs (µs), and their ratio.
    pub alone_us: Option<f64>,
    pub together_us: Option<f64>,
    pub slowdown: Option<f64>,
    /// Bus bandwidth (nccl-tests' all-reduce definition, algbw · 2(n-1)/n) alone and together.
    pub busbw_alone_gbps: Option<f64>,
    pub busbw_together_gbps: Option<f64>,
    /// Wrong elements of the background's checked runs (while overlapped), summed over ranks.
    pub wrong: Option<u64>,
}

named_enum! {
    /// Whether a row ran: `ok`, `skipped` (cannot run here; `reason` says why) or `failed`.
    Status { #[default] Ok = "ok", Skipped = "skipped", Failed = "failed" }
}

named_enum! {
    /// Where the output goes: a buffer of its own (`out-of-place`) or the input's (`in-place`).
    Placement { #[default] OutOfPlace = "out-of-place", InPlace = "in-place" }
}

/// Bytes by link class: `nvl` (NVLink, same host) and `net` (other hosts).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct WireBytes {
    pub nvl: u64,
    pub net: u64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Summary {
    /// Mean busbw over every measured row (nccl-tests' "Avg bus bandwidth").
    pub avg_busbw_gbps: f64,
    /// Rows with at least one wrong element.
    pub rows_wrong: u64,
    pub rows_failed: u64,
    pub rows_skipped: u64,
}

impl Summary {
    pub fn of(rows: &[Row]) -> Summary {
        let measured: Vec<f64> = rows.iter().filter(|r| r.status == Status::Ok).filter_map(|r| r.busbw_gbps).collect();
        Summary {
            avg_busbw_gbps: if measured.is_empty() {
                0.0
            } else {
                measured.iter().sum::<f64>() / measured.len() as f64
            },
            rows_wrong: rows.iter().filter(|r| r.is_wrong()).count() as u64,
            rows_failed: rows.iter().filter(|r| r.status == Status::Failed).count() as u64,
            rows_skipped: rows.iter().filter(|r| r.status == Status::Skipped).count() as u64,
        }
    }
}

/// NCCL version code as text: 22809 -> "2.28.9".
pub fn version_string(code: u32) -> String {
    format!("{}.{}.{}", code / 10000, code / 100 % 100, code % 100)
}

/// Now as RFC 3339 UTC (`2026-11-21T10:54:03Z`), without a date crate.
pub fn now_rfc3339() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    rfc3339(secs)
}

pub fn rfc3339(secs: u64) -> String {
    let days = (secs / 86400) as i64;
    let rem = secs % 86400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719468;
    let era = z.div_euclid(146097);
    let doe = z - era * 146097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + if m <= 2 { 1 } else { 0 };
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mean_bus_bandwidth_is_over_rows_that_ran() {
        let r = |status, busbw| Row { status, busbw_gbps: Some(busbw), ..Default::default() };
        let s = Summary::of(&[r(Status::Ok, 100.0), r(Status::Failed, 1.0), r(Status::Ok, 300.0)]);
        assert_eq!((s.avg_busbw_gbps, s.rows_failed), (200.0, 1));
    }

    #[test]
    fn enums_serialise_as_their_names() {
        for (k, name) in [(GinKind::EfaGda, "efa-gda"), (GinKind::None, "none")] {
            assert_eq!(serde_json::to_value(k).unwrap(), name);
            assert_eq!(serde_json::from_value::<GinKind>(name.into()).unwrap(), k);
        }
        assert_eq!(serde_json::to_value(Placement::OutOfPlace).unwrap(), "out-of-place");
        assert_eq!(serde_json::to_value(Status::Skipped).unwrap(), Status::Skipped.to_string());
        assert_eq!(serde_json::to_value(Kind::Interference).unwrap(), "interference");
        assert_eq!(serde_json::from_value::<Phase>("combine".into()).unwrap(), Phase::Combine);
        assert!(serde_json::from_value::<Mode>("LL".into()).is_err());
    }

    #[test]
    fn rfc3339_dates() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951782400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1795258443), "2026-11-21T10:54:03Z");
    }

    #[test]
    fn rfc3339_has_no_feb_29_in_a_century_year() {
        // 2100 is not a leap year: the civil-from-days century correction (doe / 36524).
        assert_eq!(rfc3339(4107542399), "2100-02-28T23:59:59Z");
        assert_eq!(rfc3339(4107542400), "2100-03-01T00:00:00Z");
    }

    #[test]
    fn now_is_the_current_time_in_rfc3339() {
        // Fixed-width fields: the text orders as the times do.
        let secs = || std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
        let before = rfc3339(secs());
        let now = now_rfc3339();
        let after = rfc3339(secs());
        assert!(before <= now && now <= after, "{before} {now} {after}");
    }
}
