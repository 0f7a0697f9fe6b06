//! Typed access to a request's `args` object: raw JSON → validated values, with a
//! `bad_request` that names the field for every mistake, and unknown fields refused.

use serde_json::{Map, Value};

use crate::domain::history::parse_index;
use crate::protocol::{HostError, HostResult};
use crate::store::check_client_request_id;

pub struct Args<'a> {
    map: &'a Map<String, Value>,
}

impl<'a> Args<'a> {
    /// Wrap `map`, refusing any key outside `allowed` (plus `clientRequestId` for writes).
    pub fn new(map: &'a Map<String, Value>, allowed: &[&str], write: bool) -> HostResult<Self> {
        for k in map.keys() {
            let ok = allowed.contains(&k.as_str()) || (write && k == "clientRequestId");
            if !ok {
                let mut names: Vec<&str> = allowed.to_vec();
                if write {
                    names.push("clientRequestId");
                }
                return Err(HostError::bad_request(format!(
                    "unknown argument {k:?} (allowed: {})",
                    if names.is_empty() { "none".to_string() } else { names.join(", ") }
                )));
            }
        }
        Ok(Args { map })
    }

    pub fn raw(&self, k: &str) -> Option<&'a Value> {
        self.map.get(k).filter(|v| !v.is_null())
    }

    pub fn client_request_id(&self) -> HostResult<Option<String>> {
        check_client_request_id(self.map.get("clientRequestId"))
    }

    pub fn req_str(&self, k: &str) -> HostResult<&'a str> {
        match self.map.get(k) {
            Some(Value::String(s)) => Ok(s),
            Some(_) => Err(HostError::bad_request(format!("{k} must be a string"))),
            None => Err(HostError::bad_request(format!("{k} is required"))),
        }
    }

    pub fn opt_str(&self, k: &str) -> HostResult<Option<&'a str>> {
        match self.raw(k) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(HostError::bad_request(format!("{k} must be a string"))),
        }
    }

    pub fn opt_bool(&self, k: &str) -> HostResult<bool> {
        match self.raw(k) {
            None => Ok(false),
            Some(Value::Bool(b)) => Ok(*b),
            Some(_) => Err(HostError::bad_request(format!("{k} must be a boolean"))),
        }
    }

    pub fn req_bool(&self, k: &str) -> HostResult<bool> {
        match self.map.get(k) {
            Some(Value::Bool(b)) => Ok(*b),
            Some(_) => Err(HostError::bad_request(format!("{k} must be a boolean"))),
            None => Err(HostError::bad_request(format!("{k} is required"))),
        }
    }

    pub fn req_index(&self, k: &str) -> HostResult<u64> {
        parse_index(self.map.get(k)).map_err(|m| HostError::bad_request(format!("{k} {m}")))
    }

    pub fn opt_index(&self, k: &str) -> HostResult<Option<u64>> {
        match self.map.get(k) {
            None => Ok(None),
            v => parse_index(v).map(Some).map_err(|m| HostError::bad_request(format!("{k} {m}"))),
        }
    }

    pub fn req_value(&self, k: &str) -> HostResult<&'a Value> {
        self.map.get(k).ok_or_else(|| HostError::bad_request(format!("{k} is required")))
    }

    pub fn req_object(&self, k: &str) -> HostResult<&'a Map<String, Value>> {
        match self.map.get(k) {
            Some(Value::Object(m)) => Ok(m),
            Some(_) => Err(HostError::bad_request(format!("{k} must be an object"))),
            None => Err(HostError::bad_request(format!("{k} is required"))),
        }
    }

    pub fn req_array(&self, k: &str) -> HostResult<&'a Vec<Value>> {
        match self.map.get(k) {
            Some(Value::Array(a)) => Ok(a),
            Some(_) => Err(HostError::bad_request(format!("{k} must be an array"))),
            None => Err(HostError::bad_request(format!("{k} is required"))),
        }
    }

    pub fn req_string_list(&self, k: &str) -> HostResult<Vec<String>> {
        self.req_array(k)?
            .iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| HostError::bad_request(format!("{k} must be a list of strings")))
            })
            .collect()
    }
}
