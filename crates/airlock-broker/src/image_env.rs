//! An image run's environment: the image's under the caller's, and where a bare command is
//! looked for in it.
use std::path::PathBuf;

use crate::fs_policy;

/// The image's environment with the caller's on top (a name the caller sets replaces the
/// image's), and the default guest `PATH` when neither sets one (as container runtimes do).
pub(crate) fn merged(
    image: &[(String, String)],
    caller: &[(String, String)],
) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = image
        .iter()
        .filter(|(k, _)| !caller.iter().any(|(c, _)| c == k))
        .cloned()
        .collect();
    out.extend(caller.iter().cloned());
    if !out.iter().any(|(k, _)| k == "PATH") {
        out.insert(0, ("PATH".into(), fs_policy::GUEST_PATH.join(":")));
    }
    out
}

/// Where a bare command is looked for: the guest's `PATH` (its plain absolute entries), else
/// the default guest directories.
pub(super) fn search_path(env: &[(String, String)]) -> Vec<PathBuf> {
    let from_env: Vec<PathBuf> = env
        .iter()
        .rev()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| {
            v.split(':')
                .filter(|d| airlock_image::config::is_plain_absolute(d))
                .map(PathBuf::from)
                .collect()
        })
        .unwrap_or_default();
    if from_env.is_empty() {
        fs_policy::GUEST_PATH.iter().map(PathBuf::from).collect()
    } else {
        from_env
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_caller_env_wins_and_path_is_searched_in_order() {
        let image = vec![
            ("PATH".into(), "/opt/venv/bin:/usr/bin".into()),
            ("A".into(), "1".into()),
        ];
        let caller = vec![("A".into(), "2".into())];
        let env = merged(&image, &caller);
        assert_eq!(
            env,
            vec![
                ("PATH".into(), "/opt/venv/bin:/usr/bin".into()),
                ("A".into(), "2".into())
            ]
        );
        assert_eq!(
            search_path(&env),
            vec![PathBuf::from("/opt/venv/bin"), PathBuf::from("/usr/bin")]
        );
        assert_eq!(search_path(&[]).len(), fs_policy::GUEST_PATH.len());
        assert_eq!(merged(&[], &[])[0].1, fs_policy::GUEST_PATH.join(":"));
        let odd = vec![("PATH".into(), "relative:/a/../b".to_string())];
        assert_eq!(search_path(&odd).len(), fs_policy::GUEST_PATH.len());
    }
}
