//! The last steps before a stage hands over to what it starts without an interpreter's own
//! bootstrap (a command, a restored kernel): its seccomp filter installed, the attestation
//! sent, and the broker's `start` awaited.
use airlock_jail::seccomp;
use airlock_protocol::Message;

use crate::attest::Attestation;
use crate::channel::Channel;
use crate::refusal::{Layer, Refusal};

/// Install `profile`'s filter, attest (`ready`) and wait for the broker's `start`.
pub(crate) fn filter_attest_and_wait(
    guest: &mut Channel,
    profile: seccomp::Profile,
    network: seccomp::Network,
) -> Result<(), Refusal> {
    seccomp::install_for(profile, network).layer("seccomp")?;
    let proof = Attestation::collect().layer("attestation")?;
    guest
        .notify("ready", serde_json::to_value(&proof).layer("attestation")?)
        .layer("socket")?;
    match guest.next_message().layer("socket")? {
        Message::Notification(n) if n.method == "start" => Ok(()),
        other => Err(Refusal {
            layer: "protocol",
            message: format!("expected start, got {other:?}"),
        }),
    }
}
