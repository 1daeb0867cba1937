//! A stage that restores a paused kernel instead of starting an interpreter: the Run filter
//! goes on first (as a command's Exec filter does), the stage attests, waits for `start`,
//! reads the image's header (the broker sends only that down [`crate::config::KERNEL_IMAGE_FD`])
//! and becomes the image (`airlock_jail::image::restore`): it maps the regions, says
//! `mapped`, waits for the broker's `filled` (the broker wrote the bytes in meanwhile) and
//! says `restored` just before the kernel's own code runs again.
use std::convert::Infallible;
use std::os::fd::{AsRawFd, OwnedFd};

use airlock_jail::seccomp;

use crate::channel::Channel;
use crate::config::ExecutorConfig;
use crate::kernel_image;
use crate::refusal::{Layer, Refusal};

/// Become the kernel in `image`. Returns only on failure (before anything of this process
/// was changed; past that point a failure ends it).
pub(crate) fn restore_kernel(
    guest: &mut Channel,
    _cfg: &ExecutorConfig,
    image: Option<&OwnedFd>,
    network: seccomp::Network,
) -> Result<Infallible, Refusal> {
    let Some(image) = image else {
        return Err(Refusal {
            layer: "kernel image",
            message: "no image was handed over".into(),
        });
    };
    crate::attested_start::filter_attest_and_wait(guest, seccomp::Profile::Run, network)?;
    let mut source = std::fs::File::from(image.try_clone().layer("kernel image")?);
    let header = kernel_image::read_header(&mut source).layer("kernel image")?;
    // Best effort, as a shell's `cd` to a directory that is gone: the kernel asks again.
    let _ = std::env::set_current_dir(&header.cwd);
    let regions = kernel_image::plan_regions(&header).layer("kernel image")?;
    let sigactions = kernel_image::sigactions(&header);
    drop(source);
    // The kernel had exactly its stdin, stdout, stderr and socket (the broker images no other):
    // the image fd, the filter's and the code's pipes go before it runs again.
    airlock_jail::process::close_fds_except(&[0, 1, 2, guest.fd().as_raw_fd()]).layer("fds")?;
    let frames = kernel_image::Frames::new();
    let plan = kernel_image::plan(&header, &regions, &sigactions, guest.fd(), &frames);
    match airlock_jail::image::restore(&plan) {
        Ok(never) => match never {},
        Err(e) => Err(Refusal {
            layer: "kernel image",
            message: e.to_string(),
        }),
    }
}
