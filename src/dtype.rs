//! Element types accepted by `-d`, named as nccl-tests names them.
use crate::error::{Error, Result};

crate::results::named_enum! {
    Dtype {
        Int8 = "int8",
        Uint8 = "uint8",
        Int32 = "int32",
        Uint32 = "uint32",
        Int64 = "int64",
        Uint64 = "uint64",
        Half = "half",
        #[default]
        Float = "float",
        Double = "double",
        Bfloat16 = "bfloat16",
    }
}

impl Dtype {
    pub fn size(self) -> u64 {
        match self {
            Dtype::Int8 | Dtype::Uint8 => 1,
            Dtype::Half | Dtype::Bfloat16 => 2,
            Dtype::Int32 | Dtype::Uint32 | Dtype::Float => 4,
            Dtype::Int64 | Dtype::Uint64 | Dtype::Double => 8,
        }
    }

    pub fn parse(s: &str) -> Result<Dtype> {
        Dtype::from_name(s).ok_or_else(|| {
            let names: Vec<_> = Dtype::ALL.iter().map(|d| d.as_str()).collect();
            Error::usage(format!("unknown datatype '{s}'"), format!("use one of {}", names.join(", ")))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn round_trip() {
        for &d in Dtype::ALL {
            assert_eq!(Dtype::parse(d.as_str()).unwrap(), d);
        }
        assert!(Dtype::parse("f8e4m3").unwrap_err().msg.contains("unknown datatype"));
    }

    #[test]
    fn sizes_are_the_element_widths() {
        let sizes: Vec<(&str, u64)> = Dtype::ALL.iter().map(|d| (d.as_str(), d.size())).collect();
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
