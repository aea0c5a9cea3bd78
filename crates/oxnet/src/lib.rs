//! The `oxnet` command line as a library: the applications (packet
//! generator, forwarder, capture), the demo, pcap output and reports, so
//! that tests and benchmarks run exactly what the commands run.

pub mod apps;
pub mod bench;
pub mod commands;
pub mod demo;
pub mod frame;
pub mod pcap;
pub mod report;
pub mod setup;
pub mod signal;
