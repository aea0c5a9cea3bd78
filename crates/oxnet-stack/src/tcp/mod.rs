//! TCP as graph elements (ClickNF's cTCP; docs/stack.md has the paths).
//! The state each element works on is kept apart from the elements, in
//! small modules with their own tests:
//!
//! | module | RFC | what |
//! |---|---|---|
//! | [`rtt`] | 6298 | smoothed RTT, its variation, the retransmission timeout and its back-off |
//! | [`tcb`] | 9293 §3.3 | the TCB (states, sequence variables, options in force, queues) and the per-core table of them |
//! | [`isn`] | 9293 §3.4.1, 6528, 6056 | initial sequence numbers and ephemeral ports from a keyed hash |
//! | [`newreno`] | 5681, 6582 | slow start, congestion avoidance, fast retransmit and NewReno's fast recovery |

pub mod isn;
pub mod newreno;
pub mod rtt;
pub mod tcb;
