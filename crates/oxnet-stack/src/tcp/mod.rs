//! TCP as graph elements (ClickNF's cTCP; docs/stack.md has the paths).
//! The state each element works on is kept apart from the elements, in
//! small modules with their own tests:
//!
//! | module | RFC | what |
//! |---|---|---|
//! | [`rtt`] | 6298 | smoothed RTT, its variation, the retransmission timeout and its back-off |

pub mod rtt;
