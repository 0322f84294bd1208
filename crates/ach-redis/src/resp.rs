//! Reading replies whose shape differs between RESP2 (flat arrays) and RESP3 (maps).

use redis::Value;

/// The `(field, value)` pairs of a RESP3 map or of a RESP2 flat array.
pub(crate) fn pairs(value: &Value) -> Result<Vec<(String, &Value)>, String> {
    match value {
        Value::Map(entries) => Ok(entries
            .iter()
            .filter_map(|(k, v)| Some((text(k)?, v)))
            .collect()),
        Value::Array(items) if items.len() % 2 == 0 => Ok(items
            .chunks(2)
            .filter_map(|pair| Some((text(&pair[0])?, &pair[1])))
            .collect()),
        other => Err(format!("expected field-value pairs, got {other:?}")),
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
