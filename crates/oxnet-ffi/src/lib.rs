//! oxnet for C: a C ABI over oxnet's TCP sockets and epoll (`abi`,
//! declared in `include/oxnet.h`), and a shim that lets packetdrill
//! (google/packetdrill, `--so_filename`) drive the stack
//! (`packetdrill`).
//!
//! | module | what |
//! |---|---|
//! | `net` | the router: `FfiSource -> TCPStack -> FfiSink`, simulated time |
//! | `stack` | the descriptor table and the POSIX-shaped calls, in safe Rust |
//! | `sockaddr` | `struct sockaddr_in` / `_in6` to and from endpoints |
//! | `abi` | the exported `oxnet_*` functions |
//! | `packetdrill` | `packetdrill_interface_init` and the shim's calls |

pub mod abi;
pub mod net;
pub mod packetdrill;
pub mod sockaddr;
pub mod stack;
