//! The exception a program raised, as the guest reports it (untrusted: every part bounded).
use serde::Deserialize;

use crate::result::Exception;

/// Characters of the class name kept.
pub const MAX_NAME: usize = 256;
/// Characters of the exception's text kept.
pub const MAX_VALUE: usize = 4096;
/// Bytes (UTF-8) of the traceback kept (its first line and as many of its last as fit).
pub const MAX_TRACEBACK: usize = 64 * 1024;
/// Lines of the traceback kept.
pub const MAX_LINES: usize = 1024;

/// An exception the guest reports.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
pub struct HintError {
    /// Exception class name.
    #[serde(default, rename = "type")]
    pub kind: String,
    /// Exception text.
    #[serde(default)]
    pub message: String,
    /// The traceback's lines.
    #[serde(default)]
    pub traceback: Vec<String>,
}

/// The structured error of a raised exception; None for `SystemExit` (an exit, not an error
/// to show) and for a report with no class name.
pub(crate) fn of(e: &HintError) -> Option<Exception> {
    if e.kind.is_empty() || e.kind == "SystemExit" {
        return None;
    }
    Some(Exception {
        name: cut(&e.kind, MAX_NAME),
        value: cut(&e.message, MAX_VALUE),
        traceback: tail(&e.traceback),
    })
}

fn cut(s: &str, max: usize) -> String {
    s.chars().take(max).collect()
}

/// At most `max` bytes of `s`, cut at a character boundary.
fn cut_bytes(s: &str, max: usize) -> String {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}

/// The first line, then the last lines that fit the caps, with a line saying how many went.
fn tail(lines: &[String]) -> Vec<String> {
    let Some((first, rest)) = lines.split_first() else {
        return Vec::new();
    };
    // Bytes, not characters, on both sides: a line of 4-byte characters is 4x its length.
    let first = cut_bytes(first, MAX_TRACEBACK / 2);
    let mut left = MAX_TRACEBACK.saturating_sub(first.len());
    let mut kept: Vec<String> = Vec::new();
    for line in rest.iter().rev() {
        if line.len() > left || kept.len() + 2 >= MAX_LINES {
            break;
        }
        left -= line.len();
        kept.push(line.clone());
    }
    let skipped = rest.len() - kept.len();
    let mut out = vec![first];
    if skipped > 0 {
        out.push(format!("  ... ({skipped} lines left out)\n"));
    }
    out.extend(kept.into_iter().rev());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hint(kind: &str, lines: Vec<String>) -> HintError {
        HintError {
            kind: kind.into(),
            message: "m".repeat(MAX_VALUE + 5),
            traceback: lines,
        }
    }

    #[test]
    fn a_raised_exception_is_kept_and_an_exit_is_not() {
        let lines = vec!["Traceback\n".to_string(), "ValueError: m\n".to_string()];
        let e = of(&hint("ValueError", lines.clone())).unwrap();
        assert_eq!((e.name.as_str(), e.value.len()), ("ValueError", MAX_VALUE));
        assert_eq!(e.traceback, lines);
        assert!(of(&hint("SystemExit", lines.clone())).is_none());
        assert!(of(&hint("", lines)).is_none());
    }

    #[test]
    fn a_long_traceback_keeps_its_head_and_tail_within_the_caps() {
        let mut lines = vec!["Traceback (most recent call last):\n".to_string()];
        lines.extend((0..5000).map(|i| format!("  File \"x\", line {i}\n")));
        lines.push("RecursionError: deep\n".into());
        let t = of(&hint("RecursionError", lines)).unwrap().traceback;
        assert!(t.len() <= MAX_LINES, "{}", t.len());
        assert!(t.iter().map(String::len).sum::<usize>() <= MAX_TRACEBACK + 64);
        assert_eq!(t[0], "Traceback (most recent call last):\n");
        assert!(t[1].contains("lines left out"), "{}", t[1]);
        assert_eq!(t.last().unwrap(), "RecursionError: deep\n");
    }

    /// The red team's line: a first line of 4-byte characters longer than the whole cap (a
    /// chained cause that was never raised prints no "Traceback" header first).
    #[test]
    fn a_first_line_of_wide_characters_stays_within_the_byte_cap() {
        let wide = format!("ValueError: {}\n", "\u{1F600}".repeat(20_000));
        let lines = vec![
            wide,
            "\nThe above exception was the direct cause\n".into(),
            "RuntimeError: x\n".into(),
        ];
        let t = of(&hint("RuntimeError", lines)).unwrap().traceback;
        assert!(t.iter().map(String::len).sum::<usize>() <= MAX_TRACEBACK + 64);
        assert!(t[0].len() <= MAX_TRACEBACK / 2 && t[0].starts_with("ValueError: \u{1F600}"));
        assert_eq!(t.last().unwrap(), "RuntimeError: x\n");
    }
}
