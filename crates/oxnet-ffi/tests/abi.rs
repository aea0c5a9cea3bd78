//! The C ABI from Rust, as C calls it: errno values, refused pointers and
//! lengths, EAGAIN, a passive and an active open, epoll, time.

mod common;

use common::*;
use oxnet_ffi::abi::*;
use std::ffi::c_int;
use std::ptr::{null, null_mut};

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// -1 and the errno, or the value.
fn check(r: i64) -> Result<i64, i32> {
    if r == -1 {
        Err(errno())
    } else {
        Ok(r)
    }
}

fn new_stack() -> *mut OxnetStack {
    let h = unsafe { oxnet_stack_new(LOCAL.octets().as_ptr(), null()) };
    assert!(!h.is_null());
    h
}

fn sockaddr4(addr: std::net::Ipv4Addr, port: u16) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(addr).to_be(),
        },
        sin_zero: [0; 8],
    }
}

const SIN_LEN: libc::socklen_t = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;

/// A listener on 0.0.0.0:LOCAL_PORT.
fn listener(h: *mut OxnetStack, flags: c_int) -> c_int {
    unsafe {
        let fd = oxnet_socket(h, libc::AF_INET, libc::SOCK_STREAM | flags, 0);
        assert_eq!(fd, 3, "the first descriptor is 3");
        let a = sockaddr4(std::net::Ipv4Addr::UNSPECIFIED, LOCAL_PORT);
        assert_eq!(oxnet_bind(h, fd, (&a as *const libc::sockaddr_in).cast(), SIN_LEN), 0);
        assert_eq!(oxnet_listen(h, fd, 8), 0);
        fd
    }
}

/// The next packet oxnet sent, parsed.
fn next(h: *mut OxnetStack) -> Option<Sent> {
    let mut buf = [0u8; 2048];
    let n = unsafe { oxnet_stack_output(h, buf.as_mut_ptr(), buf.len()) };
    assert!(n >= 0, "output failed: {}", errno());
    (n > 0).then(|| parse(&buf[..n as usize]))
}

fn input(h: *mut OxnetStack, p: &[u8]) {
    assert_eq!(unsafe { oxnet_stack_input(h, p.as_ptr(), p.len()) }, 0);
}

/// Feeds the handshake and returns oxnet's ISN.
fn handshake(h: *mut OxnetStack) -> u32 {
    input(h, &segment(SYN, PEER_ISN, 0, &[]));
    let synack = next(h).expect("a SYN-ACK");
    assert_eq!(synack.flags, SYN | ACK);
    assert_eq!(synack.ack, PEER_ISN + 1);
    assert_eq!((synack.src, synack.dst), (LOCAL, REMOTE));
    assert_eq!((synack.sport, synack.dport), (LOCAL_PORT, REMOTE_PORT));
    input(h, &segment(ACK, PEER_ISN + 1, synack.seq.wrapping_add(1), &[]));
    assert_eq!(next(h), None, "nothing answers the handshake's ACK");
    synack.seq
}

#[test]
fn bad_arguments_are_refused_with_their_errno() {
    let h = new_stack();
    unsafe {
        assert_eq!(
            check(oxnet_socket(h, libc::AF_UNIX, libc::SOCK_STREAM, 0).into()),
            Err(libc::EAFNOSUPPORT)
        );
        assert_eq!(
            check(oxnet_socket(h, libc::AF_INET, libc::SOCK_DGRAM, 0).into()),
            Err(libc::ESOCKTNOSUPPORT)
        );
        assert_eq!(
            check(oxnet_socket(h, libc::AF_INET, libc::SOCK_STREAM, libc::IPPROTO_UDP).into()),
            Err(libc::EPROTONOSUPPORT)
        );
        assert_eq!(
            check(oxnet_socket(null_mut(), libc::AF_INET, libc::SOCK_STREAM, 0).into()),
            Err(libc::EFAULT)
        );
        assert_eq!(check(oxnet_listen(h, 42, 1).into()), Err(libc::EBADF));
        let fd = oxnet_socket(h, libc::AF_INET, libc::SOCK_STREAM, 0);
        assert_eq!(check(oxnet_listen(h, fd, 1).into()), Err(libc::EINVAL), "not bound");
        assert_eq!(check(oxnet_bind(h, fd, null(), SIN_LEN).into()), Err(libc::EFAULT));
        let a = sockaddr4(LOCAL, LOCAL_PORT);
        let ap = (&a as *const libc::sockaddr_in).cast();
        assert_eq!(
            check(oxnet_bind(h, fd, ap, 8).into()),
            Err(libc::EINVAL),
            "short sockaddr"
        );
        let a6: libc::sockaddr_in6 = std::mem::zeroed();
        let mut a6 = a6;
        a6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
        let a6p = (&a6 as *const libc::sockaddr_in6).cast();
        let len6 = std::mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t;
        assert_eq!(
            check(oxnet_bind(h, fd, a6p, len6).into()),
            Err(libc::EAFNOSUPPORT),
            "family mismatch"
        );
        assert_eq!(check(oxnet_read(h, fd, null_mut(), 10) as i64), Err(libc::EFAULT));
        let mut b = [0u8; 4];
        assert_eq!(
            check(oxnet_read(h, fd, b.as_mut_ptr().cast(), usize::MAX) as i64),
            Err(libc::EINVAL)
        );
        assert_eq!(
            check(oxnet_read(h, fd, b.as_mut_ptr().cast(), 4) as i64),
            Err(libc::ENOTCONN)
        );
        assert_eq!(check(oxnet_write(h, 99, b.as_ptr().cast(), 4) as i64), Err(libc::EBADF));
        assert_eq!(check(oxnet_stack_input(h, null(), 40).into()), Err(libc::EFAULT));
        assert_eq!(check(oxnet_stack_input(h, b.as_ptr(), 0).into()), Err(libc::EINVAL));
        let not_ip = [0x25u8; 40];
        assert_eq!(
            check(oxnet_stack_input(h, not_ip.as_ptr(), 40).into()),
            Err(libc::EINVAL)
        );
        assert_eq!(
            check(oxnet_stack_input(h, not_ip.as_ptr(), 70_000).into()),
            Err(libc::EINVAL)
        );
        assert_eq!(check(oxnet_stack_output(h, null_mut(), 100) as i64), Err(libc::EFAULT));
        let one: c_int = 1;
        let onep = (&one as *const c_int).cast();
        assert_eq!(
            check(oxnet_setsockopt(h, fd, libc::IPPROTO_TCP, libc::TCP_NODELAY, onep, 2).into()),
            Err(libc::EINVAL)
        );
        assert_eq!(
            check(oxnet_setsockopt(h, fd, libc::IPPROTO_TCP, libc::TCP_NODELAY, null(), 4).into()),
            Err(libc::EFAULT)
        );
        assert_eq!(
            check(oxnet_setsockopt(h, fd, libc::IPPROTO_TCP, libc::TCP_CONGESTION, onep, 4).into()),
            Err(libc::ENOPROTOOPT)
        );
        let zero: c_int = 0;
        assert_eq!(
            check(
                oxnet_setsockopt(
                    h,
                    fd,
                    libc::IPPROTO_TCP,
                    libc::TCP_KEEPCNT,
                    (&zero as *const c_int).cast(),
                    4
                )
                .into()
            ),
            Err(libc::EINVAL)
        );
        assert_eq!(check(oxnet_epoll_create(h, 0).into()), Err(libc::EINVAL));
        assert_eq!(check(oxnet_fcntl(h, fd, 12345, 0).into()), Err(libc::EINVAL));
        assert_eq!(check(oxnet_close(h, fd).into()), Ok(0));
        assert_eq!(check(oxnet_close(h, fd).into()), Err(libc::EBADF));
        oxnet_stack_free(h);
    }
}

#[test]
fn options_round_trip_and_pass_from_listener_to_accepted() {
    let h = new_stack();
    unsafe {
        let fd = oxnet_socket(h, libc::AF_INET, libc::SOCK_STREAM, 0);
        let set = |level, name, v: c_int| oxnet_setsockopt(h, fd, level, name, (&v as *const c_int).cast(), 4);
        let get = |fd, level, name| {
            let mut v: c_int = -7;
            let mut len: libc::socklen_t = 4;
            assert_eq!(
                oxnet_getsockopt(h, fd, level, name, (&mut v as *mut c_int).cast(), &mut len),
                0
            );
            assert_eq!(len, 4);
            v
        };
        assert_eq!(set(libc::SOL_SOCKET, libc::SO_REUSEADDR, 1), 0);
        assert_eq!(set(libc::IPPROTO_TCP, libc::TCP_NODELAY, 1), 0);
        assert_eq!(set(libc::SOL_SOCKET, libc::SO_KEEPALIVE, 1), 0);
        assert_eq!(set(libc::IPPROTO_TCP, libc::TCP_KEEPIDLE, 30), 0);
        assert_eq!(set(libc::IPPROTO_TCP, libc::TCP_KEEPINTVL, 5), 0);
        assert_eq!(set(libc::IPPROTO_TCP, libc::TCP_KEEPCNT, 3), 0);
        assert_eq!(set(libc::IPPROTO_TCP, libc::TCP_USER_TIMEOUT, 2500), 0);
        assert_eq!(
            get(fd, libc::SOL_SOCKET, libc::SO_SNDBUF),
            262_144,
            "the stack's default"
        );
        assert_eq!(set(libc::SOL_SOCKET, libc::SO_SNDBUF, 0), -1);
        assert_eq!(set(libc::SOL_SOCKET, libc::SO_SNDBUF, 3000), 0);
        assert_eq!(get(fd, libc::SOL_SOCKET, libc::SO_SNDBUF), 3000);
        assert_eq!(get(fd, libc::IPPROTO_TCP, libc::TCP_MAXSEG), 536, "Linux's default");
        assert_eq!(set(libc::IPPROTO_TCP, libc::TCP_MAXSEG, 87), -1);
        assert_eq!(set(libc::IPPROTO_TCP, libc::TCP_MAXSEG, 900), 0);
        assert_eq!(get(fd, libc::IPPROTO_TCP, libc::TCP_MAXSEG), 900);
        assert_eq!(get(fd, libc::IPPROTO_TCP, libc::TCP_KEEPIDLE), 30);
        assert_eq!(get(fd, libc::IPPROTO_TCP, libc::TCP_USER_TIMEOUT), 2500);
        assert_eq!(get(fd, libc::SOL_SOCKET, libc::SO_ERROR), 0);
        let a = sockaddr4(std::net::Ipv4Addr::UNSPECIFIED, LOCAL_PORT);
        assert_eq!(oxnet_bind(h, fd, (&a as *const libc::sockaddr_in).cast(), SIN_LEN), 0);
        assert_eq!(oxnet_listen(h, fd, 4), 0);
        let iss = handshake(h);
        let mut peer: libc::sockaddr_in = std::mem::zeroed();
        let mut len = SIN_LEN;
        let c = oxnet_accept(h, fd, (&mut peer as *mut libc::sockaddr_in).cast(), &mut len);
        assert_eq!(c, 4);
        assert_eq!(len, SIN_LEN);
        assert_eq!(u16::from_be(peer.sin_port), REMOTE_PORT);
        assert_eq!(u32::from_be(peer.sin_addr.s_addr), u32::from(REMOTE));
        assert_eq!(get(c, libc::IPPROTO_TCP, libc::TCP_NODELAY), 1);
        assert_eq!(get(c, libc::SOL_SOCKET, libc::SO_KEEPALIVE), 1);
        assert_eq!(get(c, libc::IPPROTO_TCP, libc::TCP_KEEPCNT), 3);
        assert_eq!(get(c, libc::SOL_SOCKET, libc::SO_SNDBUF), 3000);
        // The peer offered 1000 (the handshake's SYN): 900 is used.
        assert_eq!(get(c, libc::IPPROTO_TCP, libc::TCP_MAXSEG), 900);
        // Keepalive (RFC 1122 §4.2.3.6): nothing for 30 s of silence,
        // then a probe at SND.NXT - 1 (Linux's form).
        assert_eq!(oxnet_stack_advance(h, 29_999_999), 0);
        assert_eq!(next(h), None);
        assert_eq!(oxnet_stack_advance(h, 30_000_000), 0);
        let probe = next(h).expect("a keepalive probe at 30 s");
        assert_eq!((probe.flags, probe.seq, probe.ack), (ACK, iss, PEER_ISN + 1));
        oxnet_stack_free(h);
    }
}

#[test]
fn passive_open_then_data_both_ways_with_eagain_until_ready() {
    let h = new_stack();
    unsafe {
        let l = listener(h, libc::SOCK_NONBLOCK);
        assert_eq!(oxnet_fcntl(h, l, libc::F_GETFL, 0), libc::O_RDWR | libc::O_NONBLOCK);
        assert_eq!(
            check(oxnet_accept(h, l, null_mut(), null_mut()).into()),
            Err(libc::EAGAIN)
        );
        let iss = handshake(h);
        let c = oxnet_accept(h, l, null_mut(), null_mut());
        assert_eq!(c, 4);
        let mut buf = [0u8; 64];
        assert_eq!(
            check(oxnet_read(h, c, buf.as_mut_ptr().cast(), 64) as i64),
            Err(libc::EAGAIN)
        );
        input(h, &segment(ACK | PSH, PEER_ISN + 1, iss + 1, b"hello"));
        // The ACK is delayed (RFC 1122 §4.2.3.2) ...
        assert_eq!(next(h), None);
        assert_eq!(oxnet_read(h, c, buf.as_mut_ptr().cast(), 64), 5);
        // ... until the application reads: the window opens again.
        let ack = next(h).expect("an ACK once read");
        assert_eq!((ack.flags, ack.seq, ack.ack), (ACK, iss + 1, PEER_ISN + 6));
        assert!(ack.payload.is_empty());
        assert_eq!(&buf[..5], b"hello");
        assert_eq!(oxnet_write(h, c, b"HELLO".as_ptr().cast(), 5), 5);
        let data = next(h).expect("the data goes out");
        assert_eq!(data.flags, ACK | PSH);
        assert_eq!((data.seq, data.ack), (iss + 1, PEER_ISN + 6));
        assert_eq!(data.payload, b"HELLO");
        // Not acknowledged: the RTO (1 s, RFC 6298 §2.1) sends it again.
        let rto = oxnet_stack_next_timer(h);
        assert!(rto > 0 && rto as u64 <= oxnet_stack_now(h) + 1_000_000, "{rto}");
        let mut t = 0u64;
        assert!(oxnet_stack_pending(h, &mut t) == 0);
        assert_eq!(oxnet_stack_advance(h, 1_000_000), 0);
        let again = next(h).expect("a retransmission");
        assert_eq!((again.seq, again.payload.as_slice()), (iss + 1, &b"HELLO"[..]));
        assert_eq!(oxnet_shutdown(h, c, libc::SHUT_WR), 0);
        assert_eq!(
            check(oxnet_write(h, c, b"x".as_ptr().cast(), 1) as i64),
            Err(libc::EPIPE)
        );
        oxnet_stack_free(h);
    }
}

#[test]
fn output_refuses_a_small_buffer_and_keeps_the_packet() {
    let h = new_stack();
    unsafe {
        listener(h, 0);
        input(h, &segment(SYN, PEER_ISN, 0, &[]));
        let mut time = u64::MAX;
        let len = oxnet_stack_pending(h, &mut time);
        assert!(len >= 44, "{len}");
        assert_eq!(time, 0);
        let mut small = [0u8; 10];
        assert_eq!(
            check(oxnet_stack_output(h, small.as_mut_ptr(), 10) as i64),
            Err(libc::EMSGSIZE)
        );
        assert_eq!(next(h).map(|s| s.flags), Some(SYN | ACK));
        oxnet_stack_free(h);
    }
}

#[test]
fn active_open_reports_einprogress_ealready_eisconn() {
    let h = new_stack();
    unsafe {
        let fd = oxnet_socket(h, libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_NONBLOCK, 0);
        let a = sockaddr4(REMOTE, REMOTE_PORT);
        let ap = (&a as *const libc::sockaddr_in).cast();
        assert_eq!(check(oxnet_connect(h, fd, ap, SIN_LEN).into()), Err(libc::EINPROGRESS));
        let syn = next(h).expect("a SYN");
        assert_eq!(syn.flags, SYN);
        assert_eq!((syn.src, syn.dst, syn.dport), (LOCAL, REMOTE, REMOTE_PORT));
        assert!((32768..=60999).contains(&syn.sport), "ephemeral port {}", syn.sport);
        assert_eq!(check(oxnet_connect(h, fd, ap, SIN_LEN).into()), Err(libc::EALREADY));
        // The SYN-ACK, from the peer's side (addresses and ports swapped).
        let mut synack = segment(SYN | ACK, 5000, syn.seq + 1, &[]);
        synack[12..16].copy_from_slice(&REMOTE.octets());
        synack[16..20].copy_from_slice(&LOCAL.octets());
        synack[20..22].copy_from_slice(&REMOTE_PORT.to_be_bytes());
        synack[22..24].copy_from_slice(&syn.sport.to_be_bytes());
        fix_tcp_checksum(&mut synack);
        input(h, &synack);
        let ack = next(h).expect("the handshake's ACK");
        assert_eq!((ack.flags, ack.seq, ack.ack), (ACK, syn.seq + 1, 5001));
        assert_eq!(check(oxnet_connect(h, fd, ap, SIN_LEN).into()), Err(libc::EISCONN));
        oxnet_stack_free(h);
    }
}

#[test]
fn epoll_through_the_abi_reports_accept_and_data() {
    let h = new_stack();
    unsafe {
        let l = listener(h, libc::SOCK_NONBLOCK);
        let ep = oxnet_epoll_create(h, 1);
        assert_eq!(ep, 4);
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: 77,
        };
        assert_eq!(oxnet_epoll_ctl(h, ep, libc::EPOLL_CTL_ADD, l, &mut ev), 0);
        assert_eq!(
            check(oxnet_epoll_ctl(h, ep, libc::EPOLL_CTL_ADD, l, &mut ev).into()),
            Err(libc::EEXIST)
        );
        assert_eq!(
            check(oxnet_epoll_ctl(h, ep, libc::EPOLL_CTL_ADD, l, null_mut()).into()),
            Err(libc::EFAULT)
        );
        let mut out = [libc::epoll_event { events: 0, u64: 0 }; 4];
        assert_eq!(oxnet_epoll_wait(h, ep, out.as_mut_ptr(), 4, 0), 0);
        assert_eq!(
            check(oxnet_epoll_wait(h, ep, out.as_mut_ptr(), 0, 0).into()),
            Err(libc::EINVAL)
        );
        let iss = handshake(h);
        assert_eq!(oxnet_epoll_wait(h, ep, out.as_mut_ptr(), 4, 0), 1);
        let (events, data) = (out[0].events, out[0].u64);
        assert_eq!((events, data), (libc::EPOLLIN as u32, 77));
        let c = oxnet_accept(h, l, null_mut(), null_mut());
        assert_eq!(c, 5);
        let mut ev = libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLET) as u32,
            u64: 5,
        };
        assert_eq!(oxnet_epoll_ctl(h, ep, libc::EPOLL_CTL_DEL, l, null_mut()), 0);
        assert_eq!(oxnet_epoll_ctl(h, ep, libc::EPOLL_CTL_ADD, c, &mut ev), 0);
        assert_eq!(oxnet_epoll_wait(h, ep, out.as_mut_ptr(), 4, 0), 0, "no data yet");
        input(h, &segment(ACK, PEER_ISN + 1, iss + 1, b"abc"));
        assert_eq!(oxnet_epoll_wait(h, ep, out.as_mut_ptr(), 4, 0), 1);
        let (events, data) = (out[0].events, out[0].u64);
        assert_eq!((events, data), (libc::EPOLLIN as u32, 5));
        assert_eq!(
            oxnet_epoll_wait(h, ep, out.as_mut_ptr(), 4, 0),
            0,
            "edge-triggered: once"
        );
        let mut pfd = libc::pollfd {
            fd: c,
            events: libc::POLLIN | libc::POLLOUT,
            revents: 0,
        };
        assert_eq!(oxnet_poll(h, &mut pfd, 1, 0), 1);
        assert_eq!(pfd.revents, libc::POLLIN | libc::POLLOUT);
        assert_eq!(oxnet_close(h, c), 0);
        assert_eq!(
            check(oxnet_epoll_ctl(h, ep, libc::EPOLL_CTL_DEL, c, null_mut()).into()),
            Err(libc::EBADF)
        );
        oxnet_stack_free(h);
    }
}

#[test]
fn an_ipv6_connect_sends_a_syn_from_the_stacks_ipv6_address() {
    let local6: std::net::Ipv6Addr = "fd3d:fa7b:d17d::1".parse().unwrap();
    let remote6: std::net::Ipv6Addr = "2001:db8::1".parse().unwrap();
    unsafe {
        let h = oxnet_stack_new(null(), local6.octets().as_ptr());
        assert!(!h.is_null());
        let v4 = oxnet_socket(h, libc::AF_INET, libc::SOCK_STREAM, 0);
        let a = sockaddr4(REMOTE, 80);
        let ap = (&a as *const libc::sockaddr_in).cast();
        assert_eq!(
            check(oxnet_connect(h, v4, ap, SIN_LEN).into()),
            Err(libc::EADDRNOTAVAIL),
            "no IPv4 address given"
        );
        let fd = oxnet_socket(h, libc::AF_INET6, libc::SOCK_STREAM, 0);
        let mut a6: libc::sockaddr_in6 = std::mem::zeroed();
        a6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
        a6.sin6_port = 8080u16.to_be();
        a6.sin6_addr.s6_addr = remote6.octets();
        let len6 = std::mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t;
        let a6p = (&a6 as *const libc::sockaddr_in6).cast();
        assert_eq!(
            check(oxnet_connect(h, fd, a6p, SIN_LEN).into()),
            Err(libc::EINVAL),
            "short sockaddr_in6"
        );
        assert_eq!(check(oxnet_connect(h, fd, a6p, len6).into()), Err(libc::EINPROGRESS));
        let mut buf = [0u8; 256];
        let n = oxnet_stack_output(h, buf.as_mut_ptr(), buf.len());
        assert!(n >= 60, "{n}");
        // RFC 8200 §3: version 6, next header 6 (TCP), the addresses.
        assert_eq!(buf[0] >> 4, 6);
        assert_eq!(buf[6], 6);
        assert_eq!(&buf[8..24], &local6.octets());
        assert_eq!(&buf[24..40], &remote6.octets());
        let tcp = &buf[40..n as usize];
        assert_eq!(u16::from_be_bytes([tcp[2], tcp[3]]), 8080);
        assert_eq!(tcp[13], SYN);
        oxnet_stack_free(h);
    }
}

/// packetdrill's scripts inject segments coalesced past one packet buffer
/// (as GRO would make them); the router could only drop those, so input
/// refuses them with EMSGSIZE instead of taking them and losing them.
#[test]
fn input_takes_a_packet_larger_than_a_buffer_and_refuses_one_over_65535_bytes() {
    let h = new_stack();
    unsafe {
        let l = listener(h, libc::SOCK_NONBLOCK);
        let iss = handshake(h);
        let c = oxnet_accept(h, l, null_mut(), null_mut());
        assert_eq!(c, 4);
        // 20 + 20 + 3000 bytes: more than one 2 KiB buffer (GRO-sized).
        let data: Vec<u8> = (0..3000u32).map(|i| (i % 251) as u8).collect();
        input(h, &segment(ACK | PSH, PEER_ISN + 1, iss + 1, &data));
        let mut buf = vec![0u8; 4096];
        assert_eq!(oxnet_read(h, c, buf.as_mut_ptr().cast(), 4096), 3000);
        assert_eq!(&buf[..3000], &data[..], "every byte, in order");
        let ack = next(h).expect("an ACK once read");
        assert_eq!(ack.ack, PEER_ISN + 1 + 3000);
        // Over 65535 bytes (what IPv4's total length can say): refused,
        // and nothing of it reaches the socket.
        let big = segment(ACK | PSH, PEER_ISN + 1 + 3000, iss + 1, &vec![b'b'; 65_497]);
        assert_eq!(big.len(), 65_537);
        assert_eq!(
            check(oxnet_stack_input(h, big.as_ptr(), big.len()).into()),
            Err(libc::EINVAL)
        );
        assert_eq!(
            check(oxnet_read(h, c, buf.as_mut_ptr().cast(), 4096) as i64),
            Err(libc::EAGAIN)
        );
        assert_eq!(next(h), None);
        oxnet_stack_free(h);
    }
}

/// shutdown(SHUT_RD) (packetdrill's shutdown-rd-close.pkt): what was
/// queued is still read, then read returns 0 where it would have said
/// EAGAIN; SHUT_WR alone leaves reads as they were.
#[test]
fn a_read_after_shut_rd_gives_what_is_queued_then_end_of_file() {
    let h = new_stack();
    unsafe {
        let l = listener(h, libc::SOCK_NONBLOCK);
        let iss = handshake(h);
        let c = oxnet_accept(h, l, null_mut(), null_mut());
        assert_eq!(c, 4);
        let mut buf = [0u8; 64];
        assert_eq!(oxnet_shutdown(h, c, libc::SHUT_WR), 0);
        assert_eq!(
            check(oxnet_read(h, c, buf.as_mut_ptr().cast(), 64) as i64),
            Err(libc::EAGAIN),
            "SHUT_WR does not end reading"
        );
        input(h, &segment(ACK | PSH, PEER_ISN + 1, iss + 2, b"queued"));
        assert_eq!(oxnet_shutdown(h, c, libc::SHUT_RD), 0);
        assert_eq!(oxnet_read(h, c, buf.as_mut_ptr().cast(), 64), 6);
        assert_eq!(&buf[..6], b"queued");
        assert_eq!(oxnet_read(h, c, buf.as_mut_ptr().cast(), 64), 0);
        oxnet_stack_free(h);
    }
}
