//! Bearer-token authentication of the WebSocket upgrade, and which tenant a token acts for.
//!
//! A single token (`--token-file` holding one token, or `AIRLOCK_TOKEN`) is the server's one
//! tenant, [`Tenant::single`]; a tenants file (`crate::tenancy::tokens`) names a tenant per token and is
//! read again on [`Auth::reload`] (SIGHUP) without touching open connections.
//! The token is compared in constant time (for a given length; the length itself is not
//! treated as secret). A connection without `Authorization: Bearer <token>`, with two such
//! headers, or with the wrong token is refused with HTTP 401 before the upgrade, so an
//! unauthenticated peer never reaches the JSON-RPC layer.
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use crate::tenancy::tenant::Tenant;
use crate::tenancy::tokens::{self, Entry, TokenFileError};

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
    /// Requests must carry one of a tenants file's tokens; each names its tenant.
    Tenants(Arc<TenantTokens>),
    /// Anyone who can reach the socket may run code. Dangerous; only for tests on loopback.
    DangerousNoAuth,
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Auth::Bearer(_) => f.write_str("Auth::Bearer(<redacted>)"),
            Auth::Tenants(_) => f.write_str("Auth::Tenants(<redacted>)"),
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
    /// A tenants file that cannot be used.
    #[error(transparent)]
    Tenants(#[from] TokenFileError),
}

/// A tenants file's tokens as the server holds them, and where to read them again.
#[derive(Debug)]
pub struct TenantTokens {
    path: PathBuf,
    entries: RwLock<Vec<Entry>>,
}

impl TenantTokens {
    fn entries(&self) -> std::sync::RwLockReadGuard<'_, Vec<Entry>> {
        self.entries
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
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

    /// The token file at `path`: a tenants file (`crate::tenancy::tokens`) or a file holding one
    /// token (bounded read either way).
    pub fn from_file(path: &Path) -> Result<Auth, TokenError> {
        let text = tokens::read_text(path)?;
        if tokens::is_tenants_file(&text) {
            let entries = tokens::parse(&path.display().to_string(), &text)?;
            return Ok(Auth::Tenants(Arc::new(TenantTokens {
                path: path.to_path_buf(),
                entries: RwLock::new(entries),
            })));
        }
        if text.len() as u64 > MAX_TOKEN_FILE {
            return Err(TokenError::Unusable(format!(
                "token file is over {MAX_TOKEN_FILE} bytes"
            )));
        }
        Auth::bearer(&text)
    }

    /// Read a tenants file again (SIGHUP): the tokens in force are replaced only when the
    /// whole file parses; connections already open keep their tenant. Answers how many
    /// tokens are in force; a single token cannot be reloaded (`Ok(None)`).
    pub fn reload(&self) -> Result<Option<usize>, TokenError> {
        let Auth::Tenants(t) = self else {
            return Ok(None);
        };
        let text = tokens::read_text(&t.path)?;
        let entries = tokens::parse(&t.path.display().to_string(), &text)?;
        let n = entries.len();
        *t.entries
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = entries;
        Ok(Some(n))
    }

    /// The tenant an `Authorization` header value acts for; `None`: no access.
    #[must_use]
    pub fn tenant_of(&self, authorization: Option<&[u8]>) -> Option<Tenant> {
        if let Auth::DangerousNoAuth = self {
            return Some(Tenant::single());
        }
        let value = authorization?;
        let prefix = value.get(..7)?;
        if !prefix.eq_ignore_ascii_case(b"bearer ") {
            return None;
        }
        let presented = value[7..].trim_ascii();
        match self {
            Auth::DangerousNoAuth => Some(Tenant::single()),
            Auth::Bearer(expected) => constant_time_eq(presented, expected).then(Tenant::single),
            // Only a token of the shape `airlock token add` makes: the one shape the exposed-port
            // proxy can find in any text (`carries_token`), so no tenant's token can reach a
            // guest unseen.
            Auth::Tenants(t) if tokens::is_minted(presented) => {
                tokens::find(&t.entries(), presented)
            }
            Auth::Tenants(_) => None,
        }
    }

    /// Whether an `Authorization` header value grants access.
    pub fn allows(&self, authorization: Option<&[u8]>) -> bool {
        self.tenant_of(authorization).is_some()
    }

    /// Whether a header line or a request line carries one of this server's tokens in any
    /// form ([`crate::tenancy::token_forms`]): anywhere in it, after any scheme or none, among cookies
    /// or parameters, percent-encoded, inside base64 or hex. Such a line never reaches a guest.
    /// The cost is linear in the forms' bytes, and what it takes reveals nothing of a token:
    /// the server's token is found by a hash keyed with a secret of this process (a window is
    /// compared byte for byte, in constant time, only when its hash matches); a tenant's, as
    /// every `airlock_` run's digest.
    #[must_use]
    pub fn carries_token(&self, value: &[u8]) -> bool {
        let forms = crate::tenancy::token_forms::forms(value);
        match self {
            Auth::DangerousNoAuth => false,
            Auth::Bearer(expected) => forms
                .iter()
                .any(|f| crate::tenancy::keyed_search::contains(f, expected)),
            Auth::Tenants(t) => {
                let entries = t.entries();
                forms.iter().any(|f| {
                    tokens::minted_in(f).any(|p| {
                        let d = tokens::digest(p);
                        entries.iter().any(|e| e.digest == d)
                    })
                })
            }
        }
    }

    /// The upgrade callback: pass the response through, or refuse with 401.
    #[allow(
        clippy::result_large_err,
        reason = "the signature is tungstenite's Callback"
    )]
    pub fn check(&self, req: &Request, resp: Response) -> Result<Response, ErrorResponse> {
        self.check_as(req, resp).map(|(resp, _)| resp)
    }

    /// [`Auth::check`], also answering the tenant the upgrade acts for.
    #[allow(
        clippy::result_large_err,
        reason = "the error is tungstenite's ErrorResponse"
    )]
    pub fn check_as(
        &self,
        req: &Request,
        resp: Response,
    ) -> Result<(Response, Tenant), ErrorResponse> {
        let mut values = req.headers().get_all(header::AUTHORIZATION).iter();
        let first = values.next().map(|v| v.as_bytes());
        let single = values.next().is_none();
        if let Some(tenant) = single.then(|| self.tenant_of(first)).flatten() {
            return Ok((resp, tenant));
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
    subtle::ConstantTimeEq::ct_eq(a, b).into()
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

    /// A tenants file authenticates only tokens of the minted shape (the one shape the port
    /// proxy finds anywhere), even when the file holds another token's digest.
    #[test]
    fn a_tenant_token_is_of_the_minted_shape_and_found_wherever_it_sits() {
        let minted = tokens::generate().unwrap();
        let other = "q3J1/7xV+abcdefghijklmnopqrstuvwxyzABCDEFG=";
        let mut file = String::new();
        for (name, tok) in [("alice", minted.as_str()), ("bob", other)] {
            let digest = hex::encode(tokens::digest(tok.as_bytes()));
            file.push_str(&format!("{name} sha256:{digest} 1796400000\n"));
        }
        let entries = tokens::parse("t", &file).unwrap();
        let auth = Auth::Tenants(Arc::new(TenantTokens {
            path: PathBuf::from("t"),
            entries: RwLock::new(entries),
        }));
        let bearer = |t: &str| format!("Bearer {t}").into_bytes();
        assert_eq!(
            auth.tenant_of(Some(&bearer(&minted))).unwrap().as_str(),
            "alice"
        );
        assert!(auth.tenant_of(Some(&bearer(other))).is_none());
        assert!(auth.carries_token(format!("X-Key: x{minted}.json").as_bytes()));
        assert!(!auth.carries_token(b"X-Key: airlock_not-a-token-of-this-server"));
    }

    #[test]
    fn no_auth_allows_everyone() {
        assert!(Auth::DangerousNoAuth.allows(None));
    }
}
