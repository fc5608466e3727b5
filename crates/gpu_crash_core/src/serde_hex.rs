//! GPU addresses and handles as `"0x…"` strings in JSON: developers read them in hex, and JSON
//! numbers above 2^53 lose precision in JavaScript dashboards.

pub(crate) mod hex {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &u64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{v:#x}"))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        let text = String::deserialize(d)?;
        parse(&text).map_err(serde::de::Error::custom)
    }

    pub fn parse(text: &str) -> Result<u64, String> {
        let digits = text.strip_prefix("0x").unwrap_or(text);
        u64::from_str_radix(digits, 16).map_err(|e| format!("bad hex address {text:?}: {e}"))
    }
}

pub(crate) mod hex_opt {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(v) => super::hex::serialize(v, s),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
        Option::<String>::deserialize(d)?
            .map(|t| super::hex::parse(&t).map_err(serde::de::Error::custom))
            .transpose()
    }
}

pub(crate) mod hex_pair {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(v: &[u64; 2], s: S) -> Result<S::Ok, S::Error> {
        [format!("{:#x}", v[0]), format!("{:#x}", v[1])].serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<[u64; 2], D::Error> {
        let [lo, hi] = <[String; 2]>::deserialize(d)?;
        let parse = |t: &str| super::hex::parse(t).map_err(serde::de::Error::custom);
        Ok([parse(&lo)?, parse(&hi)?])
    }
}
