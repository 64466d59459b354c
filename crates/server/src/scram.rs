//! SCRAM-SHA-256 (RFC 5802 / RFC 7677, as PostgreSQL speaks it): the server side of the
//! exchange, so a password never crosses the wire and the stored secret cannot be replayed.
//!
//! Why here and not pgwire's: pgwire 0.41 builds its SCRAM only with its `_ring` or
//! `_aws-lc-rs` feature, which also brings rustls, tokio-rustls, x509-certificate and a
//! native crypto library (ring's or AWS-LC's C and assembly) into every build of the
//! server. The exchange itself is a few HMACs: the primitives come from RustCrypto's `hmac`
//! and `sha2` and the SASLprep of `stringprep` (the very crates tokio-postgres' client side
//! uses, already in Cargo.lock), the message flow is below, and tests check it against
//! tokio-postgres and psql (libpq).
//!
//! Flow: AuthenticationSASL(["SCRAM-SHA-256"]) → client-first `n,,n=,r=CNONCE` →
//! server-first `r=CNONCE+SNONCE,s=SALT,i=4096` → client-final `c=biws,r=NONCE,p=PROOF`
//! → the proof checked against the stored key → server-final `v=SIGNATURE`.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use hmac::{Hmac, KeyInit, Mac};
use sha2::{Digest, Sha256};

/// PostgreSQL's default (`scram_iterations`).
pub const ITERATIONS: u32 = 4096;
pub const MECHANISM: &str = "SCRAM-SHA-256";

fn hmac(key: &[u8], data: &[u8]) -> [u8; 32] {
    // HMAC takes keys of any length: this cannot fail.
    let mut m = <Hmac<Sha256> as KeyInit>::new_from_slice(key).unwrap_or_else(|_| unreachable!("HMAC accepts any key length"));
    m.update(data);
    m.finalize().into_bytes().into()
}

/// PBKDF2-HMAC-SHA256 with one block: SCRAM's `Hi`.
fn hi(password: &[u8], salt: &[u8], iterations: u32) -> [u8; 32] {
    let mut first = salt.to_vec();
    first.extend_from_slice(&[0, 0, 0, 1]);
    let mut prev = hmac(password, &first);
    let mut out = prev;
    for _ in 1..iterations {
        prev = hmac(password, &prev);
        for (o, p) in out.iter_mut().zip(prev) {
            *o ^= p;
        }
    }
    out
}

/// SASLprep of the password as PostgreSQL does: the prepared form, or the raw bytes when
/// it is not valid for SASLprep.
fn prepared(password: &str) -> Vec<u8> {
    match stringprep::saslprep(password) {
        Ok(p) => p.into_owned().into_bytes(),
        Err(_) => password.as_bytes().to_vec(),
    }
}

/// What the server keeps from the password: the stored and server keys (as PostgreSQL's
/// `pg_authid` does), for one salt.
#[derive(Debug, Clone)]
pub struct Secret {
    pub salt: Vec<u8>,
    pub iterations: u32,
    stored_key: [u8; 32],
    server_key: [u8; 32],
}

impl Secret {
    pub fn new(password: &str, salt: Vec<u8>, iterations: u32) -> Secret {
        let salted = hi(&prepared(password), &salt, iterations);
        let client_key = hmac(&salted, b"Client Key");
        let stored_key: [u8; 32] = Sha256::digest(client_key).into();
        let server_key = hmac(&salted, b"Server Key");
        Secret { salt, iterations, stored_key, server_key }
    }
}

/// One connection's exchange between the server-first and the client-final messages.
#[derive(Debug, Clone)]
pub struct Exchange {
    client_first_bare: String,
    server_first: String,
    nonce: String,
    /// The gs2 header the client sent, which `c=` must repeat (base64).
    gs2_header: String,
}

fn attribute<'a>(message: &'a str, key: char) -> Option<&'a str> {
    message.split(',').find_map(|part| part.strip_prefix(key).and_then(|r| r.strip_prefix('=')))
}

/// Reads the client-first message and answers the server-first one.
pub fn server_first(secret: &Secret, client_first: &[u8], server_nonce: &[u8]) -> Result<(Exchange, String), String> {
    let text = std::str::from_utf8(client_first).map_err(|_| "SCRAM client-first message is not UTF-8".to_string())?;
    // gs2 header: "n,," (no channel binding) or "y,," (client could, server did not offer);
    // "p=..." asks for channel binding, which needs TLS.
    let (gs2_header, bare) = if let Some(rest) = text.strip_prefix("n,") {
        let (authzid, bare) = rest.split_once(',').ok_or("malformed SCRAM client-first message")?;
        (format!("n,{authzid},"), bare)
    } else if let Some(rest) = text.strip_prefix("y,") {
        let (authzid, bare) = rest.split_once(',').ok_or("malformed SCRAM client-first message")?;
        (format!("y,{authzid},"), bare)
    } else {
        return Err("SCRAM channel binding is not supported (no TLS): connect with channel_binding=disable or prefer".into());
    };
    let client_nonce = attribute(bare, 'r').filter(|n| !n.is_empty()).ok_or("SCRAM client-first message without a nonce")?;
    let nonce = format!("{client_nonce}{}", STANDARD.encode(server_nonce));
    let server_first = format!("r={nonce},s={},i={}", STANDARD.encode(&secret.salt), secret.iterations);
    Ok((Exchange { client_first_bare: bare.to_string(), server_first: server_first.clone(), nonce, gs2_header }, server_first))
}

/// Checks the client-final message's proof; the server-final message when it is right.
pub fn server_final(secret: &Secret, exchange: &Exchange, client_final: &[u8]) -> Result<String, String> {
    let text = std::str::from_utf8(client_final).map_err(|_| "SCRAM client-final message is not UTF-8".to_string())?;
    let (without_proof, proof) = text.rsplit_once(",p=").ok_or("SCRAM client-final message without a proof")?;
    let channel = attribute(without_proof, 'c').ok_or("SCRAM client-final message without channel binding data")?;
    if STANDARD.decode(channel).ok().as_deref() != Some(exchange.gs2_header.as_bytes()) {
        return Err("SCRAM channel binding data does not match".into());
    }
    if attribute(without_proof, 'r') != Some(exchange.nonce.as_str()) {
        return Err("SCRAM nonce does not match".into());
    }
    let proof = STANDARD.decode(proof).map_err(|_| "SCRAM proof is not base64".to_string())?;
    if proof.len() != 32 {
        return Err("SCRAM proof has the wrong length".into());
    }
    let auth_message = format!("{},{},{}", exchange.client_first_bare, exchange.server_first, without_proof);
    let client_signature = hmac(&secret.stored_key, auth_message.as_bytes());
    let mut client_key = [0u8; 32];
    for (k, (p, s)) in client_key.iter_mut().zip(proof.iter().zip(client_signature)) {
        *k = p ^ s;
    }
    let candidate: [u8; 32] = Sha256::digest(client_key).into();
    // Compared in constant time: every byte is looked at whatever the first difference.
    let differences = candidate.iter().zip(secret.stored_key).fold(0u8, |acc, (a, b)| acc | (a ^ b));
    if differences != 0 {
        return Err("password authentication failed".into());
    }
    let server_signature = hmac(&secret.server_key, auth_message.as_bytes());
    Ok(format!("v={}", STANDARD.encode(server_signature)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7677's example: user "user", password "pencil", its nonces and salt.
    #[test]
    fn the_rfc_7677_example_verifies() {
        let salt = STANDARD.decode("W22ZaJ0SNY7soEsUEjb6gQ==").expect("salt");
        let secret = Secret::new("pencil", salt, 4096);
        let client_first = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO";
        // The RFC's server nonce is not base64 of bytes (ours is): the exchange by hand.
        let exchange = Exchange {
            client_first_bare: "n=user,r=rOprNGfwEbeRWgbNEkqO".into(),
            server_first: "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096".into(),
            nonce: "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0".into(),
            gs2_header: "n,,".into(),
        };
        let client_final = b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
        let answer = server_final(&secret, &exchange, client_final).expect("the RFC's proof");
        assert_eq!(answer, "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=");
        let (ex, first) = server_first(&secret, client_first, b"0123456789abcdef01").expect("first");
        assert!(first.starts_with("r=rOprNGfwEbeRWgbNEkqO") && first.ends_with(",s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"), "{first}");
        assert!(server_final(&secret, &ex, client_final).is_err(), "another nonce");
        let wrong = Secret::new("pencils", STANDARD.decode("W22ZaJ0SNY7soEsUEjb6gQ==").expect("salt"), 4096);
        assert!(server_final(&wrong, &exchange, client_final).is_err(), "another password");
        assert!(server_first(&secret, b"p=tls-server-end-point,,n=,r=x", b"n").is_err(), "channel binding refused");
    }
}
