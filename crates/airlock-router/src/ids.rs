//! Unguessable identifiers for calls and per-call guest paths.

/// Bytes of entropy per id: 128 bits, so a guest cannot guess another call's path.
const ID_BYTES: usize = 16;

/// A fresh 32-hex-digit id from the kernel's CSPRNG.
pub(crate) fn fresh_id() -> std::io::Result<String> {
    let mut buf = [0u8; ID_BYTES];
    getrandom::fill(&mut buf)?;
    Ok(hex::encode(buf))
}

#[cfg(test)]
mod tests {
    #[test]
    fn ids_are_fresh_and_hex() {
        let a = super::fresh_id().unwrap();
        let b = super::fresh_id().unwrap();
        assert_ne!(a, b);
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
    }
}
