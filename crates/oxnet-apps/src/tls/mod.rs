//! TLS on stream packets (ClickNF §4.2 and §4.3, Figure 6; issue 12
//! items 2 and 3): TLSServer and TLSClient terminate TLS per connection
//! with rustls, plaintext on one side and records on the other;
//! TLSClassifier decides per connection whether TLS applies. A TLS echo
//! server is a plain one rewired:
//!
//! ```text
//! srv :: TCPEpollServer(443);
//! srv -> tls :: TLSServer(CERT cert.pem, KEY key.pem) -> [1]tls;
//! tls[1] -> srv;
//! ```
//!
//! Files: [`relay`] (the connection table, apart from the graph), `conn`
//! (one connection's steps),
//! [`element`] (the two elements), [`config`] (keywords to rustls
//! configurations), [`cert`] (self-signed certificates, `oxnet cert`),
//! [`classifier`], [`writer`] (records into packets).

pub mod cert;
pub mod classifier;
pub mod config;
mod conn;
pub mod element;
pub mod relay;
pub mod writer;

#[cfg(test)]
mod tests;

/// The rustls these elements are built on, for programs and tests that
/// talk to them with the same library (crates/oxnet/tests/tls_echo.rs).
pub use rustls;

use oxnet_graph::element::Element;
use oxnet_graph::elements::Module;

pub const MODULE: Module = Module {
    classes: &["TLSClassifier", "TLSClient", "TLSServer"],
    create,
};

fn create(class: &str) -> Option<Box<dyn Element>> {
    Some(match class {
        "TLSClassifier" => Box::new(classifier::TlsClassifier::new()),
        "TLSClient" => Box::new(element::TlsElement::client()),
        "TLSServer" => Box::new(element::TlsElement::server()),
        _ => return None,
    })
}
