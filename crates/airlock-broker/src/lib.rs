//! The trusted side: launches one fresh executor per run, relays its tool calls, enforces time
//! and memory, captures output with caps, and turns every way a run can end into exactly one
//! [`RunResult`].
//!
//! **Architecture Invariant:** [`run`] never returns before every process of the run is gone,
//! and it always returns a result (no `Result`): refusals, crashes, protocol violations and
//! internal failures are statuses, not errors.

pub mod fs_policy;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
pub(crate) mod image_env;
pub mod interpreter;
pub mod interpreter_cache;
pub(crate) mod interpreter_facts;
pub mod interpreter_image;
pub mod kernel;
pub mod limits;
pub mod machine;
pub mod media;
mod media_more;
pub mod output;
pub mod pool;
pub(crate) mod refusal;
pub mod result;
pub mod run;
pub mod runner;
pub mod sandbox_fs;
pub(crate) mod stage;
pub(crate) mod stage_cgroup;
pub mod tools;
pub mod zygote;

pub use airlock_executor::config::GUEST_WORK_DIR;
pub use airlock_executor::DataBounds;
pub use airlock_image::Image;
pub use kernel::Kernel;
pub use limits::Limits;
pub use pool::{Pool, PoolConfig, PoolStats};
pub use result::{RunResult, RunStatus, Via, TIMEOUT_EXIT_CODE};
pub use run::{run, Restricted, RunSpec, Workload};
pub use runner::{Job, QueueRefusal, Runner, RunnerConfig};
pub use sandbox_fs::{RootSpec, SandboxFs, SandboxFsError};
pub use tools::{CommandTools, NoTools, ToolFailure, ToolHandler};
pub use zygote::{Zygote, ZygoteConfig, ZygoteError, ZygoteStats};
