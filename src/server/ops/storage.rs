//! `storage.*`: importing exports and dumps (PROTOCOL.md §7 "storage").

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::types::{crid, ClientRequestId};
use super::Op;
use crate::domain::import::SettingsMode;
use crate::protocol::HostResult;
use crate::server::bodies::BodyCache;
use crate::server::dispatch::{read, Reply};
use crate::store::{ImportOptions, Store};

/// What `storage.import` does with the document's settings (default `none`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Settings {
    None,
    Keep,
    Overwrite,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Import {
    pub document: Value,
    pub settings: Option<Settings>,
    pub client_request_id: Option<ClientRequestId>,
}

impl Op for Import {
    const NAME: &'static str = "storage.import";
    const WRITE: bool = true;
    fn run(self, s: &mut Store, _: &mut BodyCache) -> HostResult<Reply> {
        let settings = match self.settings {
            None | Some(Settings::None) => SettingsMode::None,
            Some(Settings::Keep) => SettingsMode::Keep,
            Some(Settings::Overwrite) => SettingsMode::Overwrite,
        };
        Ok(s.storage_import(&self.document, ImportOptions { settings }, crid(&self.client_request_id))?
            .into())
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ImportPreview {
    pub document: Value,
}

impl Op for ImportPreview {
    const NAME: &'static str = "storage.importPreview";
    const WRITE: bool = false;
    fn run(self, s: &mut Store, _: &mut BodyCache) -> HostResult<Reply> {
        Ok(read(s.storage_import_preview(&self.document)?))
    }
}
