//! Image layers are hostile input: any bytes through airlock-image's tar reader, with small
//! bounds, must end in entries or an error — never a panic, a hang or an allocation past the
//! caps. Every entry's path goes through the normaliser and its body is read to the end.
#![no_main]

use airlock_image::bounds::{Bounds, Budget};
use airlock_image::tar::TarReader;
use airlock_image::unpack::EntryPath;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let bounds = Bounds {
        max_bytes: 1 << 20,
        max_entries: 1024,
        max_depth: 16,
        max_name: 64,
        max_path: 256,
    };
    let mut budget = Budget::new(bounds);
    let mut tar = TarReader::new(data, bounds.max_path);
    while let Ok(Some(entry)) = tar.next_entry(&mut budget) {
        let _ = EntryPath::parse(&entry.path, &bounds);
        let _ = EntryPath::parse(&entry.link, &bounds);
        let _ = std::io::copy(&mut tar.body(), &mut std::io::sink());
    }
});
