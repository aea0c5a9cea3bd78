//! Self-signed certificates for tests and demos (rcgen): what TLSServer
//! uses when it is given no CERT, and what `oxnet cert` writes.
//!
//! The key is ECDSA P-256 (rcgen's default, RFC 5480), which rustls,
//! Debian 12's OpenSSL and curl all accept; the names go into the
//! subjectAltName extension (RFC 5280 §4.2.1.6), an IP address as an
//! iPAddress entry, anything else as a dNSName, so a client that checks
//! the name (`curl --cacert`) accepts the certificate for each of them.

use std::path::{Path, PathBuf};

/// A certificate and its private key, both PEM.
#[derive(Debug, Clone)]
pub struct SelfSigned {
    /// `-----BEGIN CERTIFICATE-----`.
    pub cert_pem: String,
    /// `-----BEGIN PRIVATE KEY-----` (PKCS#8).
    pub key_pem: String,
}

/// A new self-signed certificate for `names` (host names or IP
/// addresses; at least one).
pub fn self_signed(names: &[String]) -> Result<SelfSigned, String> {
    if names.is_empty() {
        return Err("a self-signed certificate needs at least one name".into());
    }
    let made = rcgen::generate_simple_self_signed(names.to_vec())
        .map_err(|e| format!("cannot make a certificate for {names:?}: {e}"))?;
    Ok(SelfSigned {
        cert_pem: made.cert.pem(),
        key_pem: made.key_pair.serialize_pem(),
    })
}

/// Writes a new self-signed certificate for `names` to `dir/cert.pem`
/// and `dir/key.pem` (the key readable by its owner only), making `dir`
/// if needed; returns the two paths.
pub fn write_self_signed(dir: &Path, names: &[String]) -> Result<(PathBuf, PathBuf), String> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let made = self_signed(names)?;
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
    let cert = dir.join("cert.pem");
    let key = dir.join("key.pem");
    std::fs::write(&cert, &made.cert_pem).map_err(|e| format!("cannot write {}: {e}", cert.display()))?;
    // A key file replaced, not rewritten in place: an old one with wider
    // permissions would keep them.
    let _ = std::fs::remove_file(&key);
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&key)
        .and_then(|mut f| f.write_all(made.key_pem.as_bytes()))
        .map_err(|e| format!("cannot write {}: {e}", key.display()))?;
    Ok((cert, key))
}
