//! Live-history rules (storage-model §4): constants, the trim rule and index validation.

use serde_json::Value;

/// At most this many live entries (§4.1).
pub const MAX_HISTORY: usize = 60;
/// At most this many contentChars in the live history (§4.1), unless one entry alone is larger.
pub const MAX_TOTAL_CHARS: usize = 300_000;
/// Whole numbers accepted for indexes and counts (§11.20: up to 2^53).
pub const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_992.0;

/// How many entries to drop from the front of a list with these contentChars (§4.1): keep the
/// last 60; then drop the oldest while the total exceeds 300,000 and more than one remains.
pub fn trim_count(chars: &[usize]) -> usize {
    let n = chars.len();
    let mut drop = n.saturating_sub(MAX_HISTORY);
    let mut total: usize = chars[drop..].iter().sum();
    while total > MAX_TOTAL_CHARS && n - drop > 1 {
        total -= chars[drop];
        drop += 1;
    }
    drop
}

/// Parse a whole, finite, non-negative JSON number ≤ 2^53 (§4.2, §11.20). `50.0` is 50.
pub fn parse_index(v: Option<&Value>) -> Result<u64, String> {
    match v {
        Some(Value::Number(n)) => {
            if let Some(u) = n.as_u64() {
                if (u as f64) <= MAX_SAFE_INTEGER {
                    return Ok(u);
                }
                return Err("must be at most 2^53".into());
            }
            match n.as_f64() {
                Some(f) if f.is_finite() && f >= 0.0 && f.fract() == 0.0 && f <= MAX_SAFE_INTEGER => {
                    Ok(f as u64)
                }
                Some(f) if f < 0.0 => Err("must not be negative".into()),
                Some(f) if f.fract() != 0.0 => Err("must be a whole number".into()),
                _ => Err("must be a whole number ≤ 2^53".into()),
            }
        }
        Some(Value::Null) | None => Err("is required (a whole number ≥ 0)".into()),
        Some(_) => Err("must be a JSON number (whole, ≥ 0)".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn trim_keeps_last_sixty() {
        assert_eq!(trim_count(&vec![1; 61]), 1);
        assert_eq!(trim_count(&vec![1; 60]), 0);
        assert_eq!(trim_count(&[]), 0);
    }

    #[test]
    fn trim_drops_oldest_over_char_budget_but_never_the_last() {
        assert_eq!(trim_count(&[200_000, 200_000]), 1);
        assert_eq!(trim_count(&[400_000]), 0);
        assert_eq!(trim_count(&[1, 400_000]), 1);
        assert_eq!(trim_count(&[100_000, 100_000, 100_000]), 0);
        assert_eq!(trim_count(&[100_000, 100_000, 100_001]), 1);
    }

    #[test]
    fn index_rule() {
        assert_eq!(parse_index(Some(&json!(3))), Ok(3));
        assert_eq!(parse_index(Some(&json!(50.0))), Ok(50));
        assert!(parse_index(Some(&json!(1.5))).is_err());
        assert!(parse_index(Some(&json!(-1))).is_err());
        assert!(parse_index(Some(&json!("1"))).is_err());
        assert!(parse_index(Some(&json!(null))).is_err());
        assert!(parse_index(None).is_err());
        assert!(parse_index(Some(&json!(1e300))).is_err());
    }
}
