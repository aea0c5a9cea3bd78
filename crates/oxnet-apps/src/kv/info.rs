//! What every protocol shares besides the store: the clock, the server's
//! settings and connection counts, and the `stats` lists built from them.

use super::store::Store;

/// The version the server reports (`version`, `stats`): memcached's, whose
/// protocols it speaks, marked as oxnet's (clients parse the numbers).
pub const VERSION: &str = "1.6.18-oxnet";

/// The server's side of `stats` and the settings the protocols obey.
#[derive(Debug, Clone)]
pub struct ServerInfo {
    /// Unix seconds at start.
    pub started: u64,
    pub pid: u32,
    pub port: u16,
    pub udp_port: u16,
    pub max_connections: u64,
    pub curr_connections: u64,
    pub total_connections: u64,
    pub rejected_connections: u64,
    pub verbosity: u32,
    pub threads: u32,
    /// Requests answered with a protocol error, counted.
    pub protocol_errors: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
}

impl Default for ServerInfo {
    fn default() -> ServerInfo {
        ServerInfo {
            started: 0,
            pid: std::process::id(),
            port: 11211,
            udp_port: 0,
            max_connections: 1024,
            curr_connections: 0,
            total_connections: 0,
            rejected_connections: 0,
            verbosity: 0,
            threads: 1,
            protocol_errors: 0,
            bytes_read: 0,
            bytes_written: 0,
        }
    }
}

/// What a request is processed against.
pub struct Env<'a> {
    pub store: &'a mut Store,
    pub info: &'a mut ServerInfo,
    /// Unix seconds now (simulated in tests).
    pub now: u64,
}

/// This process's user and system CPU time, as memcached prints them
/// ("seconds.microseconds").
fn rusage() -> (String, String) {
    // SAFETY: getrusage writes the struct it is given.
    let mut r: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to a rusage.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut r) };
    let t = |tv: libc::timeval| format!("{}.{:06}", tv.tv_sec, tv.tv_usec);
    (t(r.ru_utime), t(r.ru_stime))
}

/// `stats` (no argument): memcached's general statistics, by its names
/// and in its order (protocol.txt "General-purpose statistics").
pub fn general(store: &Store, info: &ServerInfo, now: u64) -> Vec<(&'static str, String)> {
    let s = &store.stats;
    let c = store.config();
    let (user, system) = rusage();
    // The hash table: memcached reports 2^hash_power_level buckets.
    let buckets = store.capacity().max(1).next_power_of_two();
    vec![
        ("pid", info.pid.to_string()),
        ("uptime", now.saturating_sub(info.started).to_string()),
        ("time", now.to_string()),
        ("version", VERSION.to_string()),
        ("pointer_size", (8 * std::mem::size_of::<usize>()).to_string()),
        ("rusage_user", user),
        ("rusage_system", system),
        ("max_connections", info.max_connections.to_string()),
        ("curr_connections", info.curr_connections.to_string()),
        ("total_connections", info.total_connections.to_string()),
        ("rejected_connections", info.rejected_connections.to_string()),
        ("connection_structures", info.curr_connections.to_string()),
        ("reserved_fds", "0".to_string()),
        ("cmd_get", s.cmd_get.to_string()),
        ("cmd_set", s.cmd_set.to_string()),
        ("cmd_flush", s.cmd_flush.to_string()),
        ("cmd_touch", s.cmd_touch.to_string()),
        ("cmd_meta", s.cmd_meta.to_string()),
        ("get_hits", s.get_hits.to_string()),
        ("get_misses", s.get_misses.to_string()),
        ("get_expired", s.get_expired.to_string()),
        ("get_flushed", s.get_flushed.to_string()),
        ("delete_misses", s.delete_misses.to_string()),
        ("delete_hits", s.delete_hits.to_string()),
        ("incr_misses", s.incr_misses.to_string()),
        ("incr_hits", s.incr_hits.to_string()),
        ("decr_misses", s.decr_misses.to_string()),
        ("decr_hits", s.decr_hits.to_string()),
        ("cas_misses", s.cas_misses.to_string()),
        ("cas_hits", s.cas_hits.to_string()),
        ("cas_badval", s.cas_badval.to_string()),
        ("touch_hits", s.touch_hits.to_string()),
        ("touch_misses", s.touch_misses.to_string()),
        ("store_too_large", s.store_too_large.to_string()),
        ("store_no_memory", s.outofmemory.to_string()),
        ("auth_cmds", "0".to_string()),
        ("auth_errors", "0".to_string()),
        ("bytes_read", info.bytes_read.to_string()),
        ("bytes_written", info.bytes_written.to_string()),
        ("limit_maxbytes", c.memory_limit.to_string()),
        ("accepting_conns", "1".to_string()),
        ("listen_disabled_num", "0".to_string()),
        ("time_in_listen_disabled_us", "0".to_string()),
        ("threads", info.threads.to_string()),
        ("conn_yields", "0".to_string()),
        ("hash_power_level", buckets.trailing_zeros().to_string()),
        ("hash_bytes", (buckets * 8).to_string()),
        ("hash_is_expanding", "0".to_string()),
        ("bytes", s.bytes.to_string()),
        ("curr_items", s.curr_items.to_string()),
        ("total_items", s.total_items.to_string()),
        ("expired_unfetched", s.expired_unfetched.to_string()),
        ("evicted_unfetched", s.evicted_unfetched.to_string()),
        ("evicted_active", "0".to_string()),
        ("evictions", s.evictions.to_string()),
        ("reclaimed", s.reclaimed.to_string()),
    ]
}

/// `stats settings`: the settings memcached reports that mean something
/// here.
pub fn settings(store: &Store, info: &ServerInfo) -> Vec<(&'static str, String)> {
    let c = store.config();
    vec![
        ("maxbytes", c.memory_limit.to_string()),
        ("maxconns", info.max_connections.to_string()),
        ("tcpport", info.port.to_string()),
        ("udpport", info.udp_port.to_string()),
        ("verbosity", info.verbosity.to_string()),
        ("evictions", "on".to_string()),
        ("num_threads", info.threads.to_string()),
        ("cas_enabled", "yes".to_string()),
        ("item_size_max", c.item_size_max.to_string()),
        ("flush_enabled", "yes".to_string()),
        ("binding_protocol", "auto-negotiate".to_string()),
    ]
}

/// `stats items`: one LRU here, reported as slab class 1.
pub fn items(store: &Store) -> Vec<(String, String)> {
    let s = &store.stats;
    if s.curr_items == 0 {
        return Vec::new();
    }
    vec![
        ("items:1:number".to_string(), s.curr_items.to_string()),
        ("items:1:evicted".to_string(), s.evictions.to_string()),
        ("items:1:evicted_unfetched".to_string(), s.evicted_unfetched.to_string()),
        ("items:1:reclaimed".to_string(), s.reclaimed.to_string()),
        ("items:1:expired_unfetched".to_string(), s.expired_unfetched.to_string()),
        ("items:1:outofmemory".to_string(), s.outofmemory.to_string()),
    ]
}

/// `stats slabs`: the value memory's classes ([`super::slabs`]), by
/// memcached's names.
pub fn slabs(store: &Store) -> Vec<(String, String)> {
    let mut v = Vec::new();
    let mut active = 0;
    for (i, (chunk, pages, total, free)) in store.slabs().class_stats().into_iter().enumerate() {
        if pages == 0 {
            continue;
        }
        active += 1;
        let id = i + 1;
        v.push((format!("{id}:chunk_size"), chunk.to_string()));
        v.push((format!("{id}:chunks_per_page"), (total / pages).to_string()));
        v.push((format!("{id}:total_pages"), pages.to_string()));
        v.push((format!("{id}:total_chunks"), total.to_string()));
        v.push((format!("{id}:used_chunks"), (total - free).to_string()));
        v.push((format!("{id}:free_chunks"), free.to_string()));
    }
    v.push(("active_slabs".to_string(), active.to_string()));
    v.push(("total_malloced".to_string(), store.slabs().malloced().to_string()));
    v
}
