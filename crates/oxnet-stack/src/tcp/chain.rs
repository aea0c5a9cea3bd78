//! Received segments in several buffers: a TCP segment coalesced by the
//! NIC (82599 RSC, §7.11) or by TCPGRO is a chain whose first buffer
//! holds the headers and the start of the payload, and whose next
//! buffers hold the rest. The incoming path reads SEG.LEN from the whole
//! chain (`Seg::read`), trims it here (TCPCheckSeqNo, TCPProcessData) and
//! queues its buffers for the reader one by one (TCPProcessData).

use oxnet_driver::Packet;

/// Detaches the buffers after the first one, each a packet of its own,
/// in order.
pub fn unchain(p: &mut Packet) -> Vec<Packet> {
    let mut out = Vec::with_capacity(p.segment_count().saturating_sub(1));
    let mut next = p.take_next();
    while let Some(mut buffer) = next {
        next = buffer.take_next();
        out.push(buffer);
    }
    out
}

/// Removes `cut` bytes from the front and `tail` bytes from the end of
/// the payload of the chain `p`, whose payload starts `payload_at` bytes
/// into its first buffer: the headers move forward over data cut from
/// the first buffer (as for a single buffer), emptied buffers are freed.
/// None if the payload is shorter than `cut + tail`.
pub fn trim_payload(p: &mut Packet, payload_at: usize, cut: usize, tail: usize) -> Option<()> {
    let mut rest = unchain(p);
    let mut tail = tail;
    while tail > 0 {
        match rest.last_mut() {
            Some(last) => {
                let n = last.len().min(tail);
                last.set_len(last.len() - n).ok()?;
                tail -= n;
                if last.is_empty() {
                    rest.pop();
                }
            }
            None => {
                let in_first = p.len().checked_sub(payload_at)?;
                if tail > in_first {
                    return None;
                }
                p.set_len(p.len() - tail).ok()?;
                tail = 0;
            }
        }
    }
    let in_first = cut.min(p.len().checked_sub(payload_at)?);
    if in_first > 0 {
        p.copy_within(0..payload_at, in_first);
        p.strip_front(in_first).ok()?;
    }
    let mut cut = cut - in_first;
    let mut from = 0;
    while cut > 0 {
        let buffer = rest.get_mut(from)?;
        let n = buffer.len().min(cut);
        buffer.strip_front(n).ok()?;
        cut -= n;
        from += buffer.is_empty() as usize;
    }
    for buffer in rest.into_iter().skip(from).filter(|b| !b.is_empty()) {
        p.append(buffer);
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use oxnet_driver::{MemoryKind, Mempool};

    /// A chain: `header` bytes of 0xEE, then buffers holding the
    /// payload 0, 1, 2, ... in pieces of the given sizes (the first
    /// piece in the header's buffer).
    fn chain(pool: &Mempool, header: usize, pieces: &[usize]) -> Packet {
        let mut at = 0u8;
        let mut bytes = |n: usize| -> Vec<u8> {
            (0..n)
                .map(|_| {
                    at = at.wrapping_add(1);
                    at - 1
                })
                .collect()
        };
        let mut p = pool.alloc().unwrap();
        let mut first = vec![0xEE; header];
        first.extend(bytes(pieces[0]));
        p.set_len(first.len()).unwrap();
        p.copy_from_slice(&first);
        for &n in &pieces[1..] {
            let mut b = pool.alloc().unwrap();
            b.set_len(n).unwrap();
            b.copy_from_slice(&bytes(n));
            p.append(b);
        }
        p
    }

    fn bytes_of(p: &Packet) -> Vec<u8> {
        let mut v = Vec::new();
        p.copy_chain_to(&mut v);
        v
    }

    #[test]
    fn trimming_a_chain_keeps_the_headers_and_the_middle_of_the_payload() {
        let pool = Mempool::new("chain", 16, MemoryKind::Plain).unwrap();
        // Payload 0..30 in pieces of 10; cut 13 (the first buffer's 10 and
        // 3 of the second), tail 12 (the third buffer's 10, 2 of the
        // second).
        let mut p = chain(&pool, 4, &[10, 10, 10]);
        trim_payload(&mut p, 4, 13, 12).unwrap();
        let mut want = vec![0xEE; 4];
        want.extend(13u8..18);
        assert_eq!(bytes_of(&p), want);
        assert_eq!(p.total_len(), 9);
        assert_eq!(
            p.segment_count(),
            2,
            "the header's buffer and what is left of the second"
        );
        // Too much asked: None.
        let mut q = chain(&pool, 4, &[10, 10]);
        assert!(trim_payload(&mut q, 4, 15, 6).is_none());
        // Nothing asked: the same chain.
        let mut r = chain(&pool, 4, &[3, 10]);
        trim_payload(&mut r, 4, 0, 0).unwrap();
        assert_eq!(r.total_len(), 17);
        assert_eq!(unchain(&mut r).iter().map(|b| b.len()).collect::<Vec<_>>(), [10]);
        assert!(!r.is_chained());
    }
}
