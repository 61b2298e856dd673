//! Webhook signatures: `X-Tollgate-Signature: sha256=<hex HMAC-SHA256 of
//! the raw body>`, checked in constant time.

use hmac::{Hmac, Mac};
use sha2::Sha256;

pub const SIGNATURE_HEADER: &str = "x-tollgate-signature";

/// True when `header` is a valid signature of `body` under `secret`.
pub fn verify(secret: &[u8], body: &[u8], header: Option<&str>) -> bool {
    let Some(hex) = header.and_then(|h| h.trim().strip_prefix("sha256=")) else {
        return false;
    };
    let Some(claimed) = crate::hex::decode(hex) else {
        return false;
    };
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret) else {
        return false;
    };
    mac.update(body);
    // verify_slice compares in constant time.
    mac.verify_slice(&claimed).is_ok()
}

/// The header value a sender computes (for clients and tests).
pub fn sign(secret: &[u8], body: &[u8]) -> String {
    let mut mac = match Hmac::<Sha256>::new_from_slice(secret) {
        Ok(mac) => mac,
        // HMAC takes keys of any length; this cannot happen.
        Err(_) => return String::new(),
    };
    mac.update(body);
    format!(
        "sha256={}",
        crate::hex::encode(&mac.finalize().into_bytes())
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_vector() {
        // RFC 4231 test case 2.
        let sig = sign(b"Jefe", b"what do ya want for nothing?");
        assert_eq!(
            sig,
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        assert!(verify(b"Jefe", b"what do ya want for nothing?", Some(&sig)));
        assert!(verify(
            b"Jefe",
            b"what do ya want for nothing?",
            Some(&sig.to_uppercase().replace("SHA256=", "sha256="))
        ));
    }

    #[test]
    fn rejects_missing_malformed_and_wrong() {
        let body = b"{}";
        let good = sign(b"k", body);
        assert!(!verify(b"k", body, None));
        assert!(!verify(b"k", body, Some("")));
        assert!(!verify(
            b"k",
            body,
            Some(good.trim_start_matches("sha256="))
        ));
        assert!(!verify(b"k", body, Some("sha256=zz")));
        assert!(!verify(b"k", body, Some("sha256=abc")));
        assert!(!verify(b"other", body, Some(&good)));
        assert!(!verify(b"k", b"{ }", Some(&good)));
    }
}
