//! procfs walks: descendants, summed RSS, existence.

use std::process::Command;
use std::time::{Duration, Instant};

use airlock_jail::procfs::{descendants, process_exists, tree_rss_bytes};

#[test]
fn finds_descendants_and_their_rss() {
    let mut child = Command::new("/bin/sh")
        .args(["-c", "sleep 30 & sleep 30 & wait"])
        .spawn()
        .unwrap();
    let pid = child.id() as i32;
    let start = Instant::now();
    while descendants(pid).len() < 2 && start.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let d = descendants(pid);
    assert_eq!(d.len(), 2, "{d:?}");
    assert!(!d.contains(&pid));
    let own = airlock_jail::procfs::rss_bytes(pid);
    assert!(own > 0);
    assert!(tree_rss_bytes(pid) > own);
    // Our own tree contains the shell and its two sleeps.
    let mine = descendants(std::process::id() as i32);
    assert!(mine.contains(&pid) && d.iter().all(|p| mine.contains(p)));
    for p in &d {
        airlock_jail::process::kill(*p, libc::SIGKILL).unwrap();
    }
    child.wait().unwrap();
    assert!(!process_exists(pid));
    assert!(process_exists(std::process::id() as i32));
    assert!(!process_exists(0) && !process_exists(-1));
}
