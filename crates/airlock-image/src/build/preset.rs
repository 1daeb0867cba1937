//! The presets `airlock image build --preset` knows: a name and the Debian packages that make
//! the image. One list serves every builder (mmdebstrap and podman/buildah install the same
//! packages), so the same preset is the same set of packages whichever tool built it.
use crate::error::{ImageError, Result};

/// A ready-made image recipe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Preset {
    /// Its name, and the image's name by default.
    pub name: &'static str,
    /// One line on what it holds.
    pub summary: &'static str,
    /// The Debian packages installed (with their dependencies, without recommends).
    pub packages: &'static [&'static str],
}

/// python3, pip and venv, and the scientific stack a data-analysis session expects.
pub const PYTHON_DATA: Preset = Preset {
    name: "python-data",
    summary: "python3, pip, venv, numpy, pandas, matplotlib, scipy, scikit-learn (Debian)",
    packages: &[
        "python3",
        "python3-pip",
        "python3-venv",
        "python3-numpy",
        "python3-pandas",
        "python3-matplotlib",
        "python3-scipy",
        "python3-sklearn",
    ],
};

/// Every preset.
pub const PRESETS: &[Preset] = &[PYTHON_DATA];

/// The preset named `name`, or an error listing the ones there are.
pub fn preset(name: &str) -> Result<Preset> {
    PRESETS
        .iter()
        .find(|p| p.name == name)
        .copied()
        .ok_or_else(|| ImageError::UnknownPreset {
            name: name.to_owned(),
            known: names(),
        })
}

/// The presets' names, comma-separated.
#[must_use]
pub fn names() -> String {
    PRESETS
        .iter()
        .map(|p| p.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Shell run in the finished root (mmdebstrap's customize hook, a Containerfile's `RUN`):
/// pip may install (with `--user`, into the sandbox's writable home `/work`, or into a venv)
/// without `--break-system-packages`: the image is read-only and one sandbox's, so Debian's
/// PEP 668 marker protects nothing here.
pub const FINISH: &str = "rm -f /usr/lib/python3*/EXTERNALLY-MANAGED";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_data_is_found_and_an_unknown_preset_names_the_known_ones() {
        assert_eq!(preset("python-data").unwrap().name, "python-data");
        let e = preset("python-dta").unwrap_err().to_string();
        assert!(e.contains("python-dta") && e.contains("python-data"), "{e}");
    }
}
