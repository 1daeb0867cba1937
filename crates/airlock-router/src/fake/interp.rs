//! The fake's emulated commands and Python statements: small, exact, and honest about what
//! they cannot do (anything else is "command not found" or an unsupported statement).

/// Parses a Python string literal (`"..."` or `'...'`, with `\n \t \\ \" \'` escapes) that
/// makes up all of `s`.
pub(crate) fn string_literal(s: &str) -> Option<String> {
    let s = s.trim();
    let quote = s.chars().next().filter(|c| *c == '"' || *c == '\'')?;
    let body = s.strip_prefix(quote)?.strip_suffix(quote)?;
    let mut out = String::new();
    let mut chars = body.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next()? {
                'n' => out.push('\n'),
                't' => out.push('\t'),
                other @ ('\\' | '"' | '\'') => out.push(other),
                _ => return None,
            },
            c if c == quote => return None,
            c => out.push(c),
        }
    }
    Some(out)
}

/// One statement the fake interpreter understands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Stmt {
    Nothing,
    Print(String),
    Stderr(String),
    Exit(i32),
    Spin,
    WriteFile(String, String),
}

/// Parses one line of a program.
pub(crate) fn statement(line: &str) -> Option<Stmt> {
    let l = line.trim();
    if l.is_empty() || l.starts_with('#') || l == "import sys" || l == "pass" {
        return Some(Stmt::Nothing);
    }
    if l == "while True: pass" {
        return Some(Stmt::Spin);
    }
    if let Some(arg) = l.strip_prefix("print(").and_then(|r| r.strip_suffix(')')) {
        return string_literal(arg).map(Stmt::Print);
    }
    if let Some(arg) = l
        .strip_prefix("sys.stderr.write(")
        .and_then(|r| r.strip_suffix(')'))
    {
        return string_literal(arg).map(Stmt::Stderr);
    }
    if let Some(arg) = l
        .strip_prefix("raise SystemExit(")
        .and_then(|r| r.strip_suffix(')'))
    {
        return arg.trim().parse().ok().map(Stmt::Exit);
    }
    if let Some(rest) = l.strip_prefix("open(") {
        let (path, rest) = rest.split_once(", \"w\").write(")?;
        let data = rest.strip_suffix(')')?;
        return Some(Stmt::WriteFile(
            string_literal(path)?,
            string_literal(data)?,
        ));
    }
    None
}

/// The host of a URL (`scheme://host[:port][/...]`).
pub(crate) fn url_host(url: &str) -> Option<&str> {
    let rest = url.split_once("://")?.1;
    let authority = rest.split(['/', '?', '#']).next()?;
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = host.split(':').next()?;
    (!host.is_empty()).then_some(host)
}

/// Whether `host` is named by the allowlist (exactly, or under a `*.` entry).
pub(crate) fn allowed(host: &str, allow: &[String]) -> bool {
    let host = host.to_ascii_lowercase();
    allow.iter().any(|entry| {
        let entry = entry.to_ascii_lowercase();
        match entry.strip_prefix("*.") {
            Some(suffix) => host.ends_with(&format!(".{suffix}")),
            None => host == entry,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_and_statements() {
        assert_eq!(string_literal(r#""a\nb""#).as_deref(), Some("a\nb"));
        assert_eq!(string_literal("'x'").as_deref(), Some("x"));
        assert_eq!(string_literal("\"a\"b\""), None);
        assert_eq!(statement("print(\"hi\")"), Some(Stmt::Print("hi".into())));
        assert_eq!(statement("raise SystemExit(3)"), Some(Stmt::Exit(3)));
        assert_eq!(statement("os.system('x')"), None);
        assert_eq!(
            statement("open(\"o.txt\", \"w\").write(\"d\")"),
            Some(Stmt::WriteFile("o.txt".into(), "d".into()))
        );
    }

    #[test]
    fn hosts_and_allowlists() {
        assert_eq!(url_host("https://pypi.org/simple"), Some("pypi.org"));
        assert_eq!(url_host("http://u@h.example:8080/x"), Some("h.example"));
        let allow = vec!["pypi.org".to_owned(), "*.example.com".to_owned()];
        assert!(allowed("pypi.org", &allow));
        assert!(allowed("a.example.com", &allow));
        assert!(!allowed("example.com", &allow));
        assert!(!allowed("evil-pypi.org", &allow));
    }
}
