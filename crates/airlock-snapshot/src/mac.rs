//! HMAC-SHA256 (`hmac` over `sha2`), the store's key, and a constant-time comparison
//! (`subtle`).
//!
//! A snapshot's header carries `HMAC-SHA256(key, digest of its body)`: only a store holding
//! the key can make a snapshot this store accepts.
use std::fmt;

use hmac::{Hmac, KeyInit as _, Mac as _};
use sha2::Sha256;
use subtle::ConstantTimeEq as _;

/// Length of the store key and of a MAC.
pub(crate) const KEY_LEN: usize = 32;

/// The store's secret key (never printed).
#[derive(Clone)]
pub(crate) struct Key(pub(crate) [u8; KEY_LEN]);

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Key(..)")
    }
}

impl Key {
    /// The MAC of a body digest under this key.
    pub(crate) fn mac(&self, digest: &[u8; 32]) -> [u8; 32] {
        hmac_sha256(&self.0, digest)
    }
}

/// HMAC-SHA256 of `msg` under `key` (RFC 2104: keys longer than a block are hashed first).
pub(crate) fn hmac_sha256(key: &[u8], msg: &[u8]) -> [u8; 32] {
    // HMAC takes a key of any length: this cannot fail.
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(key) else {
        unreachable!("HMAC accepts keys of every length")
    };
    mac.update(msg);
    mac.finalize().into_bytes().into()
}

/// Whether `a == b`, in time that depends only on the lengths.
pub(crate) fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    a.ct_eq(b).into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use hex::encode as hex;

    /// RFC 4231 §4, the HMAC-SHA-256 results of test cases 1-4, 6 and 7 (5 is truncated).
    #[test]
    fn rfc4231_vectors() {
        let big = [0xaa; 131];
        let one_to_25: Vec<u8> = (1..=25).collect();
        let cases: [(&[u8], &[u8], &str); 6] = [
            (&[0x0b; 20], b"Hi There", "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"),
            (b"Jefe", b"what do ya want for nothing?", "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"),
            (&[0xaa; 20], &[0xdd; 50], "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"),
            (&one_to_25, &[0xcd; 50], "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"),
            (&big, b"Test Using Larger Than Block-Size Key - Hash Key First", "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"),
            (&big, b"This is a test using a larger than block-size key and a larger than block-size data. The key needs to be hashed before being used by the HMAC algorithm.", "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"),
        ];
        for (key, msg, want) in cases {
            assert_eq!(hex(hmac_sha256(key, msg)), want);
        }
    }

    #[test]
    fn key_mac_depends_on_key_and_digest() {
        let a = Key([1; 32]);
        let b = Key([2; 32]);
        assert_ne!(a.mac(&[0; 32]), b.mac(&[0; 32]));
        assert_ne!(a.mac(&[0; 32]), a.mac(&[1; 32]));
        assert_eq!(format!("{a:?}"), "Key(..)");
    }

    #[test]
    fn ct_eq_compares() {
        assert!(ct_eq(b"abc", b"abc"));
        assert!(!ct_eq(b"abc", b"abd"));
        assert!(!ct_eq(b"abc", b"ab"));
    }
}
