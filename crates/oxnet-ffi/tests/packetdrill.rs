//! The packetdrill shim driven as packetdrill drives it: the interface
//! filled by `packetdrill_interface_init`, then a passive open, data both
//! ways and a close, every call through the table's function pointers
//! (a blocking accept on a thread of its own, as packetdrill makes
//! blocking calls, while the main thread moves time and injects).

mod common;

use common::*;
use oxnet_ffi::packetdrill::{PacketdrillInterface, EPOCH_US, MAX_SNIFF_WAIT_US};
use std::ffi::{c_int, c_void};
use std::ptr::null_mut;

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// Loads `liboxnet_ffi.so` as packetdrill's so_testing.c does (dlopen
/// with RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE | RTLD_DEEPBIND, dlsym of
/// `packetdrill_interface_init`) and fills an interface with `flags`.
fn init(flags: &std::ffi::CStr) -> PacketdrillInterface {
    type Init = unsafe extern "C" fn(*const std::ffi::c_char, *mut PacketdrillInterface);
    let path = std::ffi::CString::new(cdylib_dir().join("liboxnet_ffi.so").to_str().expect("a UTF-8 path"))
        .expect("no NUL in the path");
    let mut ifc: PacketdrillInterface = unsafe { std::mem::zeroed() };
    unsafe {
        let mode = libc::RTLD_NOW | libc::RTLD_LOCAL | libc::RTLD_NODELETE | libc::RTLD_DEEPBIND;
        let handle = libc::dlopen(path.as_ptr(), mode);
        assert!(!handle.is_null(), "dlopen {path:?} failed");
        let sym = libc::dlsym(handle, c"packetdrill_interface_init".as_ptr());
        assert!(!sym.is_null(), "packetdrill_interface_init is exported");
        let init: Init = std::mem::transmute::<*mut c_void, Init>(sym);
        init(flags.as_ptr(), &mut ifc);
    }
    assert!(!ifc.userdata.is_null());
    ifc
}

/// gettimeofday through the table, in microseconds.
fn now(ifc: &PacketdrillInterface) -> u64 {
    let mut tv = libc::timeval { tv_sec: 0, tv_usec: 0 };
    assert_eq!(
        unsafe { ifc.gettimeofday.unwrap()(ifc.userdata, &mut tv, null_mut()) },
        0
    );
    tv.tv_sec as u64 * 1_000_000 + tv.tv_usec as u64
}

fn send(ifc: &PacketdrillInterface, p: &[u8]) {
    assert_eq!(
        unsafe { ifc.netdev_send.unwrap()(ifc.userdata, p.as_ptr().cast(), p.len()) },
        0
    );
}

/// netdev_receive: the packet and its time.
fn receive(ifc: &PacketdrillInterface) -> (Sent, u64) {
    let mut buf = vec![0u8; 65536];
    let mut n = buf.len();
    let mut t: i64 = 0;
    let r = unsafe { ifc.netdev_receive.unwrap()(ifc.userdata, buf.as_mut_ptr().cast(), &mut n, &mut t) };
    assert_eq!(r, 0, "netdev_receive: errno {}", errno());
    (parse(&buf[..n]), t as u64)
}

fn usleep(ifc: &PacketdrillInterface, us: u32) {
    assert_eq!(unsafe { ifc.usleep.unwrap()(ifc.userdata, us) }, 0);
}

/// The userdata pointer, for the syscall thread.
struct Ud(*mut c_void);
// SAFETY: the shim serializes every call with its own mutex.
unsafe impl Send for Ud {}

/// Waits (real time, up to 10 s) until thread `tid` of this process is
/// asleep, as packetdrill does before it goes on past a blocking call
/// (it looks for its syscall thread sleeping): a fixed pause is not
/// enough on a loaded machine, where the thread may not have run yet.
fn wait_until_asleep(tid: &std::sync::mpsc::Receiver<i32>) {
    let tid = tid
        .recv_timeout(std::time::Duration::from_secs(10))
        .expect("the thread started");
    let start = std::time::Instant::now();
    loop {
        let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).unwrap_or_default();
        // The state is the field after the command name's closing ')'.
        let state = stat.rsplit_once(") ").and_then(|(_, rest)| rest.chars().next());
        if matches!(state, Some('S') | Some('D')) {
            return;
        }
        assert!(
            start.elapsed() < std::time::Duration::from_secs(10),
            "thread {tid} never blocked"
        );
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

#[test]
fn a_passive_open_exchange_through_the_function_table() {
    let ifc = init(c"local4=192.168.0.1");
    let ud = ifc.userdata;
    let start = now(&ifc);
    assert_eq!(start, EPOCH_US);
    unsafe {
        // 0 socket(..., SOCK_STREAM, IPPROTO_TCP) = 3
        let fd = ifc.socket.unwrap()(ud, libc::AF_INET, libc::SOCK_STREAM, libc::IPPROTO_TCP);
        assert_eq!(fd, 3);
        // +0 setsockopt(3, SOL_SOCKET, SO_REUSEADDR, [1], 4) = 0
        let one: c_int = 1;
        let r = ifc.setsockopt.unwrap()(
            ud,
            fd,
            libc::SOL_SOCKET,
            libc::SO_REUSEADDR,
            (&one as *const c_int).cast(),
            4,
        );
        assert_eq!(r, 0);
        // +0 bind(3, ..., ...) = 0; +0 listen(3, 1) = 0
        let a = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: LOCAL_PORT.to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from(LOCAL).to_be(),
            },
            sin_zero: [0; 8],
        };
        let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        assert_eq!(
            ifc.bind.unwrap()(ud, fd, (&a as *const libc::sockaddr_in).cast(), len),
            0
        );
        assert_eq!(ifc.listen.unwrap()(ud, fd, 1), 0);
        // +.1 < S 0:0(0) win 65535 <mss 1000>
        usleep(&ifc, 100_000);
        send(&ifc, &segment(SYN, PEER_ISN, 0, &[]));
        // +0 > S. 0:0(0) ack 1
        let (synack, t) = receive(&ifc);
        assert_eq!((synack.flags, synack.ack), (SYN | ACK, PEER_ISN + 1));
        // The clock: 1 µs for the reading at the start, then the usleep.
        assert_eq!(t, start + 1 + 100_000, "the SYN-ACK is stamped with the clock");
        let iss = synack.seq;
        // +0 accept(3, ..., ...) = 4: blocks, on packetdrill's syscall
        // thread, until the ACK below.
        let (tid_tx, tid) = std::sync::mpsc::channel();
        let accepter = {
            let (ud, accept) = (Ud(ud), ifc.accept.unwrap());
            std::thread::spawn(move || {
                let ud = ud;
                tid_tx.send(libc::gettid()).unwrap();
                let mut peer: libc::sockaddr_in = std::mem::zeroed();
                let mut plen = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
                let fd = accept(ud.0, 3, (&mut peer as *mut libc::sockaddr_in).cast(), &mut plen);
                (fd, u16::from_be(peer.sin_port))
            })
        };
        wait_until_asleep(&tid);
        assert!(!accepter.is_finished(), "accept waits for the handshake");
        // +.1 < . 1:1(0) ack 1 win 257
        usleep(&ifc, 100_000);
        send(&ifc, &segment(ACK, PEER_ISN + 1, iss + 1, &[]));
        let (c, peer_port) = accepter.join().expect("the accept thread");
        assert_eq!((c, peer_port), (4, REMOTE_PORT));
        // +0 < P. 1:11(10) ack 1 win 257
        send(&ifc, &segment(ACK | PSH, PEER_ISN + 1, iss + 1, b"0123456789"));
        // +0 > . 1:1(0) ack 11: not read yet, the ACK is delayed, and
        // netdev_receive lets simulated time run until it goes.
        let before = now(&ifc);
        let (ack, t) = receive(&ifc);
        assert_eq!((ack.flags, ack.seq, ack.ack), (ACK, iss + 1, PEER_ISN + 11));
        assert!(
            t > before && t <= before + 500_000,
            "a delayed ACK, {} µs later",
            t - before
        );
        assert_eq!(now(&ifc), t, "the clock stopped when the ACK went");
        assert_eq!(now(&ifc), t + 1, "each reading moves it a tick");
        // +0 read(4, ..., 10) = 10
        let mut buf = [0u8; 10];
        assert_eq!(ifc.read.unwrap()(ud, c, buf.as_mut_ptr().cast(), 10), 10);
        assert_eq!(&buf, b"0123456789");
        // +0 recv(4, ..., 10, MSG_DONTWAIT) = -1 EAGAIN: a blocking
        // socket, but this call does not wait.
        let recv = ifc.recv.unwrap();
        assert_eq!(recv(ud, c, buf.as_mut_ptr().cast(), 10, libc::MSG_DONTWAIT), -1);
        assert_eq!(errno(), libc::EAGAIN);
        assert_eq!(recv(ud, c, buf.as_mut_ptr().cast(), 10, libc::MSG_PEEK), -1);
        assert_eq!(errno(), libc::EOPNOTSUPP);
        // +0 writev(4, [{..., 2}, {..., 3}], 2) = 5; +0 > P. 1:6(5) ack 11
        let iov = [
            libc::iovec {
                iov_base: b"he".as_ptr().cast_mut().cast(),
                iov_len: 2,
            },
            libc::iovec {
                iov_base: b"llo".as_ptr().cast_mut().cast(),
                iov_len: 3,
            },
        ];
        assert_eq!(ifc.writev.unwrap()(ud, c, iov.as_ptr(), 2), 5);
        let (data, _) = receive(&ifc);
        assert_eq!((data.flags, data.seq, data.ack), (ACK | PSH, iss + 1, PEER_ISN + 11));
        assert_eq!(data.payload, b"hello");
        // +0 fcntl(4, F_GETFL) = O_RDWR; +0 poll([{fd=4, events=POLLOUT}], 1, 0) = 1
        assert_eq!(ifc.fcntl.unwrap()(ud, c, libc::F_GETFL, 0), libc::O_RDWR);
        let mut pfd = libc::pollfd {
            fd: c,
            events: libc::POLLOUT,
            revents: 0,
        };
        assert_eq!(ifc.poll.unwrap()(ud, &mut pfd, 1, 0), 1);
        assert_eq!(pfd.revents, libc::POLLOUT);
        // +0 < . 11:11(0) ack 6; +0 close(4) = 0; +0 > F. 6:6(0) ack 11
        send(&ifc, &segment(ACK, PEER_ISN + 11, iss + 6, &[]));
        assert_eq!(ifc.close.unwrap()(ud, c), 0);
        let (fin, _) = receive(&ifc);
        assert_eq!((fin.flags, fin.seq, fin.ack), (FIN | ACK, iss + 6, PEER_ISN + 11));
        ifc.free.unwrap()(ud);
    }
}

#[test]
fn receive_gives_up_after_its_wait_and_unsupported_calls_say_so() {
    let ifc = init(c"");
    let ud = ifc.userdata;
    unsafe {
        let mut buf = [0u8; 100];
        let mut n = buf.len();
        let mut t = 0i64;
        let r = ifc.netdev_receive.unwrap()(ud, buf.as_mut_ptr().cast(), &mut n, &mut t);
        assert_eq!((r, n), (0, 0), "received nothing");
        assert_eq!(t as u64, EPOCH_US + MAX_SNIFF_WAIT_US);
        assert_eq!(
            now(&ifc),
            EPOCH_US + MAX_SNIFF_WAIT_US,
            "the wait ran in simulated time"
        );
        assert_eq!(ifc.pipe.unwrap()(ud, null_mut()), -1);
        assert_eq!(errno(), libc::EOPNOTSUPP);
        assert_eq!(ifc.ioctl.unwrap()(ud, 3, 0x541B, 0), -1);
        // A non-blocking accept does not wait.
        let fd = ifc.socket.unwrap()(ud, libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_NONBLOCK, 0);
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // A fresh socket polls as hung up: poll returns at once.
        let before = now(&ifc);
        assert_eq!(ifc.poll.unwrap()(ud, &mut pfd, 1, 250), 1);
        assert_eq!(pfd.revents, libc::POLLHUP);
        assert_eq!(now(&ifc), before + 1, "poll did not wait (1: the reading's tick)");
        // epoll_wait with nothing to report and nobody driving time: the
        // shim moves the clock itself to the timeout, 250 ms.
        let ep = ifc.epoll_create.unwrap()(ud, 1);
        let mut events = [libc::epoll_event { events: 0, u64: 0 }; 2];
        assert_eq!(ifc.epoll_wait.unwrap()(ud, ep, events.as_mut_ptr(), 2, 250), 0);
        assert_eq!(
            now(&ifc),
            before + 2 + 250_000,
            "epoll_wait waited 250 ms of simulated time"
        );
        assert_eq!(ifc.accept.unwrap()(ud, fd, null_mut(), null_mut()), -1);
        assert_eq!(errno(), libc::EINVAL, "not listening");
        ifc.free.unwrap()(ud);
    }
}

#[test]
fn a_blocking_connect_waits_for_the_handshake() {
    let ifc = init(c"local4=192.168.0.1");
    let ud = ifc.userdata;
    unsafe {
        // 0 socket(..., SOCK_STREAM, IPPROTO_TCP) = 3
        let fd = ifc.socket.unwrap()(ud, libc::AF_INET, libc::SOCK_STREAM, libc::IPPROTO_TCP);
        assert_eq!(fd, 3);
        // +0 connect(3, ..., ...) = 0, on the syscall thread.
        let (tid_tx, tid) = std::sync::mpsc::channel();
        let connecter = {
            let (ud, connect) = (Ud(ud), ifc.connect.unwrap());
            std::thread::spawn(move || {
                let ud = ud;
                tid_tx.send(libc::gettid()).unwrap();
                let a = libc::sockaddr_in {
                    sin_family: libc::AF_INET as libc::sa_family_t,
                    sin_port: REMOTE_PORT.to_be(),
                    sin_addr: libc::in_addr {
                        s_addr: u32::from(REMOTE).to_be(),
                    },
                    sin_zero: [0; 8],
                };
                let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
                connect(ud.0, 3, (&a as *const libc::sockaddr_in).cast(), len)
            })
        };
        // The main thread goes on once the call blocks (packetdrill looks
        // for the thread sleeping): the SYN is out by then.
        wait_until_asleep(&tid);
        assert!(!connecter.is_finished(), "connect waits for the handshake");
        // +0 > S 0:0(0) <...>
        let (syn, _) = receive(&ifc);
        assert_eq!(syn.flags, SYN);
        assert_eq!((syn.src, syn.dst, syn.dport), (LOCAL, REMOTE, REMOTE_PORT));
        // +.01 < S. 0:0(0) ack 1 win 65535 <mss 1000>
        usleep(&ifc, 10_000);
        let mut synack = segment(SYN | ACK, 5000, syn.seq + 1, &[]);
        // From the peer's side: the ports are the connection's.
        synack[20..22].copy_from_slice(&REMOTE_PORT.to_be_bytes());
        synack[22..24].copy_from_slice(&syn.sport.to_be_bytes());
        fix_tcp_checksum(&mut synack);
        send(&ifc, &synack);
        assert_eq!(connecter.join().expect("the connect thread"), 0);
        // +0 > . 1:1(0) ack 1
        let (ack, _) = receive(&ifc);
        assert_eq!((ack.flags, ack.seq, ack.ack), (ACK, syn.seq + 1, 5001));
        ifc.free.unwrap()(ud);
    }
}

/// A listener on LOCAL_PORT and a connection accepted through it: the
/// connection's descriptor and oxnet's ISN.
unsafe fn passive_open(ifc: &PacketdrillInterface) -> (c_int, u32) {
    let ud = ifc.userdata;
    let fd = ifc.socket.unwrap()(ud, libc::AF_INET, libc::SOCK_STREAM, libc::IPPROTO_TCP);
    let a = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: LOCAL_PORT.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(LOCAL).to_be(),
        },
        sin_zero: [0; 8],
    };
    let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    assert_eq!(
        ifc.bind.unwrap()(ud, fd, (&a as *const libc::sockaddr_in).cast(), len),
        0
    );
    assert_eq!(ifc.listen.unwrap()(ud, fd, 1), 0);
    send(ifc, &segment(SYN, PEER_ISN, 0, &[]));
    let (synack, _) = receive(ifc);
    let iss = synack.seq;
    send(ifc, &segment(ACK, PEER_ISN + 1, iss + 1, &[]));
    let c = ifc.accept.unwrap()(ud, fd, null_mut(), null_mut());
    assert!(c > fd, "accepted: {c}");
    (c, iss)
}

/// packetdrill's blocking-read.pkt: `+.1...0.200 read(4, ..., 2000)`,
/// then `+.1 < P. ...` and the script goes on with a usleep or a sniff
/// at once. The read is woken at the packet's time: the clock does not
/// move on before the waiting read has seen the packet, nor before its
/// thread has read the clock for the call's end (as packetdrill's
/// end_syscall does).
#[test]
fn a_blocking_read_ends_at_the_time_of_the_packet_that_woke_it() {
    let ifc = init(c"local4=192.168.0.1");
    let ud = ifc.userdata;
    unsafe {
        let (c, iss) = passive_open(&ifc);
        let (tid_tx, tid) = std::sync::mpsc::channel();
        let reader = {
            let (ud, read, gettimeofday) = (Ud(ud), ifc.read.unwrap(), ifc.gettimeofday.unwrap());
            std::thread::spawn(move || {
                let ud = ud;
                tid_tx.send(libc::gettid()).unwrap();
                let mut buf = [0u8; 100];
                let n = read(ud.0, c, buf.as_mut_ptr().cast(), 100);
                let mut tv = libc::timeval { tv_sec: 0, tv_usec: 0 };
                gettimeofday(ud.0, &mut tv, null_mut());
                (n, tv.tv_sec as u64 * 1_000_000 + tv.tv_usec as u64)
            })
        };
        // The read waits (packetdrill waits for the syscall thread to
        // sleep).
        wait_until_asleep(&tid);
        assert!(!reader.is_finished(), "read waits for data");
        usleep(&ifc, 100_000);
        let sent_at = now(&ifc);
        send(&ifc, &segment(ACK | PSH, PEER_ISN + 1, iss + 1, b"0123456789"));
        // The script's next line moves the clock at once.
        usleep(&ifc, 100_000);
        let (n, ended_at) = reader.join().expect("the read thread");
        assert_eq!(n, 10);
        assert!(
            ended_at >= sent_at && ended_at < sent_at + 100,
            "the read ended {} µs after the packet",
            ended_at as i64 - sent_at as i64
        );
        assert!(now(&ifc) >= sent_at + 100_000);
        ifc.free.unwrap()(ud);
    }
}
