//! TCP as graph elements (ClickNF's cTCP; docs/stack.md has the paths).
//! The state each element works on is kept apart from the elements, in
//! small modules with their own tests:
//!
//! | module | RFC | what |
//! |---|---|---|
//! | [`output`] | 9293 §3.1 | building a segment: TCP header and options, IPv4 or IPv6 header, next hop |
//! | [`offload`] | | data segments the device finishes: checksum offload and TSO (one large IPv4 segment it cuts into MSS-sized ones) |
//! | [`rtt`] | 6298 | smoothed RTT, its variation, the retransmission timeout and its back-off |
//! | [`socket`] | 9293 §3.10 | listener and stream sockets: async calls for tasks, `try_` calls for non-blocking use, errno errors |
//! | [`tcb`] | 9293 §3.3 | the TCB (states, sequence variables, options in force, queues) and the per-core table of them |
//! | [`chain`] | | received segments in several buffers (RSC, TCPGRO): trimming them, queueing their buffers |
//! | [`cookie`] | 4987 §3.6 | SYN cookies: the SYN-ACK's ISS carries a period, the MSS and a keyed hash |
//! | [`elements`] | 9293 §3.10.7 | the incoming path's elements (ClickNF Figure 2) |
//! | [`info`] | | TCPInfo: the per-core TCB, flow and listener tables and the settings the elements share |
//! | [`isn`] | 9293 §3.4.1, 6528, 6056 | initial sequence numbers and ephemeral ports from a keyed hash |
//! | [`scoreboard`] | 6675 §4, 2018, 2883 | the sender's SACK scoreboard: ranges SACKed above SND.UNA, IsLost, SetPipe (pipe), NextSeg |
//! | [`sack`] | 6675 §5 | SACK-based loss recovery: DupAcks, entering and leaving recovery, what may be sent, the timeout (§5.1) |
//! | [`newreno`] | 5681, 6582 | slow start, congestion avoidance, fast retransmit and NewReno's fast recovery (shared by every algorithm) |
//! | [`cc`] | | a connection's congestion control: NewReno, CUBIC or DCTCP over NewReno's loss recovery |
//! | [`cubic`] | 9438 | CUBIC's window rule |
//! | [`dctcp`] | 8257 §3.3 | DCTCP's alpha and window cut |
//! | [`ecn`] | 3168 §6.1, 8257 §3.2 | ECN's negotiation state, the receiver's echo and the sender's once-per-window reaction |
//! | [`epoll`] | epoll(7) | I/O multiplexing over listeners and streams: level- and edge-triggered, EPOLLIN/OUT/ERR/HUP/RDHUP, fed by the sockets' events |
//! | [`zerocopy`] | | packets in and out of a stream: received packets handed over without a copy, packets given to send kept without a copy |
//! | [`send_buffer`] | 9293 §3.8.1 | the send buffer: written bytes and given packets, in order, cut into segments by offset |
//! | [`payload`] | 9293 §3.1 | a segment's data written out: bytes copied behind the headers, given packets attached (a chain) |
//! | [`io_traits`] | | poll-style reads and writes; `futures-io` and tokio `AsyncRead`/`AsyncWrite` (features `futures-io`, `tokio`) |

pub mod cc;
pub mod chain;
pub mod cookie;
pub mod cubic;
pub mod dctcp;
pub mod ecn;
pub mod elements;
pub mod epoll;
pub mod info;
pub mod io_traits;
pub mod isn;
pub mod newreno;
pub mod offload;
pub mod output;
pub mod payload;
pub mod rtt;
pub mod sack;
pub mod scoreboard;
pub mod send_buffer;
pub mod socket;
pub mod tcb;
pub mod zerocopy;

#[cfg(test)]
mod api_tests;
#[cfg(test)]
mod zerocopy_tests;
