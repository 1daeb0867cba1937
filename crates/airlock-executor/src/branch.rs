//! Finishing a forkable kernel's branch from outside (issue 27's copy-on-write fork): the
//! branch is a clone of the kernel in new namespaces, its user namespace nested in its
//! sandbox's, its mount namespace a copy of the kernel's (pivoted into the parent sandbox's
//! root, whose writable mounts and `/proc` are still the parent's). This helper, as the
//! sandbox's host identity, has already joined the branch's user namespace, written its maps
//! and built a fresh root in a mount namespace of its own ([`crate::assemble::build`]) —
//! the branch sandbox's, where its later runs start. Here it grafts that root's writable
//! tmpfs into the branch: the parent's files copied in (no link followed; regular files,
//! directories and symlinks — as a snapshot carries them), its `work`, `tmp` and `shm` over
//! the branch's `/work`, `/tmp` and `/dev/shm`, a procfs of the branch's own pid namespace
//! over `/proc`, its loopback up; then hands the namespaces and the data root to the broker
//! like any assembled sandbox.
use std::ffi::OsStr;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;

use airlock_jail::dirfd::{DirFd, FileKind};
use airlock_jail::mounts::{self, Attrs};
use airlock_jail::{fdpass, fsmount, identity, net};

use crate::assemble_error::{at, AssembleError};
use crate::config::{SealConfig, ROOT_STAGING};

/// The writable directories: the data root's name, where the root was built with it, and
/// where the guest sees it — in the order a fresh sandbox's mount table lists them.
const WRITABLE: [(&str, &str, &str); 3] = [
    ("shm", "dev/shm", "/dev/shm"),
    ("work", "work", "/work"),
    ("tmp", "tmp", "/tmp"),
];

/// Graft the freshly built root's writable tmpfs (`data`) and a procfs of its own into the
/// branch `pid`, then hand the branch sandbox over on `channel`. The caller is in the
/// branch's user namespace and in the new root's mount namespace.
pub(crate) fn graft_and_hand_over(
    channel: BorrowedFd<'_>,
    pid: i32,
    data: OwnedFd,
    inodes: u64,
) -> Result<(), AssembleError> {
    let user = identity::own_namespace("user").map_err(at("hand-over"))?;
    let sandbox_mnt = identity::own_namespace("mnt").map_err(at("hand-over"))?;
    let writable = Attrs {
        read_only: false,
        nosuid: true,
        nodev: true,
        noexec: false,
    };
    // Copies of the fresh binds, made while they are in this mount namespace.
    let mut trees = Vec::with_capacity(WRITABLE.len());
    for (_, staged, guest) in WRITABLE {
        let fd = mounts::open_path(&Path::new(ROOT_STAGING).join(staged)).map_err(at("graft"))?;
        trees.push((
            mounts::detached_copy(fd.as_fd(), writable).map_err(at("graft"))?,
            guest,
        ));
    }
    let ns = |kind: &str| {
        File::open(format!("/proc/{pid}/ns/{kind}")).map_err(at("the branch's namespaces"))
    };
    let (mnt, pidns, netns) = (ns("mnt")?, ns("pid")?, ns("net")?);
    identity::join_mount_namespace(mnt.as_fd()).map_err(at("the branch's mount namespace"))?;
    let data = DirFd::from_owned(data).map_err(at("data root"))?;
    let mut budget = inodes;
    for (name, _, guest) in WRITABLE {
        let from = DirFd::open(Path::new(guest)).map_err(at("the parent's files"))?;
        let to = data.open_dir_at(name).map_err(at("the branch's files"))?;
        copy_tree(&from, &to, &mut budget).map_err(at("the parent's files"))?;
    }
    for (tree, guest) in &trees {
        mounts::attach(tree.as_fd(), Path::new(guest)).map_err(at("graft"))?;
    }
    let proc = fsmount::detached_proc(pidns.as_fd()).map_err(at("the branch's /proc"))?;
    mounts::attach(proc.as_fd(), Path::new("/proc")).map_err(at("the branch's /proc"))?;
    identity::join_net_namespace(netns.as_fd()).map_err(at("the branch's network"))?;
    net::loopback_up().map_err(at("the branch's loopback"))?;
    for fd in [user, sandbox_mnt, data.into()] {
        fdpass::send_fd(channel, fd.as_fd()).map_err(at("hand-over"))?;
    }
    Ok(())
}

/// Copy `from`'s tree into `to` without following a link: directories (sticky bit kept,
/// never a set-id bit), regular files (permission bits), symlinks as links. Fifos, sockets
/// and devices are not carried. At most `budget` entries, counted down.
fn copy_tree(from: &DirFd, to: &DirFd, budget: &mut u64) -> io::Result<()> {
    let limit = usize::try_from(*budget).unwrap_or(usize::MAX);
    for name in from.entries(limit)? {
        *budget = budget
            .checked_sub(1)
            .ok_or_else(|| io::Error::from_raw_os_error(28))?; // ENOSPC
        copy_entry(from, to, &name, budget)?;
    }
    Ok(())
}

fn copy_entry(from: &DirFd, to: &DirFd, name: &OsStr, budget: &mut u64) -> io::Result<()> {
    let m = from.stat_at(name)?;
    match m.kind {
        FileKind::Directory => {
            to.mkdir_at(name, m.mode & 0o1777)?;
            copy_tree(&from.open_dir_at(name)?, &to.open_dir_at(name)?, budget)
        }
        FileKind::Regular => {
            let mut src = from.open_read_at(name)?;
            let mut dst = to.create_at(name, m.mode & 0o777)?;
            io::copy(&mut src, &mut dst).map(|_| ())
        }
        FileKind::Symlink => to.symlink_at(&from.read_link_at(name)?, name),
        _ => Ok(()),
    }
}

/// Make the kernel's `/work`, `/tmp` and `/dev/shm` read-only in its own mount namespace (as
/// the sandbox's owner, from its user namespace): its branches, copies of that namespace, are
/// born with them read-only, and locked so (a less privileged copy cannot remount them).
pub(crate) fn seal(cfg: &SealConfig) -> Result<(), AssembleError> {
    let pid = cfg.kernel_pid;
    let ns = |kind: &str| {
        File::open(format!("/proc/{pid}/ns/{kind}")).map_err(at("the kernel's namespaces"))
    };
    let (user, mnt) = (ns("user")?, ns("mnt")?);
    if let Some(id) = cfg.identity {
        identity::become_id(id).map_err(at("identity"))?;
    }
    identity::join_user_namespace(user.as_fd()).map_err(at("the kernel's user namespace"))?;
    identity::join_mount_namespace(mnt.as_fd()).map_err(at("the kernel's mount namespace"))?;
    let read_only = Attrs {
        read_only: true,
        nosuid: true,
        nodev: true,
        noexec: false,
    };
    for (_, _, guest) in WRITABLE {
        mounts::set_attrs(Path::new(guest), read_only).map_err(at("seal"))?;
    }
    Ok(())
}
