//! memif wire format: the control messages sent over the Unix socket and
//! the ring layout in shared memory.
//!
//! Source: DPDK `drivers/net/memif/memif.h` (the same header VPP's
//! libmemif ships as `memif.h`; protocol version 2.0). Every message is a
//! packed 128-byte `memif_msg_t`: a 16-bit type, then the message body
//! (a packed union) at byte 2, zero padding to 128 bytes. Integers are in
//! host byte order (both peers share one machine). Written from that
//! header's layout, not copied.

/// `MEMIF_COOKIE`: the first word of every ring header.
pub const COOKIE: u32 = 0x3E31F20;
/// `MEMIF_VERSION`: major 2, minor 0 (`(2 << 8) | 0`).
pub const VERSION: u16 = 0x0200;
/// `MEMIF_NAME_SZ`.
pub const NAME_SIZE: usize = 32;
/// `sizeof(memif_msg_t)`: every control message is exactly this long.
pub const MSG_SIZE: usize = 128;
/// The largest ring a peer may ask for, as log2 (DPDK's
/// `ETH_MEMIF_MAX_LOG2_RING_SIZE`: 14, 16384 descriptors).
pub const MAX_LOG2_RING_SIZE: u8 = 14;

/// `memif_msg_type_t`.
pub mod msg_type {
    pub const ACK: u16 = 1;
    pub const HELLO: u16 = 2;
    pub const INIT: u16 = 3;
    pub const ADD_REGION: u16 = 4;
    pub const ADD_RING: u16 = 5;
    pub const CONNECT: u16 = 6;
    pub const CONNECTED: u16 = 7;
    pub const DISCONNECT: u16 = 8;
}

/// `MEMIF_MSG_ADD_RING_FLAG_S2M` (`..._C2S` in newer naming): the ring
/// carries packets from the client (slave) to the server (master).
pub const ADD_RING_FLAG_C2S: u16 = 1;
/// `MEMIF_INTERFACE_MODE_ETHERNET`, the only mode oxnet speaks.
pub const MODE_ETHERNET: u8 = 0;

/// Ring header (`memif_ring_t`, 64-byte cache lines on x86-64): cookie
/// (u32) and flags (u16) and head (u16) in the first line, tail (u16)
/// alone in the second, descriptors from the third.
pub mod ring {
    pub const COOKIE: usize = 0;
    pub const FLAGS: usize = 4;
    pub const HEAD: usize = 6;
    pub const TAIL: usize = 64;
    pub const DESCRIPTORS: usize = 128;
    /// `MEMIF_RING_FLAG_MASK_INT`: set by the receiver of a ring that
    /// polls; the sender then does not signal the interrupt eventfd.
    pub const FLAG_MASK_INT: u16 = 1;
    /// Bytes of a ring of `2^log2` descriptors.
    pub fn bytes(log2: u8) -> usize {
        DESCRIPTORS + super::desc::SIZE * (1usize << log2)
    }
}

/// Buffer descriptor (`memif_desc_t`, packed, 16 bytes): flags u16,
/// region u16, length u32, offset u32, metadata u32.
pub mod desc {
    pub const SIZE: usize = 16;
    /// `MEMIF_DESC_FLAG_NEXT`: the packet continues in the next slot.
    pub const FLAG_NEXT: u16 = 1;
}

/// One control message, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Msg {
    Ack,
    /// Server → client, first message (`memif_msg_hello_t`). The ring
    /// maxima are the highest index allowed (count − 1).
    Hello {
        name: String,
        min_version: u16,
        max_version: u16,
        max_region: u16,
        max_s2c_ring: u16,
        max_c2s_ring: u16,
        max_log2_ring_size: u8,
    },
    /// Client → server (`memif_msg_init_t`).
    Init {
        version: u16,
        id: u32,
        mode: u8,
        secret: [u8; 24],
        name: String,
    },
    /// Client → server, the region's memfd in SCM_RIGHTS.
    AddRegion {
        index: u16,
        size: u64,
    },
    /// Client → server, the ring's interrupt eventfd in SCM_RIGHTS.
    AddRing {
        flags: u16,
        index: u16,
        region: u16,
        offset: u32,
        log2_ring_size: u8,
        private_hdr_size: u16,
    },
    Connect {
        name: String,
    },
    Connected {
        name: String,
    },
    Disconnect {
        code: u32,
        reason: String,
    },
}

fn put_name(buf: &mut [u8], at: usize, len: usize, name: &str) {
    let bytes = name.as_bytes();
    let n = bytes.len().min(len - 1);
    buf[at..at + n].copy_from_slice(&bytes[..n]);
}

fn get_name(buf: &[u8], at: usize, len: usize) -> String {
    let field = &buf[at..at + len];
    let end = field.iter().position(|&b| b == 0).unwrap_or(len);
    String::from_utf8_lossy(&field[..end]).into_owned()
}

fn u16_at(buf: &[u8], at: usize) -> u16 {
    u16::from_ne_bytes([buf[at], buf[at + 1]])
}

fn u32_at(buf: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes(buf[at..at + 4].try_into().unwrap_or([0; 4]))
}

/// The body starts after the 16-bit type.
const BODY: usize = 2;

impl Msg {
    /// The 128 bytes on the wire.
    pub fn encode(&self) -> [u8; MSG_SIZE] {
        let mut b = [0u8; MSG_SIZE];
        let o = BODY;
        let kind = match self {
            Msg::Ack => msg_type::ACK,
            Msg::Hello {
                name,
                min_version,
                max_version,
                max_region,
                max_s2c_ring,
                max_c2s_ring,
                max_log2_ring_size,
            } => {
                put_name(&mut b, o, NAME_SIZE, name);
                b[o + 32..o + 34].copy_from_slice(&min_version.to_ne_bytes());
                b[o + 34..o + 36].copy_from_slice(&max_version.to_ne_bytes());
                b[o + 36..o + 38].copy_from_slice(&max_region.to_ne_bytes());
                // Field order in memif_msg_hello_t: max_m2s_ring (S2C) first.
                b[o + 38..o + 40].copy_from_slice(&max_s2c_ring.to_ne_bytes());
                b[o + 40..o + 42].copy_from_slice(&max_c2s_ring.to_ne_bytes());
                b[o + 42] = *max_log2_ring_size;
                msg_type::HELLO
            }
            Msg::Init {
                version,
                id,
                mode,
                secret,
                name,
            } => {
                b[o..o + 2].copy_from_slice(&version.to_ne_bytes());
                b[o + 2..o + 6].copy_from_slice(&id.to_ne_bytes());
                b[o + 6] = *mode;
                b[o + 7..o + 31].copy_from_slice(secret);
                put_name(&mut b, o + 31, NAME_SIZE, name);
                msg_type::INIT
            }
            Msg::AddRegion { index, size } => {
                b[o..o + 2].copy_from_slice(&index.to_ne_bytes());
                b[o + 2..o + 10].copy_from_slice(&size.to_ne_bytes());
                msg_type::ADD_REGION
            }
            Msg::AddRing {
                flags,
                index,
                region,
                offset,
                log2_ring_size,
                private_hdr_size,
            } => {
                b[o..o + 2].copy_from_slice(&flags.to_ne_bytes());
                b[o + 2..o + 4].copy_from_slice(&index.to_ne_bytes());
                b[o + 4..o + 6].copy_from_slice(&region.to_ne_bytes());
                b[o + 6..o + 10].copy_from_slice(&offset.to_ne_bytes());
                b[o + 10] = *log2_ring_size;
                b[o + 11..o + 13].copy_from_slice(&private_hdr_size.to_ne_bytes());
                msg_type::ADD_RING
            }
            Msg::Connect { name } => {
                put_name(&mut b, o, NAME_SIZE, name);
                msg_type::CONNECT
            }
            Msg::Connected { name } => {
                put_name(&mut b, o, NAME_SIZE, name);
                msg_type::CONNECTED
            }
            Msg::Disconnect { code, reason } => {
                b[o..o + 4].copy_from_slice(&code.to_ne_bytes());
                put_name(&mut b, o + 4, 96, reason);
                msg_type::DISCONNECT
            }
        };
        b[0..2].copy_from_slice(&kind.to_ne_bytes());
        b
    }

    /// Decodes 128 bytes; an unknown type is an error naming it.
    pub fn decode(b: &[u8; MSG_SIZE]) -> std::result::Result<Msg, String> {
        let o = BODY;
        Ok(match u16_at(b, 0) {
            msg_type::ACK => Msg::Ack,
            msg_type::HELLO => Msg::Hello {
                name: get_name(b, o, NAME_SIZE),
                min_version: u16_at(b, o + 32),
                max_version: u16_at(b, o + 34),
                max_region: u16_at(b, o + 36),
                max_s2c_ring: u16_at(b, o + 38),
                max_c2s_ring: u16_at(b, o + 40),
                max_log2_ring_size: b[o + 42],
            },
            msg_type::INIT => Msg::Init {
                version: u16_at(b, o),
                id: u32_at(b, o + 2),
                mode: b[o + 6],
                secret: b[o + 7..o + 31].try_into().unwrap_or([0; 24]),
                name: get_name(b, o + 31, NAME_SIZE),
            },
            msg_type::ADD_REGION => Msg::AddRegion {
                index: u16_at(b, o),
                size: u64::from_ne_bytes(b[o + 2..o + 10].try_into().unwrap_or([0; 8])),
            },
            msg_type::ADD_RING => Msg::AddRing {
                flags: u16_at(b, o),
                index: u16_at(b, o + 2),
                region: u16_at(b, o + 4),
                offset: u32_at(b, o + 6),
                log2_ring_size: b[o + 10],
                private_hdr_size: u16_at(b, o + 11),
            },
            msg_type::CONNECT => Msg::Connect {
                name: get_name(b, o, NAME_SIZE),
            },
            msg_type::CONNECTED => Msg::Connected {
                name: get_name(b, o, NAME_SIZE),
            },
            msg_type::DISCONNECT => Msg::Disconnect {
                code: u32_at(b, o),
                reason: get_name(b, o + 4, 96),
            },
            other => return Err(format!("unknown memif message type {other}")),
        })
    }

    /// Short name for error messages.
    pub fn name(&self) -> &'static str {
        match self {
            Msg::Ack => "ACK",
            Msg::Hello { .. } => "HELLO",
            Msg::Init { .. } => "INIT",
            Msg::AddRegion { .. } => "ADD_REGION",
            Msg::AddRing { .. } => "ADD_RING",
            Msg::Connect { .. } => "CONNECT",
            Msg::Connected { .. } => "CONNECTED",
            Msg::Disconnect { .. } => "DISCONNECT",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Offsets from memif.h: memif_msg_t is packed, `type:16` then the
    // union, so every body starts at byte 2.
    #[test]
    fn init_fields_sit_where_memif_h_puts_them() {
        let b = Msg::Init {
            version: VERSION,
            id: 0x11223344,
            mode: 0,
            secret: [0; 24],
            name: "ab".into(),
        }
        .encode();
        assert_eq!(&b[0..2], &3u16.to_ne_bytes());
        assert_eq!(&b[2..4], &0x0200u16.to_ne_bytes());
        assert_eq!(&b[4..8], &0x11223344u32.to_ne_bytes());
        // name after version(2) id(4) mode(1) secret(24): 2 + 31 = 33.
        assert_eq!(&b[33..35], b"ab");
    }

    #[test]
    fn add_ring_and_region_fields_sit_where_memif_h_puts_them() {
        let b = Msg::AddRing {
            flags: 1,
            index: 2,
            region: 3,
            offset: 0x1000,
            log2_ring_size: 10,
            private_hdr_size: 0,
        }
        .encode();
        assert_eq!(&b[0..16], &[5, 0, 1, 0, 2, 0, 3, 0, 0x00, 0x10, 0, 0, 10, 0, 0, 0]);
        let b = Msg::AddRegion {
            index: 1,
            size: 0x20_0000,
        }
        .encode();
        assert_eq!(&b[0..12], &[4, 0, 1, 0, 0, 0, 0x20, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn every_message_round_trips() {
        let all = [
            Msg::Ack,
            Msg::Hello {
                name: "DPDK 22.11".into(),
                min_version: VERSION,
                max_version: VERSION,
                max_region: 255,
                max_s2c_ring: 0,
                max_c2s_ring: 1,
                max_log2_ring_size: 14,
            },
            Msg::Init {
                version: VERSION,
                id: 7,
                mode: 0,
                secret: [9; 24],
                name: "oxnet".into(),
            },
            Msg::AddRegion {
                index: 0,
                size: 1 << 22,
            },
            Msg::AddRing {
                flags: 1,
                index: 0,
                region: 0,
                offset: 256,
                log2_ring_size: 9,
                private_hdr_size: 0,
            },
            Msg::Connect { name: "c".into() },
            Msg::Connected { name: "s".into() },
            Msg::Disconnect {
                code: 0,
                reason: "ID mismatch".into(),
            },
        ];
        for m in all {
            assert_eq!(Msg::decode(&m.encode()).unwrap(), m);
        }
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        let mut b = [0xffu8; MSG_SIZE];
        assert!(Msg::decode(&b)
            .unwrap_err()
            .contains("unknown memif message type 65535"));
        b[0] = 0;
        b[1] = 0;
        assert!(Msg::decode(&b).is_err());
    }

    #[test]
    fn ring_header_is_two_cache_lines() {
        assert_eq!(ring::bytes(9), 128 + 16 * 512);
    }
}
