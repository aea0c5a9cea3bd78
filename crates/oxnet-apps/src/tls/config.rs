//! rustls configurations from the elements' keywords: certificates and
//! keys from PEM files, protocol versions, ALPN, session resumption.
//!
//! The crypto provider is rustls's ring one (crates/oxnet-apps/Cargo.toml
//! says why); its cipher suites are rustls's defaults (TLS 1.3's three
//! AEAD suites, TLS 1.2's ECDHE ones with AES-GCM and ChaCha20-Poly1305).

use super::cert;
use oxnet_graph::args::{self, Args};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, ServerConfig, SignatureScheme, SupportedProtocolVersion};
use std::sync::Arc;

/// Sessions a server remembers for resumption by session id (TLS 1.2)
/// or stateful ticket, unless SESSION_CACHE says otherwise.
pub const DEFAULT_SESSION_CACHE: usize = 4096;

/// Sessions a client remembers to resume (rustls's own default).
const CLIENT_SESSIONS: usize = 256;

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// `VERSIONS 1.2 1.3` (the default: both).
fn versions(a: &mut Args) -> Result<Vec<&'static SupportedProtocolVersion>, String> {
    let Some(text) = a.keyword("VERSIONS") else {
        return Ok(vec![&rustls::version::TLS13, &rustls::version::TLS12]);
    };
    let mut out = Vec::new();
    for word in args::string(&text)?.split_whitespace() {
        match word {
            "1.3" => out.push(&rustls::version::TLS13),
            "1.2" => out.push(&rustls::version::TLS12),
            other => {
                return Err(format!(
                    "VERSIONS: '{other}' is not a TLS version this element speaks (1.2, 1.3)"
                ))
            }
        }
    }
    if out.is_empty() {
        return Err("VERSIONS: no version given".into());
    }
    Ok(out)
}

/// `ALPN "h2 http/1.1"`: protocol names in order of preference (RFC 7301
/// §3.1: each 1 to 255 bytes).
fn alpn(a: &mut Args) -> Result<Vec<Vec<u8>>, String> {
    let Some(text) = a.keyword("ALPN") else {
        return Ok(Vec::new());
    };
    let names: Vec<Vec<u8>> = args::string(&text)?
        .split_whitespace()
        .map(|w| w.as_bytes().to_vec())
        .collect();
    if let Some(bad) = names.iter().find(|n| n.len() > 255) {
        return Err(format!(
            "ALPN: a protocol name is at most 255 bytes ({} given)",
            bad.len()
        ));
    }
    Ok(names)
}

/// A file name (or name) keyword; empty is the same as absent, so that
/// a configuration can pass `CERT "$CERT"` with `$CERT` left empty.
fn path(a: &mut Args, key: &str) -> Result<Option<String>, String> {
    Ok(args::opt(a.keyword(key), args::string, key)?.filter(|v| !v.is_empty()))
}

/// Every certificate in a PEM file (the server's first, then its chain).
pub fn load_certs(file: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_file_iter(file)
        .map_err(|e| format!("CERT {file}: {e}"))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("CERT {file}: {e}"))?;
    if certs.is_empty() {
        return Err(format!("CERT {file}: no CERTIFICATE in the file"));
    }
    Ok(certs)
}

/// The first private key in a PEM file: PKCS#8, PKCS#1 (RSA) or SEC1
/// (EC).
pub fn load_key(file: &str) -> Result<PrivateKeyDer<'static>, String> {
    PrivateKeyDer::from_pem_file(file).map_err(|e| format!("KEY {file}: {e}"))
}

/// TLSServer's keywords: CERT and KEY (PEM files; without CERT a
/// self-signed certificate for NAME, default `localhost`, is made),
/// VERSIONS, ALPN, SESSION_CACHE (sessions kept for resumption; 0: none)
/// and TICKETS (session tickets, RFC 5077 and RFC 8446 §4.6.1; default
/// true).
pub fn server(a: &mut Args) -> Result<Arc<ServerConfig>, String> {
    let cert = path(a, "CERT")?;
    let key = path(a, "KEY")?;
    let name = path(a, "NAME")?;
    let (certs, key) = match (cert, key) {
        (Some(cert), Some(key)) => (load_certs(&cert)?, load_key(&key)?),
        (Some(_), None) => return Err("CERT given without KEY".into()),
        (None, Some(_)) => return Err("KEY given without CERT".into()),
        (None, None) => {
            let names: Vec<String> = name
                .unwrap_or_else(|| "localhost".into())
                .split_whitespace()
                .map(str::to_string)
                .collect();
            let made = cert::self_signed(&names)?;
            let certs = vec![CertificateDer::from_pem_slice(made.cert_pem.as_bytes()).map_err(|e| e.to_string())?];
            let key = PrivateKeyDer::from_pem_slice(made.key_pem.as_bytes()).map_err(|e| e.to_string())?;
            (certs, key)
        }
    };
    let versions = versions(a)?;
    let alpn = alpn(a)?;
    let cache = args::opt(a.keyword("SESSION_CACHE"), args::unsigned, "SESSION_CACHE")?
        .unwrap_or(DEFAULT_SESSION_CACHE as u64) as usize;
    let tickets = args::opt(a.keyword("TICKETS"), args::boolean, "TICKETS")?.unwrap_or(true);

    let mut config = ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&versions)
        .map_err(|e| format!("VERSIONS: {e}"))?
        .with_no_client_auth()
        // Checks that the key matches the certificate and that ring can
        // sign with it (RSA of 2048 bits or more, ECDSA P-256/P-384,
        // Ed25519).
        .with_single_cert(certs, key)
        .map_err(|e| format!("CERT/KEY: {e}"))?;
    config.alpn_protocols = alpn;
    config.session_storage = if cache > 0 {
        rustls::server::ServerSessionMemoryCache::new(cache)
    } else {
        Arc::new(rustls::server::NoServerSessionStorage {})
    };
    if tickets {
        config.ticketer = rustls::crypto::ring::Ticketer::new().map_err(|e| format!("TICKETS: {e}"))?;
    } else if cache == 0 {
        // Without a ticketer, TLS 1.3's tickets are ids into the cache
        // (stateful): with no cache either, none are sent.
        config.send_tls13_tickets = 0;
    }
    Ok(Arc::new(config))
}

/// TLSClient's keywords: SERVER_NAME (the name sent in SNI and checked
/// in the certificate; default `localhost`), CA (a PEM file of trusted
/// roots) or INSECURE true (any certificate accepted: tests only),
/// VERSIONS, ALPN, RESUMPTION (default true).
pub fn client(a: &mut Args) -> Result<(Arc<ClientConfig>, ServerName<'static>), String> {
    let name = path(a, "SERVER_NAME")?.unwrap_or_else(|| "localhost".into());
    let name = ServerName::try_from(name.clone()).map_err(|e| format!("SERVER_NAME {name}: {e}"))?;
    let ca = path(a, "CA")?;
    let insecure = args::opt(a.keyword("INSECURE"), args::boolean, "INSECURE")?.unwrap_or(false);
    let versions = versions(a)?;
    let alpn = alpn(a)?;
    let resumption = args::opt(a.keyword("RESUMPTION"), args::boolean, "RESUMPTION")?.unwrap_or(true);

    let builder = ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&versions)
        .map_err(|e| format!("VERSIONS: {e}"))?;
    let mut config = match (ca, insecure) {
        (_, true) => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider())))
            .with_no_client_auth(),
        (Some(ca), false) => {
            let mut roots = rustls::RootCertStore::empty();
            for cert in load_certs(&ca).map_err(|e| e.replacen("CERT", "CA", 1))? {
                roots.add(cert).map_err(|e| format!("CA {ca}: {e}"))?;
            }
            builder.with_root_certificates(roots).with_no_client_auth()
        }
        (None, false) => return Err("TLSClient needs CA FILE (trusted roots) or INSECURE true".into()),
    };
    config.alpn_protocols = alpn;
    config.resumption = if resumption {
        rustls::client::Resumption::in_memory_sessions(CLIENT_SESSIONS)
    } else {
        rustls::client::Resumption::disabled()
    };
    Ok((Arc::new(config), name))
}

/// INSECURE: accepts any certificate chain, but still checks that the
/// server holds the certificate's key (the handshake signature), so the
/// handshake itself is exercised as with a real verifier.
#[derive(Debug)]
struct AnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
