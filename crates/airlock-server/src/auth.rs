//! Bearer-token authentication of the WebSocket upgrade.
//!
//! The token is compared in constant time (for a given length; the length itself is not
//! treated as secret). A connection without `Authorization: Bearer <token>`, with two such
//! headers, or with the wrong token is refused with HTTP 401 before the upgrade, so an
//! unauthenticated peer never reaches the JSON-RPC layer.
use std::path::Path;

use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::http::{header, StatusCode};

/// Longest token file read (a token is a line; anything bigger is not one).
const MAX_TOKEN_FILE: u64 = 4096;
/// Shortest token accepted: anything shorter can be guessed.
pub const MIN_TOKEN_LEN: usize = 16;

/// Who may connect.
#[derive(Clone)]
pub enum Auth {
    /// Requests must carry this bearer token.
    Bearer(Vec<u8>),
    /// Anyone who can reach the socket may run code. Dangerous; only for tests on loopback.
    DangerousNoAuth,
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Auth::Bearer(_) => f.write_str("Auth::Bearer(<redacted>)"),
            Auth::DangerousNoAuth => f.write_str("Auth::DangerousNoAuth"),
        }
    }
}

/// Why a token could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// The file could not be read.
    #[error("token file {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The failure.
        source: std::io::Error,
    },
    /// Too short, too long, or with characters a header cannot carry.
    #[error("token is unusable: {0}")]
    Unusable(String),
}

impl Auth {
    /// A bearer token given as text (surrounding whitespace is ignored).
    pub fn bearer(token: &str) -> Result<Auth, TokenError> {
        let token = token.trim();
        if token.len() < MIN_TOKEN_LEN {
            return Err(TokenError::Unusable(format!(
                "shorter than {MIN_TOKEN_LEN} characters"
            )));
        }
        if !token.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(TokenError::Unusable(
                "only printable ASCII without spaces is allowed".into(),
            ));
        }
        Ok(Auth::Bearer(token.as_bytes().to_vec()))
    }

    /// A bearer token read from a file (bounded read).
    pub fn from_file(path: &Path) -> Result<Auth, TokenError> {
        use std::io::Read;
        let io = |source| TokenError::Io {
            path: path.display().to_string(),
            source,
        };
        let mut text = String::new();
        std::fs::File::open(path)
            .map_err(io)?
            .take(MAX_TOKEN_FILE + 1)
            .read_to_string(&mut text)
            .map_err(io)?;
        if text.len() as u64 > MAX_TOKEN_FILE {
            return Err(TokenError::Unusable(format!(
                "token file is over {MAX_TOKEN_FILE} bytes"
            )));
        }
        Auth::bearer(&text)
    }

    /// Whether an `Authorization` header value grants access.
    pub fn allows(&self, authorization: Option<&[u8]>) -> bool {
        match self {
            Auth::DangerousNoAuth => true,
            Auth::Bearer(expected) => {
                let Some(value) = authorization else {
                    return false;
                };
                let Some(prefix) = value.get(..7) else {
                    return false;
                };
                if !prefix.eq_ignore_ascii_case(b"bearer ") {
                    return false;
                }
                constant_time_eq(value[7..].trim_ascii(), expected)
            }
        }
    }

    /// Whether an `Authorization` value carries the server's own token (never forwarded to a
    /// guest's exposed port). Without a token (`DangerousNoAuth`) nothing is the token.
    pub fn is_server_token(&self, authorization: &[u8]) -> bool {
        match self {
            Auth::Bearer(_) => self.allows(Some(authorization)),
            Auth::DangerousNoAuth => false,
        }
    }

    /// The upgrade callback: pass the response through, or refuse with 401.
    #[allow(
        clippy::result_large_err,
        reason = "the signature is tungstenite's Callback"
    )]
    pub fn check(&self, req: &Request, resp: Response) -> Result<Response, ErrorResponse> {
        let mut values = req.headers().get_all(header::AUTHORIZATION).iter();
        let first = values.next().map(|v| v.as_bytes());
        let single = values.next().is_none();
        if single && self.allows(first) {
            return Ok(resp);
        }
        let body = serde_json::json!({
            "jsonrpc": "2.0",
            "id": null,
            "error": {"code": airlock_protocol::ErrorCode::Unauthorized.code(),
                      "message": "unauthorized: missing or wrong bearer token"}
        })
        .to_string();
        let mut refusal = ErrorResponse::new(Some(body));
        *refusal.status_mut() = StatusCode::UNAUTHORIZED;
        refusal.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            header::HeaderValue::from_static("Bearer"),
        );
        refusal.headers_mut().insert(
            header::CONTENT_TYPE,
            header::HeaderValue::from_static("application/json"),
        );
        Err(refusal)
    }
}

/// Equal length and equal bytes, in time that depends only on the length.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_exact_bearer_token_is_allowed() {
        let auth = Auth::bearer("  0123456789abcdef\n").unwrap();
        assert!(auth.allows(Some(b"Bearer 0123456789abcdef")));
        assert!(auth.allows(Some(b"bearer 0123456789abcdef")));
        assert!(!auth.allows(None));
        assert!(!auth.allows(Some(b"Bearer 0123456789abcdeg")));
        assert!(!auth.allows(Some(b"Bearer 0123456789abcde")));
        assert!(!auth.allows(Some(b"Basic 0123456789abcdef")));
        assert!(!auth.allows(Some(b"Bearer")));
        assert!(!auth.allows(Some(b"0123456789abcdef")));
    }

    #[test]
    fn weak_tokens_are_refused() {
        assert!(Auth::bearer("short").is_err());
        assert!(Auth::bearer("has a space in the middle").is_err());
        assert!(Auth::bearer("").is_err());
    }

    #[test]
    fn no_auth_allows_everyone() {
        assert!(Auth::DangerousNoAuth.allows(None));
    }
}
