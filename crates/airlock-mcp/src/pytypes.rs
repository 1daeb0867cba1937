//! JSON Schema as Python type hints, for the typed stubs and the `execute` description.
//!
//! Everything produced here is built from a fixed vocabulary (`str`, `int`, `float`, `bool`,
//! `list[...]`, `dict`, `None`, `Any`) and, for enums and defaults, JSON literals (a JSON
//! string or number literal is a valid Python literal), so nothing an upstream sends becomes
//! Python code. Output is bounded (depth, enum size, literal length).
use serde_json::Value;

/// Longest default or enum literal shown.
const MAX_LITERAL: usize = 40;
/// Most enum values shown as a `Literal[...]`.
const MAX_ENUM: usize = 8;

fn literal(v: &Value) -> Option<String> {
    let s = match v {
        Value::Null => "None".to_owned(),
        Value::Bool(true) => "True".to_owned(),
        Value::Bool(false) => "False".to_owned(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => serde_json::to_string(s).ok()?,
        _ => return None,
    };
    (s.len() <= MAX_LITERAL).then_some(s)
}

fn named(t: &str, schema: &Value, depth: usize) -> String {
    match t {
        "string" => "str".to_owned(),
        "integer" => "int".to_owned(),
        "number" => "float".to_owned(),
        "boolean" => "bool".to_owned(),
        "null" => "None".to_owned(),
        "object" => "dict".to_owned(),
        "array" => match schema.get("items") {
            Some(items) if items.is_object() && depth < 2 => {
                format!("list[{}]", py_type_at(items, depth + 1))
            }
            _ => "list".to_owned(),
        },
        _ => "Any".to_owned(),
    }
}

fn union(parts: Vec<String>) -> String {
    let mut seen: Vec<String> = Vec::new();
    for p in parts {
        if !seen.contains(&p) {
            seen.push(p);
        }
    }
    if seen.iter().any(|p| p == "Any") || seen.is_empty() {
        return "Any".to_owned();
    }
    seen.join(" | ")
}

fn py_type_at(schema: &Value, depth: usize) -> String {
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        let lits: Option<Vec<String>> = values.iter().map(literal).collect();
        if let Some(lits) = lits.filter(|l| !l.is_empty() && l.len() <= MAX_ENUM) {
            return format!("Literal[{}]", lits.join(", "));
        }
    }
    match schema.get("type") {
        Some(Value::String(t)) => named(t, schema, depth),
        Some(Value::Array(ts)) => union(
            ts.iter()
                .filter_map(Value::as_str)
                .map(|t| named(t, schema, depth))
                .collect(),
        ),
        _ => {
            let alts = schema
                .get("anyOf")
                .or_else(|| schema.get("oneOf"))
                .and_then(Value::as_array);
            match alts {
                Some(a) if depth < 2 => union(a.iter().map(|s| py_type_at(s, depth + 1)).collect()),
                _ => "Any".to_owned(),
            }
        }
    }
}

/// The Python type hint for a property's schema.
pub fn py_type(schema: &Value) -> String {
    py_type_at(schema, 0)
}

/// The schema's `default`, as a Python literal, when it is a short scalar.
pub fn default(schema: &Value) -> Option<String> {
    schema.get("default").and_then(literal)
}

/// When an output schema is an SDK's wrapper of a non-object return (one required property
/// `result`, e.g. FastMCP's `x-fastmcp-wrap-result`), the wrapped value's schema.
pub fn wrapped_result(output_schema: &Value) -> Option<&Value> {
    let props = output_schema.get("properties")?.as_object()?;
    if props.len() != 1 {
        return None;
    }
    props.get("result")
}

/// The return type hint for a tool's output schema (None when it declares none).
pub fn return_type(output_schema: Option<&Value>) -> Option<String> {
    let s = output_schema?;
    Some(match wrapped_result(s) {
        Some(inner) => py_type(inner),
        None => "dict".to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn schemas_become_hints() {
        assert_eq!(py_type(&json!({"type": "string"})), "str");
        assert_eq!(py_type(&json!({"type": ["integer", "null"]})), "int | None");
        assert_eq!(
            py_type(&json!({"type": "array", "items": {"type": "number"}})),
            "list[float]"
        );
        assert_eq!(
            py_type(&json!({"enum": ["c", "f"]})),
            "Literal[\"c\", \"f\"]"
        );
        assert_eq!(
            py_type(&json!({"anyOf": [{"type": "string"}, {"type": "null"}]})),
            "str | None"
        );
        assert_eq!(py_type(&json!({})), "Any");
        assert_eq!(default(&json!({"default": true})).as_deref(), Some("True"));
        assert_eq!(
            default(&json!({"default": "a\"\n"})).as_deref(),
            Some("\"a\\\"\\n\"")
        );
        assert_eq!(default(&json!({"default": [1]})), None);
        let wrapped = json!({"type": "object", "properties": {"result": {"type": "integer"}},
                             "required": ["result"], "x-fastmcp-wrap-result": true});
        assert_eq!(return_type(Some(&wrapped)).as_deref(), Some("int"));
        assert_eq!(
            return_type(Some(&json!({"type": "object"}))).as_deref(),
            Some("dict")
        );
        assert_eq!(return_type(None), None);
    }
}
