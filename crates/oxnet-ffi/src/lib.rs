//! oxnet for C: a C ABI over oxnet's TCP sockets and epoll (`abi`,
//! declared in `include/oxnet.h`, written by hand), and a shim that lets
//! packetdrill (google/packetdrill, `--so_filename`) drive the stack
//! (`packetdrill`). Built as a cdylib (`liboxnet_ffi.so`) and an rlib.
//!
//! | module | what |
//! |---|---|
//! | `net` | the router: `FfiSource -> TCPStack -> FfiSink`, simulated time |
//! | `stack` | the descriptor table and the POSIX-shaped calls, in safe Rust |
//! | `sockaddr` | `struct sockaddr_in` / `_in6` to and from endpoints |
//! | `abi` | the exported `oxnet_*` functions |
//! | `packetdrill` | `packetdrill_interface_init` and the shim's calls |
//!
//! # Running packetdrill by hand (not in CI)
//! Build the library (`cargo build -p oxnet-ffi`), then, with a
//! packetdrill built from google/packetdrill:
//!
//! ```text
//! packetdrill --so_filename=target/debug/liboxnet_ffi.so \
//!     --ip_version=ipv4 --local_ip=192.168.0.1 \
//!     crates/oxnet-stack/tests/scripts/passive_open.pkt
//! ```
//!
//! `--local_ip` must be the stack's address (packetdrill otherwise picks
//! a random one in 192.168.0.0/16); the remote end is packetdrill's
//! default, 192.0.2.1. For IPv6: `--ip_version=ipv6
//! --local_ip=fd3d:fa7b:d17d::1`. `--so_flags=local4=A.B.C.D,local6=X`
//! changes the stack's addresses. The scripts of
//! `crates/oxnet-stack/tests/scripts/` are in packetdrill's syntax.
//! docs/packetdrill.md has the whole cross-check (building packetdrill,
//! `scripts/packetdrill-check.sh`, which scripts pass and why others fail).
//!
//! # Tests
//! `tests/abi.rs` (the ABI from Rust), `tests/c_echo.rs` (compiles and
//! runs `tests/c/echo.c` with the system `cc`), `tests/packetdrill.rs`
//! (the shim loaded and called as packetdrill does).

pub mod abi;
pub mod net;
pub mod packetdrill;
pub mod sockaddr;
pub mod stack;
