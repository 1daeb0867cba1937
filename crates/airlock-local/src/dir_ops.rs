//! A sandbox's files made and moved in place: `files.make_dir` and `files.rename` (issue 40),
//! beside the `Sandbox` trait's file ops and by the same no-follow walks (`crate::files`).
use airlock_policy::GuestRelPath;
use airlock_router::SandboxError;

use crate::files;
use crate::sandbox::LocalSandbox;

impl LocalSandbox {
    /// Makes the directory `path` beneath `working_directory` (each missing parent too with
    /// `parents`); `Ok(false)` when a directory is already there.
    pub async fn make_dir(
        &self,
        working_directory: &str,
        path: &GuestRelPath,
        parents: bool,
    ) -> Result<bool, SandboxError> {
        let rel = self.rel_path(working_directory, path)?;
        self.blocking(move |root| files::make_dir(root, &rel, parents))
            .await
    }

    /// Renames `from` to `to`, both beneath `working_directory` (a file at `to` is replaced).
    pub async fn rename(
        &self,
        working_directory: &str,
        from: &GuestRelPath,
        to: &GuestRelPath,
    ) -> Result<(), SandboxError> {
        let from = self.rel_path(working_directory, from)?;
        let to = self.rel_path(working_directory, to)?;
        self.blocking(move |root| files::rename(root, &from, &to))
            .await
    }
}
