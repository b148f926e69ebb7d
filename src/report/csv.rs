//! CSV output: one line per result row. The columns are the fields of `Row` as the JSON writes
//! them, in the struct's order, nested objects flattened as `outer.inner` (`wire_bytes.nvl`), every
//! field present even where a row has none; so a field added to `Row` appears here by itself.
//! Cells are the JSON values: strings bare, null empty, numbers as JSON writes them (exact).
use crate::results::Row;
use serde::de::{self, DeserializeSeed, IntoDeserializer, MapAccess, Visitor};
use serde::Deserialize;
use std::cell::RefCell;
use std::path::Path;

/// The CSV columns: `Row`'s fields read off the type itself (see `Probe`).
pub fn columns() -> Vec<String> {
    let cols = RefCell::new(vec![]);
    Row::deserialize(Probe { path: String::new(), cols: &cols }).expect("Row's fields can be probed");
    cols.into_inner()
}

pub fn to_string(rows: &[Row]) -> String {
    let cols = columns();
    let mut w = csv::Writer::from_writer(vec![]);
    w.write_record(&cols).expect("in-memory CSV");
    for r in rows {
        let v = serde_json::to_value(r).expect("a Row serializes");
        w.write_record(cols.iter().map(|c| cell(c.split('.').try_fold(&v, |v, k| v.get(k))))).expect("in-memory CSV");
    }
    String::from_utf8(w.into_inner().expect("in-memory CSV")).expect("CSV is UTF-8")
}

pub fn write(path: &Path, rows: &[Row]) -> std::io::Result<()> {
    super::write_atomic(path, to_string(rows).as_bytes())
}

fn cell(v: Option<&serde_json::Value>) -> String {
    match v {
        None | Some(serde_json::Value::Null) => String::new(),
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

/// A deserializer that builds a value of any plain serde type while recording the path of every
/// leaf it is asked for: structs hand it their field names in declaration order, and it answers
/// every `Option` with `Some`, so fields that are None in real rows (and skipped in their JSON)
/// still get their columns, nested ones included.
struct Probe<'a> {
    path: String,
    cols: &'a RefCell<Vec<String>>,
}

impl Probe<'_> {
    fn leaf(&self) {
        self.cols.borrow_mut().push(self.path.clone());
    }
}

type Error = de::value::Error;

macro_rules! leaf {
    ($($method:ident => $visit:ident($($value:expr)?)),* $(,)?) => {
        $(fn $method<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
            self.leaf();
            v.$visit($($value)?)
        })*
    };
}

impl<'de> de::Deserializer<'de> for Probe<'_> {
    type Error = Error;

    leaf! {
        deserialize_any => visit_unit(),
        deserialize_bool => visit_bool(false),
        deserialize_i8 => visit_i64(0),
        deserialize_i16 => visit_i64(0),
        deserialize_i32 => visit_i64(0),
        deserialize_i64 => visit_i64(0),
        deserialize_u8 => visit_u64(0),
        deserialize_u16 => visit_u64(0),
        deserialize_u32 => visit_u64(0),
        deserialize_u64 => visit_u64(0),
        deserialize_f32 => visit_f64(0.0),
        deserialize_f64 => visit_f64(0.0),
        deserialize_char => visit_char(' '),
        deserialize_str => visit_str(""),
        deserialize_string => visit_str(""),
        deserialize_bytes => visit_bytes(&[]),
        deserialize_byte_buf => visit_bytes(&[]),
        deserialize_unit => visit_unit(),
        deserialize_identifier => visit_str(""),
        deserialize_ignored_any => visit_unit(),
    }

    fn deserialize_option<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        v.visit_some(self)
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(self, _: &'static str, v: V) -> Result<V::Value, Error> {
        self.deserialize_unit(v)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(self, _: &'static str, v: V) -> Result<V::Value, Error> {
        v.visit_newtype_struct(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        self.leaf();
        v.visit_seq(de::value::SeqDeserializer::new(std::iter::empty::<()>()))
    }

    fn deserialize_tuple<V: Visitor<'de>>(self, _: usize, v: V) -> Result<V::Value, Error> {
        self.deserialize_seq(v)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(self, _: &'static str, _: usize, v: V) -> Result<V::Value, Error> {
        self.deserialize_seq(v)
    }

    fn deserialize_map<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        self.leaf();
        v.visit_map(de::value::MapDeserializer::new(std::iter::empty::<((), ())>()))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, Error> {
        v.visit_map(Fields { fields, at: 0, probe: self })
    }

    /// An enum is one column (a unit variant's name), its first variant standing in.
    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _: &'static str,
        variants: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, Error> {
        self.leaf();
        let first = variants.first().copied().unwrap_or("");
        v.visit_enum(IntoDeserializer::<Error>::into_deserializer(first))
    }
}

/// A struct's fields, each probed under `outer.name`.
struct Fields<'a> {
    fields: &'static [&'static str],
    at: usize,
    probe: Probe<'a>,
}

impl<'de> MapAccess<'de> for Fields<'_> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, Error> {
        match self.fields.get(self.at) {
            Some(name) => seed.deserialize(IntoDeserializer::<Error>::into_deserializer(*name)).map(Some),
            None => Ok(None),
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        let name = self.fields[self.at];
        self.at += 1;
        let path = if self.probe.path.is_empty() { name.to_string() } else { format!("{}.{name}", self.probe.path) };
        seed.deserialize(Probe { path, cols: self.probe.cols })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_follow_the_struct() {
        let c = columns();
        assert_eq!(&c[..5], ["impl", "size_bytes", "count", "dtype", "placement"]);
        let at = |n: &str| c.iter().position(|x| x == n).unwrap_or_else(|| panic!("no {n} in {c:?}"));
        assert!(at("wire_bytes.nvl") + 1 == at("wire_bytes.net") && at("wire_bytes.net") < at("sms"));
        assert!(at("tokens") < at("hidden") && at("hidden") < at("bw_definition"));
    }

    #[test]
    fn enums_and_nested_options_are_columns() {
        #[derive(Deserialize, Debug)]
        #[allow(dead_code)]
        enum Status {
            Ok,
            Skipped,
        }
        #[derive(Deserialize, Debug)]
        #[allow(dead_code)]
        struct Inner {
            a: u8,
            b: Option<String>,
        }
        #[derive(Deserialize, Debug)]
        #[allow(dead_code)]
        struct Outer {
            status: Status,
            inner: Option<Inner>,
            list: Vec<u32>,
            #[serde(rename = "x")]
            renamed: f32,
        }
        let cols = RefCell::new(vec![]);
        Outer::deserialize(Probe { path: String::new(), cols: &cols }).unwrap();
        assert_eq!(cols.into_inner(), ["status", "inner.a", "inner.b", "list", "x"]);
    }
}
