//! A paused kernel's image header (`airlock_executor::kernel_image::read_header`), as a
//! restoring stage reads it before it becomes the image (broker → stage; the bytes come from a
//! verified snapshot, but the stage treats them as hostile). Oracles: no panic, no allocation
//! past the header bound; an accepted header encodes back to bytes that read as the same.
#![no_main]

use airlock_executor::kernel_image::{encode_header, read_header};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &[u8]| {
    let Ok(header) = read_header(input) else {
        return;
    };
    let again = read_header(&encode_header(&header)[..]).expect("an encoded header reads back");
    assert_eq!(again, header);
});
