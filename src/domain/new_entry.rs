//! The typed shape of an entry a client adds (storage-model §2.1–§2.2): `history.append`,
//! `history.branch` and `sessions.appendTo` take a [`NewEntry`], so a wrong role, a content that is
//! neither a string nor a list of parts, a text part without text, an image part without a URL or a
//! stamp of the wrong type is refused at the boundary with the path of the field
//! (`entry.content[1].text: …`). Everything the types do not name — other top-level fields, other
//! fields of a part, parts of other types — is kept verbatim, and [`NewEntry::into_value`] gives
//! back the stored JSON form.

use std::borrow::Cow;

use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::de::Error as _;
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

/// Who wrote an entry a client adds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    User,
    Assistant,
}

/// An entry's `content`: a plain string or a list of parts.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum Content {
    Text(String),
    Parts(Vec<Part>),
}

/// By hand rather than `untagged`, so an error inside a part keeps its path (`content[2].text`).
impl<'de> Deserialize<'de> for Content {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Content;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a string or an array of parts")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Content, E> {
                Ok(Content::Text(s.to_owned()))
            }
            fn visit_string<E: serde::de::Error>(self, s: String) -> Result<Content, E> {
                Ok(Content::Text(s))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Content, A::Error> {
                let mut parts = Vec::with_capacity(seq.size_hint().unwrap_or(0));
                while let Some(p) = seq.next_element::<Part>()? {
                    parts.push(p);
                }
                Ok(Content::Parts(parts))
            }
        }
        d.deserialize_any(V)
    }
}

/// Which of the two text part types a text part has (readers treat them alike, §2.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextType {
    Text,
    InputText,
}

/// One part of an array content.
#[derive(Debug, Clone, PartialEq)]
pub enum Part {
    /// `{type: "text" | "input_text", text, …}`
    Text { kind: TextType, text: String, extra: Map<String, Value> },
    /// `{type: "image_url", image_url: {url, …} | "<url>", …}`
    Image { image_url: ImageUrl, extra: Map<String, Value> },
    /// A part of any other type: stored as is, counted as 0 chars, dropped by builders.
    Other(Value),
}

/// An image part's `image_url`: the object form or the bare-string form.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged, expecting = "an object {url} or a URL string")]
pub enum ImageUrl {
    Bare(String),
    Object {
        url: String,
        #[serde(flatten)]
        extra: Map<String, Value>,
    },
}

impl ImageUrl {
    pub fn url(&self) -> &str {
        match self {
            ImageUrl::Bare(u) | ImageUrl::Object { url: u, .. } => u,
        }
    }
}

impl<'de> Deserialize<'de> for Part {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Value::deserialize(d)?;
        let Value::Object(mut m) = v else { return Ok(Part::Other(v)) };
        let kind = match m.get("type").and_then(Value::as_str) {
            Some("text") => Some(TextType::Text),
            Some("input_text") => Some(TextType::InputText),
            Some("image_url") => None,
            _ => return Ok(Part::Other(Value::Object(m))),
        };
        m.remove("type");
        match kind {
            Some(kind) => match m.remove("text") {
                Some(Value::String(text)) => Ok(Part::Text { kind, text, extra: m }),
                _ => Err(D::Error::custom("must have a string `text` (a text part)")),
            },
            None => {
                let bad = || {
                    D::Error::custom("must have `image_url`: an object {url} or a URL string (an image part)")
                };
                let raw = m.remove("image_url").ok_or_else(bad)?;
                let image_url = ImageUrl::deserialize(raw).map_err(|_| bad())?;
                Ok(Part::Image { image_url, extra: m })
            }
        }
    }
}

impl Serialize for Part {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let (head, extra): ([(&str, Value); 2], &Map<String, Value>) = match self {
            Part::Other(v) => return v.serialize(s),
            Part::Text { kind, text, extra } => {
                let t = match kind {
                    TextType::Text => "text",
                    TextType::InputText => "input_text",
                };
                ([("type", t.into()), ("text", text.as_str().into())], extra)
            }
            Part::Image { image_url, extra } => {
                let url = serde_json::to_value(image_url).map_err(serde::ser::Error::custom)?;
                ([("type", "image_url".into()), ("image_url", url)], extra)
            }
        };
        let mut map = s.serialize_map(Some(2 + extra.len()))?;
        for (k, v) in &head {
            map.serialize_entry(k, v)?;
        }
        for (k, v) in extra {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

impl JsonSchema for Part {
    fn schema_name() -> Cow<'static, str> {
        "Part".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "a text part, an image part, or a part of another type (stored as is)",
            "anyOf": [
                {
                    "type": "object",
                    "properties": {"type": {"enum": ["text", "input_text"]}, "text": {"type": "string"}},
                    "required": ["type", "text"]
                },
                {
                    "type": "object",
                    "properties": {
                        "type": {"const": "image_url"},
                        "image_url": {"anyOf": [
                            {"type": "string"},
                            {"type": "object", "properties": {"url": {"type": "string"}}, "required": ["url"]}
                        ]}
                    },
                    "required": ["type", "image_url"]
                },
                {"not": {"type": "object", "properties": {"type": {"enum": ["text", "input_text", "image_url"]}}, "required": ["type"]}}
            ]
        })
    }
}

/// `videoSrc`: the video an attach came from (what makes `[mm:ss]` seekable).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VideoSrc {
    pub platform: String,
    pub url: String,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `failed`: the request of a user entry failed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Failed {
    pub code: String,
    pub message: String,
    pub at: i64,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `original`: what a rescue stub or a summary replaced (`{content}` as it was, any shape).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Original {
    pub content: Value,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `providerKey`: who replied. `id`: the provider card the extension used (only a reply stamped
/// with the id of one of the person's cards may switch the panel back to it, storage-model §2.2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ProviderKey {
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    #[schemars(with = "String")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    #[schemars(with = "String")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    #[schemars(with = "String")]
    pub id: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// An entry a client adds: `{role, content, …stamps}` plus any other fields, kept verbatim.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", expecting = "an entry object {role, content, …stamps}")]
pub struct NewEntry {
    pub role: Role,
    pub content: Content,
    // The stamps of storage-model §2.2, named here (not in a flattened struct) so an error in
    // one names it. Each is optional; one that is present must have its type (`null` included:
    // a stamp is there with its value or not there at all).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    #[schemars(with = "String")]
    pub entry_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    #[schemars(with = "String")]
    pub attach_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    #[schemars(with = "VideoSrc")]
    pub video_src: Option<VideoSrc>,
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    #[schemars(with = "bool")]
    pub images_seen: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    #[schemars(with = "bool")]
    pub summarized: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    #[schemars(with = "Original")]
    pub original: Option<Original>,
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    #[schemars(with = "Failed")]
    pub failed: Option<Failed>,
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    #[schemars(with = "String")]
    pub provider_label: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    #[schemars(with = "ProviderKey")]
    pub provider_key: Option<ProviderKey>,
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    #[schemars(with = "bool")]
    pub interrupted: Option<bool>,
    /// Fields the types do not name, kept as they came.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl NewEntry {
    /// The stored JSON form: `role`, `content`, the stamps, then the other fields.
    pub fn into_value(self) -> Value {
        serde_json::to_value(self).expect("an entry serializes to JSON")
    }

    /// Read a JSON entry as a client would send it (the message names the field that is wrong).
    pub fn from_value(v: Value) -> Result<NewEntry, String> {
        serde_path_to_error::deserialize(v).map_err(|e| match e.path().to_string().as_str() {
            "." => e.inner().to_string(),
            p => format!("{p}: {}", e.inner()),
        })
    }
}

/// Deserialize an optional field that, when present, must hold a `T` (`null` included: a field
/// given as `null` is refused, not read as absent). Use with `#[serde(default)]`; the typed
/// operation arguments (`server/ops`) use it too.
pub fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_entry_comes_back_as_it_was_sent() {
        let sent = json!({
            "role": "user",
            "content": [
                {"type": "text", "text": "look", "cache_control": {"type": "ephemeral"}},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA", "detail": "low"}, "originalUrl": "x"},
                {"type": "image_url", "image_url": "https://example.com/a.png"},
                {"type": "input_text", "text": "😀"},
                {"type": "audio", "data": [1, 2.5, -3]},
                7,
                null
            ],
            "zeta": {"nested": [1, {"b": null}]},
            "providerKey": {"name": "p", "model": "m", "id": "card-1", "extra": true},
            "videoSrc": {"platform": "youtube", "url": "u", "tabId": 12},
            "big": 18446744073709551615_u64,
            "float": 0.1
        });
        let e = NewEntry::from_value(sent.clone()).unwrap();
        assert_eq!(e.role, Role::User);
        assert!(matches!(&e.content, Content::Parts(p) if p.len() == 7));
        assert_eq!(e.provider_key.as_ref().unwrap().model.as_deref(), Some("m"));
        assert_eq!(e.provider_key.as_ref().unwrap().id.as_deref(), Some("card-1"));
        assert_eq!(e.extra.keys().collect::<Vec<_>>(), ["zeta", "big", "float"]);
        assert_eq!(e.into_value(), sent);
        let plain = json!({"role": "assistant", "content": "hi", "interrupted": true});
        assert_eq!(NewEntry::from_value(plain.clone()).unwrap().into_value(), plain);
    }

    #[test]
    fn a_wrong_field_is_refused_by_name() {
        let err = |v: Value| NewEntry::from_value(v).unwrap_err();
        assert!(err(json!({"role": "system", "content": "x"})).starts_with("role: unknown variant"));
        assert!(err(json!({"role": "user"})).contains("missing field `content`"));
        assert!(err(json!({"role": "user", "content": 5})).starts_with("content: "));
        let e = err(json!({"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text"}]}));
        assert!(e.starts_with("content[1]: must have a string `text`"), "{e}");
        let e = err(json!({"role": "user", "content": [{"type": "image_url", "image_url": {"u": 1}}]}));
        assert!(e.starts_with("content[0]: must have `image_url`"), "{e}");
        assert_eq!(
            err(json!({"role": "user", "content": "x", "imagesSeen": "yes"})).split(':').next(),
            Some("imagesSeen")
        );
        assert!(err(json!({"role": "user", "content": "x", "interrupted": null})).starts_with("interrupted"));
        let e = err(json!({"role": "assistant", "content": "x", "providerKey": {"name": "p", "id": 5}}));
        assert!(e.starts_with("providerKey.id"), "{e}");
        assert!(err(json!(["user", "x"])).contains("an entry object"));
    }
}
