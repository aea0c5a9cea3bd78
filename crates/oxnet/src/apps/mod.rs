//! The applications behind the commands, as steps that a loop calls: one
//! step moves at most one batch. `oxnet demo` runs all three in one thread
//! (run to completion, as Click does); `oxnet fwd` etc. run one each.

pub mod capture;
pub mod fwd;
pub mod multiqueue;
pub mod napi;
pub mod pktgen;
pub mod respond;
pub mod seq;
pub mod stats;

pub use capture::Capture;
pub use fwd::Forwarder;
pub use napi::Napi;
pub use pktgen::PacketGenerator;
pub use seq::SequenceChecker;
