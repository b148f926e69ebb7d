//! Per-communicator NCCL configuration (`ncclConfig_t`): the isolation knobs a communicator can be
//! given when it is created (here by `ncclCommSplit`). A knob left `None` stays
//! `NCCL_CONFIG_UNDEF_*`, i.e. NCCL's default (or its environment variable). Every field used
//! here exists in every supported generation (2.28.x up to 2.32.x); the struct starts from
//! NCCL's own `NCCL_CONFIG_INITIALIZER` (compat), so size, magic and version are NCCL's.
use super::ffi;
use crate::error::{Error, Result};
use serde::Serialize;
use std::ffi::CString;

/// The knobs, as asked on the command line (and recorded per communicator in the JSON).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CommConfig {
    /// `cgaClusterSize`: CTAs per cooperative group array of NCCL's kernels (0..8).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cga_cluster_size: Option<i32>,
    /// `minCTAs` / `maxCTAs`: the CTAs (hence SMs) NCCL's kernels may use on this communicator.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_ctas: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_ctas: Option<i32>,
    /// `splitShare`: share the parent communicator's resources (channels, proxy, buffers).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub split_share: Option<bool>,
    /// `netName`: the network plugin / transport to use ("IB", "Socket", "AWS Libfabric", ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub net_name: Option<String>,
    /// `trafficClass`: the network traffic class (IB: the GRH traffic class / DSCP).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub traffic_class: Option<i32>,
}

/// NCCL's limit on CTAs per communicator (MAXCHANNELS in 2.28 and 2.32).
pub const MAX_CTAS: i32 = 64;

impl CommConfig {
    /// Command-line checks (no GPU needed). `flag` prefixes the messages (`--dp`).
    pub fn validate(&self, flag: &str) -> Result<()> {
        let ctas = |name: &str, v: Option<i32>| match v {
            Some(v) if !(1..=MAX_CTAS).contains(&v) => Err(Error::usage(
                format!("{flag}-{name} {v} is not in 1..={MAX_CTAS}"),
                format!("use {flag}-{name} 1..{MAX_CTAS} (NCCL's channels per communicator)"),
            )),
            _ => Ok(()),
        };
        ctas("min-ctas", self.min_ctas)?;
        ctas("max-ctas", self.max_ctas)?;
        if let (Some(lo), Some(hi)) = (self.min_ctas, self.max_ctas) {
            if lo > hi {
                return Err(Error::usage(
                    format!("{flag}-min-ctas {lo} is above {flag}-max-ctas {hi}"),
                    "give a minimum no larger than the maximum",
                ));
            }
        }
        if let Some(c) = self.cga_cluster_size.filter(|c| !(0..=8).contains(c)) {
            return Err(Error::usage(format!("{flag}-cga-cluster-size {c} is not in 0..=8"), "use 0..8"));
        }
        if let Some(t) = self.traffic_class.filter(|t| !(0..=255).contains(t)) {
            return Err(Error::usage(format!("{flag}-traffic-class {t} is not in 0..=255"), "use 0..255"));
        }
        if let Some(n) = &self.net_name {
            if n.is_empty() {
                return Err(Error::usage(format!("{flag}-net-name is empty"), "name a network, e.g. IB or Socket"));
            }
            if n.contains('\0') {
                return Err(Error::usage(
                    format!("{flag}-net-name holds a NUL byte"),
                    "name a network, e.g. IB or Socket",
                ));
            }
        }
        Ok(())
    }

    /// The knobs set, as "maxCTAs=8 netName=IB" (empty: NCCL's defaults).
    pub fn describe(&self) -> String {
        let mut v = vec![];
        let mut put = |k: &str, x: Option<String>| {
            if let Some(x) = x {
                v.push(format!("{k}={x}"));
            }
        };
        put("cgaClusterSize", self.cga_cluster_size.map(|x| x.to_string()));
        put("minCTAs", self.min_ctas.map(|x| x.to_string()));
        put("maxCTAs", self.max_ctas.map(|x| x.to_string()));
        put("splitShare", self.split_share.map(|x| (x as i32).to_string()));
        put("netName", self.net_name.clone());
        put("trafficClass", self.traffic_class.map(|x| x.to_string()));
        if v.is_empty() {
            "NCCL defaults".into()
        } else {
            v.join(" ")
        }
    }

    /// The `ncclConfig_t` to hand NCCL. `net_name` must outlive the call that uses the struct.
    pub fn to_ffi(&self, net_name: &mut Option<CString>) -> ffi::ncclConfig_t {
        let mut c = super::compat::config();
        if let Some(v) = self.cga_cluster_size {
            c.cgaClusterSize = v;
        }
        if let Some(v) = self.min_ctas {
            c.minCTAs = v;
        }
        if let Some(v) = self.max_ctas {
            c.maxCTAs = v;
        }
        if let Some(v) = self.split_share {
            c.splitShare = v as i32;
        }
        if let Some(v) = self.traffic_class {
            c.trafficClass = v;
        }
        *net_name = self.net_name.as_deref().and_then(|n| CString::new(n).ok());
        if let Some(n) = net_name {
            c.netName = n.as_ptr();
        }
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unset_knobs_stay_nccls_defaults() {
        let d = super::super::compat::config();
        let mut keep = None;
        let c = CommConfig::default().to_ffi(&mut keep);
        assert_eq!(c.size, std::mem::size_of::<ffi::ncclConfig_t>());
        assert_eq!(c.magic, 0xcafebeef);
        assert_eq!((c.maxCTAs, c.minCTAs, c.splitShare), (d.maxCTAs, d.minCTAs, d.splitShare));
        assert_eq!(c.maxCTAs, i32::MIN, "NCCL_CONFIG_UNDEF_INT");
        assert!(c.netName.is_null());
        assert_eq!(CommConfig::default().describe(), "NCCL defaults");
    }

    #[test]
    fn set_knobs_reach_the_struct() {
        let k = CommConfig {
            max_ctas: Some(8),
            min_ctas: Some(2),
            split_share: Some(true),
            net_name: Some("IB".into()),
            traffic_class: Some(106),
            cga_cluster_size: Some(0),
        };
        let mut keep = None;
        let c = k.to_ffi(&mut keep);
        assert_eq!((c.maxCTAs, c.minCTAs, c.splitShare, c.trafficClass, c.cgaClusterSize), (8, 2, 1, 106, 0));
        assert_eq!(unsafe { std::ffi::CStr::from_ptr(c.netName) }.to_str().unwrap(), "IB");
        assert_eq!(k.describe(), "cgaClusterSize=0 minCTAs=2 maxCTAs=8 splitShare=1 netName=IB trafficClass=106");
        assert!(k.validate("--dp").is_ok());
    }

    #[test]
    fn a_fixed_cta_count_is_min_equal_to_max() {
        let k = CommConfig { min_ctas: Some(16), max_ctas: Some(16), ..Default::default() };
        assert!(k.validate("--dp").is_ok());
        let k = CommConfig { min_ctas: Some(MAX_CTAS), max_ctas: Some(MAX_CTAS), ..Default::default() };
        assert!(k.validate("--dp").is_ok());
    }

    #[test]
    fn bad_knobs_are_usage_errors() {
        for (k, needle) in [
            (CommConfig { max_ctas: Some(0), ..Default::default() }, "--dp-max-ctas 0"),
            (CommConfig { min_ctas: Some(65), ..Default::default() }, "--dp-min-ctas 65"),
            (CommConfig { min_ctas: Some(9), max_ctas: Some(8), ..Default::default() }, "is above"),
            (CommConfig { cga_cluster_size: Some(9), ..Default::default() }, "cga-cluster-size 9"),
            (CommConfig { traffic_class: Some(256), ..Default::default() }, "traffic-class 256"),
            (CommConfig { net_name: Some(String::new()), ..Default::default() }, "net-name is empty"),
            (CommConfig { net_name: Some("IB\0".into()), ..Default::default() }, "net-name holds a NUL"),
        ] {
            let e = k.validate("--dp").unwrap_err();
            assert_eq!(e.exit, crate::error::Exit::Usage);
            assert!(e.msg.contains(needle), "{e}");
        }
    }
}
