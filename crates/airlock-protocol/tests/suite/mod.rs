//! Integration tests, one concern per module.

mod error_codes;
mod frame_reading;
mod frame_rejections;
mod io_util;
mod message_decode;
mod proptests;
