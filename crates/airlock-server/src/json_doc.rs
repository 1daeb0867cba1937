//! A JSON document one part of the server carries for another without reading it: the
//! request a sandbox was made from (kept in its paused record and its snapshots' manifests, so
//! the face that wrote it can make the sandbox again) and a declared tool's JSON Schema. The
//! registry holds these as it holds bytes; only a face or the store reads inside.
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// An opaque JSON document (serialized as the document itself).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct JsonDoc(pub Value);

impl JsonDoc {
    /// The document without its top-level member `name` (a branch's request loses its key).
    #[must_use]
    pub fn without(&self, name: &str) -> JsonDoc {
        let mut v = self.0.clone();
        if let Some(o) = v.as_object_mut() {
            o.remove(name);
        }
        JsonDoc(v)
    }
}
