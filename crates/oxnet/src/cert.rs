//! `oxnet cert --out DIR [--name HOST]...`: a self-signed certificate and
//! its key (ECDSA P-256) written as DIR/cert.pem and DIR/key.pem, for
//! TLSServer's CERT and KEY in tests and demos (conf/echo-tls.click).

use std::path::Path;

/// Writes the pair and prints the two paths.
pub fn main(out: &Path, names: &[String]) -> Result<(), String> {
    let (cert, key) = oxnet_apps::tls::cert::write_self_signed(out, names)?;
    println!("{}", cert.display());
    println!("{}", key.display());
    Ok(())
}
