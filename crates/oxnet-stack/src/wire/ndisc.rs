//! Neighbor Discovery for IPv6 (RFC 4861 §4): Router Solicitation and
//! Advertisement, Neighbor Solicitation and Advertisement, Redirect, and
//! the options of §4.6 that an Ethernet host uses. These are ICMPv6
//! messages: [`super::icmpv6::Icmpv6Repr`] verifies the checksum and hands
//! types 133 to 137 to [`NdiscRepr::parse`].

use super::ethernet::EthernetAddress;
use super::icmpv6::{msg_type, Icmpv6Packet};
use super::{get_u16, get_u32, put_u16, put_u32, Result, WireError};
use std::net::Ipv6Addr;

/// Byte offsets of the Neighbor Discovery fields, from the start of the
/// ICMPv6 message (RFC 4861 §4.1 to §4.5).
mod field {
    use std::ops::Range;
    /// Router Advertisement: Cur Hop Limit.
    pub const RA_HOP_LIMIT: usize = 4;
    /// Router Advertisement: M and O flags.
    pub const RA_FLAGS: usize = 5;
    /// Router Advertisement: Router Lifetime (seconds).
    pub const RA_ROUTER_LIFETIME: usize = 6;
    /// Router Advertisement: Reachable Time (milliseconds).
    pub const RA_REACHABLE_TIME: usize = 8;
    /// Router Advertisement: Retrans Timer (milliseconds).
    pub const RA_RETRANS_TIMER: usize = 12;
    /// Neighbor Advertisement: R, S and O flags.
    pub const NA_FLAGS: usize = 4;
    /// Neighbor Solicitation and Advertisement, Redirect: Target Address.
    pub const TARGET: Range<usize> = 8..24;
    /// Redirect: Destination Address.
    pub const REDIRECT_DEST: Range<usize> = 24..40;

    /// Where the options start, which is also each message's least length.
    pub const RS_OPTIONS: usize = 8;
    pub const RA_OPTIONS: usize = 16;
    pub const NS_NA_OPTIONS: usize = 24;
    pub const REDIRECT_OPTIONS: usize = 40;
}

/// Option types (RFC 4861 §4.6).
mod option_type {
    pub const SOURCE_LLADDR: u8 = 1;
    pub const TARGET_LLADDR: u8 = 2;
    pub const PREFIX_INFO: u8 = 3;
    pub const MTU: u8 = 5;
}

/// Router Advertisement flags (RFC 4861 §4.2).
const RA_FLAG_MANAGED: u8 = 0x80;
const RA_FLAG_OTHER: u8 = 0x40;
/// Neighbor Advertisement flags (RFC 4861 §4.4).
const NA_FLAG_ROUTER: u8 = 0x80;
const NA_FLAG_SOLICITED: u8 = 0x40;
const NA_FLAG_OVERRIDE: u8 = 0x20;
/// Prefix Information flags (RFC 4861 §4.6.2).
const PREFIX_FLAG_ON_LINK: u8 = 0x80;
const PREFIX_FLAG_AUTONOMOUS: u8 = 0x40;

/// Most Prefix Information options kept from one Router Advertisement;
/// further ones are skipped (a bound on what a crafted message can make
/// the stack hold).
pub const MAX_PREFIXES: usize = 4;

/// A Prefix Information option (RFC 4861 §4.6.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NdiscPrefixInfo {
    /// Number of leading bits of `prefix` that are valid (0 to 128).
    pub prefix_len: u8,
    /// L: the prefix is on-link.
    pub on_link: bool,
    /// A: the prefix can be used for stateless address configuration.
    pub autonomous: bool,
    /// Valid lifetime in seconds (all ones: infinity).
    pub valid_lifetime: u32,
    /// Preferred lifetime in seconds (all ones: infinity).
    pub preferred_lifetime: u32,
    /// The prefix.
    pub prefix: Ipv6Addr,
}

/// The options of a Neighbor Discovery message that the stack uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NdiscOptions {
    /// Source Link-layer Address (type 1, §4.6.1).
    pub source_lladdr: Option<EthernetAddress>,
    /// Target Link-layer Address (type 2, §4.6.1).
    pub target_lladdr: Option<EthernetAddress>,
    /// MTU (type 5, §4.6.4).
    pub mtu: Option<u32>,
    /// Prefix Information (type 3, §4.6.2), the first ones filled.
    pub prefixes: [Option<NdiscPrefixInfo>; MAX_PREFIXES],
}

impl NdiscOptions {
    /// Parses the options area (RFC 4861 §4.6): each option's length is in
    /// units of 8 bytes; a length of 0 (§4.6: "MUST silently discard") or
    /// one running past the message is Malformed. Unknown options
    /// (Redirected Header among them) are skipped, and so are known ones of
    /// a length wrong for them (a link-layer address of another length than
    /// Ethernet's, RFC 2464 §6; a Prefix Information not 32 bytes, an MTU
    /// not 8), so that an odd option costs that option and not the
    /// message (§4.6 asks only that a length of 0 discard it). A repeated
    /// option: the last one counts, but for prefixes, which are collected.
    pub fn parse(bytes: &[u8]) -> Result<NdiscOptions> {
        let mut options = NdiscOptions::default();
        let mut prefixes = 0;
        let mut at = 0;
        while at < bytes.len() {
            let header = bytes
                .get(at..at + 2)
                .ok_or(WireError::Malformed("NDISC option without its length"))?;
            let (kind, len) = (header[0], header[1] as usize * 8);
            if len == 0 {
                return Err(WireError::Malformed("NDISC option of length 0"));
            }
            let option = bytes
                .get(at..at + len)
                .ok_or(WireError::Malformed("NDISC option runs past the message"))?;
            match (kind, len) {
                (option_type::SOURCE_LLADDR, 8) => options.source_lladdr = EthernetAddress::from_bytes(&option[2..]),
                (option_type::TARGET_LLADDR, 8) => options.target_lladdr = EthernetAddress::from_bytes(&option[2..]),
                (option_type::MTU, 8) => options.mtu = Some(get_u32(option, 4)),
                (option_type::PREFIX_INFO, 32) if prefixes < MAX_PREFIXES => {
                    options.prefixes[prefixes] = Some(parse_prefix_info(option));
                    prefixes += 1;
                }
                (option_type::PREFIX_INFO, 32) => {} // past MAX_PREFIXES: skipped
                // §4.6: options a node does not recognize are skipped; so
                // are known ones of a length wrong for them.
                _ => {}
            }
            at += len;
        }
        Ok(options)
    }

    /// Length of the options emit writes.
    pub fn len(&self) -> usize {
        8 * (self.source_lladdr.is_some() as usize
            + self.target_lladdr.is_some() as usize
            + self.mtu.is_some() as usize)
            + 32 * self.prefixes.iter().flatten().count()
    }

    /// Whether there is no option to emit.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Writes the options into the first [`NdiscOptions::len`] bytes of
    /// `buf`: link-layer addresses, MTU, then every prefix. Returns the
    /// length written.
    pub fn emit(&self, buf: &mut [u8]) -> usize {
        let mut at = 0;
        for (kind, addr) in [
            (option_type::SOURCE_LLADDR, self.source_lladdr),
            (option_type::TARGET_LLADDR, self.target_lladdr),
        ] {
            if let Some(addr) = addr {
                buf[at..at + 2].copy_from_slice(&[kind, 1]);
                buf[at + 2..at + 8].copy_from_slice(&addr.0);
                at += 8;
            }
        }
        if let Some(mtu) = self.mtu {
            buf[at..at + 4].copy_from_slice(&[option_type::MTU, 1, 0, 0]);
            put_u32(buf, at + 4, mtu);
            at += 8;
        }
        for prefix in self.prefixes.iter().flatten() {
            emit_prefix_info(prefix, &mut buf[at..at + 32]);
            at += 32;
        }
        at
    }
}

/// The fields of a 32-byte Prefix Information option (RFC 4861 §4.6.2).
fn parse_prefix_info(option: &[u8]) -> NdiscPrefixInfo {
    let mut prefix = [0u8; 16];
    prefix.copy_from_slice(&option[16..32]);
    NdiscPrefixInfo {
        prefix_len: option[2],
        on_link: option[3] & PREFIX_FLAG_ON_LINK != 0,
        autonomous: option[3] & PREFIX_FLAG_AUTONOMOUS != 0,
        valid_lifetime: get_u32(option, 4),
        preferred_lifetime: get_u32(option, 8),
        prefix: Ipv6Addr::from(prefix),
    }
}

/// Writes a 32-byte Prefix Information option (RFC 4861 §4.6.2).
fn emit_prefix_info(info: &NdiscPrefixInfo, option: &mut [u8]) {
    let mut flags = 0;
    if info.on_link {
        flags |= PREFIX_FLAG_ON_LINK;
    }
    if info.autonomous {
        flags |= PREFIX_FLAG_AUTONOMOUS;
    }
    option[..4].copy_from_slice(&[option_type::PREFIX_INFO, 4, info.prefix_len, flags]);
    put_u32(option, 4, info.valid_lifetime);
    put_u32(option, 8, info.preferred_lifetime);
    option[12..16].fill(0);
    option[16..32].copy_from_slice(&info.prefix.octets());
}

/// A Neighbor Discovery message as a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NdiscRepr {
    /// Router Solicitation (type 133, §4.1).
    RouterSolicit {
        /// Options (a source link-layer address, usually).
        options: NdiscOptions,
    },
    /// Router Advertisement (type 134, §4.2).
    RouterAdvert {
        /// Cur Hop Limit for outgoing packets (0: unspecified).
        hop_limit: u8,
        /// M: addresses are available through DHCPv6.
        managed: bool,
        /// O: other configuration is available through DHCPv6.
        other_config: bool,
        /// Router Lifetime in seconds (0: not a default router).
        router_lifetime: u16,
        /// Reachable Time in milliseconds (0: unspecified).
        reachable_time: u32,
        /// Retrans Timer in milliseconds (0: unspecified).
        retrans_timer: u32,
        /// Options (source link-layer address, MTU, prefixes).
        options: NdiscOptions,
    },
    /// Neighbor Solicitation (type 135, §4.3).
    NeighborSolicit {
        /// The address whose link-layer address is asked for.
        target: Ipv6Addr,
        /// Options (a source link-layer address, unless the source is ::).
        options: NdiscOptions,
    },
    /// Neighbor Advertisement (type 136, §4.4).
    NeighborAdvert {
        /// R: the sender is a router.
        router: bool,
        /// S: sent in answer to a solicitation.
        solicited: bool,
        /// O: the advertisement should override a cached address.
        override_cache: bool,
        /// The address advertised.
        target: Ipv6Addr,
        /// Options (a target link-layer address, usually).
        options: NdiscOptions,
    },
    /// Redirect (type 137, §4.5).
    Redirect {
        /// The better first hop.
        target: Ipv6Addr,
        /// The destination being redirected.
        dest: Ipv6Addr,
        /// Options (a target link-layer address; the Redirected Header is
        /// skipped).
        options: NdiscOptions,
    },
}

/// The 16 bytes at `range` as an address (the caller checked the length).
fn addr_at(bytes: &[u8], range: std::ops::Range<usize>) -> Ipv6Addr {
    let mut a = [0u8; 16];
    a.copy_from_slice(&bytes[range]);
    Ipv6Addr::from(a)
}

impl NdiscRepr {
    /// The message in an ICMPv6 packet of type 133 to 137 (whose checksum
    /// the caller verified), checked as RFC 4861 §6.1.1, §6.1.2, §7.1.1,
    /// §7.1.2 and §8.1 ask, but for what needs the IPv6 header (hop limit
    /// 255, source address rules), which the caller checks: code 0, the
    /// message's least length (Truncated), a target of NS or NA and the
    /// destination of a Redirect not multicast, and the options.
    pub fn parse<T: AsRef<[u8]>>(packet: &Icmpv6Packet<T>) -> Result<NdiscRepr> {
        let bytes = packet.as_bytes();
        let t = packet.msg_type();
        let options_at = match t {
            msg_type::ROUTER_SOLICIT => field::RS_OPTIONS,
            msg_type::ROUTER_ADVERT => field::RA_OPTIONS,
            msg_type::NEIGHBOR_SOLICIT | msg_type::NEIGHBOR_ADVERT => field::NS_NA_OPTIONS,
            msg_type::REDIRECT => field::REDIRECT_OPTIONS,
            _ => return Err(WireError::Unsupported("ICMPv6 type that is not Neighbor Discovery")),
        };
        if packet.msg_code() != 0 {
            return Err(WireError::Malformed("NDISC message with a nonzero code"));
        }
        if bytes.len() < options_at {
            return Err(WireError::Truncated);
        }
        let options = NdiscOptions::parse(&bytes[options_at..])?;
        let repr = match t {
            msg_type::ROUTER_SOLICIT => NdiscRepr::RouterSolicit { options },
            msg_type::ROUTER_ADVERT => NdiscRepr::RouterAdvert {
                hop_limit: bytes[field::RA_HOP_LIMIT],
                managed: bytes[field::RA_FLAGS] & RA_FLAG_MANAGED != 0,
                other_config: bytes[field::RA_FLAGS] & RA_FLAG_OTHER != 0,
                router_lifetime: get_u16(bytes, field::RA_ROUTER_LIFETIME),
                reachable_time: get_u32(bytes, field::RA_REACHABLE_TIME),
                retrans_timer: get_u32(bytes, field::RA_RETRANS_TIMER),
                options,
            },
            msg_type::NEIGHBOR_SOLICIT => NdiscRepr::NeighborSolicit {
                target: Self::unicast_target(bytes)?,
                options,
            },
            msg_type::NEIGHBOR_ADVERT => {
                let flags = bytes[field::NA_FLAGS];
                NdiscRepr::NeighborAdvert {
                    router: flags & NA_FLAG_ROUTER != 0,
                    solicited: flags & NA_FLAG_SOLICITED != 0,
                    override_cache: flags & NA_FLAG_OVERRIDE != 0,
                    target: Self::unicast_target(bytes)?,
                    options,
                }
            }
            _ => {
                let dest = addr_at(bytes, field::REDIRECT_DEST);
                if dest.is_multicast() {
                    return Err(WireError::Malformed("NDISC Redirect to a multicast destination"));
                }
                NdiscRepr::Redirect {
                    target: addr_at(bytes, field::TARGET),
                    dest,
                    options,
                }
            }
        };
        Ok(repr)
    }

    /// The target of NS or NA, which is never multicast (§7.1.1, §7.1.2).
    fn unicast_target(bytes: &[u8]) -> Result<Ipv6Addr> {
        let target = addr_at(bytes, field::TARGET);
        if target.is_multicast() {
            return Err(WireError::Malformed("NDISC target address is multicast"));
        }
        Ok(target)
    }

    /// The message's options.
    pub fn options(&self) -> &NdiscOptions {
        match self {
            NdiscRepr::RouterSolicit { options }
            | NdiscRepr::RouterAdvert { options, .. }
            | NdiscRepr::NeighborSolicit { options, .. }
            | NdiscRepr::NeighborAdvert { options, .. }
            | NdiscRepr::Redirect { options, .. } => options,
        }
    }

    /// Where the options start: the length of the message without them.
    fn options_at(&self) -> usize {
        match self {
            NdiscRepr::RouterSolicit { .. } => field::RS_OPTIONS,
            NdiscRepr::RouterAdvert { .. } => field::RA_OPTIONS,
            NdiscRepr::NeighborSolicit { .. } | NdiscRepr::NeighborAdvert { .. } => field::NS_NA_OPTIONS,
            NdiscRepr::Redirect { .. } => field::REDIRECT_OPTIONS,
        }
    }

    /// Length of the ICMPv6 message this emits, options included.
    pub fn buffer_len(&self) -> usize {
        self.options_at() + self.options().len()
    }

    /// Writes the message (type, code 0, fields and options; not the
    /// checksum, which [`super::icmpv6::Icmpv6Repr::emit`] fills) into a
    /// buffer of exactly `buffer_len()` bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Icmpv6Packet<T>) {
        let options_at = self.options_at();
        let bytes = packet.as_bytes_mut();
        bytes[4..options_at].fill(0); // reserved fields
        let t = match *self {
            NdiscRepr::RouterSolicit { .. } => msg_type::ROUTER_SOLICIT,
            NdiscRepr::RouterAdvert {
                hop_limit,
                managed,
                other_config,
                router_lifetime,
                reachable_time,
                retrans_timer,
                ..
            } => {
                bytes[field::RA_HOP_LIMIT] = hop_limit;
                bytes[field::RA_FLAGS] =
                    if managed { RA_FLAG_MANAGED } else { 0 } | if other_config { RA_FLAG_OTHER } else { 0 };
                put_u16(bytes, field::RA_ROUTER_LIFETIME, router_lifetime);
                put_u32(bytes, field::RA_REACHABLE_TIME, reachable_time);
                put_u32(bytes, field::RA_RETRANS_TIMER, retrans_timer);
                msg_type::ROUTER_ADVERT
            }
            NdiscRepr::NeighborSolicit { target, .. } => {
                bytes[field::TARGET].copy_from_slice(&target.octets());
                msg_type::NEIGHBOR_SOLICIT
            }
            NdiscRepr::NeighborAdvert {
                router,
                solicited,
                override_cache,
                target,
                ..
            } => {
                bytes[field::NA_FLAGS] = if router { NA_FLAG_ROUTER } else { 0 }
                    | if solicited { NA_FLAG_SOLICITED } else { 0 }
                    | if override_cache { NA_FLAG_OVERRIDE } else { 0 };
                bytes[field::TARGET].copy_from_slice(&target.octets());
                msg_type::NEIGHBOR_ADVERT
            }
            NdiscRepr::Redirect { target, dest, .. } => {
                bytes[field::TARGET].copy_from_slice(&target.octets());
                bytes[field::REDIRECT_DEST].copy_from_slice(&dest.octets());
                msg_type::REDIRECT
            }
        };
        self.options().emit(&mut bytes[options_at..]);
        packet.set_msg_type(t);
        packet.set_msg_code(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::icmpv6::Icmpv6Repr;
    use crate::wire::Checksum;
    use proptest::prelude::*;

    const MAC: EthernetAddress = EthernetAddress([0x52, 0x54, 0x00, 0x12, 0x34, 0x56]);

    fn addr(s: &str) -> Ipv6Addr {
        s.parse().unwrap()
    }

    /// Neighbor Solicitation from fe80::1 to the solicited-node address
    /// ff02::1:ff00:2 for target fe80::2, with the source link-layer
    /// address. Checksum by hand: pseudo-header fe80 + 1 + ff02 + 1 +
    /// ff00 + 2 + 0020 + 003a = 0x2fce0; message 8700 + fe80 + 2 + 0101 +
    /// 5254 + 0012 + 3456 = 0x20d3f; total 0x50a1f, folded 0x0a24,
    /// complement 0xf5db.
    const SOLICIT: [u8; 32] = [
        135, 0, 0xf5, 0xdb, 0, 0, 0, 0, // type, code, checksum, reserved
        0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, // target
        1, 1, 0x52, 0x54, 0x00, 0x12, 0x34, 0x56, // source link-layer address
    ];

    fn solicit() -> Icmpv6Repr<'static> {
        Icmpv6Repr::Ndisc(NdiscRepr::NeighborSolicit {
            target: addr("fe80::2"),
            options: NdiscOptions {
                source_lladdr: Some(MAC),
                ..Default::default()
            },
        })
    }

    #[test]
    fn parses_and_emits_known_neighbor_solicitation() {
        let (src, dst) = (addr("fe80::1"), addr("ff02::1:ff00:2"));
        let packet = Icmpv6Packet::new_checked(&SOLICIT[..]).unwrap();
        assert_eq!(
            Icmpv6Repr::parse(&packet, &src, &dst, Checksum::Verify).unwrap(),
            solicit()
        );
        let mut buf = [0xEEu8; 32];
        assert_eq!(solicit().buffer_len(), 32);
        solicit().emit(&mut Icmpv6Packet::new_unchecked(&mut buf[..]), &src, &dst);
        assert_eq!(buf, SOLICIT);
    }

    fn prefix() -> NdiscPrefixInfo {
        NdiscPrefixInfo {
            prefix_len: 64,
            on_link: true,
            autonomous: true,
            valid_lifetime: 2_592_000,
            preferred_lifetime: 604_800,
            prefix: addr("2001:db8:1::"),
        }
    }

    #[test]
    fn router_advertisement_layout() {
        let ra = NdiscRepr::RouterAdvert {
            hop_limit: 64,
            managed: false,
            other_config: true,
            router_lifetime: 1800,
            reachable_time: 30_000,
            retrans_timer: 1000,
            options: NdiscOptions {
                source_lladdr: Some(MAC),
                mtu: Some(1500),
                prefixes: [Some(prefix()), None, None, None],
                ..Default::default()
            },
        };
        assert_eq!(ra.buffer_len(), 16 + 8 + 8 + 32);
        let mut buf = vec![0u8; ra.buffer_len()];
        ra.emit(&mut Icmpv6Packet::new_unchecked(&mut buf[..]));
        let expected_head = [134, 0, 0, 0, 64, 0x40, 0x07, 0x08, 0, 0, 0x75, 0x30, 0, 0, 0x03, 0xe8];
        assert_eq!(buf[..16], expected_head);
        assert_eq!(buf[16..24], [1, 1, 0x52, 0x54, 0x00, 0x12, 0x34, 0x56]);
        assert_eq!(buf[24..32], [5, 1, 0, 0, 0, 0, 0x05, 0xdc]);
        let expected_prefix = [
            3, 4, 64, 0xc0, 0x00, 0x27, 0x8d, 0x00, 0x00, 0x09, 0x3a, 0x80, 0, 0, 0, 0, // 30 and 7 days
            0x20, 0x01, 0x0d, 0xb8, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        ];
        assert_eq!(buf[32..64], expected_prefix);
        assert_eq!(
            NdiscRepr::parse(&Icmpv6Packet::new_checked(&buf[..]).unwrap()).unwrap(),
            ra
        );
    }

    #[test]
    fn other_messages_round_trip() {
        let (src, dst) = (addr("fe80::1"), addr("fe80::2"));
        let reprs = [
            NdiscRepr::RouterSolicit {
                options: NdiscOptions {
                    source_lladdr: Some(MAC),
                    ..Default::default()
                },
            },
            NdiscRepr::RouterSolicit {
                options: NdiscOptions::default(),
            },
            NdiscRepr::NeighborAdvert {
                router: true,
                solicited: true,
                override_cache: false,
                target: addr("2001:db8::2"),
                options: NdiscOptions {
                    target_lladdr: Some(MAC),
                    ..Default::default()
                },
            },
            NdiscRepr::Redirect {
                target: addr("fe80::9"),
                dest: addr("2001:db8::7"),
                options: NdiscOptions {
                    target_lladdr: Some(MAC),
                    ..Default::default()
                },
            },
        ];
        for ndisc in reprs {
            let repr = Icmpv6Repr::Ndisc(ndisc);
            let mut buf = vec![0xEEu8; repr.buffer_len()];
            repr.emit(&mut Icmpv6Packet::new_unchecked(&mut buf[..]), &src, &dst);
            let packet = Icmpv6Packet::new_checked(&buf[..]).unwrap();
            assert_eq!(Icmpv6Repr::parse(&packet, &src, &dst, Checksum::Verify).unwrap(), repr);
        }
        // R and S set, O clear: 0xc0.
        let mut buf = vec![0u8; reprs[2].buffer_len()];
        reprs[2].emit(&mut Icmpv6Packet::new_unchecked(&mut buf[..]));
        assert_eq!(buf[4], 0xc0);
    }

    #[test]
    fn options_are_checked() {
        // Length 0.
        assert!(matches!(
            NdiscOptions::parse(&[1, 0, 0, 0, 0, 0, 0, 0]),
            Err(WireError::Malformed(_))
        ));
        // Running past the message.
        assert!(matches!(
            NdiscOptions::parse(&[1, 2, 0, 0, 0, 0, 0, 0]),
            Err(WireError::Malformed(_))
        ));
        // Only a type byte.
        assert!(matches!(NdiscOptions::parse(&[1]), Err(WireError::Malformed(_))));
        // An MTU of 16 bytes and a Prefix Information of 8 are skipped.
        let mut mtu = [0u8; 16];
        mtu[..2].copy_from_slice(&[5, 2]);
        assert_eq!(NdiscOptions::parse(&mtu).unwrap(), NdiscOptions::default());
        let short_prefix = [3, 1, 64, 0xc0, 0, 0, 0, 1];
        assert_eq!(NdiscOptions::parse(&short_prefix).unwrap(), NdiscOptions::default());
        // Unknown options and a long link-layer address are skipped.
        let mut skipped = vec![200, 1, 9, 9, 9, 9, 9, 9];
        skipped.extend_from_slice(&[1, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        skipped.extend_from_slice(&[2, 1, 1, 2, 3, 4, 5, 6]);
        let options = NdiscOptions::parse(&skipped).unwrap();
        assert_eq!(
            options,
            NdiscOptions {
                target_lladdr: Some(EthernetAddress([1, 2, 3, 4, 5, 6])),
                ..Default::default()
            }
        );
    }

    #[test]
    fn prefixes_past_the_bound_are_skipped() {
        let options = NdiscOptions {
            prefixes: [Some(prefix()); MAX_PREFIXES],
            ..Default::default()
        };
        let mut buf = vec![0u8; options.len() + 32];
        let len = options.emit(&mut buf);
        emit_prefix_info(
            &NdiscPrefixInfo {
                prefix_len: 48,
                ..prefix()
            },
            &mut buf[len..],
        );
        assert_eq!(NdiscOptions::parse(&buf).unwrap(), options);
    }

    #[test]
    fn messages_are_checked() {
        // Every truncation below the fixed part of an NS.
        for len in HEADER_LEN_FOR_TEST..24 {
            let packet = Icmpv6Packet::new_checked(&SOLICIT[..len]).unwrap();
            assert_eq!(
                NdiscRepr::parse(&packet).unwrap_err(),
                WireError::Truncated,
                "len {len}"
            );
        }
        // An option cut short.
        for len in 25..32 {
            let packet = Icmpv6Packet::new_checked(&SOLICIT[..len]).unwrap();
            assert!(
                matches!(NdiscRepr::parse(&packet), Err(WireError::Malformed(_))),
                "len {len}"
            );
        }
        let mut coded = SOLICIT;
        coded[1] = 1;
        assert!(matches!(
            NdiscRepr::parse(&Icmpv6Packet::new_checked(&coded[..]).unwrap()),
            Err(WireError::Malformed(_))
        ));
        let mut multicast = SOLICIT;
        multicast[8] = 0xff;
        assert!(matches!(
            NdiscRepr::parse(&Icmpv6Packet::new_checked(&multicast[..]).unwrap()),
            Err(WireError::Malformed(_))
        ));
        let mut echo = SOLICIT;
        echo[0] = 128;
        assert!(matches!(
            NdiscRepr::parse(&Icmpv6Packet::new_checked(&echo[..]).unwrap()),
            Err(WireError::Unsupported(_))
        ));
    }

    const HEADER_LEN_FOR_TEST: usize = crate::wire::icmpv6::HEADER_LEN;

    proptest! {
        #[test]
        fn random_options_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
            if let Ok(options) = NdiscOptions::parse(&bytes) {
                prop_assert!(options.len() <= bytes.len());
            }
        }

        #[test]
        fn random_messages_never_panic(t in 133u8..=137, rest in proptest::collection::vec(any::<u8>(), 7..80)) {
            let mut bytes = vec![t];
            bytes.extend_from_slice(&rest);
            bytes[1] = 0;
            let packet = Icmpv6Packet::new_checked(&bytes[..]).unwrap();
            if let Ok(repr) = NdiscRepr::parse(&packet) {
                // What parsed emits and parses back the same.
                let mut buf = vec![0u8; repr.buffer_len()];
                repr.emit(&mut Icmpv6Packet::new_unchecked(&mut buf[..]));
                prop_assert_eq!(NdiscRepr::parse(&Icmpv6Packet::new_checked(&buf[..]).unwrap()).unwrap(), repr);
            }
        }
    }
}
