//! The vhost-user transport, front-end (client) side — what DPDK calls
//! virtio-user: the same virtio-net driver and virtqueues as on PCI, but the
//! "device" is a back-end process (DPDK's vhost PMD, Open vSwitch, VPP,
//! Snabb) reached through a Unix socket. No VM, no root.
//!
//! The protocol is QEMU's docs/interop/vhost-user.rst ("Vhost-user
//! Protocol"); sections are cited by their titles. In short:
//!
//! * messages are a 12-byte header (request, flags, size) and a payload, in
//!   native byte order ("Message Specification"); file descriptors travel
//!   as SCM_RIGHTS ancillary data ("Communication");
//! * the back-end maps our memory from the file descriptors we send with
//!   `SET_MEM_TABLE`. All plain DMA memory of this process lives in one
//!   memfd arena ([`crate::memory::arena`]), so one region covers every
//!   ring and every mempool, including pools made after the table was sent.
//!   Its guest address is its user address is our virtual address, so the
//!   IOVA of plain memory (= virtual address) is what descriptors carry;
//! * each ring is described by NUM, ADDR, BASE, KICK, CALL and — with
//!   `VHOST_USER_F_PROTOCOL_FEATURES` — enabled by `SET_VRING_ENABLE` ("Ring
//!   states": with protocol features a ring starts disabled);
//! * the back-end polls and sets VIRTQ_USED_F_NO_NOTIFY, so in steady state
//!   neither TX nor RX makes a system call: a notification (a write to the
//!   kick eventfd) happens only while the back-end asks for one.
//!
//! Roles ("Introduction": front-end and back-end can each be the client,
//! connecting, or the server, listening): by default we connect to a
//! back-end that listens (`vhost-user:PATH`; Open vSwitch's
//! `dpdkvhostuser` ports, testpmd's `net_vhost`); with `vhost-user:PATH,server`
//! we listen and the back-end connects (Open vSwitch's recommended
//! `dpdkvhostuserclient` ports, testpmd's `net_vhost` with `client=1`).
//! Either way the connection can be lost (the back-end restarts): the driver
//! polls [`Transport::poll_device`] every few hundred batches, we notice the
//! closed socket, and then reconnect — as client with a bounded backoff
//! ([`RECONNECT_MIN`] doubling to [`RECONNECT_MAX`]), as server by accepting
//! the next connection — and negotiate again from SET_OWNER ("Issued when a
//! new connection is established") through SET_MEM_TABLE; the driver then
//! sets up its rings again from index 0. A ring's state does not survive
//! the back-end (what it had taken but not used is gone with it), so the
//! driver frees what was in flight and counts it as not sent.
//!
//! There is no status register and no config space: `reset`/`set_status`
//! map onto ring start/stop (see [`VhostUser::reset`]); the link status is
//! emulated from the socket, as DPDK's virtio-user does (VIRTIO_NET_F_STATUS
//! offered by the transport itself: link down once the back-end has closed
//! the connection).
//!
//! Every read from the socket has a time limit ([`REPLY_TIMEOUT`]), every
//! write is MSG_NOSIGNAL (a closed socket is an error, not SIGPIPE), and
//! each error names the socket and the message being exchanged.

use super::net;
use super::transport::DeviceEvent;
use super::transport::Transport;
use super::virtqueue::Virtqueue;
use super::{VirtioNet, VirtioOptions};
use crate::device::{Config, Device};
use crate::error::{Error, Result};
use crate::memory::{self, MemoryKind};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::time::{Duration, Instant};

/// How long we wait for any answer of the back-end.
pub const REPLY_TIMEOUT: Duration = Duration::from_secs(2);

/// First wait before connecting again to a back-end that went away; it
/// doubles after each failed attempt up to [`RECONNECT_MAX`].
pub const RECONNECT_MIN: Duration = Duration::from_millis(10);
/// Longest wait between two attempts to reconnect.
pub const RECONNECT_MAX: Duration = Duration::from_secs(1);

/// Request codes ("Front-end message types").
mod request {
    pub const GET_FEATURES: u32 = 1;
    pub const SET_FEATURES: u32 = 2;
    pub const SET_OWNER: u32 = 3;
    pub const SET_MEM_TABLE: u32 = 5;
    pub const SET_VRING_NUM: u32 = 8;
    pub const SET_VRING_ADDR: u32 = 9;
    pub const SET_VRING_BASE: u32 = 10;
    pub const GET_VRING_BASE: u32 = 11;
    pub const SET_VRING_KICK: u32 = 12;
    pub const SET_VRING_CALL: u32 = 13;
    pub const GET_PROTOCOL_FEATURES: u32 = 15;
    pub const SET_PROTOCOL_FEATURES: u32 = 16;
    pub const SET_VRING_ENABLE: u32 = 18;

    /// Name for messages.
    pub fn name(code: u32) -> &'static str {
        match code {
            GET_FEATURES => "GET_FEATURES",
            SET_FEATURES => "SET_FEATURES",
            SET_OWNER => "SET_OWNER",
            SET_MEM_TABLE => "SET_MEM_TABLE",
            SET_VRING_NUM => "SET_VRING_NUM",
            SET_VRING_ADDR => "SET_VRING_ADDR",
            SET_VRING_BASE => "SET_VRING_BASE",
            GET_VRING_BASE => "GET_VRING_BASE",
            SET_VRING_KICK => "SET_VRING_KICK",
            SET_VRING_CALL => "SET_VRING_CALL",
            GET_PROTOCOL_FEATURES => "GET_PROTOCOL_FEATURES",
            SET_PROTOCOL_FEATURES => "SET_PROTOCOL_FEATURES",
            SET_VRING_ENABLE => "SET_VRING_ENABLE",
            _ => "an unknown request",
        }
    }
}

/// "Header": the lower 2 bits of flags are the version, currently 1.
const VERSION: u32 = 1;
/// Bit 2: set on each reply from the back-end.
const FLAG_REPLY: u32 = 1 << 2;
/// Bit 3: the front-end wants an ack ("REPLY_ACK").
const FLAG_NEED_REPLY: u32 = 1 << 3;
const HEADER_LEN: usize = 12;
/// No reply we ask for is longer than a vring state or a u64; a back-end
/// announcing more than this is not speaking vhost-user.
const MAX_REPLY_PAYLOAD: usize = 64;

/// VHOST_USER_F_PROTOCOL_FEATURES: the reused virtio feature bit 30
/// ("Communication"); never a virtio feature, so never passed to the driver.
pub const F_PROTOCOL_FEATURES: u64 = 1 << 30;
/// VHOST_F_LOG_ALL (bit 26): dirty logging for live migration, not ours.
const F_LOG_ALL: u64 = 1 << 26;
/// VHOST_USER_PROTOCOL_F_REPLY_ACK: the back-end acks requests that carry
/// FLAG_NEED_REPLY with a u64, 0 = success ("REPLY_ACK").
pub const PROTOCOL_F_REPLY_ACK: u64 = 1 << 3;
/// Protocol features we use.
const WANTED_PROTOCOL_FEATURES: u64 = PROTOCOL_F_REPLY_ACK;

/// Virtio features a vhost-user back-end may offer but the transport must
/// hide from the driver. The control queue (CTRL_VQ, CTRL_RX) is handled by
/// the front-end itself in vhost-user net (DPDK's virtio-user emulates it;
/// the DPDK back-end would treat queue 2 as a second receive queue and never
/// answer), and a vhost-user port delivers every frame anyway.
const HIDDEN_FEATURES: u64 = F_PROTOCOL_FEATURES | F_LOG_ALL | net::F_CTRL_VQ | net::F_CTRL_RX;

/// Granularity of the memory region we share: the table is sent again
/// only when the arena grows past a multiple of this.
const REGION_STEP: usize = 64 << 20;

/// Most memory regions a SET_MEM_TABLE may carry ("Memory regions
/// description": region0 ... region7). We send one.
const MAX_REGIONS: usize = 8;

/// Who opens the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// We connect to a back-end listening at the path (the default).
    Client,
    /// We listen at the path and the back-end connects (`,server`).
    Server,
}

/// Splits `PATH[,server|,client]` (what follows `vhost-user:`). A path
/// with a comma cannot be given (the part after it would be an option).
pub fn parse_spec(rest: &str) -> Result<(&str, Role)> {
    let mut parts = rest.split(',');
    let path = parts.next().unwrap_or("");
    if path.is_empty() {
        return Err(Error::BadSpec(format!("vhost-user:{rest}: the socket path is empty")));
    }
    let mut role = Role::Client;
    for option in parts {
        role = match option {
            "server" => Role::Server,
            "client" => Role::Client,
            other => {
                return Err(Error::BadSpec(format!(
                    "vhost-user:{rest}: unknown option '{other}' (options: server, client)"
                )))
            }
        };
    }
    Ok((path, role))
}

/// Opens `vhost-user:PATH[,server]`: connects (or, as server, waits up to
/// `config.link_timeout` for the back-end to connect) and initialises a
/// virtio-net device whose device is the back-end behind the socket.
pub fn open(rest: &str, config: &Config) -> Result<Box<dyn Device>> {
    let (path, role) = parse_spec(rest)?;
    let transport = match role {
        Role::Client => VhostUser::connect(path, config)?,
        Role::Server => VhostUser::listen(path, config)?,
    };
    let spec = format!("vhost-user:{rest}");
    Ok(Box::new(VirtioNet::init(
        transport,
        &spec,
        config,
        VirtioOptions::default(),
    )?))
}

/// A connection to a vhost-user back-end.
pub struct VhostUser {
    path: String,
    /// The connection; `None` while the back-end is gone.
    socket: Option<OwnedFd>,
    /// As server: the listening socket (we remove its path when dropped).
    listener: Option<UnixListener>,
    /// Features the driver chose (SET_FEATURES), sent again on reconnect.
    driver_features: Option<u64>,
    /// Earliest time of the next attempt to reconnect, and the wait after
    /// that one if it fails.
    retry_at: Instant,
    backoff: Duration,
    /// Connections made again after a loss.
    reconnects: u64,
    /// Virtio feature bits as the back-end offered them (GET_FEATURES).
    offered: u64,
    /// Negotiated protocol features (0 without F_PROTOCOL_FEATURES).
    protocol_features: u64,
    /// Kick eventfd of each queue (−1: not set up); written by `notify`.
    kick_fds: Vec<RawFd>,
    /// Owns the kick and call eventfds (closed on drop).
    eventfds: Vec<OwnedFd>,
    /// Rings started, to be stopped by `reset`.
    started: Vec<u16>,
    /// Bytes of the arena the back-end has mapped (the region's size).
    mapped: usize,
}

impl VhostUser {
    /// Connects to the back-end listening at `path`, claims it (SET_OWNER),
    /// reads its features and negotiates protocol features.
    pub fn connect(path: &str, config: &Config) -> Result<VhostUser> {
        check_memory(path, config)?;
        let socket = connect_unix(path)?;
        let mut vhost = VhostUser::new(path, Some(socket), None);
        vhost.handshake()?;
        Ok(vhost)
    }

    /// Listens at `path` (role server), waits up to `config.link_timeout`
    /// for a back-end to connect, claims it and negotiates as `connect`.
    /// A stale socket file at `path` (nobody listening) is replaced; a live
    /// one is an error.
    pub fn listen(path: &str, config: &Config) -> Result<VhostUser> {
        check_memory(path, config)?;
        let listener = listen_unix(path)?;
        let mut vhost = VhostUser::new(path, None, Some(listener));
        let deadline = Instant::now() + config.link_timeout;
        loop {
            if let Some(socket) = vhost.accept()? {
                vhost.socket = Some(socket);
                break;
            }
            if Instant::now() >= deadline {
                return Err(vhost.describe_error(
                    "listening",
                    format!(
                        "no back-end connected within {:.0} s (a vhost-user client, e.g. an Open vSwitch \
                         dpdkvhostuserclient port with options:vhost-server-path={path})",
                        config.link_timeout.as_secs_f64()
                    ),
                ));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        vhost.handshake()?;
        Ok(vhost)
    }

    fn new(path: &str, socket: Option<OwnedFd>, listener: Option<UnixListener>) -> VhostUser {
        VhostUser {
            path: path.to_string(),
            socket,
            listener,
            driver_features: None,
            retry_at: Instant::now(),
            backoff: RECONNECT_MIN,
            reconnects: 0,
            offered: 0,
            protocol_features: 0,
            kick_fds: Vec::new(),
            eventfds: Vec::new(),
            started: Vec::new(),
            mapped: 0,
        }
    }

    /// SET_OWNER, GET_FEATURES and protocol features on a new connection.
    fn handshake(&mut self) -> Result<()> {
        // SET_OWNER: "Issued when a new connection is established".
        self.send(request::SET_OWNER, 0, &[], &[])?;
        self.offered = self.query_u64(request::GET_FEATURES)?;
        self.protocol_features = 0;
        if self.offered & F_PROTOCOL_FEATURES != 0 {
            // "Back-ends that report VHOST_USER_F_PROTOCOL_FEATURES must
            // support this message even before VHOST_USER_SET_FEATURES".
            let offered = self.query_u64(request::GET_PROTOCOL_FEATURES)?;
            let wanted = offered & WANTED_PROTOCOL_FEATURES;
            self.send(request::SET_PROTOCOL_FEATURES, 0, &wanted.to_ne_bytes(), &[])?;
            self.protocol_features = wanted;
        }
        Ok(())
    }

    /// As server: the next connection, if one is waiting.
    fn accept(&self) -> Result<Option<OwnedFd>> {
        let Some(listener) = &self.listener else {
            return Ok(None);
        };
        match listener.accept() {
            Ok((stream, _)) => {
                // accept(2): the new socket does not inherit O_NONBLOCK;
                // the same time limits as a connection we make.
                let limits = stream
                    .set_read_timeout(Some(REPLY_TIMEOUT))
                    .and_then(|()| stream.set_write_timeout(Some(REPLY_TIMEOUT)));
                limits.map_err(|e| self.describe_error("setting socket time limits", e))?;
                Ok(Some(OwnedFd::from(stream)))
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Ok(None),
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => Ok(None),
            Err(e) => Err(self.describe_error("accepting a connection", e)),
        }
    }

    /// Forgets the connection and everything tied to it: the back-end is
    /// gone (it closed the socket, or we gave up on it).
    fn drop_connection(&mut self) {
        self.socket = None;
        self.kick_fds.clear();
        self.eventfds.clear();
        self.started.clear();
        self.mapped = 0;
    }

    /// A new connection (as client: connect; as server: accept), then the
    /// negotiation of [`VhostUser::connect`] and the features and memory
    /// table of the first one. Ok(false): no back-end there yet.
    fn reconnect(&mut self) -> Result<bool> {
        let socket = if self.listener.is_some() {
            match self.accept()? {
                Some(socket) => socket,
                None => return Ok(false),
            }
        } else {
            match connect_unix(&self.path) {
                Ok(socket) => socket,
                Err(_) => return Ok(false),
            }
        };
        self.socket = Some(socket);
        self.handshake()?;
        if let Some(features) = self.driver_features {
            // The rings are laid out for these features (ANY_LAYOUT, the
            // header size): a back-end without them cannot take over.
            let missing = features & !net::F_STATUS & !self.offered;
            if missing != 0 {
                return Err(self.describe_error(
                    "reconnecting",
                    format!("the back-end no longer offers features {missing:#x} the rings were set up with"),
                ));
            }
            self.set_driver_features(features)?;
        }
        self.reconnects += 1;
        Ok(true)
    }

    /// Connections made again after the back-end went away.
    pub fn reconnects(&self) -> u64 {
        self.reconnects
    }

    /// Negotiated vhost-user protocol features.
    pub fn protocol_features(&self) -> u64 {
        self.protocol_features
    }

    /// The connection's descriptor; −1 while there is none (a system call
    /// on it fails with EBADF, reported as "not connected").
    fn raw_socket(&self) -> RawFd {
        self.socket.as_ref().map_or(-1, |s| s.as_raw_fd())
    }

    fn describe_error(&self, what: &str, detail: impl std::fmt::Display) -> Error {
        Error::Device(format!("vhost-user:{}: {what}: {detail}", self.path))
    }

    /// Sends one message (header, payload, file descriptors).
    fn send(&self, code: u32, extra_flags: u32, payload: &[u8], fds: &[RawFd]) -> Result<()> {
        let mut message = Vec::with_capacity(HEADER_LEN + payload.len());
        message.extend_from_slice(&code.to_ne_bytes());
        message.extend_from_slice(&(VERSION | extra_flags).to_ne_bytes());
        message.extend_from_slice(&(payload.len() as u32).to_ne_bytes());
        message.extend_from_slice(payload);
        crate::unix::send_with_fds(self.raw_socket(), &message, fds).map_err(|e| {
            let hint = match e.raw_os_error() {
                Some(libc::EPIPE) | Some(libc::ECONNRESET) => " (the back-end closed the connection)",
                Some(libc::EBADF) => " (not connected: the back-end went away)",
                _ => "",
            };
            self.describe_error(&format!("sending {}", request::name(code)), format!("{e}{hint}"))
        })
    }

    /// Reads the reply to `code` and returns its payload.
    fn receive_reply(&self, code: u32) -> Result<Vec<u8>> {
        let what = format!("waiting for the answer to {}", request::name(code));
        let mut header = [0u8; HEADER_LEN];
        self.receive_exact(&mut header, &what)?;
        let size = parse_reply_header(code, &header).map_err(|e| self.describe_error(&what, e))?;
        let mut payload = vec![0u8; size];
        self.receive_exact(&mut payload, &what)?;
        Ok(payload)
    }

    fn receive_exact(&self, buf: &mut [u8], what: &str) -> Result<()> {
        let mut done = 0;
        while done < buf.len() {
            // SAFETY: writing into the unfilled tail of our own buffer.
            let n = unsafe {
                libc::recv(
                    self.raw_socket(),
                    buf[done..].as_mut_ptr() as *mut libc::c_void,
                    buf.len() - done,
                    0,
                )
            };
            if n > 0 {
                done += n as usize;
                continue;
            }
            if n == 0 {
                return Err(self.describe_error(
                    what,
                    "the back-end closed the connection (it refused the request, or is not a vhost-user back-end)",
                ));
            }
            let e = std::io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::EAGAIN) => {
                    return Err(self.describe_error(what, format!("no answer within {} s", REPLY_TIMEOUT.as_secs())))
                }
                Some(libc::ECONNRESET) => {
                    return Err(self.describe_error(what, "the back-end closed the connection (reset)"))
                }
                _ => return Err(self.describe_error(what, e)),
            }
        }
        Ok(())
    }

    /// A request whose reply is a u64 (GET_FEATURES, GET_PROTOCOL_FEATURES).
    fn query_u64(&self, code: u32) -> Result<u64> {
        self.send(code, 0, &[], &[])?;
        let payload = self.receive_reply(code)?;
        let bytes: [u8; 8] = payload.as_slice().try_into().map_err(|_| {
            self.describe_error(
                &format!("answer to {}", request::name(code)),
                format!("{} bytes instead of 8", payload.len()),
            )
        })?;
        Ok(u64::from_ne_bytes(bytes))
    }

    /// A request without a reply of its own. With REPLY_ACK it asks for
    /// an ack and turns a refusal into an error naming the request.
    fn command(&self, code: u32, payload: &[u8], fds: &[RawFd]) -> Result<()> {
        if self.protocol_features & PROTOCOL_F_REPLY_ACK == 0 {
            return self.send(code, 0, payload, fds);
        }
        self.send(code, FLAG_NEED_REPLY, payload, fds)?;
        let ack = self.receive_reply(code)?;
        match <[u8; 8]>::try_from(ack.as_slice()).map(u64::from_ne_bytes) {
            Ok(0) => Ok(()),
            Ok(status) => Err(self.describe_error(
                &format!("{} refused", request::name(code)),
                format!("the back-end answered {status} (see its log)"),
            )),
            Err(_) => Err(self.describe_error(
                &format!("ack of {}", request::name(code)),
                format!("{} bytes instead of 8", ack.len()),
            )),
        }
    }

    /// Without REPLY_ACK nothing tells us whether the back-end accepted
    /// what we sent; one round trip does (a back-end that rejects a message
    /// closes the connection, and we see that here, at the right step).
    fn sync(&self, after: &str) -> Result<()> {
        if self.protocol_features & PROTOCOL_F_REPLY_ACK != 0 {
            return Ok(());
        }
        self.query_u64(request::GET_FEATURES)
            .map(|_| ())
            .map_err(|e| Error::Device(format!("{e} (after {after})")))
    }

    /// SET_MEM_TABLE with the arena as the single region: guest address =
    /// user address = our virtual address, mmap offset 0. The region covers
    /// only what the arena has handed out so far, rounded up to
    /// [`REGION_STEP`], not its whole (sparse) 4 GiB: a back-end that locks
    /// its memory (Open vSwitch runs with --mlockall) would otherwise fill
    /// all of it. When the arena grows past it, `before_tx` sends the table
    /// again (the protocol allows a new table at any time; DPDK stops its
    /// queues while it remaps).
    fn set_mem_table(&mut self) -> Result<()> {
        let arena = memory::arena()?;
        let base = arena.base as u64;
        let size = arena
            .high_water()
            .max(1)
            .div_ceil(REGION_STEP)
            .saturating_mul(REGION_STEP)
            .min(arena.size);
        self.mapped = size;
        let mut payload = Vec::with_capacity(8 + 32);
        payload.extend_from_slice(&1u32.to_ne_bytes()); // num regions
        payload.extend_from_slice(&0u32.to_ne_bytes()); // padding
        for value in [base, size as u64, base, 0] {
            // guest address, size, user address, mmap offset
            payload.extend_from_slice(&value.to_ne_bytes());
        }
        const { assert!(1 <= MAX_REGIONS) };
        self.command(request::SET_MEM_TABLE, &payload, &[arena.fd])
    }

    fn vring_state(index: u16, num: u32) -> [u8; 8] {
        let mut state = [0u8; 8];
        state[..4].copy_from_slice(&(index as u32).to_ne_bytes());
        state[4..].copy_from_slice(&num.to_ne_bytes());
        state
    }

    /// True while the back-end has not closed the connection. One
    /// non-blocking peek: no data is consumed.
    fn connected(&self) -> bool {
        if self.socket.is_none() {
            return false;
        }
        let mut byte = [0u8; 1];
        // SAFETY: peeking at most one byte into our own buffer.
        let n = unsafe {
            libc::recv(
                self.raw_socket(),
                byte.as_mut_ptr() as *mut libc::c_void,
                1,
                libc::MSG_PEEK | libc::MSG_DONTWAIT,
            )
        };
        if n > 0 {
            return true; // unsolicited data, but the peer is there
        }
        if n == 0 {
            return false; // orderly shutdown by the peer
        }
        let err = std::io::Error::last_os_error().raw_os_error();
        matches!(err, Some(libc::EAGAIN) | Some(libc::EINTR))
    }
}

impl Transport for VhostUser {
    fn describe(&self) -> String {
        format!("vhost-user:{}", self.path)
    }

    fn memory_kind(&self) -> MemoryKind {
        MemoryKind::Plain
    }

    /// Stops every ring we started (GET_VRING_BASE stops a ring: "Ring
    /// states"), so the back-end no longer touches our memory once this
    /// returns: DPDK answers only after its forwarding core let go of the
    /// queues. Nothing to do on a fresh connection. RESET_OWNER is
    /// deprecated and not used.
    fn reset(&mut self) -> Result<()> {
        let mut first_error = None;
        for index in std::mem::take(&mut self.started) {
            let result = self
                .send(request::GET_VRING_BASE, 0, &Self::vring_state(index, 0), &[])
                .and_then(|()| self.receive_reply(request::GET_VRING_BASE));
            if let Err(e) = result {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// No status register. DRIVER_OK is the point where everything has
    /// been sent: without REPLY_ACK, one round trip confirms the back-end
    /// took it.
    fn set_status(&mut self, status: u8) -> Result<()> {
        if status & super::transport::status::DRIVER_OK != 0 {
            self.sync("setting up the rings")?;
        }
        Ok(())
    }

    fn device_features(&mut self) -> Result<u64> {
        // VIRTIO_NET_F_STATUS is the transport's own (see read_config).
        Ok((self.offered & !HIDDEN_FEATURES) | net::F_STATUS)
    }

    /// SET_FEATURES, then the memory table (QEMU's order: features, memory,
    /// rings).
    fn set_driver_features(&mut self, features: u64) -> Result<()> {
        self.driver_features = Some(features);
        let mut wire = features & !net::F_STATUS & !HIDDEN_FEATURES;
        wire |= self.offered & F_PROTOCOL_FEATURES;
        self.command(request::SET_FEATURES, &wire.to_ne_bytes(), &[])?;
        self.set_mem_table()?;
        self.sync("SET_FEATURES and SET_MEM_TABLE")
    }

    /// vhost-user leaves the size to us: the configured ring size.
    fn queue_size(&mut self, _queue: u16, wanted: u16) -> Result<u16> {
        Ok(wanted)
    }

    /// NUM, ADDR, BASE, KICK, CALL, ENABLE — the order DPDK's vhost library
    /// expects ("Front-end message types").
    fn setup_queue(&mut self, queue: &Virtqueue) -> Result<()> {
        let index = queue.index;
        if index > 0xFF {
            return Err(self.describe_error("setting up rings", format!("queue {index} above 255")));
        }
        self.command(
            request::SET_VRING_NUM,
            &Self::vring_state(index, queue.size() as u32),
            &[],
        )?;
        // "A vring address description": index, flags, then the user
        // addresses of descriptors, used ring, available ring, and the log
        // address (unused: flags 0 means no logging).
        let mut address = Vec::with_capacity(40);
        address.extend_from_slice(&(index as u32).to_ne_bytes());
        address.extend_from_slice(&0u32.to_ne_bytes());
        for value in [queue.desc_virt(), queue.used_virt(), queue.avail_virt(), 0] {
            address.extend_from_slice(&value.to_ne_bytes());
        }
        self.command(request::SET_VRING_ADDR, &address, &[])?;
        self.command(request::SET_VRING_BASE, &Self::vring_state(index, 0), &[])?;

        let kick = eventfd(&self.path)?;
        let call = eventfd(&self.path)?;
        let payload = (index as u64).to_ne_bytes();
        self.command(request::SET_VRING_KICK, &payload, &[kick.as_raw_fd()])?;
        // We poll: the back-end need not signal used buffers (§2.4.7).
        queue.suppress_interrupts();
        self.command(request::SET_VRING_CALL, &payload, &[call.as_raw_fd()])?;
        if self.offered & F_PROTOCOL_FEATURES != 0 {
            // "the ring is initialized in a disabled state and is enabled by
            // VHOST_USER_SET_VRING_ENABLE with parameter 1".
            self.command(request::SET_VRING_ENABLE, &Self::vring_state(index, 1), &[])?;
        }
        if self.kick_fds.len() <= index as usize {
            self.kick_fds.resize(index as usize + 1, -1);
        }
        self.kick_fds[index as usize] = kick.as_raw_fd();
        self.eventfds.push(kick);
        self.eventfds.push(call);
        self.started.push(index);
        Ok(())
    }

    /// A write to the kick eventfd. Only called while the back-end has not
    /// set VIRTQ_USED_F_NO_NOTIFY (a polling back-end sets it), so this is
    /// not on the steady-state path.
    #[inline]
    fn notify(&mut self, queue: u16) {
        if let Some(&fd) = self.kick_fds.get(queue as usize) {
            if fd >= 0 {
                let one = 1u64;
                // SAFETY: writing 8 bytes from a local to our own eventfd.
                unsafe { libc::write(fd, &one as *const u64 as *const libc::c_void, 8) };
            }
        }
    }

    /// Only the link status exists: up while the socket is connected
    /// (emulated VIRTIO_NET_F_STATUS, as DPDK's virtio-user does).
    fn read_config(&self, offset: u16, buf: &mut [u8]) -> Result<bool> {
        if offset != net::CONFIG_STATUS || buf.len() != 2 {
            return Ok(false);
        }
        let status = if self.connected() { net::S_LINK_UP } else { 0 };
        buf.copy_from_slice(&status.to_le_bytes());
        Ok(true)
    }

    #[inline]
    fn before_tx(&mut self) -> Result<()> {
        // Packets may come from memory allocated after the last table (a
        // new mempool): share it before the back-end reads them.
        let arena = memory::arena()?;
        if arena.high_water() > self.mapped {
            self.set_mem_table()?;
            self.sync("SET_MEM_TABLE")?;
        }
        Ok(())
    }

    fn check_alive(&mut self) -> Result<()> {
        if self.connected() {
            Ok(())
        } else {
            Err(self.describe_error("connection", "the back-end closed the connection"))
        }
    }

    /// Connected: notices a closed socket (Lost). Not connected: tries to
    /// reconnect, as client no sooner than the backoff allows.
    fn poll_device(&mut self) -> DeviceEvent {
        if self.socket.is_some() {
            if self.connected() {
                return DeviceEvent::Unchanged;
            }
            self.drop_connection();
            self.retry_at = Instant::now();
            self.backoff = RECONNECT_MIN;
            return DeviceEvent::Lost;
        }
        let now = Instant::now();
        if now < self.retry_at {
            return DeviceEvent::Unchanged;
        }
        match self.reconnect() {
            Ok(true) => {
                self.backoff = RECONNECT_MIN;
                DeviceEvent::Back
            }
            outcome => {
                // Nobody there yet, or a back-end that failed half-way
                // through the negotiation: try again later (as server, a
                // waiting connection is looked at on the next poll).
                if outcome.is_err() || self.listener.is_none() {
                    self.retry_at = now + self.backoff;
                    self.backoff = (self.backoff * 2).min(RECONNECT_MAX);
                }
                self.drop_connection();
                DeviceEvent::Unchanged
            }
        }
    }

    fn disconnect(&mut self) {
        self.drop_connection();
        self.retry_at = Instant::now() + self.backoff;
        self.backoff = (self.backoff * 2).min(RECONNECT_MAX);
    }
}

impl Drop for VhostUser {
    fn drop(&mut self) {
        if self.listener.is_some() {
            // Our own socket file: remove it, as a server does.
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

fn check_memory(path: &str, config: &Config) -> Result<()> {
    if config.memory == Some(MemoryKind::HugePages) {
        return Err(Error::Config(format!(
            "vhost-user:{path}: the back-end maps our DMA memory from the plain-memory arena; \
             huge-page memory (--memory huge) cannot be shared with it: leave --memory unset or use plain"
        )));
    }
    Ok(())
}

/// A non-blocking listening socket at `path`. A socket file nobody
/// listens on (left by a process that died) is replaced; anything else at
/// `path` is an error.
fn listen_unix(path: &str) -> Result<UnixListener> {
    let fail = |what: &str, detail: String| Error::Device(format!("vhost-user:{path}: {what}: {detail}"));
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        use std::os::unix::fs::FileTypeExt;
        if !meta.file_type().is_socket() {
            return Err(fail("cannot listen", "the path exists and is not a socket".into()));
        }
        if UnixStream::connect(path).is_ok() {
            return Err(fail(
                "cannot listen",
                "another process is listening on this socket".into(),
            ));
        }
        std::fs::remove_file(path).map_err(|e| fail("cannot remove the stale socket", e.to_string()))?;
    }
    let listener = UnixListener::bind(path).map_err(|e| fail("cannot listen", e.to_string()))?;
    listener
        .set_nonblocking(true)
        .map_err(|e| fail("cannot listen", e.to_string()))?;
    Ok(listener)
}

/// Connects to a Unix stream socket with send and receive time limits.
/// Checks the header of a back-end's reply to request `code` (code, flags
/// with version 1 and the reply bit, payload size at most
/// MAX_REPLY_PAYLOAD) and returns the payload size. Any bytes give an
/// answer, never a panic (fuzz target `vhost_user_reply`).
pub fn parse_reply_header(code: u32, header: &[u8]) -> std::result::Result<usize, String> {
    let field = |i: usize| {
        header
            .get(i * 4..i * 4 + 4)
            .map_or(0, |b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
    };
    if header.len() != HEADER_LEN {
        return Err(format!("a {}-byte header instead of {HEADER_LEN}", header.len()));
    }
    let (reply_code, flags, size) = (field(0), field(1), field(2) as usize);
    if reply_code != code || flags & 3 != VERSION || flags & FLAG_REPLY == 0 || size > MAX_REPLY_PAYLOAD {
        return Err(format!(
            "got request {reply_code:#x} flags {flags:#x} size {size}, not a vhost-user reply \
             (is this socket a vhost-user back-end?)"
        ));
    }
    Ok(size)
}

fn connect_unix(path: &str) -> Result<OwnedFd> {
    let fail =
        |what: &str, e: std::io::Error, hint: &str| Error::Device(format!("vhost-user:{path}: {what}: {e}{hint}"));
    // SAFETY: plain syscall; the result is checked and owned at once.
    let raw = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if raw < 0 {
        return Err(fail("cannot create a Unix socket", std::io::Error::last_os_error(), ""));
    }
    // SAFETY: `raw` is a fresh descriptor nobody else owns.
    let socket = unsafe { OwnedFd::from_raw_fd(raw) };
    // SAFETY: sockaddr_un is plain old data; all zeros is valid.
    let mut address: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    address.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let bytes = path.as_bytes();
    if bytes.is_empty() || bytes.len() >= address.sun_path.len() || bytes.contains(&0) {
        return Err(Error::BadSpec(format!(
            "vhost-user:{path}: a socket path must be 1 to {} bytes without NUL",
            address.sun_path.len() - 1
        )));
    }
    for (dst, &src) in address.sun_path.iter_mut().zip(bytes) {
        *dst = src as libc::c_char;
    }
    let timeout = libc::timeval {
        tv_sec: REPLY_TIMEOUT.as_secs() as libc::time_t,
        tv_usec: 0,
    };
    for option in [libc::SO_RCVTIMEO, libc::SO_SNDTIMEO] {
        // SAFETY: setsockopt with a timeval of the right size.
        let rc = unsafe {
            libc::setsockopt(
                raw,
                libc::SOL_SOCKET,
                option,
                &timeout as *const libc::timeval as *const libc::c_void,
                std::mem::size_of::<libc::timeval>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(fail("setting socket time limits", std::io::Error::last_os_error(), ""));
        }
    }
    // SAFETY: connect with a fully initialised sockaddr_un.
    let rc = unsafe {
        libc::connect(
            raw,
            &address as *const libc::sockaddr_un as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        let e = std::io::Error::last_os_error();
        let hint = match e.raw_os_error() {
            Some(libc::ENOENT) | Some(libc::ECONNREFUSED) => {
                " (is the vhost-user back-end running? e.g. dpdk-testpmd --vdev 'net_vhost0,iface=PATH' ...)"
            }
            _ => "",
        };
        return Err(fail("cannot connect", e, hint));
    }
    Ok(socket)
}

fn eventfd(path: &str) -> Result<OwnedFd> {
    // SAFETY: plain syscall; the result is checked and owned at once.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
    if fd < 0 {
        return Err(Error::Io(format!(
            "vhost-user:{path}: eventfd: {}",
            std::io::Error::last_os_error()
        )));
    }
    // SAFETY: a fresh descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_socket_names_the_path_and_the_back_end() {
        let err = VhostUser::connect("/nonexistent/oxnet-test.sock", &Config::default())
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.contains("vhost-user:/nonexistent/oxnet-test.sock: cannot connect"),
            "{err}"
        );
        assert!(err.contains("back-end running"), "{err}");
    }

    #[test]
    fn huge_page_memory_is_refused_with_a_reason() {
        let config = Config {
            memory: Some(MemoryKind::HugePages),
            ..Config::default()
        };
        let err = VhostUser::connect("/tmp/x.sock", &config).err().unwrap().to_string();
        assert!(err.contains("--memory huge"), "{err}");
    }

    #[test]
    fn specs_name_a_path_and_an_optional_role() {
        assert_eq!(parse_spec("/tmp/a.sock").unwrap(), ("/tmp/a.sock", Role::Client));
        assert_eq!(parse_spec("/tmp/a.sock,server").unwrap(), ("/tmp/a.sock", Role::Server));
        assert_eq!(parse_spec("/tmp/a.sock,client").unwrap(), ("/tmp/a.sock", Role::Client));
        assert!(parse_spec(",server").unwrap_err().to_string().contains("path is empty"));
        let err = parse_spec("/tmp/a.sock,srever").unwrap_err().to_string();
        assert!(err.contains("unknown option 'srever'"), "{err}");
    }

    #[test]
    fn vring_state_is_index_then_number() {
        assert_eq!(VhostUser::vring_state(1, 512), [1, 0, 0, 0, 0, 2, 0, 0]);
    }
}
