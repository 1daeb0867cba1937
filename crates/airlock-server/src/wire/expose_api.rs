//! `sandbox.expose` and `sandbox.unexpose`: the wire side of [`crate::registry::expose`], and the
//! server's [`PortDialer`](crate::registry::port_dial::PortDialer) (through the sandbox's own network namespace).
use std::net::SocketAddr;

use airlock_protocol::{ErrorCode, ErrorObject};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::registry::expose::ExposeError;
use crate::registry::sandboxes::{Held, Sandboxes};

/// `{sandbox_id, port}`, the params of both methods.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PortParams {
    #[allow(dead_code, reason = "routed on before the method runs")]
    sandbox_id: String,
    port: u64,
}

/// The port of `sandbox.expose`/`sandbox.unexpose` params: 1 to 65535.
pub(crate) fn parse(method: &str, params: Value) -> Result<u16, ErrorObject> {
    let p = serde_json::from_value::<PortParams>(params)
        .map_err(|e| ErrorObject::new(ErrorCode::InvalidParams, format!("{method} params: {e}")))?;
    match u16::try_from(p.port) {
        Ok(port) if port > 0 => Ok(port),
        _ => Err(ErrorObject::new(
            ErrorCode::InvalidParams,
            format!("{method} params: port {} is not in 1..=65535", p.port),
        )),
    }
}

/// The URL of an exposure served on `listen`.
#[must_use]
pub fn url(listen: SocketAddr, token: &str) -> String {
    format!("http://{listen}/x/{token}/")
}

fn no_listener() -> ErrorObject {
    ErrorObject::new(
        ErrorCode::SandboxRefused,
        "this server has no HTTP listener to serve an exposed port on: start it with \
         `airlock serve --listen ADDR` instead of `--stdio`",
    )
    .with_data(json!({ "kind": "PortsNeedListener" }))
}

/// `sandbox.expose {sandbox_id, port}` → `{port, url, expires: null}` (the live exposure of
/// the port when there is one). `listen`: the server's listener, none on stdio.
pub(crate) fn expose(
    listen: Option<SocketAddr>,
    sbs: &Sandboxes,
    held: &Held,
    params: Value,
) -> Result<Value, ErrorObject> {
    let port = parse(airlock_protocol::method::SANDBOX_EXPOSE, params)?;
    let listen = listen.ok_or_else(no_listener)?;
    let e = sbs
        .exposures()
        .expose(&held.id, port, || sbs.get(&held.id).is_ok())
        .map_err(|e| {
            let code = match e {
                ExposeError::Gone(_) => ErrorCode::NotFound,
                ExposeError::Full { .. } => ErrorCode::OverCapacity,
                _ => ErrorCode::InternalError,
            };
            ErrorObject::new(code, e.to_string())
        })?;
    Ok(json!({ "port": port, "url": url(listen, &e.token), "expires": Value::Null }))
}

/// `sandbox.unexpose {sandbox_id, port}` → `{port}`: the URL stops working and its live
/// connections close before the answer. A port not exposed is success (nothing to revoke).
pub(crate) fn unexpose(sbs: &Sandboxes, held: &Held, params: Value) -> Result<Value, ErrorObject> {
    let port = parse(airlock_protocol::method::SANDBOX_UNEXPOSE, params)?;
    sbs.exposures().unexpose(&held.id, port);
    Ok(json!({ "port": port }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_outside_1_to_65535_and_unknown_members_are_refused() {
        let m = "sandbox.expose";
        assert_eq!(
            parse(m, json!({"sandbox_id": "s", "port": 8000})).unwrap(),
            8000
        );
        assert_eq!(parse(m, json!({"sandbox_id": "s", "port": 1})).unwrap(), 1);
        assert_eq!(
            parse(m, json!({"sandbox_id": "s", "port": 65535})).unwrap(),
            65535
        );
        for bad in [
            json!({"sandbox_id": "s", "port": 0}),
            json!({"sandbox_id": "s", "port": 65536}),
            json!({"sandbox_id": "s", "port": -1}),
            json!({"sandbox_id": "s", "port": "80"}),
            json!({"sandbox_id": "s"}),
            json!({"sandbox_id": "s", "port": 80, "host": "10.0.0.1"}),
        ] {
            let e = parse(m, bad.clone()).unwrap_err();
            assert_eq!(e.code, ErrorCode::InvalidParams.code(), "{bad}");
        }
    }

    #[test]
    fn the_url_names_the_listener_and_the_token() {
        let a: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        assert_eq!(url(a, "ab12"), "http://127.0.0.1:8080/x/ab12/");
        let b: SocketAddr = "[::1]:9".parse().unwrap();
        assert_eq!(url(b, "ab12"), "http://[::1]:9/x/ab12/");
    }
}
