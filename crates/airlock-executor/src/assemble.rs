//! Building a sandbox's own root (the bubblewrap/nsjail model), once per sandbox: in a stage
//! of its own for a sandbox that outlives a run ([`assemble`]), or at the start of a one-shot
//! run's own stage ([`build`]: one process and one user namespace fewer per run).
//!
//! In a fresh user namespace (single-entry maps; as a root broker's sandbox, an unprivileged
//! host identity first) and mount namespace: a small tmpfs over [`ROOT_STAGING`] becomes the
//! root; the host paths the workload needs are bound into it read-only, nosuid, nodev (each tree
//! gets its attributes before it is attached); `/dev` is a tmpfs with six device nodes; one
//! size- and inode-bounded tmpfs holds everything writable (`/work`, `/tmp`, `/dev/shm`), its
//! own mount is detached so only those three binds reach it; the skeleton and `/dev` are made
//! read-only. The namespaces and the work dir go back to the broker, which holds them for the
//! sandbox's life: nothing is left on the host, and closing them frees everything.
//!
//! Runs join these namespaces, unshare a copy of the mount namespace, mount their own `/proc`
//! and pivot into the root ([`crate::stage`]); a one-shot run is already in them.
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use airlock_jail::mounts::{self, Attrs, Tmpfs};
use airlock_jail::{fdpass, identity, ns, process, userns};

use crate::assemble_error::at;
pub use crate::assemble_error::AssembleError;
use crate::bind_source::Source;
use crate::config::{AssembleConfig, DataBounds, INSIDE_ID, ROOT_STAGING, SANDBOX_CHANNEL_FD};
use crate::container;

/// The skeleton (directories, mount points, a few /etc files) is tiny.
const SKELETON: Tmpfs = Tmpfs {
    bytes: 4 << 20,
    inodes: 16_384,
    mode: 0o755,
    attrs: Attrs {
        read_only: false,
        nosuid: true,
        nodev: true,
        noexec: false,
    },
};

/// Device nodes the guest gets (bound from the host, nosuid, noexec).
const DEVICES: [&str; 5] = ["null", "zero", "full", "random", "urandom"];

/// Files the root gets of its own (unless a bind provides them).
const PASSWD: &str = "root:x:0:0:root:/root:/usr/sbin/nologin\n\
                      sandbox:x:1000:1000:sandbox:/work:/bin/sh\n\
                      nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n";
const GROUP: &str = "root:x:0:\nsandbox:x:1000:\nnogroup:x:65534:\n";
const HOSTS: &str = "127.0.0.1 localhost airlock\n::1 localhost ip6-localhost\n";

/// Assemble the root and hand the namespaces and the work dir to the broker.
pub fn assemble(cfg: &AssembleConfig) -> Result<(), AssembleError> {
    let channel = fdpass::take_inherited(SANDBOX_CHANNEL_FD).map_err(at("channel"))?;
    let data = build(cfg)?;
    match cfg.branch_of {
        None => hand_over(channel.as_fd(), data),
        Some(pid) => {
            crate::branch::graft_and_hand_over(channel.as_fd(), pid, data, cfg.data.inodes)
        }
    }
}

/// Send the caller's user and mount namespaces and `data` (the root of the sandbox's writable
/// tmpfs: `work`, `tmp`, `shm`), in that order, over `channel`.
pub fn hand_over(channel: BorrowedFd<'_>, data: OwnedFd) -> Result<(), AssembleError> {
    for fd in [
        identity::own_namespace("user").map_err(at("hand-over"))?,
        identity::own_namespace("mnt").map_err(at("hand-over"))?,
        data,
    ] {
        fdpass::send_fd(channel, fd.as_fd()).map_err(at("hand-over"))?;
    }
    Ok(())
}

/// Build the root at [`ROOT_STAGING`] in a fresh user and mount namespace, which the calling
/// process is in from then on (a one-shot run's stage goes on from here to isolate and fork);
/// returns the root of its writable tmpfs (`work`, `tmp`, `shm`), opened.
pub fn build(cfg: &AssembleConfig) -> Result<OwnedFd, AssembleError> {
    // The bind trees are cloned (detached, read-only, nosuid, nodev) where the caller may
    // clone mounts: a root broker's stage does it in the host's mount namespace with root's
    // access (an interpreter may sit under /root) before it becomes the sandbox's unprivileged
    // identity; any other stage in its own new mount namespace. Either way before anything is
    // mounted over the host tree.
    let early = cfg.identity.is_some();
    let mut cloned = if early { Some(sources(cfg)?) } else { None };
    if let Some(id) = cfg.identity {
        identity::become_id(id).map_err(at("identity"))?;
    }
    // After the identity change, which clears it.
    process::set_parent_death_signal_kill().map_err(at("pdeathsig"))?;
    match cfg.branch_of {
        None => userns::enter_user_namespace(INSIDE_ID, INSIDE_ID)
            .map_err(container::explain(container::USERNS))
            .map_err(at("userns"))?,
        Some(pid) => userns::join_and_map_branch(pid, INSIDE_ID).map_err(at("branch userns"))?,
    }
    ns::unshare(ns::Namespaces {
        mount: true,
        ..ns::Namespaces::default()
    })
    .map_err(at("mount namespace"))?;
    ns::make_mounts_private().map_err(at("mount namespace"))?;
    let (sources, links) = match cloned.take() {
        Some(c) => c,
        None => sources(cfg)?,
    };
    let root = Path::new(ROOT_STAGING);
    mounts::mount_tmpfs(root, SKELETON).map_err(at("root tmpfs"))?;
    for s in &sources {
        bind(root, s)?;
    }
    for (link, target) in &links {
        reproduce_link(root, link, target)?;
    }
    if cfg.image.is_none() {
        // An image brings its own /etc (the store added the sandbox's account and hosts).
        write_etc(root)?;
    }
    mkdirs(&root.join("proc"))?;
    make_dev(root)?;
    let data = make_data(root, cfg.data)?;
    mounts::set_attrs(&root.join("dev"), read_only()).map_err(at("read-only /dev"))?;
    mounts::set_attrs(root, read_only()).map_err(at("read-only root"))?;
    Ok(data)
}

fn read_only() -> Attrs {
    Attrs {
        read_only: true,
        ..Attrs::default()
    }
}

/// The path inside the root for a host path (absolute, no `..`).
fn inside(root: &Path, host: &Path) -> Result<PathBuf, AssembleError> {
    let mut p = root.to_path_buf();
    for c in host.components() {
        match c {
            Component::RootDir => {}
            Component::Normal(n) => p.push(n),
            _ => {
                return Err(AssembleError {
                    step: "binds",
                    message: format!("{} is not a plain absolute path", host.display()),
                })
            }
        }
    }
    Ok(p)
}

/// The binds and links of the root: an image's top-level entries, or the host paths asked for.
#[allow(clippy::type_complexity, reason = "a private pair of lists")]
fn sources(cfg: &AssembleConfig) -> Result<(Vec<Source>, Vec<(PathBuf, PathBuf)>), AssembleError> {
    match &cfg.image {
        Some(image) if cfg.binds.is_empty() => crate::assemble_image::open_image(image),
        Some(_) => Err(AssembleError {
            step: "binds",
            message: "a root from an image binds nothing of the host".into(),
        }),
        None => open_sources(&cfg.binds),
    }
}

/// Canonical, existing, de-duplicated sources (a path under another bound one is covered by
/// it), each opened now; and the symlinks among the requested paths, to reproduce.
#[allow(clippy::type_complexity, reason = "a private pair of lists")]
fn open_sources(
    binds: &[PathBuf],
) -> Result<(Vec<Source>, Vec<(PathBuf, PathBuf)>), AssembleError> {
    let mut canon: Vec<PathBuf> = Vec::new();
    let mut links = Vec::new();
    for b in binds {
        let Ok(real) = std::fs::canonicalize(b) else {
            continue; // absent on this machine: nothing to bind
        };
        if let Ok(target) = std::fs::read_link(b) {
            links.push((b.clone(), target));
        }
        canon.push(real);
    }
    canon.sort();
    canon.dedup();
    let mut kept: Vec<PathBuf> = Vec::new();
    for c in canon {
        if c == Path::new("/") {
            return Err(AssembleError {
                step: "binds",
                message: "the host root cannot be bound".into(),
            });
        }
        if !kept.iter().any(|k| c.starts_with(k)) {
            kept.push(c);
        }
    }
    let mut sources = Vec::new();
    for guest in kept {
        let fd = mounts::open_path(&guest).map_err(at("open bind source"))?;
        let tree = mounts::detached_copy(fd.as_fd(), Attrs::SYSTEM)
            .map_err(container::explain(container::CLONE_TREE))
            .map_err(at("bind"))?;
        let dir = std::fs::metadata(&guest)
            .map(|m| m.is_dir())
            .unwrap_or(false);
        sources.push(Source { guest, tree, dir });
    }
    Ok((sources, links))
}

fn mkdirs(p: &Path) -> Result<(), AssembleError> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(p)
        .map_err(at("mkdir"))
}

fn bind(root: &Path, s: &Source) -> Result<(), AssembleError> {
    let target = inside(root, &s.guest)?;
    if let Some(parent) = target.parent() {
        mkdirs(parent)?;
    }
    if s.dir {
        mkdirs(&target)?;
    } else {
        std::fs::File::create(&target).map_err(at("bind target"))?;
    }
    mounts::attach(s.tree.as_fd(), &target).map_err(at("bind"))
}

/// A requested path that is a symlink on the host (`/bin -> usr/bin`) is the same symlink in
/// the root, where nothing else is there already.
fn reproduce_link(root: &Path, link: &Path, target: &Path) -> Result<(), AssembleError> {
    let at_path = inside(root, link)?;
    if at_path.symlink_metadata().is_ok() {
        return Ok(());
    }
    if let Some(parent) = at_path.parent() {
        mkdirs(parent)?;
    }
    std::os::unix::fs::symlink(target, &at_path).map_err(at("symlink"))
}

fn write_etc(root: &Path) -> Result<(), AssembleError> {
    let etc = root.join("etc");
    mkdirs(&etc)?;
    for (name, text) in [("passwd", PASSWD), ("group", GROUP), ("hosts", HOSTS)] {
        let p = etc.join(name);
        if p.symlink_metadata().is_err() {
            std::fs::write(&p, text).map_err(at("/etc"))?;
        }
    }
    Ok(())
}

fn make_dev(root: &Path) -> Result<(), AssembleError> {
    let dev = root.join("dev");
    mkdirs(&dev)?;
    mounts::mount_tmpfs(
        &dev,
        Tmpfs {
            bytes: 64 << 10,
            inodes: 64,
            mode: 0o755,
            attrs: Attrs {
                read_only: false,
                nosuid: true,
                nodev: false,
                noexec: true,
            },
        },
    )
    .map_err(at("/dev tmpfs"))?;
    for name in DEVICES {
        let host = Path::new("/dev").join(name);
        let target = dev.join(name);
        std::fs::File::create(&target).map_err(at("/dev node"))?;
        let src = mounts::open_path(&host).map_err(at("/dev node"))?;
        let tree = mounts::detached_copy(src.as_fd(), Attrs::DEVICE).map_err(at("/dev node"))?;
        mounts::attach(tree.as_fd(), &target).map_err(at("/dev node"))?;
    }
    for (name, to) in [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        std::os::unix::fs::symlink(to, dev.join(name)).map_err(at("/dev link"))?;
    }
    mkdirs(&dev.join("shm"))
}

/// The one bounded tmpfs for everything writable; returns its root (holding `work`, `tmp` and
/// `shm`), opened for the broker: its files, its snapshots.
fn make_data(root: &Path, bounds: DataBounds) -> Result<OwnedFd, AssembleError> {
    let data = root.join(".data");
    mkdirs(&data)?;
    mounts::mount_tmpfs(
        &data,
        Tmpfs {
            bytes: bounds.bytes,
            // The three directories below count too.
            inodes: bounds.inodes.saturating_add(4),
            mode: 0o755,
            attrs: Attrs {
                read_only: false,
                nosuid: true,
                nodev: true,
                noexec: false,
            },
        },
    )
    .map_err(at("data tmpfs"))?;
    let writable = Attrs {
        read_only: false,
        nosuid: true,
        nodev: true,
        noexec: false,
    };
    for (name, guest, mode) in [
        ("work", "work", 0o755),
        ("tmp", "tmp", 0o1777),
        ("shm", "dev/shm", 0o1777),
    ] {
        let src = data.join(name);
        std::fs::create_dir(&src).map_err(at("data dir"))?;
        std::fs::set_permissions(&src, std::fs::Permissions::from_mode(mode))
            .map_err(at("data dir"))?;
        let target = root.join(guest);
        mkdirs(&target)?;
        let fd = mounts::open_path(&src).map_err(at("data bind"))?;
        let tree = mounts::detached_copy(fd.as_fd(), writable).map_err(at("data bind"))?;
        mounts::attach(tree.as_fd(), &target).map_err(at("data bind"))?;
    }
    // Opened before the detach: the descriptor keeps the (then unreachable) mount.
    let handle = airlock_jail::dirfd::DirFd::open(&data).map_err(at("data dir"))?;
    mounts::detach(&data).map_err(at("data detach"))?;
    std::fs::remove_dir(&data).map_err(at("data detach"))?;
    Ok(handle.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inside_maps_plain_absolute_paths_only() {
        let r = Path::new("/tmp");
        assert_eq!(
            inside(r, Path::new("/usr/lib")).unwrap(),
            Path::new("/tmp/usr/lib")
        );
        assert!(inside(r, Path::new("/usr/../etc")).is_err());
        assert!(inside(r, Path::new("usr")).is_ok_and(|p| p == Path::new("/tmp/usr")));
    }
}
