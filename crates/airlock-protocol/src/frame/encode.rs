//! One frame in one buffer: the header, then the body.
use super::error::FrameError;
use super::limits::FrameLimits;
use crate::message::Message;

/// Frames `body` (header + body in one buffer), refusing a body over `limits.max_body`.
pub fn encode_frame(body: &[u8], limits: &FrameLimits) -> Result<Vec<u8>, FrameError> {
    if body.len() > limits.max_body {
        return Err(FrameError::BodyTooLarge {
            len: u64::try_from(body.len()).unwrap_or(u64::MAX),
            max: limits.max_body,
        });
    }
    let header = format!("Content-Length: {}\r\n\r\n", body.len());
    let mut frame = Vec::with_capacity(header.len() + body.len());
    frame.extend_from_slice(header.as_bytes());
    frame.extend_from_slice(body);
    Ok(frame)
}

/// Serializes and frames `message`, refusing a body over `limits.max_body`.
pub fn encode_message(message: &Message, limits: &FrameLimits) -> Result<Vec<u8>, FrameError> {
    let body = message.to_vec().map_err(FrameError::Encode)?;
    encode_frame(&body, limits)
}
