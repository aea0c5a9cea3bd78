//! `memif:PATH[,role=client|server][,id=N]`: the shared-memory packet
//! interface of VPP and DPDK (`net_memif`), written from DPDK's
//! `drivers/net/memif/memif.h` and `rte_eth_memif.c` and VPP's libmemif
//! documentation (`extras/libmemif/docs`). See docs/memif.md.
//!
//! Roles. The *client* (slave in older naming) connects to the Unix
//! socket at PATH, creates the shared memory (one memfd region holding
//! the rings and every packet buffer) and announces it; the *server*
//! (master) listens, maps what the client announces and checks the
//! interface id. Default role: client (VPP and DPDK default to server).
//!
//! Handshake (memif.h message comments; the server acknowledges INIT
//! and each ADD_REGION / ADD_RING, one message at a time):
//!
//! ```text
//! server                          client
//!   HELLO  ------------------------>      versions, maxima
//!         <------------------------ INIT  version, id, mode, name
//!   ACK    ------------------------>
//!         <------------------ ADD_REGION  index, size + memfd
//!   ACK    ------------------------>
//!         <-------------------- ADD_RING  flags, index, region, offset,
//!   ACK    ------------------------>      log2 size + interrupt eventfd
//!         <--------------------- CONNECT
//!   CONNECTED ---------------------->
//! ```
//! Either side may send DISCONNECT (code, reason) and close.
//!
//! Rings. C2S (S2M) rings carry client → server packets, S2C (M2S) rings
//! server → client. The client owns every buffer. In the default copy
//! mode of DPDK (`rte_eth_memif.c`, eth_memif_rx / eth_memif_tx):
//! - C2S: the client fills slots from `head` (its own counter) and
//!   publishes `head`; the server reads from its last head up to `head`
//!   and publishes `tail`; free slots for the client: size − (head − tail).
//! - S2C: the client hands empty buffers to the server by advancing
//!   `head` (length = buffer size); the server copies packets into them
//!   from `tail` up to `head` and publishes `tail`; the client reads from
//!   its last tail up to `tail` and hands the slots back.
//!
//! head and tail are free-running 16-bit counters (slot = counter & mask).
//! A packet longer than one buffer continues in the next slot
//! (`MEMIF_DESC_FLAG_NEXT`). After publishing, the sender writes the
//! ring's interrupt eventfd unless the receiver set
//! `MEMIF_RING_FLAG_MASK_INT` (it polls).
//!
//! Packets are copied between the shared region and oxnet mempools: the
//! region is the peer's memory, and a packet given to the application
//! must not be overwritten by the peer. (The region could later be a DMA
//! domain of its own, [`crate::domain`], to skip the receive copy.)

mod proto;
mod region;
pub mod socket;

pub use proto::{Msg, COOKIE, MSG_SIZE, VERSION};

use crate::device::{Config, Device, DeviceStats, Features, Link};
use crate::error::{Error, Result};
use crate::memory::MemoryKind;
use crate::mempool::Mempool;
use crate::packet::PacketBatch;
use proto::{desc, ring as ring_layout, ADD_RING_FLAG_C2S, MAX_LOG2_RING_SIZE, MODE_ETHERNET};
use region::{Desc, Region, Ring};
use socket::Received;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Which end of the connection oxnet is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Connects, creates the shared memory (slave).
    Client,
    /// Listens, maps the client's memory (master).
    Server,
}

/// Packet buffer size in the shared region (DPDK's `bsize` default).
pub const BUFFER_SIZE: u32 = 2048;
/// Regions a client may announce to our server (indices 0..=MAX_REGION).
const MAX_REGION: u16 = 15;
/// Time limit for each handshake message.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(2);
/// Pause between two connection attempts of a client whose server is gone.
const RETRY_INTERVAL: Duration = Duration::from_millis(100);
/// The data path looks at the control socket every this many calls while
/// connected (a DISCONNECT or a closed socket), every call otherwise.
const CONTROL_POLL_CALLS: u32 = 1024;
/// Most packets one rx_batch call takes from a ring.
const MAX_RX_BURST: usize = 256;
/// Largest packet accepted for transmission (chained over buffers).
const MAX_PACKET: usize = 9216;

/// Parsed `PATH[,role=client|server][,id=N]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    pub path: String,
    pub role: Role,
    pub id: u32,
}

/// Parses the part of the spec after `memif:`.
pub fn parse_spec(rest: &str) -> Result<Options> {
    let bad = |why: String| {
        Error::BadSpec(format!(
            "memif:{rest}: {why} (use memif:PATH[,role=client|server][,id=N], e.g. memif:/run/oxnet.sock,role=server,id=0)"
        ))
    };
    let mut parts = rest.split(',');
    let path = parts.next().unwrap_or("").to_string();
    if path.is_empty() {
        return Err(bad("no socket path".into()));
    }
    let mut options = Options {
        path,
        role: Role::Client,
        id: 0,
    };
    for part in parts {
        match part.split_once('=') {
            Some(("role", "client")) | Some(("role", "slave")) => options.role = Role::Client,
            Some(("role", "server")) | Some(("role", "master")) => options.role = Role::Server,
            Some(("role", other)) => return Err(bad(format!("role '{other}' is neither client nor server"))),
            Some(("id", n)) => {
                options.id = n
                    .parse()
                    .map_err(|_| bad(format!("id '{n}' is not a number from 0 to 4294967295")))?
            }
            _ => return Err(bad(format!("unknown option '{part}'"))),
        }
    }
    Ok(options)
}

/// Opens `memif:` + `rest`. A client connects at once (retrying up to
/// `config.link_timeout` while no server listens) and returns with the
/// link up; a server returns listening, link down until a client connects.
pub fn open(rest: &str, config: &Config) -> Result<Box<dyn Device>> {
    Ok(Box::new(Memif::open(rest, config)?))
}

/// One ring as one side uses it.
struct Queue {
    ring: Ring,
    /// The ring's interrupt eventfd (sender writes, receiver reads).
    event: OwnedFd,
    /// Receiver: the last head (server, C2S) or tail (client, S2C) read.
    last: u16,
    /// Client C2S ring: bytes of the packet starting at each slot (0 for
    /// continuation slots), to count what the server never consumed.
    lengths: Vec<u32>,
}

/// A live connection: socket, regions, and rings.
struct Connection {
    socket: OwnedFd,
    regions: Vec<Region>,
    /// Our receive rings (client: S2C; server: C2S), by queue.
    rx: Vec<Queue>,
    /// Our transmit rings (client: C2S; server: S2C), by queue.
    tx: Vec<Queue>,
    peer: String,
    /// When the peer closed or sent DISCONNECT; the rings stay until what
    /// it left in our receive rings has been read (or briefly after).
    gone_at: Option<Instant>,
}

/// The memif device.
pub struct Memif {
    spec: String,
    options: Options,
    config: Config,
    pools: Vec<Mempool>,
    listener: Option<OwnedFd>,
    conn: Option<Connection>,
    stats: DeviceStats,
    connects: u64,
    last_attempt: Option<Instant>,
    calls: u32,
    /// Why the last connection attempt or connection ended.
    last_error: Option<String>,
    interrupts_armed: Vec<bool>,
    /// Per receive queue: buffers allocated and not yet used.
    spare: Vec<PacketBatch>,
}

impl Memif {
    /// Opens the device (see [`open`]).
    pub fn open(rest: &str, config: &Config) -> Result<Memif> {
        let options = parse_spec(rest)?;
        let spec = format!("memif:{rest}");
        if config.memory == Some(MemoryKind::HugePages) {
            return Err(Error::Config(format!(
                "{spec}: memif shares a memfd region and copies packets into plain-memory pools; drop --memory huge"
            )));
        }
        let mut pools = Vec::new();
        for q in 0..config.rx_queues {
            pools.push(Mempool::new(
                &format!("memif-rx{q}"),
                config.effective_pool_size(),
                MemoryKind::Plain,
            )?);
        }
        let mut dev = Memif {
            spec,
            options,
            config: config.clone(),
            pools,
            listener: None,
            conn: None,
            stats: DeviceStats::default(),
            connects: 0,
            last_attempt: None,
            calls: 0,
            last_error: None,
            interrupts_armed: vec![false; config.rx_queues as usize],
            spare: (0..config.rx_queues)
                .map(|_| PacketBatch::with_capacity(MAX_RX_BURST))
                .collect(),
        };
        match dev.options.role {
            Role::Server => dev.listener = Some(dev.listen()?),
            Role::Client => {
                let start = Instant::now();
                loop {
                    match dev.client_connect() {
                        Ok(conn) => {
                            dev.install(conn);
                            break;
                        }
                        // No server (yet): retry until the link timeout.
                        Err(Attempt::NoServer(why)) if start.elapsed() < config.link_timeout => {
                            let _ = why;
                            std::thread::sleep(RETRY_INTERVAL);
                        }
                        Err(Attempt::NoServer(why)) => {
                            return Err(Error::Device(format!(
                                "{}: no memif server at {} within {:.0} s ({why}); start the peer with role=server \
                                 (DPDK: --vdev net_memif,role=server,socket={},socket-abstract=no) or use role=server here",
                                dev.spec,
                                dev.options.path,
                                config.link_timeout.as_secs_f64(),
                                dev.options.path
                            )))
                        }
                        Err(Attempt::Failed(e)) => return Err(e),
                    }
                }
            }
        }
        Ok(dev)
    }

    /// How many connections were set up since the device was opened.
    pub fn connects(&self) -> u64 {
        self.connects
    }

    /// Why the last connection (attempt) ended, if one did.
    pub fn last_error(&self) -> Option<&str> {
        self.last_error.as_deref()
    }

    fn err(&self, what: impl std::fmt::Display) -> Error {
        Error::Device(format!("{}: {what}", self.spec))
    }

    fn listen(&self) -> Result<OwnedFd> {
        let path = &self.options.path;
        if let Ok(meta) = std::fs::symlink_metadata(path) {
            use std::os::unix::fs::FileTypeExt;
            if !meta.file_type().is_socket() {
                return Err(self.err(format!("cannot listen at {path}: the path exists and is not a socket")));
            }
            // A socket file nobody listens on is left over from an earlier
            // run: remove it. One that answers belongs to a live server.
            if socket::connect(path).is_ok() {
                return Err(self.err(format!(
                    "cannot listen at {path}: another process is listening there (use role=client to connect to it)"
                )));
            }
            std::fs::remove_file(path).map_err(|e| self.err(format!("cannot remove the stale socket {path}: {e}")))?;
        }
        socket::listen(path).map_err(|e| self.err(format!("cannot listen at {path}: {e}")))
    }

    fn install(&mut self, conn: Connection) {
        // Our receive rings: poll mode unless the application armed the
        // queue's interrupt (MEMIF_RING_FLAG_MASK_INT, memif.h).
        for (q, rx) in conn.rx.iter().enumerate() {
            let armed = self.interrupts_armed.get(q).copied().unwrap_or(false);
            rx.ring
                .flags()
                .store(if armed { 0 } else { ring_layout::FLAG_MASK_INT }, Ordering::Release);
        }
        self.conn = Some(conn);
        self.connects += 1;
        self.last_error = None;
    }

    // ----- client ---------------------------------------------------------

    fn client_connect(&self) -> std::result::Result<Connection, Attempt> {
        let path = &self.options.path;
        let socket = socket::connect(path).map_err(|e| match e.raw_os_error() {
            // connect(2): EPROTOTYPE, the socket at PATH is of another type.
            Some(libc::EPROTOTYPE) => Attempt::Failed(self.err(format!(
                "{path} is not a memif socket: it is a Unix socket of another type (memif uses SOCK_SEQPACKET; \
                 a stream socket is a different service, e.g. vhost-user)"
            ))),
            _ => Attempt::NoServer(e.to_string()),
        })?;
        socket::set_timeout(&socket, HANDSHAKE_TIMEOUT);
        let fail = |what: String| Attempt::Failed(self.err(what));

        // 1. HELLO from the server.
        let hello = self
            .expect(
                &socket,
                "HELLO",
                "the first message of a memif server",
                "the connection",
            )
            .map_err(Attempt::Failed)?;
        let (peer, max_s2c, max_c2s, max_log2) = match hello {
            (
                Msg::Hello {
                    name,
                    min_version,
                    max_version,
                    max_s2c_ring,
                    max_c2s_ring,
                    max_log2_ring_size,
                    ..
                },
                _,
            ) => {
                if !(min_version..=max_version).contains(&VERSION) {
                    return Err(fail(format!(
                        "the memif server '{name}' speaks versions {min_version:#06x}..={max_version:#06x}, oxnet speaks {VERSION:#06x}"
                    )));
                }
                (name, max_s2c_ring, max_c2s_ring, max_log2_ring_size)
            }
            (other, _) => {
                return Err(fail(format!(
                    "{path} is not a memif server: its first message is {} instead of HELLO",
                    other.name()
                )))
            }
        };

        // 2. Shared memory: rings then buffers, in one region.
        let c2s = (self.config.tx_queues as usize).min(max_c2s as usize + 1);
        let s2c = (self.config.rx_queues as usize).min(max_s2c as usize + 1);
        let log2_of = |size: usize| (size.trailing_zeros() as u8).min(max_log2).min(MAX_LOG2_RING_SIZE);
        let tx_log2 = log2_of(self.config.tx_ring_size);
        let rx_log2 = log2_of(self.config.rx_ring_size);
        let layout = Layout::new(c2s, tx_log2, s2c, rx_log2);
        let region = Region::create("oxnet-memif", layout.total).map_err(Attempt::Failed)?;
        let mut tx = Vec::new();
        let mut rx = Vec::new();
        for r in 0..c2s + s2c {
            let (offset, log2) = layout.ring(r);
            let ring = Ring::at(&region, offset, log2).ok_or_else(|| fail("ring layout outside the region".into()))?;
            ring.init();
            for slot in 0..ring.size() {
                ring.write(
                    slot,
                    Desc {
                        flags: 0,
                        region: 0,
                        length: BUFFER_SIZE,
                        offset: layout.buffer(r, slot),
                    },
                );
            }
            let queue = Queue {
                last: 0,
                lengths: if r < c2s {
                    vec![0; ring.size() as usize]
                } else {
                    Vec::new()
                },
                ring,
                event: region::eventfd().map_err(Attempt::Failed)?,
            };
            if r < c2s {
                tx.push(queue);
            } else {
                // Every S2C buffer goes to the server at once.
                queue.ring.head().store(queue.ring.size(), Ordering::Release);
                rx.push(queue);
            }
        }

        // 3. INIT, then each region and ring, then CONNECT; an ACK each.
        let init = Msg::Init {
            version: VERSION,
            id: self.options.id,
            mode: MODE_ETHERNET,
            secret: [0; 24],
            name: "oxnet".into(),
        };
        self.request(&socket, &init, None, &format!("interface id {}", self.options.id))
            .map_err(Attempt::Failed)?;
        let add_region = Msg::AddRegion {
            index: 0,
            size: layout.total as u64,
        };
        self.request(
            &socket,
            &add_region,
            Some(region.fd().as_raw_fd()),
            &format!("region 0 ({} bytes)", layout.total),
        )
        .map_err(Attempt::Failed)?;
        for (r, queue) in tx.iter().chain(rx.iter()).enumerate() {
            let (offset, log2) = layout.ring(r);
            let c2s_ring = r < c2s;
            let msg = Msg::AddRing {
                flags: if c2s_ring { ADD_RING_FLAG_C2S } else { 0 },
                index: if c2s_ring { r as u16 } else { (r - c2s) as u16 },
                region: 0,
                offset,
                log2_ring_size: log2,
                private_hdr_size: 0,
            };
            let what = format!(
                "{} ring {}",
                if c2s_ring { "C2S" } else { "S2C" },
                if c2s_ring { r } else { r - c2s }
            );
            self.request(&socket, &msg, Some(queue.event.as_raw_fd()), &what)
                .map_err(Attempt::Failed)?;
        }
        socket::send(&socket, &Msg::Connect { name: "oxnet".into() }, None)
            .map_err(|e| fail(format!("sending CONNECT: {e}")))?;
        match self
            .expect(&socket, "CONNECTED", "the answer to CONNECT", "the connection")
            .map_err(Attempt::Failed)?
        {
            (Msg::Connected { .. }, _) => {}
            (other, _) => return Err(fail(format!("the server answered CONNECT with {}", other.name()))),
        }
        socket::set_nonblocking(&socket, true);
        Ok(Connection {
            socket,
            regions: vec![region],
            rx,
            tx,
            peer,
            gone_at: None,
        })
    }

    /// Sends a request and waits for its ACK; a DISCONNECT names what
    /// the server refused (`what`) and why.
    fn request(&self, socket: &OwnedFd, msg: &Msg, fd: Option<RawFd>, what: &str) -> Result<()> {
        socket::send(socket, msg, fd).map_err(|e| self.err(format!("sending {}: {e}", msg.name())))?;
        match self.expect(socket, "ACK", &format!("the answer to {}", msg.name()), what)? {
            (Msg::Ack, _) => Ok(()),
            (other, _) => Err(self.err(format!("the server answered {} with {}", msg.name(), other.name()))),
        }
    }

    /// Receives one message within the handshake time limit; DISCONNECT,
    /// a closed socket, a timeout and garbage become errors.
    fn expect(&self, socket: &OwnedFd, wanted: &str, context: &str, what: &str) -> Result<(Msg, Option<OwnedFd>)> {
        let path = &self.options.path;
        match socket::receive(socket, true) {
            Ok(Received::Msg(Msg::Disconnect { code, reason }, _)) => Err(self.err(format!(
                "the memif peer refused {what} and disconnected (code {code}): '{reason}'{}",
                hint(&reason)
            ))),
            Ok(Received::Msg(m, fd)) => Ok((m, fd)),
            Ok(Received::Nothing) | Ok(Received::Closed) => Err(self.err(format!(
                "the peer at {path} closed the connection while oxnet waited for {wanted} ({context}): \
                 is it a memif peer, and does it accept {what}?"
            ))),
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => Err(self.err(format!(
                "no {wanted} from {path} within {} s ({context}): the socket is not a memif peer, or the peer is stuck",
                HANDSHAKE_TIMEOUT.as_secs()
            ))),
            Err(e) if e.kind() == std::io::ErrorKind::InvalidData => Err(self.err(format!(
                "{path} is not a memif peer: waiting for {wanted} ({context}) it sent bytes that are no memif message ({e})"
            ))),
            Err(e) => Err(self.err(format!("reading from {path}: {e}"))),
        }
    }

    // ----- server ---------------------------------------------------------

    /// Runs the server's half of the handshake on an accepted socket.
    fn server_handshake(&self, socket: OwnedFd) -> Result<Connection> {
        socket::set_timeout(&socket, HANDSHAKE_TIMEOUT);
        let hello = Msg::Hello {
            name: "oxnet".into(),
            min_version: VERSION,
            max_version: VERSION,
            max_region: MAX_REGION,
            max_s2c_ring: self.config.tx_queues - 1,
            max_c2s_ring: self.config.rx_queues - 1,
            max_log2_ring_size: MAX_LOG2_RING_SIZE,
        };
        socket::send(&socket, &hello, None).map_err(|e| self.err(format!("sending HELLO: {e}")))?;
        let mut regions: Vec<Region> = Vec::new();
        let mut c2s: Vec<(Msg, OwnedFd)> = Vec::new();
        let mut s2c: Vec<(Msg, OwnedFd)> = Vec::new();
        let mut peer = String::new();
        let mut initialised = false;
        // Refuses with a DISCONNECT that names the reason (memif.h: code,
        // string[96]) and returns the same reason as our error.
        let refuse = |socket: &OwnedFd, reason: String| -> Error {
            let _ = socket::send(
                socket,
                &Msg::Disconnect {
                    code: 0,
                    reason: reason.clone(),
                },
                None,
            );
            self.err(format!("refused a memif client: {reason}"))
        };
        loop {
            let (msg, fd) = self.expect(&socket, "a client message", "handshake", "the handshake")?;
            if !initialised && !matches!(msg, Msg::Init { .. }) {
                return Err(refuse(&socket, format!("expected INIT, got {}", msg.name())));
            }
            match msg {
                Msg::Init {
                    version,
                    id,
                    mode,
                    name,
                    ..
                } => {
                    if initialised {
                        return Err(refuse(&socket, "INIT twice".into()));
                    }
                    if version != VERSION {
                        return Err(refuse(&socket, format!("incompatible memif version {version:#06x}")));
                    }
                    if id != self.options.id {
                        return Err(refuse(
                            &socket,
                            format!(
                                "ID mismatch: no interface {id} here (this one is id {})",
                                self.options.id
                            ),
                        ));
                    }
                    if mode != MODE_ETHERNET {
                        return Err(refuse(&socket, format!("mode {mode} not supported (only ethernet)")));
                    }
                    peer = name;
                    initialised = true;
                }
                Msg::AddRegion { index, size } => {
                    let Some(fd) = fd else {
                        return Err(refuse(&socket, format!("region {index}: no file descriptor")));
                    };
                    if index as usize != regions.len() || index > MAX_REGION {
                        return Err(refuse(
                            &socket,
                            format!("region index {index} out of order or above {MAX_REGION}"),
                        ));
                    }
                    if size == 0 || size > u32::MAX as u64 + 1 {
                        return Err(refuse(&socket, format!("region {index}: size {size} not usable")));
                    }
                    match Region::map(fd, size as usize) {
                        Ok(r) => regions.push(r),
                        Err(e) => return Err(refuse(&socket, format!("region {index}: {e}"))),
                    }
                }
                Msg::AddRing {
                    flags,
                    index,
                    region,
                    offset,
                    log2_ring_size,
                    ..
                } => {
                    let Some(fd) = fd else {
                        return Err(refuse(&socket, format!("ring {index}: no interrupt eventfd")));
                    };
                    let list = if flags & ADD_RING_FLAG_C2S != 0 {
                        &mut c2s
                    } else {
                        &mut s2c
                    };
                    let max = if flags & ADD_RING_FLAG_C2S != 0 {
                        self.config.rx_queues
                    } else {
                        self.config.tx_queues
                    };
                    if index as usize != list.len() || index >= max {
                        return Err(refuse(
                            &socket,
                            format!("ring index {index} out of order or not below {max}"),
                        ));
                    }
                    if log2_ring_size > MAX_LOG2_RING_SIZE || region as usize >= regions.len() {
                        return Err(refuse(
                            &socket,
                            format!("ring {index}: bad size 2^{log2_ring_size} or region {region}"),
                        ));
                    }
                    let m = Msg::AddRing {
                        flags,
                        index,
                        region,
                        offset,
                        log2_ring_size,
                        private_hdr_size: 0,
                    };
                    list.push((m, fd));
                }
                Msg::Connect { .. } => {
                    if c2s.is_empty() || s2c.is_empty() {
                        return Err(refuse(&socket, "CONNECT before a ring in each direction".into()));
                    }
                    let mut rx = Vec::new();
                    let mut tx = Vec::new();
                    for (list, out) in [(c2s, &mut rx), (s2c, &mut tx)] {
                        for (m, event) in list {
                            let Msg::AddRing {
                                region,
                                offset,
                                log2_ring_size,
                                index,
                                ..
                            } = m
                            else {
                                continue;
                            };
                            let Some(ring) = Ring::at(&regions[region as usize], offset, log2_ring_size) else {
                                return Err(refuse(&socket, format!("ring {index} lies outside region {region}")));
                            };
                            if ring.cookie() != COOKIE {
                                return Err(refuse(
                                    &socket,
                                    format!("ring {index}: wrong cookie {:#x}", ring.cookie()),
                                ));
                            }
                            let last = ring.head().load(Ordering::Acquire);
                            out.push(Queue {
                                ring,
                                event,
                                last,
                                lengths: Vec::new(),
                            });
                        }
                    }
                    // Our receive rings start where the client's head is:
                    // a fresh ring has head = tail = 0.
                    for q in &rx {
                        q.ring.tail().store(q.last, Ordering::Release);
                    }
                    for q in &mut tx {
                        q.last = 0;
                    }
                    socket::send(&socket, &Msg::Connected { name: "oxnet".into() }, None)
                        .map_err(|e| self.err(format!("sending CONNECTED: {e}")))?;
                    socket::set_nonblocking(&socket, true);
                    return Ok(Connection {
                        socket,
                        regions,
                        rx,
                        tx,
                        peer,
                        gone_at: None,
                    });
                }
                other => {
                    return Err(refuse(
                        &socket,
                        format!("unexpected {} during the handshake", other.name()),
                    ))
                }
            }
            socket::send(&socket, &Msg::Ack, None).map_err(|e| self.err(format!("sending ACK: {e}")))?;
        }
    }

    // ----- connection upkeep ------------------------------------------------

    /// Looks at the control socket and (re)connects; called from the data
    /// path every CONTROL_POLL_CALLS calls while connected, every call
    /// while not.
    #[inline]
    fn upkeep(&mut self) {
        self.calls = self.calls.wrapping_add(1);
        let live = self.conn.as_ref().is_some_and(|c| c.gone_at.is_none());
        if live && !self.calls.is_multiple_of(CONTROL_POLL_CALLS) {
            return;
        }
        self.upkeep_now();
    }

    #[cold]
    fn upkeep_now(&mut self) {
        if let Some(conn) = &mut self.conn {
            if conn.gone_at.is_none() {
                loop {
                    match socket::receive(&conn.socket, false) {
                        Ok(Received::Nothing) => break,
                        Ok(Received::Msg(Msg::Disconnect { reason, .. }, _)) => {
                            self.last_error = Some(format!("the peer '{}' disconnected: {reason}", conn.peer));
                            conn.gone_at = Some(Instant::now());
                            break;
                        }
                        Ok(Received::Msg(..)) => continue,
                        Ok(Received::Closed) | Err(_) => {
                            self.last_error = Some(format!("the peer '{}' closed the connection", conn.peer));
                            conn.gone_at = Some(Instant::now());
                            break;
                        }
                    }
                }
            }
            if let Some(at) = conn.gone_at {
                // Read what the peer left in our receive rings first (its
                // memory stays mapped), then let go of the rings.
                let drained = conn.rx.iter().all(|q| Self::rx_pending(self.options.role, q) == 0);
                if drained || at.elapsed() > Duration::from_millis(200) {
                    self.teardown();
                }
            }
            // A server with a live client leaves later clients waiting in
            // the backlog until this one goes.
            return;
        }
        match self.options.role {
            Role::Client => {
                if self.last_attempt.is_some_and(|t| t.elapsed() < RETRY_INTERVAL) {
                    return;
                }
                self.last_attempt = Some(Instant::now());
                match self.client_connect() {
                    Ok(conn) => self.install(conn),
                    Err(Attempt::NoServer(why)) => self.last_error = Some(format!("no server: {why}")),
                    Err(Attempt::Failed(e)) => self.note_failure(e),
                }
            }
            Role::Server => {
                let Some(listener) = &self.listener else { return };
                if let Some(socket) = socket::accept(listener) {
                    match self.server_handshake(socket) {
                        Ok(conn) => self.install(conn),
                        Err(e) => self.note_failure(e),
                    }
                }
            }
        }
    }

    /// Remembers why a connection attempt failed and says so once.
    fn note_failure(&mut self, e: Error) {
        let text = e.to_string();
        if self.last_error.as_deref() != Some(text.as_str()) {
            eprintln!("{text}");
        }
        self.last_error = Some(text);
    }

    /// Drops the connection: packets we posted that the peer never
    /// consumed are counted as not sent.
    fn teardown(&mut self) {
        let Some(conn) = self.conn.take() else { return };
        if self.options.role == Role::Client {
            for q in &conn.tx {
                let head = q.ring.head().load(Ordering::Relaxed);
                let mut slot = q.ring.tail().load(Ordering::Acquire);
                while slot != head {
                    let len = q.lengths[(slot & q.ring.mask()) as usize];
                    if len > 0 {
                        self.stats.tx_packets -= 1;
                        self.stats.tx_bytes -= len as u64;
                        self.stats.tx_not_sent += 1;
                    }
                    slot = slot.wrapping_add(1);
                }
            }
        }
        // Dropping `conn` closes the socket and unmaps the regions.
    }

    /// Slots the peer has filled that we have not read.
    fn rx_pending(role: Role, q: &Queue) -> u16 {
        let published = match role {
            Role::Server => q.ring.head().load(Ordering::Acquire),
            Role::Client => q.ring.tail().load(Ordering::Acquire),
        };
        published.wrapping_sub(q.last)
    }
}

/// Why a client's connection attempt failed.
enum Attempt {
    /// Nothing listens at the path (yet): worth retrying.
    NoServer(String),
    /// Something answered but the handshake failed: a clear error.
    Failed(Error),
}

/// Words to help with the reasons DPDK and VPP give.
fn hint(reason: &str) -> &'static str {
    let r = reason.to_ascii_lowercase();
    if r.contains("id mismatch") || r.contains("id not found") || r.contains("no interface") {
        " (the interface id differs: give both sides the same ,id=N)"
    } else if r.contains("region") {
        " (the server refused the shared memory region)"
    } else if r.contains("already connected") {
        " (the server already has a client for this id)"
    } else {
        ""
    }
}

/// Where the client puts rings and buffers in its region: the C2S rings,
/// then the S2C rings, each 64-byte aligned; then one BUFFER_SIZE buffer
/// per slot of every ring, in the same order.
struct Layout {
    rings: Vec<(u32, u8)>,
    buffers: u32,
    total: usize,
}

impl Layout {
    fn new(c2s: usize, c2s_log2: u8, s2c: usize, s2c_log2: u8) -> Layout {
        let mut rings = Vec::new();
        let mut at = 0usize;
        for log2 in std::iter::repeat_n(c2s_log2, c2s).chain(std::iter::repeat_n(s2c_log2, s2c)) {
            rings.push((at as u32, log2));
            at += (ring_layout::bytes(log2) + 63) & !63;
        }
        let buffers = (at + 4095) & !4095;
        let slots: usize = rings.iter().map(|&(_, l)| 1usize << l).sum();
        let total = (buffers + slots * BUFFER_SIZE as usize + 4095) & !4095;
        Layout {
            rings,
            buffers: buffers as u32,
            total,
        }
    }

    fn ring(&self, r: usize) -> (u32, u8) {
        self.rings[r]
    }

    fn buffer(&self, r: usize, slot: u16) -> u32 {
        let before: usize = self.rings[..r].iter().map(|&(_, l)| 1usize << l).sum();
        self.buffers + ((before + slot as usize) as u32) * BUFFER_SIZE
    }
}

// ----- data path -------------------------------------------------------------

impl Memif {
    /// Copies received slots into packets (both roles: read from `last`
    /// up to what the peer published).
    fn receive(&mut self, queue: u16, batch: &mut PacketBatch, max: usize) -> usize {
        let role = self.options.role;
        let Some(conn) = &mut self.conn else { return 0 };
        let Some(q) = conn.rx.get_mut(queue as usize) else {
            return 0;
        };
        let pool = &self.pools[queue as usize];
        let published = match role {
            Role::Server => q.ring.head().load(Ordering::Acquire),
            Role::Client => q.ring.tail().load(Ordering::Acquire),
        };
        let size = q.ring.size();
        let available = published.wrapping_sub(q.last);
        if available == 0 || available > size {
            // Nothing, or a peer that published more than the ring holds:
            // ignore until it makes sense.
            if available > size {
                self.stats.kernel_invalid_descs += 1;
            }
            self.refill(queue);
            return 0;
        }
        // Buffers come from a per-queue spare batch, topped up with one
        // alloc_batch per call; what is not used stays there.
        let spare = &mut self.spare[queue as usize];
        let want = (available as usize).min(max).min(MAX_RX_BURST);
        if spare.len() < want {
            let n = want - spare.len();
            pool.alloc_batch(spare, n);
        }
        let mut slot = q.last;
        let end = published;
        let mut received = 0;
        while slot != end && received < max {
            let Some(mut packet) = spare.pop() else {
                self.stats.rx_pool_empty += 1;
                break;
            };
            // One packet: one slot, or several chained with FLAG_NEXT.
            let mut len = 0usize;
            let mut ok = true;
            let start = slot;
            loop {
                if slot == end {
                    // A chain cut short by the peer: wait for the rest.
                    slot = start;
                    ok = false;
                    break;
                }
                let d = q.ring.read(slot);
                slot = slot.wrapping_add(1);
                let src = conn
                    .regions
                    .get(d.region as usize)
                    .and_then(|r| r.slice_ptr(d.offset, d.length));
                match src {
                    Some(src) if len + d.length as usize <= packet.capacity() => {
                        let n = d.length as usize;
                        // SAFETY: `src` has n bytes inside the region
                        // (checked); the peer does not write this slot
                        // until we hand it back.
                        let bytes = unsafe { std::slice::from_raw_parts(src, n) };
                        packet.data_room_mut()[len..len + n].copy_from_slice(bytes);
                        len += d.length as usize;
                    }
                    Some(_) => {
                        self.stats.rx_oversize += 1;
                        ok = false;
                    }
                    None => {
                        self.stats.kernel_invalid_descs += 1;
                        ok = false;
                    }
                }
                if d.flags & desc::FLAG_NEXT == 0 {
                    break;
                }
            }
            if slot == start {
                spare.push(packet);
                break;
            }
            if ok && len > 0 {
                let _ = packet.set_len(len);
                self.stats.rx_packets += 1;
                self.stats.rx_bytes += len as u64;
                batch.push(packet);
                received += 1;
            } else {
                if ok {
                    self.stats.rx_length_errors += 1;
                }
                spare.push(packet);
            }
        }
        q.last = slot;
        if role == Role::Server {
            // The slots go back to the client (it reuses them when tail
            // passes them).
            q.ring.tail().store(slot, Ordering::Release);
        }
        self.refill(queue);
        received
    }

    /// Client: hands every read S2C slot back to the server with a full
    /// buffer (descriptor region and offset are the slot's own, set once).
    fn refill(&mut self, queue: u16) {
        if self.options.role != Role::Client {
            return;
        }
        let Some(conn) = &self.conn else { return };
        let Some(q) = conn.rx.get(queue as usize) else { return };
        let head = q.ring.head().load(Ordering::Relaxed);
        let target = q.last.wrapping_add(q.ring.size());
        if head == target {
            return;
        }
        let mut slot = head;
        while slot != target {
            q.ring.set_length(slot, BUFFER_SIZE, 0);
            slot = slot.wrapping_add(1);
        }
        q.ring.head().store(target, Ordering::Release);
    }

    fn transmit(&mut self, queue: u16, batch: &mut PacketBatch) -> usize {
        let role = self.options.role;
        let Some(conn) = &mut self.conn else { return 0 };
        if conn.gone_at.is_some() {
            return 0;
        }
        let Some(q) = conn.tx.get_mut(queue as usize) else {
            return 0;
        };
        let ring = &q.ring;
        let size = ring.size();
        // Our counter and the limit the peer gave us.
        let (mut slot, limit) = match role {
            Role::Client => {
                let head = ring.head().load(Ordering::Relaxed);
                (head, ring.tail().load(Ordering::Acquire).wrapping_add(size))
            }
            Role::Server => (ring.tail().load(Ordering::Relaxed), ring.head().load(Ordering::Acquire)),
        };
        if limit.wrapping_sub(slot) > size {
            // The peer published nonsense: send nothing.
            self.stats.kernel_invalid_descs += 1;
            return 0;
        }
        let regions = &conn.regions;
        let stats = &mut self.stats;
        let lengths = &mut q.lengths;
        let mut full = false;
        let mut chain = Vec::new();
        let taken = batch.consume_front_while(batch.len(), |packet| {
            let total = packet.total_len();
            if total == 0 || total > MAX_PACKET {
                stats.tx_invalid += 1;
                return Ok(());
            }
            // A chained packet is gathered first (rare); one segment is
            // copied straight from its buffer.
            let data: &[u8] = if packet.is_chained() {
                chain.clear();
                packet.copy_chain_to(&mut chain);
                &chain
            } else {
                &packet
            };
            let first = slot;
            let mut s = slot;
            let mut rest = data;
            while !rest.is_empty() {
                if s == limit {
                    full = true;
                    return Err(packet);
                }
                let d = ring.read(s);
                // Client: its own buffer, BUFFER_SIZE bytes. Server: the
                // client's buffer, as long as its descriptor says.
                let room = match role {
                    Role::Client => BUFFER_SIZE,
                    Role::Server => d.length,
                } as usize;
                let n = rest.len().min(room);
                let dst = regions
                    .get(d.region as usize)
                    .and_then(|r| r.slice_ptr(d.offset, n as u32));
                let Some(dst) = dst.filter(|_| n > 0) else {
                    stats.kernel_invalid_descs += 1;
                    full = true;
                    return Err(packet);
                };
                // SAFETY: `dst` has n bytes inside the region (checked);
                // the slot is ours until we publish it.
                unsafe { std::ptr::copy_nonoverlapping(rest.as_ptr(), dst, n) };
                rest = &rest[n..];
                ring.set_length(s, n as u32, if rest.is_empty() { 0 } else { desc::FLAG_NEXT });
                if role == Role::Client {
                    lengths[(s & ring.mask()) as usize] = 0;
                }
                s = s.wrapping_add(1);
            }
            if role == Role::Client {
                lengths[(first & ring.mask()) as usize] = total as u32;
            }
            slot = s;
            stats.tx_packets += 1;
            stats.tx_bytes += total as u64;
            Ok(())
        });
        if full {
            self.stats.tx_ring_full += 1;
        }
        match role {
            Role::Client => ring.head().store(slot, Ordering::Release),
            Role::Server => ring.tail().store(slot, Ordering::Release),
        }
        if taken > 0 && ring.flags().load(Ordering::Acquire) & ring_layout::FLAG_MASK_INT == 0 {
            region::signal(&q.event);
        }
        taken
    }
}

impl Device for Memif {
    fn driver_name(&self) -> &'static str {
        "memif"
    }

    fn spec(&self) -> &str {
        &self.spec
    }

    fn rx_batch(&mut self, queue: u16, batch: &mut PacketBatch, max: usize) -> usize {
        self.upkeep();
        self.receive(queue, batch, max)
    }

    fn tx_batch(&mut self, queue: u16, batch: &mut PacketBatch) -> usize {
        self.upkeep();
        self.transmit(queue, batch)
    }

    fn stats(&mut self) -> DeviceStats {
        self.stats
    }

    fn link(&self) -> Link {
        // memif has no speed; 0 Mbit/s.
        Link {
            up: self.conn.as_ref().is_some_and(|c| c.gone_at.is_none()),
            speed_mbps: 0,
        }
    }

    fn mac(&self) -> [u8; 6] {
        // Locally administered (bit 1 of the first byte), from role and id.
        let id = self.options.id.to_be_bytes();
        [
            0x02,
            0xfe,
            if self.options.role == Role::Server { 1 } else { 2 },
            id[1],
            id[2],
            id[3],
        ]
    }

    fn set_promisc(&mut self, _on: bool) -> Result<()> {
        // A point-to-point link: every frame is for us.
        Ok(())
    }

    fn features(&self) -> Features {
        Features::default()
    }

    fn mempool(&self, queue: u16) -> Mempool {
        self.pools[(queue as usize).min(self.pools.len() - 1)].clone()
    }

    fn queues(&self) -> (u16, u16) {
        (self.config.rx_queues, self.config.tx_queues)
    }

    fn rx_interrupt_fd(&self, queue: u16) -> Option<RawFd> {
        self.conn.as_ref()?.rx.get(queue as usize).map(|q| q.event.as_raw_fd())
    }

    fn set_rx_interrupt(&mut self, queue: u16, enabled: bool) -> Result<()> {
        if let Some(armed) = self.interrupts_armed.get_mut(queue as usize) {
            *armed = enabled;
        }
        if let Some(q) = self.conn.as_ref().and_then(|c| c.rx.get(queue as usize)) {
            q.ring
                .flags()
                .store(if enabled { 0 } else { ring_layout::FLAG_MASK_INT }, Ordering::Release);
        }
        Ok(())
    }

    fn drain_tx(&mut self, timeout: Duration) -> usize {
        // A server's packets are consumed when copied; a client's when the
        // server moves the C2S tail past them.
        let start = Instant::now();
        loop {
            self.upkeep_now();
            let outstanding = match (&self.conn, self.options.role) {
                (Some(conn), Role::Client) if conn.gone_at.is_none() => conn
                    .tx
                    .iter()
                    .map(|q| {
                        let head = q.ring.head().load(Ordering::Relaxed);
                        let mut slot = q.ring.tail().load(Ordering::Acquire);
                        let mut n = 0;
                        while slot != head {
                            n += (q.lengths[(slot & q.ring.mask()) as usize] > 0) as usize;
                            slot = slot.wrapping_add(1);
                        }
                        n
                    })
                    .sum(),
                _ => 0,
            };
            if outstanding == 0 || start.elapsed() >= timeout {
                return outstanding;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}

impl Drop for Memif {
    fn drop(&mut self) {
        if let Some(conn) = &self.conn {
            if conn.gone_at.is_none() {
                let _ = socket::send(
                    &conn.socket,
                    &Msg::Disconnect {
                        code: 0,
                        reason: "oxnet closed the device".into(),
                    },
                    None,
                );
            }
        }
        self.teardown();
        if self.listener.take().is_some() {
            let _ = std::fs::remove_file(&self.options.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_name_path_role_and_id() {
        assert_eq!(
            parse_spec("/tmp/x").unwrap(),
            Options {
                path: "/tmp/x".into(),
                role: Role::Client,
                id: 0
            }
        );
        assert_eq!(
            parse_spec("/tmp/x,role=server,id=7").unwrap(),
            Options {
                path: "/tmp/x".into(),
                role: Role::Server,
                id: 7
            }
        );
        for bad in ["", ",role=server", "/x,role=boss", "/x,id=-1", "/x,color=red"] {
            let e = parse_spec(bad).unwrap_err().to_string();
            assert!(e.contains("memif:PATH[,role=client|server][,id=N]"), "{bad}: {e}");
        }
    }

    #[test]
    fn layout_puts_rings_first_and_one_buffer_per_slot() {
        let l = Layout::new(1, 9, 1, 9);
        assert_eq!(l.ring(0), (0, 9));
        assert_eq!(l.ring(1).0 as usize, ring_layout::bytes(9));
        assert_eq!(l.buffer(0, 0) as usize % 4096, 0);
        assert_eq!(l.buffer(1, 0) - l.buffer(0, 0), 512 * BUFFER_SIZE);
        assert!(l.total >= l.buffer(1, 511) as usize + BUFFER_SIZE as usize);
    }
}
