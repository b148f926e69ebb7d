//! Element types accepted by `-d`, named as nccl-tests names them.
use crate::error::{Error, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dtype {
    Int8,
    Uint8,
    Int32,
    Uint32,
    Int64,
    Uint64,
    Half,
    Float,
    Double,
    Bfloat16,
}

pub const ALL: [Dtype; 10] = [
    Dtype::Int8,
    Dtype::Uint8,
    Dtype::Int32,
    Dtype::Uint32,
    Dtype::Int64,
    Dtype::Uint64,
    Dtype::Half,
    Dtype::Float,
    Dtype::Double,
    Dtype::Bfloat16,
];

impl Dtype {
    pub fn name(self) -> &'static str {
        match self {
            Dtype::Int8 => "int8",
            Dtype::Uint8 => "uint8",
            Dtype::Int32 => "int32",
            Dtype::Uint32 => "uint32",
            Dtype::Int64 => "int64",
            Dtype::Uint64 => "uint64",
            Dtype::Half => "half",
            Dtype::Float => "float",
            Dtype::Double => "double",
            Dtype::Bfloat16 => "bfloat16",
        }
    }

    pub fn size(self) -> u64 {
        match self {
            Dtype::Int8 | Dtype::Uint8 => 1,
            Dtype::Half | Dtype::Bfloat16 => 2,
            Dtype::Int32 | Dtype::Uint32 | Dtype::Float => 4,
            Dtype::Int64 | Dtype::Uint64 | Dtype::Double => 8,
        }
    }

    pub fn parse(s: &str) -> Result<Dtype> {
        ALL.iter().copied().find(|d| d.name() == s).ok_or_else(|| {
            let names: Vec<_> = ALL.iter().map(|d| d.name()).collect();
            Error::usage(format!("unknown datatype '{s}'"), format!("use one of {}", names.join(", ")))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn round_trip() {
        for d in ALL {
            assert_eq!(Dtype::parse(d.name()).unwrap(), d);
        }
        assert!(Dtype::parse("f8e4m3").unwrap_err().msg.contains("unknown datatype"));
    }

    #[test]
    fn sizes_are_the_element_widths() {
        let sizes: Vec<(&str, u64)> = ALL.iter().map(|d| (d.name(), d.size())).collect();
        assert_eq!(
            sizes,
            [
                ("int8", 1),
                ("uint8", 1),
                ("int32", 4),
                ("uint32", 4),
                ("int64", 8),
                ("uint64", 8),
                ("half", 2),
                ("float", 4),
                ("double", 8),
                ("bfloat16", 2),
            ]
        );
    }
}
