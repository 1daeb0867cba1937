//! Generated Python for the upstream tools: the `airlock_tools` module written into each
//! `execute` run's work dir (`import airlock_tools; airlock_tools.weather.forecast(city="x")`),
//! and the list of tools in the `execute` tool's description.
//!
//! Nothing from an upstream is pasted into the Python source as code: names become
//! identifiers only when they are plain ASCII identifiers (else the tool is reachable through
//! `call_tool` only, and a function taking `**args` is generated under a sanitized name), and
//! every text (descriptions, the qualified name) is emitted as a JSON string literal, which is
//! a valid Python string literal.
use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::config::is_identifier;
use crate::pytypes;
use crate::registry::{UpstreamTool, UpstreamTools};

/// The module's file name in the work dir.
pub const MODULE_FILE: &str = "airlock_tools.py";

/// Python keywords and soft keywords that cannot be parameter or attribute names.
const KEYWORDS: &[&str] = &[
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue",
    "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import",
    "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while",
    "with", "yield",
];

/// The names a stub's body uses besides its parameters: a parameter of the same name would
/// shadow them.
const STUB_NAMES: &[&str] = &["_a", "_UNSET", "_call"];

fn usable(name: &str) -> bool {
    is_identifier(name)
        && !KEYWORDS.contains(&name)
        && !STUB_NAMES.contains(&name)
        && !name.starts_with("__")
}

/// `name` made into an identifier: every other character becomes `_`.
fn sanitize(name: &str) -> String {
    let mut s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() || s.starts_with(|c: char| c.is_ascii_digit()) || !usable(&s) {
        s.insert(0, 't');
        s.insert(1, '_');
    }
    s
}

fn lit(s: &str) -> String {
    // A JSON string literal is a valid Python string literal (same escapes, \uXXXX included).
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".to_owned())
}

fn type_of(schema: &Value) -> String {
    match &schema["type"] {
        Value::String(t) => t.clone(),
        Value::Array(ts) => ts
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(" | "),
        _ => "any".to_owned(),
    }
}

fn docstring(t: &UpstreamTool, props: &[(String, &Value)], required: &BTreeSet<&str>) -> String {
    let mut doc = String::new();
    doc.push_str(if t.description.is_empty() {
        "(no description)"
    } else {
        &t.description
    });
    doc.push_str(&format!("\n\nCalls {} through airlock.", t.qualified));
    if !props.is_empty() {
        doc.push_str("\n\nArgs:");
        for (name, schema) in props {
            let mut req = if required.contains(name.as_str()) {
                String::new()
            } else {
                ", optional".to_owned()
            };
            if let Some(d) = pytypes::default(schema) {
                req.push_str(&format!(", default {d}"));
            }
            doc.push_str(&format!("\n    {name} ({}{req})", type_of(schema)));
            if let Some(d) = schema["description"].as_str() {
                let d: String = d.chars().take(300).collect();
                doc.push_str(&format!(": {d}"));
            }
        }
    }
    doc.push_str(&format!("\n\nReturns: {}", RETURNS));
    doc
}

/// What a stub (and `call_tool`) returns, in the words of the docs.
const RETURNS: &str = "the tool's structuredContent when it has one (a {\"result\": X} wrapper \
     its outputSchema declares is unwrapped to X); else its one content block, text parsed as \
     JSON when it is JSON; else a list of the blocks.";

struct Params<'a> {
    props: Vec<(String, &'a Value)>,
    required: BTreeSet<&'a str>,
    typed: bool,
}

fn params(t: &UpstreamTool) -> Params<'_> {
    let props: Vec<(String, &Value)> = t.input_schema["properties"]
        .as_object()
        .map(|m| m.iter().map(|(k, v)| (k.clone(), v)).collect())
        .unwrap_or_default();
    let required: BTreeSet<&str> = t.input_schema["required"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let typed = props.iter().all(|(k, _)| usable(k));
    Params {
        props,
        required,
        typed,
    }
}

/// The parameter list, required ones first: `city: str, days: int = ...` (`shown_default`
/// puts the schema's default in place of `...` when it has a short scalar one).
fn param_list(p: &Params<'_>, unset: &str, shown_default: bool) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (k, s) in &p.props {
        if p.required.contains(k.as_str()) {
            out.push(format!("{k}: {}", pytypes::py_type(s)));
        }
    }
    for (k, s) in &p.props {
        if !p.required.contains(k.as_str()) {
            let d = if shown_default {
                pytypes::default(s).unwrap_or_else(|| unset.to_owned())
            } else {
                unset.to_owned()
            };
            out.push(format!("{k}: {} = {d}", pytypes::py_type(s)));
        }
    }
    out
}

/// `(city: str, days: int = 1) -> dict`, as the `execute` description shows a tool.
pub fn signature(t: &UpstreamTool) -> String {
    let p = params(t);
    let ret = pytypes::return_type(t.output_schema.as_ref())
        .map(|r| format!(" -> {r}"))
        .unwrap_or_default();
    if !p.typed {
        return format!("(**args){ret}");
    }
    format!("({}){ret}", param_list(&p, "...", true).join(", "))
}

fn function(t: &UpstreamTool, fname: &str) -> String {
    let p = params(t);
    let ret = pytypes::return_type(t.output_schema.as_ref())
        .map(|r| format!(" -> {r}"))
        .unwrap_or_default();
    let mut out = String::new();
    if p.typed && !p.props.is_empty() {
        let list = param_list(&p, "_UNSET", false).join(", ");
        out.push_str(&format!("def {fname}(*, {list}){ret}:\n"));
        out.push_str("    _a = {}\n");
        for (k, _) in &p.props {
            out.push_str(&format!(
                "    if {k} is not _UNSET:\n        _a[{}] = {k}\n",
                lit(k)
            ));
        }
        out.push_str(&format!("    return _call({}, _a)\n", lit(&t.qualified)));
    } else {
        out.push_str(&format!(
            "def {fname}(**args){ret}:\n    return _call({}, args)\n",
            lit(&t.qualified)
        ));
    }
    out.push_str(&format!(
        "{fname}.__doc__ = {}\n",
        lit(&docstring(t, &p.props, &p.required))
    ));
    out
}

/// The `airlock_tools` module for `tools`. Annotations stay strings (`from __future__ import
/// annotations`), so nothing is imported or evaluated for them.
pub fn module(tools: &UpstreamTools) -> String {
    let mut out = String::from(
        "\"\"\"Typed stubs for the upstream MCP tools airlock offers this run (generated).\n\n\
         Each function calls call_tool(\"NAME.tool\", args); failures raise ToolError with\n\
         .code, .message and .data = {code, reason, retryable}.\"\"\"\n\
         from __future__ import annotations\n\
         import builtins as _builtins\nimport types as _types\n\n\n\
         class _Unset:\n    \"\"\"An argument not given: left out of the call.\"\"\"\n\n    \
         def __repr__(self):\n        return \"...\"\n\n\n_UNSET = _Unset()\n\n\n\
         def _call(name, args):\n    return _builtins.call_tool(name, args)\n\n\n",
    );
    let mut groups: BTreeMap<&str, Vec<&UpstreamTool>> = BTreeMap::new();
    for t in tools.tools() {
        groups.entry(t.upstream.as_str()).or_default().push(t);
    }
    let mut all = Vec::new();
    for (upstream, list) in &groups {
        let mut attrs = Vec::new();
        let mut seen = BTreeSet::new();
        for t in list {
            let mut attr = sanitize(&t.tool);
            while !seen.insert(attr.clone()) {
                attr.push('_');
            }
            let fname = format!("_{upstream}__{attr}");
            out.push_str(&function(t, &fname));
            out.push('\n');
            attrs.push(format!("{attr}={fname}"));
            all.push(lit(&t.qualified));
        }
        out.push_str(&format!(
            "{upstream} = _types.SimpleNamespace({})\n\n",
            attrs.join(", ")
        ));
    }
    out.push_str(&format!("TOOLS = [{}]\n", all.join(", ")));
    out
}

/// Longest upstream description shown per tool in the `execute` description.
const LISTED_DESCRIPTION_CHARS: usize = 200;

/// The `execute` tool's description (`where_` says which sandbox runs it): how to call tools,
/// what they return, then every upstream tool with its typed signature.
pub fn execute_description(tools: &UpstreamTools, where_: &str) -> String {
    let mut d = format!(
        "Run a Python 3 program {where_}, and return its status, stdout and stderr. The \
         program can call the upstream MCP tools below with call_tool(\"NAME.tool\", {{args}}) \
         or through the generated module (`import airlock_tools; \
         airlock_tools.NAME.tool(arg=...)`, keyword arguments only; \
         help(airlock_tools.NAME.tool) shows a tool's documentation). Each returns {RETURNS} \
         A failure raises ToolError with .code, .message, .data. Write one program that makes \
         all the calls it needs and prints the combined answer."
    );
    if tools.is_empty() {
        d.push_str("\n\nNo upstream tools are configured.");
        return d;
    }
    d.push_str("\n\nUpstream tools (`= ...`: optional, left out when not given):");
    for t in tools.tools() {
        let first: String = t
            .description
            .lines()
            .next()
            .unwrap_or("")
            .chars()
            .take(LISTED_DESCRIPTION_CHARS)
            .collect();
        d.push_str(&format!("\n- {}{}: {first}", t.qualified, signature(t)));
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_are_sanitized() {
        assert_eq!(sanitize("get-weather"), "get_weather");
        assert_eq!(sanitize("class"), "t_class");
        assert_eq!(sanitize("9lives"), "t_9lives");
        assert_eq!(sanitize("__init__"), "t___init__");
        assert!(usable(&sanitize("a b\"c")));
    }

    /// Found by the `mcp_upstream_reply` fuzz target: a property named like a name the stub's
    /// body uses became a parameter shadowing it (`_a` lost the argument and sent a dict
    /// holding itself, `_UNSET` dropped it, `_call` made the call fail).
    #[test]
    fn parameters_never_shadow_the_stubs_own_names() {
        for name in ["_a", "_UNSET", "_call"] {
            let t = UpstreamTool {
                qualified: "up.t".into(),
                upstream: "up".into(),
                tool: "t".into(),
                description: String::new(),
                input_schema: serde_json::json!({"properties": {name: {"type": "string"}}}),
                output_schema: None,
            };
            assert_eq!(signature(&t), "(**args)", "{name}");
            assert!(function(&t, "_up__t").starts_with("def _up__t(**args):\n"));
        }
    }

    #[test]
    fn literals_cannot_break_out() {
        let s = lit("\"\"\"\n__import__('os')\\");
        assert!(s.starts_with('"') && s.ends_with('"'));
        assert!(!s.contains('\n'));
    }
}
