//! A session run (`sandbox.run_code` in a sandbox made by `sandbox.create`) forked from the
//! zygote is held to a cold, exec-per-run session run field by field: every layer the broker's
//! attestation covers, as the guest sees itself and as the host sees the live guest, and what
//! the attestation does not cover (rlimits, umask, identity, cwd, fds, mounts, environment,
//! Landlock, cgroup, signals, dumpability). Fields that must differ per run (namespace inodes,
//! host pids, the sandbox's random host uid) are compared as properties. As root and as
//! `airlock-test`.
use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::support::*;

/// The identities the server runs as.
const IDENTITIES: [Option<&str>; 2] = [None, Some("airlock-test")];

/// Prints one JSON line of what the guest sees of itself, then waits (so that the host can
/// look at the live guest) for a few seconds.
const PROBE: &str = r#"
import os, sys, json, re, resource, errno, time
def norm(s):
    return re.sub(r'\[\d+\]', '[N]', s)
def attempt(f):
    try:
        f()
        return 'ok'
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
def write(path):
    def f():
        with open(path, 'w') as fh:
            fh.write('x')
    return f
status = dict(l.split(':', 1) for l in open('/proc/self/status').read().splitlines())
status = {k: v.strip() for k, v in status.items()}
keep = ['NoNewPrivs', 'Seccomp', 'Seccomp_filters', 'CapInh', 'CapPrm', 'CapEff', 'CapBnd',
        'CapAmb', 'Uid', 'Gid', 'Groups', 'Umask', 'SigBlk', 'SigIgn', 'SigCgt', 'NSpid',
        'NSpgid', 'NSsid', 'Threads', 'Cpus_allowed_list', 'Mems_allowed_list',
        'Speculation_Store_Bypass', 'untag_mask', 'THP_enabled']
out = {}
out['status'] = {k: status.get(k) for k in keep}
out['ns'] = {n: os.readlink('/proc/self/ns/' + n) for n in sorted(os.listdir('/proc/self/ns'))}
out['interfaces'] = sorted(l.split(':')[0].strip() for l in open('/proc/net/dev').read().splitlines()[2:])
out['pid'] = os.getpid()
out['ppid'] = os.getppid()
out['pgid'] = os.getpgid(0)
out['sid'] = os.getsid(0)
out['procs'] = sorted(int(p) for p in os.listdir('/proc') if p.isdigit())
out['rlimits'] = {n: resource.getrlimit(getattr(resource, n)) for n in sorted(dir(resource)) if n.startswith('RLIMIT_')}
old = os.umask(0o77); os.umask(old); out['umask'] = old
out['resuid'] = os.getresuid(); out['resgid'] = os.getresgid(); out['groups'] = sorted(os.getgroups())
out['cwd'] = os.getcwd()
def link(fd):
    try:
        return norm(os.readlink('/proc/self/fd/' + fd))
    except OSError:
        return None  # the listing's own descriptor
out['fds'] = {fd: link(fd) for fd in sorted(os.listdir('/proc/self/fd'), key=int)}
out['fds'] = {k: v for k, v in out['fds'].items() if v is not None}
def mount(line):
    f = line.split(' ')
    sep = f.index('-')
    # ids, and the device numbers of anonymous filesystems (per sandbox), out
    dev = re.sub(r'^0:\d+$', '0:N', f[2])
    opts = re.sub(r'\b(uid|gid)=\d+', r'\1=H', ' '.join(f[sep + 1:]))
    return ' '.join([dev] + f[3:sep]) + ' - ' + opts
out['mounts'] = [mount(l) for l in open('/proc/self/mountinfo').read().splitlines()]
out['environ'] = dict(os.environ)
out['proc_environ'] = sorted(x.decode() for x in open('/proc/self/environ', 'rb').read().split(b'\0') if x)
out['hostname'] = os.uname().nodename
out['oom_score_adj'] = open('/proc/self/oom_score_adj').read().strip()
out['cgroup_inside'] = open('/proc/self/cgroup').read()
out['proc_self_owner'] = [os.stat('/proc/self/status').st_uid, os.stat('/proc/self/status').st_gid]
for name, call in [('priority', lambda: os.getpriority(os.PRIO_PROCESS, 0)),
                   ('scheduler', lambda: os.sched_getscheduler(0)),
                   ('affinity', lambda: sorted(os.sched_getaffinity(0)))]:
    try:
        out[name] = call()
    except OSError as e:
        out[name] = 'errno ' + errno.errorcode.get(e.errno, '?')
out['landlock'] = {p: attempt(write(p)) for p in ['/work/w', '/tmp/w', '/dev/shm/w', '/w', '/etc/w', '/usr/w', '/proc/w', '/dev/w']}
out['mkdir'] = {p: attempt(lambda p=p: os.mkdir(p)) for p in ['/work/d', '/d', '/usr/d', '/etc/d']}
out['fork'] = attempt(lambda: os._exit(0) if os.fork() == 0 else None)
out['work'] = sorted(os.listdir('/work'))
out['flags'] = str(sys.flags)
out['path'] = sys.path
out['modules_random'] = 'random' in sys.modules
print(json.dumps(out, sort_keys=True), flush=True)
time.sleep(float(os.environ.get('PROBE_WAIT', '3')))
print('done')
"#;

/// What the host sees of a live guest and its server.
#[derive(Debug)]
struct HostView {
    /// The guest's host pid (pid 1 of its namespace).
    pid: i32,
    /// `readlink /proc/<guest>/ns/*` from the host.
    ns: BTreeMap<String, String>,
    /// The same for the server and (if any) its zygote.
    server_ns: BTreeMap<String, String>,
    zygote_ns: Option<BTreeMap<String, String>>,
    /// /proc/<guest>/cgroup, the server's.
    cgroup: String,
    server_cgroup: String,
    /// Host uid of the guest, and the owner of /proc/<guest>.
    uid: u32,
    proc_owner: u32,
    /// Guest's pgid and sid on the host; the server's.
    pgid: i32,
    sid: i32,
    server_pgid: i32,
    server_sid: i32,
    /// Whether the guest's grandparent is the server (stage = the server's child).
    grandparent_is_server: bool,
    /// The server's descriptors on user namespaces.
    server_userns_fds: Vec<String>,
}

fn namespaces(pid: i32) -> BTreeMap<String, String> {
    std::fs::read_dir(format!("/proc/{pid}/ns"))
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let link = std::fs::read_link(e.path())
                .map(|l| l.display().to_string())
                .unwrap_or_default();
            (name, link)
        })
        .collect()
}

fn stat_field(pid: i32, n: usize) -> i32 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = stat.rsplit_once(')').unwrap().1;
    // after ") ": state ppid pgrp session ...: field 0 is the state.
    after.split_whitespace().nth(n).unwrap().parse().unwrap()
}

fn ppid(pid: i32) -> i32 {
    stat_field(pid, 1)
}

/// The server's live guest: its descendant that is pid 1 of a pid namespace of its own.
fn live_guest(server: i32) -> i32 {
    let found: Vec<i32> = descendants(server)
        .into_iter()
        .filter(|p| {
            std::fs::read_to_string(format!("/proc/{p}/status"))
                .ok()
                .and_then(|s| {
                    s.lines()
                        .find(|l| l.starts_with("NSpid:"))
                        .map(|l| l.split_whitespace().count() == 3 && l.ends_with("\t1"))
                })
                .unwrap_or(false)
        })
        .collect();
    assert_eq!(found.len(), 1, "expected one live guest: {found:?}");
    found[0]
}

fn host_view(server: i32) -> HostView {
    let pid = live_guest(server);
    let zygote = all_descendants(server)
        .into_iter()
        .find(|p| is_zygote_of(server, *p));
    let userns: Vec<String> = fd_list(server)
        .into_iter()
        .filter(|l| l.starts_with("user:["))
        .collect();
    let proc_owner = std::fs::metadata(format!("/proc/{pid}")).unwrap().uid();
    HostView {
        pid,
        ns: namespaces(pid),
        server_ns: namespaces(server),
        zygote_ns: zygote.map(namespaces),
        cgroup: std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap(),
        server_cgroup: std::fs::read_to_string(format!("/proc/{server}/cgroup")).unwrap(),
        uid: uid_of(pid).unwrap(),
        proc_owner,
        pgid: stat_field(pid, 2),
        sid: stat_field(pid, 3),
        server_pgid: stat_field(server, 2),
        server_sid: stat_field(server, 3),
        grandparent_is_server: ppid(ppid(pid)) == server,
        server_userns_fds: userns,
    }
}

/// One probe run in a fresh sandbox of `server`: the guest's JSON, the host's view of the live
/// guest, the run's result, and the cgroup directories the guest was in.
async fn probe(server: &WsServer) -> (Value, HostView, Value) {
    let mut c = server.connect().await;
    let r = c.call("sandbox.create", json!({"spec": {}})).await;
    let sid = result_of(&r)["sandbox_id"].as_str().unwrap().to_string();
    let id = c
        .request(
            "sandbox.run_code",
            json!({"sandbox_id": sid, "code": PROBE, "stream": true}),
        )
        .await;
    let mut text = String::new();
    let deadline = Instant::now() + PATIENCE;
    while !text.contains('\n') {
        assert!(Instant::now() < deadline, "no probe line: {text:?}");
        let m = c.recv().await.expect("closed before the probe printed");
        if m["method"] == "output" && m["params"]["stream"] == "stdout" {
            text.push_str(m["params"]["data"].as_str().unwrap());
        } else {
            assert!(
                m["id"] != json!(id),
                "the probe ended before it printed: {m}"
            );
            c.stash.push(m);
        }
    }
    let line = text.lines().next().unwrap();
    let seen: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
    let host = host_view(server.pid());
    let (resp, _) = c.wait_for(id, &no_tools).await;
    let result = result_of(&resp).clone();
    assert_eq!(result["status"], "completed", "{result}");
    let d = c.call("sandbox.dispose", json!({"sandbox_id": sid})).await;
    result_of(&d);
    (seen, host, result)
}

/// The run's own cgroup directories (`0::/path` and v1 `n:ctl:/path`), as host paths.
fn cgroup_dirs(cgroup: &str) -> Vec<std::path::PathBuf> {
    cgroup
        .lines()
        .filter_map(|l| {
            let mut f = l.splitn(3, ':');
            let (_, ctl, path) = (f.next()?, f.next()?, f.next()?);
            let base = if ctl.is_empty() {
                "/sys/fs/cgroup".to_string()
            } else {
                format!("/sys/fs/cgroup/{}", ctl.trim_start_matches("name="))
            };
            Some(std::path::PathBuf::from(format!("{base}{path}")))
        })
        .collect()
}

/// Everything the two runs must agree on as it is; the differing fields are taken out and
/// checked as properties by the caller.
fn without_per_run(mut seen: Value) -> Value {
    let o = seen.as_object_mut().unwrap();
    o.remove("ns");
    o.remove("cgroup_inside");
    seen
}

/// The properties of one run's namespaces and place on the host (both ways must have them).
fn check_properties(how: &str, seen: &Value, host: &HostView, server_pid: i32) {
    // The guest's view of its namespaces is the host's view of it.
    for (name, link) in seen["ns"].as_object().unwrap() {
        assert_eq!(
            host.ns.get(name).map(String::as_str),
            link.as_str(),
            "{how}: {name} seen from inside and from the host differ"
        );
    }
    // Every namespace the attestation covers, and cgroup and time as well, differs from the
    // server's and the zygote's.
    for name in ["user", "net", "ipc", "uts", "mnt", "pid", "cgroup"] {
        let guest = &host.ns[name];
        assert_ne!(
            guest, &host.server_ns[name],
            "{how}: {name} is the server's"
        );
        if let Some(z) = &host.zygote_ns {
            assert_ne!(guest, &z[name], "{how}: {name} is the zygote's");
        }
    }
    // The user namespace is the sandbox's own, which the server holds.
    assert!(
        host.server_userns_fds.contains(&host.ns["user"]),
        "{how}: the guest's user namespace {} is not one the server holds: {:?}",
        host.ns["user"],
        host.server_userns_fds
    );
    assert_eq!(seen["pid"], 1, "{how}");
    assert_eq!(seen["ppid"], 0, "{how}");
    assert_eq!(seen["procs"], json!([1]), "{how}");
    assert!(
        host.grandparent_is_server,
        "{how}: the stage is not the server's child"
    );
    assert_ne!(
        host.pgid, host.server_pgid,
        "{how}: the server's process group"
    );
    assert_ne!(host.pid, server_pid);
    assert_eq!(host.sid, host.server_sid, "{how}: session");
    assert_ne!(host.cgroup, "", "{how}");
    // A per-run cgroup wherever the server can make one (root): the guest is not in the
    // server's memory and pids cgroups.
    if uid_of(server_pid) == Some(0) {
        let (guest_cg, server_cg) = (cgroup_dirs(&host.cgroup), cgroup_dirs(&host.server_cgroup));
        let own = guest_cg.iter().filter(|d| !server_cg.contains(d)).count();
        assert!(own >= 1, "{how}: in no cgroup of its own: {}", host.cgroup);
    }
}

async fn equal_to_cold(user: Option<&str>) {
    // Both started under `nohup`, as an operator may: the server then ignores SIGHUP, and an
    // ignored disposition survives execve (the zygote must not hand it to its runs).
    let forked = WsServer::start_wrapped(user, &["nohup"], &[]);
    let cold = WsServer::start_wrapped(user, &["nohup"], &["--exec-per-run"]);
    let (f_seen, f_host, f_result) = probe(&forked).await;
    let (c_seen, c_host, c_result) = probe(&cold).await;
    assert_eq!(f_result["via"], "zygote", "{f_result}");
    assert_eq!(c_result["via"], "exec", "{c_result}");
    for (how, seen, host, server) in [
        ("forked", &f_seen, &f_host, &forked),
        ("cold", &c_seen, &c_host, &cold),
    ] {
        check_properties(how, seen, host, server.pid());
        // The guest's cgroups are gone once its run is (disposal done too).
        let server_cg = cgroup_dirs(&host.server_cgroup);
        for dir in cgroup_dirs(&host.cgroup) {
            if server_cg.contains(&dir) {
                continue;
            }
            let end = Instant::now() + Duration::from_secs(5);
            while dir.exists() && Instant::now() < end {
                std::thread::sleep(Duration::from_millis(50));
            }
            assert!(!dir.exists(), "{how}: cgroup {dir:?} left behind");
        }
        assert!(
            settle(server.pid(), Duration::from_secs(5)).is_empty(),
            "{how}: a process survived"
        );
    }
    // Host-side properties that must agree.
    for (h, server) in [(&f_host, &forked), (&c_host, &cold)] {
        match user {
            None => assert!(
                h.uid >= 2_000_000_000,
                "a root server's guest uid {}",
                h.uid
            ),
            Some(_) => assert_eq!(Some(h.uid), uid_of(server.pid())),
        }
    }
    if user.is_some() {
        assert_eq!(
            f_host.uid, c_host.uid,
            "non-root: both run as the server's uid"
        );
    } else {
        assert_ne!(f_host.uid, c_host.uid, "each sandbox its own random uid");
    }
    assert_eq!(
        (f_host.proc_owner == f_host.uid),
        (c_host.proc_owner == c_host.uid),
        "/proc/<guest> ownership (dumpability): forked owner {} uid {}, cold owner {} uid {}",
        f_host.proc_owner,
        f_host.uid,
        c_host.proc_owner,
        c_host.uid
    );
    // Cgroup: the same controllers, each in a per-run directory in both or in neither.
    let shape = |h: &HostView| {
        let server_cg = cgroup_dirs(&h.server_cgroup);
        cgroup_dirs(&h.cgroup)
            .iter()
            .map(|d| server_cg.contains(d))
            .collect::<Vec<_>>()
    };
    assert_eq!(shape(&f_host), shape(&c_host), "cgroup placement differs");
    let ctls = |s: &str| {
        s.lines()
            .map(|l| l.split(':').nth(1).unwrap_or("").to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(ctls(&f_host.cgroup), ctls(&c_host.cgroup));
    // Everything else, field by field.
    let (f, c) = (without_per_run(f_seen), without_per_run(c_seen));
    let mut differing = Vec::new();
    for (k, v) in c.as_object().unwrap() {
        if f.get(k) != Some(v) {
            differing.push(format!("{k}:\n  forked {}\n  cold   {}", f[k], v));
        }
    }
    for k in f.as_object().unwrap().keys() {
        if c.get(k).is_none() {
            differing.push(format!("{k}: only in the forked run"));
        }
    }
    assert!(
        differing.is_empty(),
        "a forked session run differs from a cold one ({user:?}):\n{}",
        differing.join("\n")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_forked_session_run_equals_a_cold_one_field_by_field() {
    equal_to_cold(IDENTITIES[0]).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_forked_session_run_equals_a_cold_one_field_by_field_as_airlock_test() {
    equal_to_cold(IDENTITIES[1]).await;
}

// ---- attacks on forked session runs ----

async fn new_sandbox(c: &mut WsClient) -> String {
    let r = c.call("sandbox.create", json!({"spec": {}})).await;
    result_of(&r)["sandbox_id"].as_str().unwrap().to_string()
}

/// Many sandboxes run at once through two slots (most runs queue): each forked run sees its
/// own sandbox's files and namespace only, and writes only there — no descriptor of one
/// sandbox reaches another's run however the queue interleaves them.
async fn no_mix_up_under_concurrency(user: Option<&str>) {
    const N: usize = 8;
    let server = WsServer::start_as(user, &["--max-concurrent-runs", "2"]);
    let mut clients = Vec::new();
    for i in 0..N {
        let mut c = server.connect().await;
        let sid = new_sandbox(&mut c).await;
        let w = c
            .call(
                "files.write",
                json!({"sandbox_id": sid, "path": format!("own-{i}"), "data": b64(format!("{i}").as_bytes())}),
            )
            .await;
        result_of(&w);
        clients.push((c, sid, i));
    }
    let code = "import os, time\nnames = sorted(os.listdir('/work'))\ntext = [open(n).read() for n in names]\nopen('ran-' + text[0], 'w').write('x')\ntime.sleep(0.3)\nprint(names, text, os.readlink('/proc/self/ns/user'))";
    let runs = clients.into_iter().map(|(mut c, sid, i)| {
        tokio::spawn(async move {
            let r = c
                .call("sandbox.run_code", json!({"sandbox_id": sid, "code": code}))
                .await;
            let r = result_of(&r).clone();
            let l = c.call("files.list", json!({"sandbox_id": sid})).await;
            let names: Vec<String> = result_of(&l)["entries"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e["name"].as_str().unwrap_or("").to_string())
                .collect();
            (i, r, names)
        })
    });
    let mut userns = std::collections::BTreeSet::new();
    let mut queued = 0;
    for run in runs.collect::<Vec<_>>() {
        let (i, r, mut names) = run.await.unwrap();
        assert_eq!(r["status"], "completed", "{r}");
        assert_eq!(r["via"], "zygote", "{r}");
        let out = r["stdout"].as_str().unwrap();
        let want = format!("['own-{i}'] ['{i}'] user:[");
        assert!(out.starts_with(&want), "sandbox {i} saw {out:?}");
        userns.insert(out.trim_end().rsplit(' ').next().unwrap().to_string());
        names.sort();
        assert_eq!(
            names,
            [format!("own-{i}"), format!("ran-{i}")],
            "sandbox {i}"
        );
        if r["queued_ms"].as_f64().unwrap() > 0.5 {
            queued += 1;
        }
    }
    assert_eq!(userns.len(), N, "user namespaces shared: {userns:?}");
    assert!(queued >= N / 2, "only {queued} runs queued");
    assert!(settle(server.pid(), Duration::from_secs(5)).is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn concurrent_forked_session_runs_see_only_their_own_sandbox() {
    no_mix_up_under_concurrency(IDENTITIES[0]).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn concurrent_forked_session_runs_see_only_their_own_sandbox_as_airlock_test() {
    no_mix_up_under_concurrency(IDENTITIES[1]).await;
}

/// A forked session run signals everything it can name (every pid, every process group, -1):
/// the zygote, the server and another sandbox's live run are untouched.
async fn signals_reach_only_the_run(user: Option<&str>) {
    let server = WsServer::start_as(user, &[]);
    let mut warm = server.connect().await;
    let sb = new_sandbox(&mut warm).await;
    // A first run starts the zygote's use; note the zygote.
    let r = warm
        .call(
            "sandbox.run_code",
            json!({"sandbox_id": sb, "code": "print(1)"}),
        )
        .await;
    assert_eq!(result_of(&r)["via"], "zygote");
    let zygote: Vec<i32> = all_descendants(server.pid())
        .into_iter()
        .filter(|p| is_zygote_of(server.pid(), *p))
        .collect();
    assert_eq!(zygote.len(), 1);
    let victim_code = "import time\nprint('up', flush=True)\ntime.sleep(4)\nprint('survived')";
    let victim = warm
        .request(
            "sandbox.run_code",
            json!({"sandbox_id": sb, "code": victim_code, "stream": true}),
        )
        .await;
    loop {
        let m = warm.recv().await.unwrap();
        if m["method"] == "output" {
            break;
        }
        warm.stash.push(m);
    }
    let mut attacker = server.connect().await;
    let sa = new_sandbox(&mut attacker).await;
    let code = format!(
        "import os, signal\nhit = []\nfor p in list(range(2, 5000)) + {zygote:?} + [{server}]:\n    for f in (os.kill, os.killpg):\n        try:\n            f(p, signal.SIGKILL); hit.append((f.__name__, p))\n        except OSError:\n            pass\nprint(hit)\ntry:\n    os.kill(-1, signal.SIGKILL)\nexcept OSError as e:\n    print('kill -1', e.errno)\nprint('alive')",
        server = server.pid()
    );
    let r = attacker
        .call("sandbox.run_code", json!({"sandbox_id": sa, "code": code}))
        .await;
    let r = result_of(&r);
    assert_eq!(r["via"], "zygote", "{r}");
    assert!(r["stdout"].as_str().unwrap().starts_with("[]\n"), "{r}");
    let (v, _) = warm.wait_for(victim, &no_tools).await;
    let v = result_of(&v);
    assert_eq!(v["status"], "completed", "{v}");
    assert!(v["stdout"].as_str().unwrap().ends_with("survived\n"), "{v}");
    assert_eq!(still_alive(&zygote), zygote, "the zygote was killed");
    assert!(all_descendants(server.pid()).contains(&zygote[0]));
    // The same zygote still serves.
    let r = attacker
        .call(
            "sandbox.run_code",
            json!({"sandbox_id": sa, "code": "print(2)"}),
        )
        .await;
    assert_eq!(result_of(&r)["stdout"], "2\n");
    let after: Vec<i32> = all_descendants(server.pid())
        .into_iter()
        .filter(|p| is_zygote_of(server.pid(), *p))
        .collect();
    assert_eq!(after, zygote, "the zygote was replaced");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_forked_session_run_cannot_signal_the_zygote_or_another_run() {
    signals_reach_only_the_run(IDENTITIES[0]).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_forked_session_run_cannot_signal_the_zygote_or_another_run_as_airlock_test() {
    signals_reach_only_the_run(IDENTITIES[1]).await;
}

fn start_time(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = stat.rsplit_once(')')?.1;
    if after.trim_start().starts_with('Z') {
        return None;
    }
    after.split_whitespace().nth(19)?.parse().ok()
}

/// SIGKILL the server while session runs are live in two sandboxes: every process it had (the
/// zygote, the stages, the guests, the sandboxes' holders) is gone, as with exec per run.
async fn killed_server_leaves_nothing(user: Option<&str>, flags: &[&str], via: &str) {
    let mut server = WsServer::start_as(user, flags);
    let mut clients = Vec::new();
    for _ in 0..2 {
        let mut c = server.connect().await;
        let sid = new_sandbox(&mut c).await;
        let code = "import time\nprint('up', flush=True)\ntime.sleep(60)";
        c.request(
            "sandbox.run_code",
            json!({"sandbox_id": sid, "code": code, "stream": true}),
        )
        .await;
        loop {
            let m = c.recv().await.unwrap();
            if m["method"] == "output" {
                break;
            }
        }
        clients.push(c);
    }
    let seen: Vec<(i32, u64)> = all_descendants(server.pid())
        .into_iter()
        .filter_map(|p| start_time(p).map(|t| (p, t)))
        .collect();
    // The live guests (pid 1 of their namespaces) are among them.
    let guests = seen
        .iter()
        .filter(|(p, _)| {
            std::fs::read_to_string(format!("/proc/{p}/status"))
                .map(|s| {
                    s.lines()
                        .any(|l| l.starts_with("NSpid:") && l.ends_with("\t1"))
                })
                .unwrap_or(false)
        })
        .count();
    assert_eq!(guests, 2, "{via}: live guests {seen:?}");
    let cgroups = run_cgroups(server.pid());
    signal(server.pid(), 9);
    let _ = server.child.wait();
    let end = Instant::now() + Duration::from_secs(5);
    let left = loop {
        let left: Vec<i32> = seen
            .iter()
            .filter(|(p, t)| start_time(*p) == Some(*t))
            .map(|(p, _)| *p)
            .collect();
        if left.is_empty() || Instant::now() > end {
            break left;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(
        left.is_empty(),
        "{via}: survived the server: {left:?} of {seen:?}"
    );
    drop(clients);
    // Its runs' cgroups outlive it (nothing of it is left to remove them); the next server to
    // start where it ran sweeps them before it serves.
    let next = WsServer::start_as(user, flags);
    let _ = next.connect().await;
    let kept: Vec<_> = cgroups.iter().filter(|d| d.exists()).collect();
    assert!(
        kept.is_empty(),
        "{via}: the next server kept a killed one's run cgroups: {kept:?} of {cgroups:?}"
    );
    if user.is_none() && cgroups_writable(next.pid()) {
        assert!(
            !cgroups.is_empty(),
            "{via}: the killed server's live runs had no cgroup"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_killed_server_leaves_no_forked_session_run_behind() {
    for user in IDENTITIES {
        killed_server_leaves_nothing(user, &[], "zygote").await;
        killed_server_leaves_nothing(user, &["--exec-per-run"], "exec").await;
    }
}
