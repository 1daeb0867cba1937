//! Whether a secret occurs in a text, in time linear in the text and independent of the
//! secret's bytes: a Rabin-Karp search whose hash (a polynomial modulo the Mersenne prime
//! 2^61 - 1) has a base drawn once per process from the kernel, so where windows collide with
//! the secret's hash cannot be steered by whoever writes the text; a window whose hash matches
//! is compared in constant time.
use std::sync::LazyLock;

use subtle::ConstantTimeEq as _;

const P: u64 = (1 << 61) - 1;

/// The hash's base: random in `[2^32, P)` (a failure to draw one falls back to a fixed base,
/// which costs only the search's independence from the text, never a miss).
static BASE: LazyLock<u64> = LazyLock::new(|| {
    getrandom::u64().map_or(0x9E37_79B9_7F4A_7C15, |r| r) % (P - (1 << 32)) + (1 << 32)
});

fn mul(a: u64, b: u64) -> u64 {
    let p = u128::from(a) * u128::from(b);
    // Both halves are below P after the fold; the sum may need one more reduction.
    let folded = (p & u128::from(P)) + (p >> 61);
    let r = u64::try_from(folded % u128::from(P)).unwrap_or(0);
    r % P
}

fn add(a: u64, b: u64) -> u64 {
    (a + b) % P
}

fn sub(a: u64, b: u64) -> u64 {
    (a + P - b) % P
}

/// The hash of `s`.
fn hash(s: &[u8]) -> u64 {
    s.iter()
        .fold(0, |h, &c| add(mul(h, *BASE), u64::from(c) + 1))
}

/// Whether `needle` occurs in `haystack` (an empty needle never does).
#[must_use]
pub(crate) fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    let n = needle.len();
    if n == 0 || haystack.len() < n {
        return false;
    }
    let target = hash(needle);
    // BASE^(n-1), the weight of the byte leaving the window.
    let top = (1..n).fold(1, |w, _| mul(w, *BASE));
    let mut h = hash(&haystack[..n]);
    let mut found = false;
    for i in 0..=haystack.len() - n {
        if i > 0 {
            let out = u64::from(haystack[i - 1]) + 1;
            let inn = u64::from(haystack[i + n - 1]) + 1;
            h = add(mul(sub(h, mul(out, top)), *BASE), inn);
        }
        if h == target {
            found |= bool::from(haystack[i..i + n].ct_eq(needle));
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::contains;

    #[test]
    fn finds_exactly_the_occurrences() {
        let secret = b"s3cret-token-value";
        assert!(contains(b"xx s3cret-token-value yy", secret));
        assert!(contains(b"s3cret-token-value", secret));
        assert!(contains(b"..s3cret-token-value", secret));
        assert!(!contains(b"s3cret-token-valu", secret));
        assert!(!contains(b"s3cret-token-valuE and more", secret));
        assert!(!contains(b"", secret));
        assert!(!contains(b"abc", b""));
        // Every position of a long text.
        let mut text = vec![b'a'; 5000];
        for at in [0, 1, 2500, 5000 - secret.len()] {
            let mut t = text.clone();
            t[at..at + secret.len()].copy_from_slice(secret);
            assert!(contains(&t, secret), "{at}");
        }
        text[4990] = b's';
        assert!(!contains(&text, secret));
    }
}
