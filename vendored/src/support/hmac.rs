//! HMAC-SHA256, set up in one place for every signer of the runtime:
//! signed links, webhook signatures, Slack's request signatures and the
//! inbox's session cookies. The key is set up once and every MAC starts
//! from a copy of it; a claimed MAC is checked in constant time, so how
//! long a refusal takes says nothing about how much of it was right.

use ::hmac::{Hmac, Mac};
use sha2::Sha256;

/// The length of a MAC, in bytes.
pub const MAC_LEN: usize = 32;

/// An HMAC-SHA256 key. Cheap to clone; its `Debug` never shows the key.
#[derive(Clone)]
pub struct HmacKey {
    /// Keyed once; each MAC is computed on a clone.
    keyed: Hmac<Sha256>,
}

impl HmacKey {
    /// A key of any length, empty included (HMAC hashes a long key and
    /// pads a short one). Whether a key is long enough is the caller's
    /// rule, as it differs between signers.
    pub fn new(key: &[u8]) -> HmacKey {
        // HMAC's key set-up accepts every length: the `Err` of this
        // generic (KeyInit) signature is never returned for HMAC.
        let keyed =
            Hmac::<Sha256>::new_from_slice(key).expect("HMAC-SHA256 takes a key of any length");
        HmacKey { keyed }
    }

    /// The MAC of `parts` written one after another (no separators: a
    /// caller that needs unambiguous fields adds its own).
    pub fn sign(&self, parts: &[&[u8]]) -> [u8; MAC_LEN] {
        self.with(parts).finalize().into_bytes().into()
    }

    /// Whether `claimed` is the MAC of `parts`, compared in constant time
    /// (a `claimed` of another length is simply refused).
    pub fn verify(&self, parts: &[&[u8]], claimed: &[u8]) -> bool {
        self.with(parts).verify_slice(claimed).is_ok()
    }

    fn with(&self, parts: &[&[u8]]) -> Hmac<Sha256> {
        let mut mac = self.keyed.clone();
        for part in parts {
            mac.update(part);
        }
        mac
    }
}

impl std::fmt::Debug for HmacKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HmacKey(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 4231 test case 2: "Jefe", "what do ya want for nothing?".
    const RFC_4231_2: &str = "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843";

    #[test]
    fn matches_rfc_4231_whatever_the_split_into_parts() {
        let key = HmacKey::new(b"Jefe");
        let whole = key.sign(&[b"what do ya want for nothing?"]);
        assert_eq!(crate::support::hex::encode(&whole), RFC_4231_2);
        let split = key.sign(&[b"what do ya", b" want ", b"", b"for nothing?"]);
        assert_eq!(split, whole);
    }

    #[test]
    fn verify_takes_only_the_exact_mac() {
        let key = HmacKey::new(b"Jefe");
        let parts: &[&[u8]] = &[b"what do ya want for nothing?"];
        let mac = key.sign(parts);
        assert!(key.verify(parts, &mac));
        let mut flipped = mac;
        flipped[MAC_LEN - 1] ^= 1;
        assert!(!key.verify(parts, &flipped));
        assert!(!key.verify(parts, &mac[..MAC_LEN - 1]));
        assert!(!key.verify(parts, &[]));
        assert!(!key.verify(&[b"what do ya want for nothing!"], &mac));
        assert!(!HmacKey::new(b"jefe").verify(parts, &mac));
    }

    #[test]
    fn keys_of_any_length_work_and_debug_hides_them() {
        for len in [0, 1, 64, 65, 1000] {
            let key = HmacKey::new(&vec![7; len]);
            let mac = key.sign(&[b"m"]);
            assert!(key.verify(&[b"m"], &mac), "{len}");
        }
        let shown = format!("{:?}", HmacKey::new(b"super-secret"));
        assert!(!shown.contains("super-secret"), "{shown}");
    }
}
