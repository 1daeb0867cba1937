//! The proxy is the only way out: direct connections, UDP (DNS) and other socket kinds fail
//! even while an allowlist is in force, and the servers see nothing.
use std::time::Duration;

use super::server::Server;
use crate::support::*;

const EACCES: &str = "13";

fn direct_py(targets: &[(String, u16)]) -> String {
    let mut code = String::from("import socket\n");
    for (ip, port) in targets {
        code.push_str(&format!(
            "try:\n    socket.create_connection(({ip:?}, {port}), timeout=3); print('CONNECTED')\n\
             except OSError as e:\n    print('blocked', e.errno)\n"
        ));
    }
    code.push_str(
        "for fam, ty in ((socket.AF_INET, socket.SOCK_DGRAM), (socket.AF_INET6, socket.SOCK_DGRAM), \
         (socket.AF_UNIX, socket.SOCK_STREAM), (socket.AF_INET, socket.SOCK_RAW)):\n\
         \x20   try:\n        socket.socket(fam, ty); print('opened', fam, ty)\n\
         \x20   except OSError as e:\n        print('denied', e.errno)\n\
         try:\n    socket.getaddrinfo('example.com', 80); print('RESOLVED')\n\
         except OSError as e:\n    print('no dns')\n",
    );
    code
}

#[test]
fn direct_connections_bypassing_the_proxy_fail_and_reach_no_one() {
    for who in identities() {
        let good = Server::start("127.0.0.2");
        let host_lo = Server::start("127.0.0.1");
        let targets = vec![
            ("127.0.0.2".to_string(), good.port()),
            ("127.0.0.1".to_string(), host_lo.port()),
            ("10.0.0.1".to_string(), 80),
        ];
        let flags = [
            "--allow-host".to_string(),
            format!("127.0.0.2:{}", good.port()),
            "--allow-private".to_string(),
            "127.0.0.0/8".to_string(),
        ];
        let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
        let v = run_py(who, &direct_py(&targets), &flags);
        assert_completed(&v);
        let lines: Vec<&str> = v["stdout"].as_str().unwrap().lines().collect();
        // Landlock refuses connect to any port but the proxy's (EACCES), before the empty
        // namespace would have.
        assert_eq!(
            lines[..3],
            [
                format!("blocked {EACCES}"),
                format!("blocked {EACCES}"),
                format!("blocked {EACCES}")
            ],
            "{v:#}"
        );
        assert_eq!(
            lines[3..7],
            ["denied 1", "denied 1", "denied 1", "denied 1"],
            "{v:#}"
        );
        assert_eq!(lines[7], "no dns", "{v:#}");
        // The same from a command.
        let code = direct_py(&targets[..2]);
        let e = exec(who, &["/usr/bin/python3", "-c", &code], &flags);
        assert_completed(&e);
        assert!(
            e["stdout"]
                .as_str()
                .unwrap()
                .starts_with(&format!("blocked {EACCES}\nblocked {EACCES}\n")),
            "{e:#}"
        );
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(
            (good.hits(), host_lo.hits()),
            (0, 0),
            "a direct connection got through"
        );
        assert_eq!(
            v["egress"],
            serde_json::json!([]),
            "nothing went through the proxy"
        );
    }
}
