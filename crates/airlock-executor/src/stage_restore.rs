//! A stage that restores a paused kernel instead of starting an interpreter: the Run filter
//! goes on first (as a command's Exec filter does), the stage attests, waits for `start`,
//! reads the image's header and becomes the image (`airlock_jail::image::restore`), which
//! says `restored` on the socket just before the kernel's own code runs again.
use std::convert::Infallible;
use std::os::fd::{AsFd, OwnedFd};

use airlock_jail::seccomp;
use airlock_protocol::Message;

use crate::attest::Attestation;
use crate::channel::Channel;
use crate::config::ExecutorConfig;
use crate::kernel_image;
use crate::refusal::{Layer, Refusal};

/// The notification a restored kernel's first words are.
pub const RESTORED_METHOD: &str = "restored";

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
    seccomp::install_for(seccomp::Profile::Run, network).layer("seccomp")?;
    let proof = Attestation::collect().layer("attestation")?;
    guest
        .notify("ready", serde_json::to_value(&proof).layer("attestation")?)
        .layer("socket")?;
    match guest.next_message().layer("socket")? {
        Message::Notification(n) if n.method == "start" => {}
        other => {
            return Err(Refusal {
                layer: "protocol",
                message: format!("expected start, got {other:?}"),
            })
        }
    }
    let mut source = std::fs::File::from(image.try_clone().layer("kernel image")?);
    let header = kernel_image::read_header(&mut source).layer("kernel image")?;
    // Best effort, as a shell's `cd` to a directory that is gone: the kernel asks again.
    let _ = std::env::set_current_dir(&header.cwd);
    let regions = kernel_image::plan_regions(&header).layer("kernel image")?;
    let sigactions = kernel_image::sigactions(&header);
    let mut done = Vec::new();
    let restored = Message::notification(RESTORED_METHOD, None);
    airlock_protocol::write_message(&mut done, &restored).layer("socket")?;
    let plan = kernel_image::plan(
        &header,
        &regions,
        &sigactions,
        source.as_fd(),
        (guest.fd(), &done),
    );
    match airlock_jail::image::restore(&plan) {
        Ok(never) => match never {},
        Err(e) => Err(Refusal {
            layer: "kernel image",
            message: e.to_string(),
        }),
    }
}
