//! TCP as graph elements (ClickNF's cTCP; docs/stack.md has the paths).
//! The state each element works on is kept apart from the elements, in
//! small modules with their own tests:
//!
//! | module | RFC | what |
//! |---|---|---|
//! | [`rtt`] | 6298 | smoothed RTT, its variation, the retransmission timeout and its back-off |
//! | [`newreno`] | 5681, 6582 | slow start, congestion avoidance, fast retransmit and NewReno's fast recovery |

pub mod newreno;
pub mod rtt;
