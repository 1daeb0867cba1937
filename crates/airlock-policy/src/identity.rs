//! The authorities a workload's host tools exercise.

use crate::vocab::vocabulary;

/// An authority a host-side tool acts with. Neither is "safe": `App` is the application's full
/// authority, and least privilege comes from what a host registers, not what it declares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Identity {
    /// The application's own authority.
    App,
    /// The authority of the user the run acts for, minted per run by the host.
    User,
}

vocabulary!(Identity, "identity", {
    App => "app",
    User => "user",
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings() {
        assert_eq!("app".parse::<Identity>(), Ok(Identity::App));
        assert_eq!("user".parse::<Identity>(), Ok(Identity::User));
        assert!("admin".parse::<Identity>().is_err());
    }
}
