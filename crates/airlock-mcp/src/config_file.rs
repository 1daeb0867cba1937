//! `mcp.toml`: the upstreams section, as an alternative to repeated `--upstream` flags.
//!
//! ```toml
//! [upstreams]
//! weather = "python3 weather_server.py --units metric"   # split into words, no shell
//! github = ["npx", "-y", "@modelcontextprotocol/server-github"]
//! ```
//!
//! Parsing is strict (unknown keys and wrong types are errors) and the text is bounded.
use toml::{Table, Value};

use crate::config::{is_identifier, UpstreamSpec, MAX_UPSTREAM_NAME};
use crate::error::McpError;
use crate::words;

/// Largest accepted config file; a list of commands is a few hundred bytes.
pub const MAX_CONFIG_BYTES: usize = 64 * 1024;

fn bad(key: &str, reason: impl Into<String>) -> McpError {
    McpError::BadUpstreamSpec {
        spec: key.chars().take(200).collect(),
        reason: reason.into(),
    }
}

/// The upstreams an `mcp.toml` declares, in name order.
pub fn parse_upstreams(text: &str) -> Result<Vec<UpstreamSpec>, McpError> {
    if text.len() > MAX_CONFIG_BYTES {
        return Err(bad(
            "mcp.toml",
            format!(
                "{} bytes, above the {MAX_CONFIG_BYTES} byte cap",
                text.len()
            ),
        ));
    }
    let table: Table = text
        .parse()
        .map_err(|e: toml::de::Error| bad("mcp.toml", e.message().to_owned()))?;
    if let Some(k) = table.keys().find(|k| k.as_str() != "upstreams") {
        return Err(bad(k, "unknown key (expected: upstreams)"));
    }
    let Some(ups) = table.get("upstreams") else {
        return Ok(Vec::new());
    };
    let ups = ups
        .as_table()
        .ok_or_else(|| bad("upstreams", "must be a table"))?;
    let mut out = Vec::new();
    for (name, v) in ups {
        let key = format!("upstreams.{name}");
        if !is_identifier(name) || name.len() > MAX_UPSTREAM_NAME {
            return Err(bad(
                &key,
                "the name must be a Python identifier of at most 32 bytes",
            ));
        }
        let argv = match v {
            Value::String(s) => words::split(s).map_err(|r| bad(&key, r))?,
            Value::Array(items) => items
                .iter()
                .map(|i| i.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| bad(&key, "an array command must hold strings only"))?,
            _ => return Err(bad(&key, "must be a command string or an array of strings")),
        };
        if argv.is_empty() {
            return Err(bad(&key, "the command is empty"));
        }
        out.push(UpstreamSpec {
            name: name.clone(),
            argv,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_strings_and_arrays_strictly() {
        let got = parse_upstreams(
            "[upstreams]\nweather = \"python3 'a b.py' x\"\ngh = [\"npx\", \"-y\", \"srv\"]\n",
        )
        .unwrap();
        assert_eq!(got[0].name, "gh");
        assert_eq!(got[0].argv, vec!["npx", "-y", "srv"]);
        assert_eq!(got[1].argv, vec!["python3", "a b.py", "x"]);
        assert!(parse_upstreams("[other]\n").is_err());
        assert!(parse_upstreams("[upstreams]\n\"a.b\" = \"x\"\n").is_err());
        assert!(parse_upstreams("[upstreams]\na = 3\n").is_err());
        assert!(parse_upstreams("[upstreams]\na = []\n").is_err());
        assert!(parse_upstreams(&"#".repeat(MAX_CONFIG_BYTES + 1)).is_err());
        assert!(parse_upstreams("").unwrap().is_empty());
    }
}
