//! Settings, and provider API keys in the operating system's secret store.

mod basics;
pub(crate) mod secrets;
