//! Reading replies whose shape differs between RESP2 (flat arrays) and RESP3 (maps).

use redis::Value;

/// What is wrong with the shape of a reply (or of a line of `CLUSTER NODES`).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ReplyShape {
    /// A value of another type than the one documented.
    #[error("expected {expected}, got {got}")]
    Expected {
        /// What the documentation says.
        expected: &'static str,
        /// What came, as the client prints it.
        got: String,
    },
    /// A documented field is missing.
    #[error("{context}: no {field}")]
    MissingField {
        /// Where (a command's name, an entry).
        context: String,
        /// The field.
        field: &'static str,
    },
    /// A field that must be a number is not.
    #[error("{context}: {what} {value} is not a number")]
    NotANumber {
        /// Where (a command's name).
        context: String,
        /// The field.
        what: &'static str,
        /// Its value, quoted.
        value: String,
    },
    /// A slot outside `0..16384`.
    #[error("slot {value} is not in 0..16384")]
    SlotOutOfRange {
        /// The value, quoted.
        value: String,
    },
    /// An open slot of `CLUSTER NODES` in neither documented form.
    #[error("open slot {field:?} is neither [s->-id] nor [s-<-id]")]
    OpenSlot {
        /// The field.
        field: String,
    },
    /// A slot range whose first slot is after its last.
    #[error("slot range {field:?} is reversed")]
    ReversedRange {
        /// The field.
        field: String,
    },
}

/// The `(field, value)` pairs of a RESP3 map or of a RESP2 flat array.
pub(crate) fn pairs(value: &Value) -> Result<Vec<(String, &Value)>, ReplyShape> {
    match value {
        Value::Map(entries) => Ok(entries
            .iter()
            .filter_map(|(k, v)| Some((text(k)?, v)))
            .collect()),
        Value::Array(items) if items.len() % 2 == 0 => Ok(items
            .chunks(2)
            .filter_map(|pair| Some((text(&pair[0])?, &pair[1])))
            .collect()),
        other => Err(ReplyShape::Expected {
            expected: "field-value pairs",
            got: format!("{other:?}"),
        }),
    }
}

pub(crate) fn text(value: &Value) -> Option<String> {
    match value {
        Value::BulkString(bytes) => Some(String::from_utf8_lossy(bytes).into_owned()),
        Value::SimpleString(text) => Some(text.clone()),
        Value::Int(number) => Some(number.to_string()),
        Value::Okay => Some("OK".into()),
        _ => None,
    }
}

pub(crate) fn integer(value: &Value) -> Option<i64> {
    match value {
        Value::Int(number) => Some(*number),
        Value::BulkString(bytes) => std::str::from_utf8(bytes).ok()?.parse().ok(),
        Value::SimpleString(text) => text.parse().ok(),
        _ => None,
    }
}
