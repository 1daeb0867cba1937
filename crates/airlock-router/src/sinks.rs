//! Where landing artifacts go: the [`OutputSink`] interface, its errors, and an in-memory
//! sink.
//!
//! The policy layer holds no opinion about the destination (a directory, a blob container, a
//! UI panel); a sink owns the confinement question for its own destination. The file-system
//! sink, which answers it with no-follow primitives, is `airlock_local::sink::FileSystemSink`.
//! Sink errors name the artifact, never a host path, because they reach the model.

use std::sync::Mutex;

use async_trait::async_trait;
use thiserror::Error;

use crate::names::ArtifactName;
use crate::observe::ErrorKind;

/// What a collected output is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Disposition {
    /// Delivered to the sink (the question is confidentiality).
    Land,
    /// Returned to the kind that asked for it, to parse (the question is integrity).
    Consume,
}

/// One output's bytes, ready to deliver or consume.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Artifact {
    /// The spelling it lands under.
    pub name: ArtifactName,
    /// The declared (never sniffed) media type.
    pub media_type: String,
    /// Its exact bytes.
    pub bytes: Vec<u8>,
    /// Land or consume.
    pub disposition: Disposition,
}

/// What a sink did with an artifact.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LandedArtifact {
    /// The name it landed under.
    pub name: ArtifactName,
    /// The declared media type.
    pub media_type: String,
    /// Bytes delivered.
    pub size: u64,
    /// The one line the model may see.
    pub display: String,
    /// The host's own reference (never rendered into the transcript).
    pub handle: String,
}

/// A delivery that did not land. Messages name the artifact only.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum SinkError {
    /// The destination would leave the sink's root (a link or non-directory in the way).
    #[error("artifact {name:?} cannot land: its destination is not confined to the output root")]
    NotConfined {
        /// The artifact.
        name: String,
    },
    /// Something already occupies the destination (and the sink does not replace).
    #[error("artifact {name:?} cannot land: the destination already exists")]
    Exists {
        /// The artifact.
        name: String,
    },
    /// The destination refused the bytes.
    #[error("artifact {name:?} cannot land: {reason}")]
    Refused {
        /// The artifact.
        name: String,
        /// Why, without a host path.
        reason: String,
    },
}

impl ErrorKind for SinkError {
    fn kind(&self) -> &'static str {
        match self {
            SinkError::NotConfined { .. } => "SandboxLandingNotConfined",
            SinkError::Exists { .. } => "SandboxLandingExists",
            SinkError::Refused { .. } => "SandboxLandingRefused",
        }
    }
}

/// A destination for landing artifacts.
#[async_trait]
pub trait OutputSink: Send + Sync {
    /// Delivers one artifact: a push nothing can take back.
    async fn deliver(&self, artifact: &Artifact) -> Result<LandedArtifact, SinkError>;
}

/// Keeps delivered artifacts in memory (tests, hosts that hand bytes on themselves). Refuses
/// a name already delivered, by collision key.
#[derive(Debug, Default)]
pub struct MemorySink {
    delivered: Mutex<Vec<Artifact>>,
}

impl MemorySink {
    /// An empty sink.
    #[must_use]
    pub fn new() -> MemorySink {
        MemorySink::default()
    }

    /// Everything delivered, in order.
    #[must_use]
    pub fn delivered(&self) -> Vec<Artifact> {
        self.delivered
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

#[async_trait]
impl OutputSink for MemorySink {
    async fn deliver(&self, artifact: &Artifact) -> Result<LandedArtifact, SinkError> {
        let mut d = self
            .delivered
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let key = artifact.name.collision_key();
        if d.iter().any(|a| a.name.collision_key() == key) {
            return Err(SinkError::Exists {
                name: artifact.name.to_string(),
            });
        }
        d.push(artifact.clone());
        Ok(LandedArtifact {
            name: artifact.name.clone(),
            media_type: artifact.media_type.clone(),
            size: artifact.bytes.len() as u64,
            display: format!(
                "{} ({}, {} bytes)",
                artifact.name,
                artifact.media_type,
                artifact.bytes.len()
            ),
            handle: format!("memory:{}", d.len() - 1),
        })
    }
}
