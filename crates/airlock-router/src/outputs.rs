//! Declared outputs and [`collect_outputs`]: the pull surface, in a fixed phase order.
//!
//! A [`DeclaredOutput`] names one artifact by a literal path relative to the work dir (never
//! a glob: enumerating is `files_list`'s job), with a declared media type (never sniffed),
//! required or optional, to land or to consume. Collection runs four phases and the order is
//! the contract:
//!
//! 1. **Declaration**, with zero sandbox calls: at most `max_files` outputs, a valid name for
//!    every output, a sink when anything lands, no two landing names colliding (by case or
//!    Unicode form).
//! 2. **Stat and cap** every output: a required one missing, a size the backend cannot state,
//!    a directory, a file over `max_bytes_per_file`, or a running total over
//!    `max_total_bytes` is refused here, before a byte is read.
//! 3. **Read** every present output with the per-file cap as the bound, and re-check every cap
//!    against the bytes actually read (a file that changed since its stat is refused).
//! 4. **Deliver** the landing ones, in declaration order. Delivery is a push nothing can take
//!    back, so nothing is delivered until every earlier phase passed.
//!
//! A consumed output counts against every cap: `files_out` bounds the collection the
//! workload declared, not the part of it that lands. Each failure is its own error naming the
//! cap and the file.

use airlock_policy::{GuestRelPath, SandboxKey, SandboxSpec, TransferField, TransferLimits};
use thiserror::Error;

use crate::names::{validate_artifact_name, ArtifactName, NameError};
use crate::observe::{ErrorKind, Observers, OutputsCollected};
use crate::sandbox::{Sandbox, SandboxError};
use crate::sinks::{Artifact, Disposition, LandedArtifact, OutputSink, SinkError};

/// One artifact a workload declares it produces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeclaredOutput {
    /// Literal path relative to the work dir.
    pub path: GuestRelPath,
    /// The spelling it lands under; `None` is the path.
    pub name: Option<String>,
    /// The declared media type.
    pub media_type: String,
    /// Whether an absence is an error.
    pub required: bool,
    /// Land or consume.
    pub disposition: Disposition,
}

impl DeclaredOutput {
    /// A required, landing output at `path`, named as its path.
    #[must_use]
    pub fn new(path: GuestRelPath, media_type: impl Into<String>) -> DeclaredOutput {
        DeclaredOutput {
            path,
            name: None,
            media_type: media_type.into(),
            required: true,
            disposition: Disposition::Land,
        }
    }
    /// An absence is normal.
    #[must_use]
    pub fn optional(mut self) -> Self {
        self.required = false;
        self
    }
    /// Lands under `name` rather than the path.
    #[must_use]
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }
    /// Returned to the caller to parse, not delivered.
    #[must_use]
    pub fn consume(mut self) -> Self {
        self.disposition = Disposition::Consume;
        self
    }
    fn raw_name(&self) -> &str {
        self.name.as_deref().unwrap_or(self.path.as_str())
    }
}

/// What became of one declared output, in declaration order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Collected {
    /// Delivered to the sink.
    Landed(LandedArtifact),
    /// Read and handed back to parse.
    Consumed(Artifact),
    /// An optional output that was not there.
    Absent {
        /// Its name.
        name: ArtifactName,
    },
}

/// A collection that did not complete.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum CollectError {
    /// An output's name is not a valid artifact name.
    #[error("output name {name:?} is invalid: {reason}")]
    InvalidName {
        /// The name as declared.
        name: String,
        /// Why.
        reason: NameError,
    },
    /// Two landing names would be one file at the destination.
    #[error("artifact names {first:?} and {second:?} collide (identical, or differing only by case or Unicode form)")]
    NameCollision {
        /// The earlier one.
        first: String,
        /// The later one.
        second: String,
    },
    /// Something lands and no sink was given.
    #[error("output {name:?} lands, and no sink was given")]
    NoSink {
        /// The first landing output.
        name: String,
    },
    /// A transfer cap was exceeded.
    #[error("{cap} ({limit}) exceeded by {file:?}: {value}")]
    CapExceeded {
        /// Which cap.
        cap: TransferField,
        /// The file that breached it.
        file: String,
        /// The value that breached it (a size, a running total, or a count).
        value: u64,
        /// The cap.
        limit: u64,
    },
    /// A required output was not there.
    #[error("required output {file:?} is missing")]
    Missing {
        /// Its name.
        file: String,
    },
    /// The backend could not say how large an output is (or it is not a plain file).
    #[error("the size of output {file:?} is unknown")]
    SizeUnknown {
        /// Its name.
        file: String,
    },
    /// The output is a directory.
    #[error("output {file:?} is a directory, not a file")]
    NotAFile {
        /// Its name.
        file: String,
    },
    /// The bytes read differ in size from what stat reported.
    #[error("output {file:?} changed while it was collected ({stat} bytes at stat, {read} read)")]
    Changed {
        /// Its name.
        file: String,
        /// Size at stat.
        stat: u64,
        /// Bytes read.
        read: u64,
    },
    /// The sandbox failed on one output.
    #[error("output {file:?}: {source}")]
    Sandbox {
        /// Its name.
        file: String,
        /// What the sandbox said.
        source: SandboxError,
    },
    /// A delivery failed; `landed` lists what landed before it (it stays landed).
    #[error("{source}")]
    Landing {
        /// What the sink said.
        source: SinkError,
        /// What landed before the failure, in order.
        landed: Vec<LandedArtifact>,
    },
}

impl ErrorKind for CollectError {
    fn kind(&self) -> &'static str {
        match self {
            CollectError::InvalidName { .. } => "SandboxArtifactNameInvalid",
            CollectError::NameCollision { .. } => "SandboxArtifactNameCollision",
            CollectError::NoSink { .. } => "SandboxOutputNoSink",
            CollectError::CapExceeded { .. } => "SandboxTransferCapExceeded",
            CollectError::Missing { .. } => "SandboxOutputMissing",
            CollectError::SizeUnknown { .. } => "SandboxOutputSizeUnknown",
            CollectError::NotAFile { .. } => "SandboxOutputNotAFile",
            CollectError::Changed { .. } => "SandboxOutputChanged",
            CollectError::Sandbox { source, .. } => source.kind(),
            CollectError::Landing { source, .. } => source.kind(),
        }
    }
}

/// Where and how to collect.
#[derive(Debug, Clone, Copy, Default)]
pub struct CollectContext<'a> {
    /// The observers to tell (`OutputsCollected`), if any.
    pub observers: Option<&'a Observers>,
    /// The sandbox's key, for the record.
    pub key: Option<&'a SandboxKey>,
}

/// Collects `outputs` from `sandbox` under `spec`'s work dir and `files_out` caps, landing the
/// landing ones in `sink` (see the module docs for the phase order).
pub async fn collect_outputs(
    sandbox: &dyn Sandbox,
    spec: &SandboxSpec,
    outputs: &[DeclaredOutput],
    sink: Option<&dyn OutputSink>,
    ctx: CollectContext<'_>,
) -> Result<Vec<Collected>, CollectError> {
    let result = collect(sandbox, spec.work_dir(), spec.files_out(), outputs, sink).await;
    if let Some(obs) = ctx.observers {
        obs.emit(
            || {
                let (count, bytes) = match &result {
                    Ok(items) => items.iter().fold((0, 0), |(c, b), i| match i {
                        Collected::Landed(l) => (c + 1, b + l.size),
                        Collected::Consumed(_) | Collected::Absent { .. } => (c, b),
                    }),
                    Err(CollectError::Landing { landed, .. }) => {
                        (landed.len(), landed.iter().map(|l| l.size).sum())
                    }
                    Err(_) => (0, 0),
                };
                OutputsCollected {
                    key: ctx.key.cloned(),
                    count,
                    bytes,
                    failure: result.as_ref().err().map(ErrorKind::kind),
                }
            },
            |o, e| o.outputs_collected(e),
        );
    }
    result
}

fn cap(cap: TransferField, file: &ArtifactName, value: u64, limit: u64) -> CollectError {
    CollectError::CapExceeded {
        cap,
        file: file.to_string(),
        value,
        limit,
    }
}

/// Charge one file of `size` bytes against the per-file and total byte caps (the same check for
/// the stat'ed sizes of phase 2 and the bytes actually read in phase 3).
fn charge(
    limits: &TransferLimits,
    name: &ArtifactName,
    size: u64,
    total: &mut u64,
) -> Result<(), CollectError> {
    if size > limits.max_bytes_per_file {
        return Err(cap(
            TransferField::MaxBytesPerFile,
            name,
            size,
            limits.max_bytes_per_file,
        ));
    }
    *total = total.saturating_add(size);
    if *total > limits.max_total_bytes {
        return Err(cap(
            TransferField::MaxTotalBytes,
            name,
            *total,
            limits.max_total_bytes,
        ));
    }
    Ok(())
}

/// Phase 1: everything the declaration alone decides.
fn declaration_checks(
    outputs: &[DeclaredOutput],
    limits: &TransferLimits,
    sink: bool,
) -> Result<Vec<ArtifactName>, CollectError> {
    let mut names = Vec::with_capacity(outputs.len().min(1024));
    for (i, o) in outputs.iter().enumerate() {
        let name =
            validate_artifact_name(o.raw_name()).map_err(|reason| CollectError::InvalidName {
                name: o.raw_name().chars().take(300).collect(),
                reason,
            })?;
        let count = i as u64 + 1;
        if count > limits.max_files {
            return Err(cap(TransferField::MaxFiles, &name, count, limits.max_files));
        }
        if o.disposition == Disposition::Land && !sink {
            return Err(CollectError::NoSink {
                name: name.to_string(),
            });
        }
        names.push(name);
    }
    let mut seen = std::collections::HashMap::new();
    for (o, n) in outputs.iter().zip(&names) {
        if o.disposition != Disposition::Land {
            continue;
        }
        if let Some(first) = seen.insert(n.collision_key(), n) {
            return Err(CollectError::NameCollision {
                first: first.to_string(),
                second: n.to_string(),
            });
        }
    }
    Ok(names)
}

async fn collect(
    sandbox: &dyn Sandbox,
    work_dir: &str,
    limits: &TransferLimits,
    outputs: &[DeclaredOutput],
    sink: Option<&dyn OutputSink>,
) -> Result<Vec<Collected>, CollectError> {
    let names = declaration_checks(outputs, limits, sink.is_some())?;
    let sandbox_err = |name: &ArtifactName, source| CollectError::Sandbox {
        file: name.to_string(),
        source,
    };

    // Phase 2: stat and cap everything.
    let mut sizes: Vec<Option<u64>> = Vec::with_capacity(outputs.len());
    let mut total: u64 = 0;
    for (o, name) in outputs.iter().zip(&names) {
        let st = sandbox
            .stat(work_dir, &o.path)
            .await
            .map_err(|e| sandbox_err(name, e))?;
        let Some(st) = st else {
            if o.required {
                return Err(CollectError::Missing {
                    file: name.to_string(),
                });
            }
            sizes.push(None);
            continue;
        };
        if st.is_dir {
            return Err(CollectError::NotAFile {
                file: name.to_string(),
            });
        }
        let size = st.size.ok_or_else(|| CollectError::SizeUnknown {
            file: name.to_string(),
        })?;
        charge(limits, name, size, &mut total)?;
        sizes.push(Some(size));
    }

    // Phase 3: read, re-checking every cap against the bytes actually read.
    let mut read_total: u64 = 0;
    let mut items: Vec<Option<Artifact>> = Vec::with_capacity(outputs.len());
    for ((o, name), size) in outputs.iter().zip(&names).zip(&sizes) {
        let Some(size) = *size else {
            items.push(None);
            continue;
        };
        let bytes = match sandbox
            .read_file(work_dir, &o.path, limits.max_bytes_per_file)
            .await
        {
            Ok(b) => b,
            Err(SandboxError::TooLarge { size, .. }) => {
                return Err(cap(
                    TransferField::MaxBytesPerFile,
                    name,
                    size,
                    limits.max_bytes_per_file,
                ))
            }
            Err(SandboxError::NotFound { .. }) => {
                // Removed since its stat: still an absence, but not one to paper over.
                return Err(CollectError::Changed {
                    file: name.to_string(),
                    stat: size,
                    read: 0,
                });
            }
            Err(e) => return Err(sandbox_err(name, e)),
        };
        let got = bytes.len() as u64;
        charge(limits, name, got, &mut read_total)?;
        if got != size {
            return Err(CollectError::Changed {
                file: name.to_string(),
                stat: size,
                read: got,
            });
        }
        items.push(Some(Artifact {
            name: name.clone(),
            media_type: o.media_type.clone(),
            bytes,
            disposition: o.disposition,
        }));
    }

    // Phase 4: deliver, in declaration order.
    let mut out = Vec::with_capacity(items.len());
    let mut landed = Vec::new();
    for (item, name) in items.into_iter().zip(names) {
        match item {
            None => out.push(Collected::Absent { name }),
            Some(a) if a.disposition == Disposition::Consume => out.push(Collected::Consumed(a)),
            Some(a) => {
                let Some(sink) = sink else {
                    return Err(CollectError::NoSink {
                        name: name.to_string(),
                    });
                };
                match sink.deliver(&a).await {
                    Ok(l) => {
                        landed.push(l.clone());
                        out.push(Collected::Landed(l));
                    }
                    Err(source) => return Err(CollectError::Landing { source, landed }),
                }
            }
        }
    }
    Ok(out)
}
