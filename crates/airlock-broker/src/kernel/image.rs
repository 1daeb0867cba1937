//! A kernel's state carried as its process image instead of pickled (see
//! `airlock_executor::kernel_image` for the format, `airlock_jail::image` for how a fresh,
//! fully sandboxed stage becomes it). Between cells the broker asks the kernel for what only
//! it can say (its signal actions, glibc's rseq area, its working directory), stops it, reads
//! its registers, maps and memory from outside, and streams the image into the store as it
//! reads. A kernel it cannot image faithfully — a thread, a descriptor beyond its own four, a
//! shared mapping, a file mapped that is gone — is pickled as before.
use std::collections::BTreeSet;
use std::io::Read;
use std::os::fd::{AsFd, OwnedFd};
use std::time::Duration;

use airlock_executor::kernel_image::{
    encode_header, Header, Kind, Region, MAX_HEADER, MAX_REGIONS,
};
use airlock_jail::procfs::{maps_line, Mapping};
use airlock_protocol::Message;
use serde_json::Value;

use super::live::Live;
use super::procs::Procs;
use super::signals::{signal_kernel, stop_kernel, SIGCONT};

/// Where a paused kernel's image is read from, as often as a kernel is started from it (a
/// verified snapshot, held open): the broker never spools or holds it.
pub trait ImageSource: Send + Sync + std::fmt::Debug {
    /// A reader over the image, from its first byte.
    fn open(&self) -> std::io::Result<Box<dyn Read + Send>>;
}

/// The first bytes of `state` (as many as an image's magic), and whether they are an image's
/// (a pickled state starts otherwise): the caller goes on with them chained before the rest.
pub fn peek_image(state: &mut dyn Read) -> std::io::Result<(bool, Vec<u8>)> {
    let magic = airlock_executor::kernel_image::MAGIC;
    let mut head = Vec::with_capacity(magic.len());
    state.take(magic.len() as u64).read_to_end(&mut head)?;
    Ok((head.as_slice() == magic, head))
}

/// The rest of an image once its header went down the stage's pipe: its filled ranges'
/// bytes, written into the restoring process once it has mapped them ([`Fill::write_into`]).
pub(super) struct Fill {
    reader: Box<dyn Read + Send>,
    ranges: Vec<(u64, u64)>,
}

impl std::fmt::Debug for Fill {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fill")
            .field("ranges", &self.ranges.len())
            .finish_non_exhaustive()
    }
}

/// Open `source` and read its header: the header, and a reader at its first filled byte.
fn open_header(source: &dyn ImageSource) -> std::io::Result<(Header, Box<dyn Read + Send>)> {
    let mut reader = source.open()?;
    let header =
        airlock_executor::kernel_image::read_header(&mut reader).map_err(std::io::Error::other)?;
    Ok((header, reader))
}

/// Open `source`: its header goes down a pipe for the restoring stage (which reads it on
/// `KERNEL_IMAGE_FD`), the rest waits in the [`Fill`].
pub(super) fn feed(source: &dyn ImageSource) -> std::io::Result<(OwnedFd, Fill)> {
    let (header, reader) = open_header(source)?;
    let ranges = header.filled().collect();
    let bytes = encode_header(&header);
    let (pipe, mut writer) = std::io::pipe()?;
    // Written from a thread: a header larger than the pipe would block until the stage reads.
    std::thread::Builder::new()
        .name("kernel-image".into())
        .spawn(move || {
            let _ = std::io::Write::write_all(&mut writer, &bytes);
        })?;
    Ok((OwnedFd::from(pipe), Fill { reader, ranges }))
}

impl Fill {
    /// Write every filled range's bytes into `pid` (mapped writable by now), in order: this
    /// thread writes while another decodes the next buffers from the snapshot. `pid` must be
    /// a child of `parent` (the restoring stage's supervisor); the bytes go through its
    /// `/proc/PID/mem`, opened once while that process is known to hold the pid, so that if it
    /// dies meanwhile they go nowhere, never into a process that reused its pid.
    pub(super) fn write_into(self, pid: i32, parent: i32) -> std::io::Result<()> {
        use std::os::unix::fs::FileExt;
        const BUF: usize = 1 << 20;
        let mem = memory_of_child(pid, parent)?;
        let Fill { mut reader, ranges } = self;
        let (full, filled) = std::sync::mpsc::sync_channel::<std::io::Result<Vec<u8>>>(2);
        let (empty, spare) = std::sync::mpsc::channel::<Vec<u8>>();
        let total: u64 = ranges.iter().map(|r| r.1).sum();
        let decoder = std::thread::Builder::new()
            .name("kernel-image".into())
            .spawn(move || {
                let mut left = total;
                while left > 0 {
                    let mut buf = spare.try_recv().unwrap_or_else(|_| vec![0u8; BUF]);
                    let n = usize::try_from(left).unwrap_or(BUF).min(BUF);
                    buf.resize(n, 0);
                    let read = reader.read_exact(&mut buf).map(|()| buf);
                    let failed = read.is_err();
                    if full.send(read).is_err() || failed {
                        return;
                    }
                    left -= n as u64;
                }
            })?;
        let mut pending: &[u8] = &[];
        let mut current = Vec::new();
        for (start, len) in ranges {
            let mut done = 0u64;
            while done < len {
                if pending.is_empty() {
                    if !current.is_empty() {
                        let _ = empty.send(std::mem::take(&mut current));
                    }
                    current = filled
                        .recv()
                        .map_err(|_| std::io::Error::other("the image ended early"))??;
                    pending = &[];
                }
                let src: &[u8] = if pending.is_empty() {
                    &current
                } else {
                    pending
                };
                let want = usize::try_from(len - done)
                    .unwrap_or(usize::MAX)
                    .min(src.len());
                let n = mem.write_at(&src[..want], start + done)?;
                if n == 0 {
                    return Err(std::io::Error::other("the restoring process took no bytes"));
                }
                done += n as u64;
                pending = &src[n..];
            }
        }
        drop(filled);
        let _ = decoder.join();
        Ok(())
    }
}

/// `/proc/PID/mem` of `pid`, opened for writing, checked to be the memory of a child of
/// `parent`: the pidfd is opened first and found alive last, so the pid named that one process
/// throughout (a pid is not reused while its process or zombie lives).
fn memory_of_child(pid: i32, parent: i32) -> std::io::Result<std::fs::File> {
    let pidfd = airlock_jail::pidfd::open(pid).map_err(std::io::Error::other)?;
    let mem = std::fs::OpenOptions::new()
        .write(true)
        .open(format!("/proc/{pid}/mem"))?;
    // Field 4 of its stat: the parent's pid.
    let ppid =
        airlock_jail::procfs::stat_fields(pid).and_then(|f| f.get(4 - 3)?.parse::<i32>().ok());
    if ppid != Some(parent) {
        return Err(std::io::Error::other(
            "the restoring process is not the stage's child",
        ));
    }
    airlock_jail::pidfd::send_signal(pidfd.as_fd(), 0)
        .map_err(|e| std::io::Error::other(format!("the restoring process ended: {e}")))?;
    Ok(mem)
}

/// The whole image `source` holds, from its first byte, and its length (its header says),
/// read in one pass.
pub(super) fn whole(source: &dyn ImageSource) -> std::io::Result<(u64, Box<dyn Read + Send>)> {
    let (header, rest) = open_header(source)?;
    let head = encode_header(&header);
    let len = head.len() as u64 + header.filled_len();
    Ok((len, Box::new(std::io::Cursor::new(head).chain(rest))))
}

/// Why a kernel is not imaged (it is pickled instead), or its imaging failed.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    /// Something of the kernel an image would not carry (it stays as it was).
    #[error("{0}")]
    NotImageable(String),
    /// The exchange broke; the kernel must be ended.
    #[error("the kernel could not be imaged: {0}")]
    Broken(String),
}

impl From<super::pages::PagesError> for ImageError {
    fn from(e: super::pages::PagesError) -> Self {
        match e {
            super::pages::PagesError::TooMany
            | super::pages::PagesError::Hidden
            | super::pages::PagesError::Guarded => ImageError::NotImageable(e.to_string()),
            super::pages::PagesError::Unreadable(why) => ImageError::Broken(why),
        }
    }
}

/// What the kernel said of itself before it was imaged.
#[derive(Debug)]
pub(super) struct Facts {
    sigactions: Vec<[u64; 5]>,
    sigmask: u64,
    rseq: Option<(i64, u32)>,
    cwd: String,
    /// Each file it maps: its size and mtime as the kernel sees it (the broker resolves no
    /// path the sandbox controls).
    files: std::collections::BTreeMap<String, (u64, (i64, i64))>,
    /// The names the image keeps.
    pub(super) saved: Vec<String>,
}

/// Most mapped files a kernel's facts may name.
const MAX_FILES: usize = 4096;

/// How long the kernel gets to say its facts.
const FACTS_TIMEOUT: Duration = Duration::from_secs(30);

/// Ask the (stopped) kernel for its facts; it is stopped again afterwards.
pub(super) async fn facts(live: &mut Live) -> Result<Facts, ImageError> {
    let procs = live.procs();
    let Procs::Stage(_) = procs else {
        return Err(ImageError::NotImageable("a branch of a fork".into()));
    };
    signal_kernel(procs, SIGCONT);
    let id = super::ids::request_id("image-facts");
    if !live
        .launched
        .send(Message::request(id.clone(), "image_facts", None))
    {
        return Err(ImageError::Broken("its socket is closed".into()));
    }
    let answer = tokio::time::timeout(FACTS_TIMEOUT, async {
        match live.launched.recv().await {
            Some(Message::Response(r)) if r.id.as_ref() == Some(&id) => Ok(r.outcome),
            Some(_) => Err(ImageError::Broken("an unexpected message".into())),
            None => Err(ImageError::Broken("its socket closed".into())),
        }
    })
    .await
    .map_err(|_| ImageError::Broken("no answer in time".into()))??;
    if !stop_kernel(procs).await {
        return Err(ImageError::Broken("it would not stop afterwards".into()));
    }
    let v = answer.map_err(|e| ImageError::NotImageable(e.message.chars().take(300).collect()))?;
    parse_facts(&v).ok_or_else(|| ImageError::Broken("malformed facts".into()))
}

fn parse_facts(v: &Value) -> Option<Facts> {
    let sigactions = v["sigactions"]
        .as_array()?
        .iter()
        .take(64)
        .map(|a| {
            let a = a.as_array()?;
            let mut out = [0u64; 5];
            for (o, x) in out.iter_mut().zip(a) {
                *o = x.as_u64()?;
            }
            Some(out)
        })
        .collect::<Option<Vec<_>>>()?;
    let rseq = match &v["rseq"] {
        Value::Array(a) if a.len() == 2 => {
            Some((a[0].as_i64()?, u32::try_from(a[1].as_u64()?).ok()?))
        }
        _ => None,
    };
    let saved = super::state::saved_names(v);
    let files = v["files"]
        .as_object()?
        .iter()
        .take(MAX_FILES)
        .map(|(path, id)| {
            let id = id.as_array()?;
            let n = |i: usize| id.get(i).and_then(Value::as_i64);
            let size = u64::try_from(n(0)?).ok()?;
            Some((path.chars().take(4096).collect(), (size, (n(1)?, n(2)?))))
        })
        .collect::<Option<_>>()?;
    Some(Facts {
        files,
        sigactions,
        sigmask: v["sigmask"].as_u64()?,
        rseq,
        cwd: v["cwd"].as_str()?.chars().take(4096).collect(),
        saved,
    })
}

/// A stopped kernel's image, read from its memory as the store asks for bytes.
pub struct ImageReader {
    header: std::io::Cursor<Vec<u8>>,
    /// `(address, length)` of every filled range, in stream order.
    ranges: Vec<(u64, u64)>,
    next: usize,
    done_in_range: u64,
    pid: i32,
    pidfd: OwnedFd,
    /// The whole stream's length.
    pub len: u64,
}

/// Image the stopped kernel `pid` (its facts already taken); at most `cap` bytes of memory.
pub(super) fn capture(pid: i32, facts: &Facts, cap: u64) -> Result<ImageReader, ImageError> {
    let not = |why: &str| ImageError::NotImageable(why.to_string());
    let pidfd = airlock_jail::pidfd::open(pid).map_err(|e| not(&e.to_string()))?;
    if airlock_jail::procfs::thread_count(pid) != Some(1) {
        return Err(not("it has more than one thread"));
    }
    check_fds(pid)?;
    let registers = airlock_jail::image::registers_of_stopped(pid).map_err(|e| {
        // ETIMEDOUT: it would not stop for the tracer and was ended.
        if e.errno() == Some(110) {
            ImageError::Broken(e.to_string())
        } else {
            not(&format!("its registers could not be read: {e}"))
        }
    })?;
    let maps = mappings(pid)?;
    let stage = stage_binary();
    let pages = super::pages::Pages::open(pid)?;
    let mut regions = Vec::new();
    for m in maps.iter().filter(|m| Some((m.dev, m.inode)) != stage) {
        if let Some(r) = region(facts, m)? {
            regions.extend(pages.carried(r)?);
        }
        if regions.len() > MAX_REGIONS {
            return Err(not("it has too many mappings"));
        }
    }
    let header = Header {
        regions,
        registers: registers.gpr,
        fs_base: registers.fs_base,
        layout: layout(pid, &maps)?,
        sigactions: facts.sigactions.clone(),
        sigmask: facts.sigmask,
        rseq: facts
            .rseq
            .map(|(offset, size)| (registers.fs_base.wrapping_add_signed(offset), size.max(32))),
        cwd: facts.cwd.clone(),
    };
    let filled = header.filled_len();
    if filled > cap {
        return Err(not("its memory is larger than the bound"));
    }
    let head = encode_header(&header);
    if head.len() as u64 > MAX_HEADER {
        return Err(not(
            "its description is larger than a restoring stage reads",
        ));
    }
    let len = head.len() as u64 + filled;
    Ok(ImageReader {
        header: std::io::Cursor::new(head),
        ranges: header.filled().collect(),
        next: 0,
        done_in_range: 0,
        pid,
        pidfd,
        len,
    })
}

impl Read for ImageReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.header.read(buf)?;
        if n > 0 {
            return Ok(n);
        }
        let Some(&(start, len)) = self.ranges.get(self.next) else {
            // The pid still names the process imaged: nothing was read from a successor.
            airlock_jail::pidfd::send_signal(self.pidfd.as_fd(), 0).map_err(|e| {
                std::io::Error::other(format!("the kernel ended while imaged: {e}"))
            })?;
            return Ok(0);
        };
        let want = usize::try_from(len - self.done_in_range)
            .unwrap_or(usize::MAX)
            .min(buf.len());
        let got = airlock_jail::image::read_memory(
            self.pid,
            start + self.done_in_range,
            &mut buf[..want],
        )
        .map_err(std::io::Error::other)?;
        if got == 0 {
            return Err(std::io::Error::other(
                "the kernel's memory could not be read",
            ));
        }
        self.done_in_range += got as u64;
        if self.done_in_range == len {
            self.next += 1;
            self.done_in_range = 0;
        }
        Ok(got)
    }
}

/// The airlock binary's device and inode: a kernel restored from an image keeps the code of
/// the stage that restored it mapped (`airlock_jail::image`), which the next image leaves out.
fn stage_binary() -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(std::env::current_exe().ok()?).ok()?;
    Some((m.dev(), m.ino()))
}

fn proc_text(pid: i32, file: &str, limit: u64) -> Result<String, ImageError> {
    let path = format!("/proc/{pid}/{file}");
    let f = std::fs::File::open(&path).map_err(|e| ImageError::Broken(format!("{path}: {e}")))?;
    let mut text = String::new();
    f.take(limit)
        .read_to_string(&mut text)
        .map_err(|e| ImageError::Broken(format!("{path}: {e}")))?;
    Ok(text)
}

/// Exactly its own four descriptors: stdin, stdout, stderr and the broker's socket (a
/// restored kernel gets new ones at the same numbers; anything else it held would be gone).
fn check_fds(pid: i32) -> Result<(), ImageError> {
    let dir = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map_err(|e| ImageError::Broken(format!("its fds: {e}")))?;
    let fds: BTreeSet<String> = dir
        .take(64)
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect();
    let own: BTreeSet<String> = ["0", "1", "2", "3"].map(String::from).into();
    if fds == own {
        Ok(())
    } else {
        Err(ImageError::NotImageable(
            "it holds a file or socket of its own".into(),
        ))
    }
}

/// The kernel's mappings (`/proc/PID/maps`, at most 16 MiB of it).
fn mappings(pid: i32) -> Result<Vec<Mapping>, ImageError> {
    const LIMIT: u64 = 16 << 20;
    let maps = proc_text(pid, "maps", LIMIT)?;
    // Cut at the bound, the last mappings would be missing from the image.
    if maps.len() as u64 >= LIMIT {
        return Err(ImageError::NotImageable("it has too many mappings".into()));
    }
    maps.lines()
        .map(|line| {
            maps_line(line)
                .ok_or_else(|| ImageError::Broken(format!("an unreadable mapping: {line:.200}")))
        })
        .collect()
}

/// One mapping as a region (None: `[vsyscall]`, the same everywhere).
fn region(facts: &Facts, m: &Mapping) -> Result<Option<Region>, ImageError> {
    let (perms, name) = (&m.perms, m.name.as_str());
    let shared = perms[3] == b's';
    if shared && (perms[1] == b'w' || m.inode == 0) {
        return Err(ImageError::NotImageable(
            "it has a writable shared mapping".into(),
        ));
    }
    let prot = u32::from(perms[0] == b'r')
        | u32::from(perms[1] == b'w') << 1
        | u32::from(perms[2] == b'x') << 2;
    let readable = perms[0] == b'r';
    let (kind, fill) = match name {
        "[vsyscall]" => return Ok(None),
        "[vdso]" | "[vvar]" | "[vvar_vclock]" => (
            Kind::Special {
                name: name.to_string(),
            },
            false,
        ),
        "[stack]" => (Kind::Stack, readable),
        _ if m.inode != 0 && name.starts_with('/') => {
            if name.ends_with(" (deleted)") {
                return Err(ImageError::NotImageable(
                    "it maps a file that was deleted".into(),
                ));
            }
            let Some(&(size, mtime)) = facts.files.get(name) else {
                return Err(ImageError::NotImageable(format!(
                    "it maps {name:.100}, which it did not report"
                )));
            };
            let code = perms[1] != b'w' && perms[2] == b'x';
            (
                Kind::File {
                    path: name.to_string(),
                    offset: m.offset,
                    size,
                    mtime,
                    shared,
                },
                readable && !code && !shared,
            )
        }
        "" | "[heap]" => (Kind::Anon, readable),
        _ => return Err(ImageError::NotImageable(format!("it maps {name:.100}"))),
    };
    Ok(Some(Region {
        start: m.start,
        end: m.end,
        prot,
        kind,
        fill,
    }))
}

/// The kernel's view of the process's layout (`/proc/PID/stat` fields 26–28, 45–51, and the
/// heap's end as brk).
fn layout(pid: i32, maps: &[Mapping]) -> Result<[u64; 11], ImageError> {
    let fields = airlock_jail::procfs::stat_fields(pid)
        .ok_or_else(|| ImageError::Broken("its stat is gone".into()))?;
    let get = |n: usize| {
        fields
            .get(n - 3)
            .and_then(|x| x.parse::<i64>().ok())
            .map(i64::cast_unsigned)
            .ok_or_else(|| ImageError::Broken(format!("an unreadable stat field {n}")))
    };
    let start_brk = get(47)?;
    let brk = maps
        .iter()
        .find(|m| m.name == "[heap]")
        .map_or(start_brk, |m| m.end);
    Ok([
        get(26)?,
        get(27)?,
        get(45)?,
        get(46)?,
        start_brk,
        brk,
        get(28)?,
        get(48)?,
        get(49)?,
        get(50)?,
        get(51)?,
    ])
}
