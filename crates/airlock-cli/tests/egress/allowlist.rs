//! What the allowlist lets through, and how a denial reads.
use std::time::Duration;

use super::server::{connect_py, fetch_py, Server};
use crate::support::*;

fn stdout(v: &serde_json::Value) -> &str {
    v["stdout"].as_str().unwrap_or("")
}

fn decisions(v: &serde_json::Value) -> Vec<(String, String)> {
    v["egress"]
        .as_array()
        .unwrap_or(&Vec::new())
        .iter()
        .map(|d| {
            (
                d["decision"].as_str().unwrap_or("").into(),
                d["reason"].as_str().unwrap_or("").into(),
            )
        })
        .collect()
}

#[test]
fn allowed_host_answers_through_the_proxy_by_url_and_by_tunnel() {
    for who in identities() {
        let good = Server::start("127.0.0.2");
        let allow = format!("127.0.0.2:{}", good.port());
        let code = format!(
            "{}{}",
            fetch_py(&format!("http://127.0.0.2:{}/x", good.port())),
            connect_py(&allow)
        );
        let v = run_py(
            who,
            &code,
            &["--allow-host", &allow, "--allow-private", "127.0.0.2/32"],
        );
        assert_completed(&v);
        let out = stdout(&v);
        assert!(out.starts_with(&format!("OK {}\n", good.body)), "{v:#}");
        assert!(
            out.contains("STATUS HTTP/1.1 200 Connection established"),
            "{v:#}"
        );
        assert!(
            out.contains("BODY HTTP/1.0 200 OK") && out.trim_end().ends_with(&good.body),
            "{v:#}"
        );
        assert_eq!(good.hits(), 2, "one forwarded request and one tunnel");
        assert_eq!(
            decisions(&v),
            [
                ("allow".into(), "allowed".into()),
                ("allow".into(), "allowed".into())
            ]
        );
        assert_eq!(v["egress"][0]["address"], "127.0.0.2");
    }
}

#[test]
fn denied_host_gets_an_explanation_and_its_server_sees_nothing() {
    for who in identities() {
        let good = Server::start("127.0.0.2");
        let evil = Server::start("127.0.0.3");
        let code = format!(
            "{}{}",
            fetch_py(&format!("http://127.0.0.3:{}/", evil.port())),
            connect_py(&format!("127.0.0.3:{}", evil.port()))
        );
        let v = run_py(
            who,
            &code,
            &[
                "--allow-host",
                &format!("127.0.0.2:{}", good.port()),
                "--allow-private",
                "127.0.0.0/8",
            ],
        );
        assert_completed(&v);
        let out = stdout(&v);
        let expect = format!(
            "HTTP 403 airlock egress proxy: request to 127.0.0.3:{} denied: host not in the allowlist. \
             This sandbox has no other network route; retrying another way will not work.",
            evil.port()
        );
        assert!(out.starts_with(&expect), "{v:#}");
        assert!(out.contains("STATUS HTTP/1.1 403 Forbidden"), "{v:#}");
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(evil.hits(), 0, "the denied server saw a connection");
        assert_eq!(good.hits(), 0);
        assert_eq!(
            decisions(&v),
            [
                ("deny".into(), "host_not_allowed".into()),
                ("deny".into(), "host_not_allowed".into())
            ]
        );
    }
}

#[test]
fn a_name_allowed_by_the_list_but_resolving_to_loopback_is_denied_after_resolution() {
    for who in identities() {
        let local = Server::start("127.0.0.1");
        let code = fetch_py(&format!("http://localhost:{}/", local.port()));
        let v = run_py(
            who,
            &code,
            &["--allow-host", &format!("localhost:{}", local.port())],
        );
        assert_completed(&v);
        let out = stdout(&v);
        assert!(out.starts_with("HTTP 403 "), "{v:#}");
        assert!(
            out.contains("a loopback") && out.contains("may not reach"),
            "{v:#}"
        );
        assert_eq!(v["egress"][0]["reason"], "forbidden_address", "{v:#}");
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(local.hits(), 0, "the loopback server saw a connection");
    }
}

#[test]
fn connect_to_a_port_the_rule_does_not_name_is_denied() {
    for who in identities() {
        let good = Server::start("127.0.0.2");
        let other = Server::start("127.0.0.2");
        let code = connect_py(&format!("127.0.0.2:{}", other.port()));
        let v = run_py(
            who,
            &code,
            &[
                "--allow-host",
                &format!("127.0.0.2:{}", good.port()),
                "--allow-private",
                "127.0.0.2",
            ],
        );
        assert_completed(&v);
        let out = stdout(&v);
        assert!(out.contains("STATUS HTTP/1.1 403 Forbidden"), "{v:#}");
        assert!(
            out.contains("the host is allowed, but not on this port"),
            "{v:#}"
        );
        assert_eq!(v["egress"][0]["reason"], "port_not_allowed");
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!((other.hits(), good.hits()), (0, 0));
    }
}

#[test]
fn commands_reach_allowed_hosts_through_the_proxy_too() {
    for who in identities() {
        let good = Server::start("127.0.0.2");
        let evil = Server::start("127.0.0.3");
        let url = format!("http://127.0.0.2:{}/", good.port());
        let bad = format!("http://127.0.0.3:{}/", evil.port());
        let v = exec(
            who,
            &["curl", "-sS", "--max-time", "10", &url, &bad],
            &[
                "--allow-host",
                &format!("127.0.0.2:{}", good.port()),
                "--allow-private",
                "127.0.0.0/8",
            ],
        );
        assert_completed(&v);
        let out = stdout(&v);
        assert!(out.starts_with(&good.body), "{v:#}");
        assert!(out.contains("denied: host not in the allowlist"), "{v:#}");
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!((good.hits(), evil.hits()), (1, 0));
    }
}
