//! Linux network interfaces as the kernel-backed devices (tap, af_packet,
//! af_xdp) see them: names, indexes, MAC, MTU, link, flags, addresses.
//!
//! Everything here reads `/sys/class/net/NAME/*` (Documentation/ABI/testing/
//! sysfs-class-net in Linux) or uses the `SIOCGIFFLAGS`/`SIOCSIFFLAGS`
//! ioctls on a throw-away datagram socket (netdevice(7)). No netlink: what
//! we need is small, and every line can be read without a library.

use crate::device::Link;
use crate::error::{Error, Result};
use std::path::PathBuf;

/// Longest interface name the kernel accepts (IFNAMSIZ = 16, with the NUL).
pub const MAX_NAME_LEN: usize = 15;

/// Checks an interface name as the kernel would (dev_valid_name in
/// net/core/dev.c): 1..=15 bytes, not "." or "..", no '/', ':' or
/// white space.
pub fn check_name(name: &str) -> Result<()> {
    let bad = name.is_empty()
        || name.len() > MAX_NAME_LEN
        || name == "."
        || name == ".."
        || name
            .bytes()
            .any(|b| b == b'/' || b == b':' || b.is_ascii_whitespace() || b == 0);
    if bad {
        return Err(Error::BadSpec(format!(
            "'{name}' is not a Linux interface name (1 to {MAX_NAME_LEN} bytes, no '/', ':' or spaces)"
        )));
    }
    Ok(())
}

fn sysfs(name: &str) -> PathBuf {
    PathBuf::from("/sys/class/net").join(name)
}

fn read_sysfs(name: &str, file: &str) -> Option<String> {
    std::fs::read_to_string(sysfs(name).join(file))
        .ok()
        .map(|s| s.trim().to_string())
}

/// Whether an interface of that name exists in this network namespace.
pub fn exists(name: &str) -> bool {
    check_name(name).is_ok() && sysfs(name).exists()
}

/// The interface index (if_nametoindex(3)); a missing interface gets an
/// error naming it and `oxnet devices`.
pub fn ifindex(name: &str) -> Result<u32> {
    check_name(name)?;
    let c_name = std::ffi::CString::new(name).map_err(|_| Error::BadSpec(format!("bad interface name '{name}'")))?;
    // SAFETY: c_name is a valid NUL-terminated string.
    let index = unsafe { libc::if_nametoindex(c_name.as_ptr()) };
    if index == 0 {
        return Err(Error::BadSpec(format!(
            "there is no network interface '{name}' in this network namespace (`oxnet devices` lists them)"
        )));
    }
    Ok(index)
}

/// Parses "aa:bb:cc:dd:ee:ff".
pub fn parse_mac(text: &str) -> Option<[u8; 6]> {
    let mut mac = [0u8; 6];
    let mut parts = text.trim().split(':');
    for byte in mac.iter_mut() {
        let part = parts.next()?;
        if part.is_empty() || part.len() > 2 {
            return None;
        }
        *byte = u8::from_str_radix(part, 16).ok()?;
    }
    parts.next().is_none().then_some(mac)
}

/// The interface's MAC address (sysfs `address`).
pub fn mac(name: &str) -> Result<[u8; 6]> {
    let text = read_sysfs(name, "address").ok_or_else(|| {
        Error::BadSpec(format!(
            "there is no network interface '{name}' in this network namespace"
        ))
    })?;
    parse_mac(&text).ok_or_else(|| Error::Device(format!("{name}: its address '{text}' is not an Ethernet MAC")))
}

/// The interface's MTU (sysfs `mtu`).
pub fn mtu(name: &str) -> Result<usize> {
    read_sysfs(name, "mtu").and_then(|s| s.parse().ok()).ok_or_else(|| {
        Error::BadSpec(format!(
            "there is no network interface '{name}' in this network namespace"
        ))
    })
}

/// Link state: up when `operstate` is "up" (or "unknown" with carrier, as
/// TAP devices report), speed from sysfs `speed` (veth and tap have none:
/// 0 is reported as 10 000 Mbit/s, what Linux's ethtool says of veth).
pub fn link(name: &str) -> Link {
    let operstate = read_sysfs(name, "operstate").unwrap_or_default();
    let carrier = read_sysfs(name, "carrier").as_deref() == Some("1");
    let up = operstate == "up" || (operstate == "unknown" && carrier);
    let speed = read_sysfs(name, "speed")
        .and_then(|s| s.parse::<i64>().ok())
        .filter(|&s| s > 0)
        .unwrap_or(10_000) as u32;
    Link {
        up,
        speed_mbps: if up { speed } else { 0 },
    }
}

/// What kind of interface it is: the driver behind it ("veth", "tun",
/// "virtio_net", "ixgbe", ...) from sysfs, or "" when unknown.
pub fn kind(name: &str) -> String {
    if sysfs(name).join("tun_flags").exists() {
        return "tun".into();
    }
    if let Ok(target) = std::fs::read_link(sysfs(name).join("device/driver")) {
        if let Some(driver) = target.file_name() {
            return driver.to_string_lossy().into_owned();
        }
    }
    // Virtual devices: DEVTYPE in uevent (veth has none; its iflink
    // differs from its ifindex because it has a peer).
    if let Some(uevent) = read_sysfs(name, "uevent") {
        if let Some(devtype) = uevent.lines().find_map(|l| l.strip_prefix("DEVTYPE=")) {
            return devtype.to_string();
        }
    }
    let ifindex = read_sysfs(name, "ifindex");
    let iflink = read_sysfs(name, "iflink");
    if ifindex.is_some() && iflink.is_some() && ifindex != iflink {
        return "veth".into();
    }
    if name == "lo" {
        return "loopback".into();
    }
    String::new()
}

fn ioctl_socket() -> Result<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: plain socket(2) call; the result is checked.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(Error::Io(format!(
            "socket for interface ioctls: {}",
            std::io::Error::last_os_error()
        )));
    }
    // SAFETY: fd was just created and is owned by nobody else.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) })
}

fn ifreq_for(name: &str) -> Result<libc::ifreq> {
    check_name(name)?;
    // SAFETY: ifreq is plain old data; all zeroes is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(name.bytes()) {
        *dst = src as libc::c_char;
    }
    Ok(req)
}

/// The interface flags (IFF_UP, IFF_PROMISC, ...; netdevice(7) SIOCGIFFLAGS).
pub fn flags(name: &str) -> Result<u32> {
    use std::os::fd::AsRawFd;
    let socket = ioctl_socket()?;
    let mut req = ifreq_for(name)?;
    // SAFETY: req is a valid ifreq naming the interface; the kernel writes
    // ifru_flags.
    let rc = unsafe { libc::ioctl(socket.as_raw_fd(), libc::SIOCGIFFLAGS as _, &mut req) };
    if rc < 0 {
        return Err(Error::Io(format!(
            "{name}: reading its flags: {}",
            std::io::Error::last_os_error()
        )));
    }
    // SAFETY: SIOCGIFFLAGS filled the flags member of the union.
    Ok(unsafe { req.ifr_ifru.ifru_flags } as u16 as u32)
}

/// Sets and clears interface flags (SIOCSIFFLAGS, needs CAP_NET_ADMIN).
pub fn change_flags(name: &str, set: u32, clear: u32) -> Result<()> {
    use std::os::fd::AsRawFd;
    let old = flags(name)?;
    let new = (old | set) & !clear;
    if new == old {
        return Ok(());
    }
    let socket = ioctl_socket()?;
    let mut req = ifreq_for(name)?;
    req.ifr_ifru.ifru_flags = new as u16 as libc::c_short;
    // SAFETY: req names the interface and carries the new flags.
    let rc = unsafe { libc::ioctl(socket.as_raw_fd(), libc::SIOCSIFFLAGS as _, &req) };
    if rc < 0 {
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() == Some(libc::EPERM) {
            return Err(Error::Permission(format!(
                "{name}: changing its flags needs CAP_NET_ADMIN (run as root)"
            )));
        }
        return Err(Error::Io(format!("{name}: changing its flags: {err}")));
    }
    Ok(())
}

/// Brings the interface up (IFF_UP).
pub fn set_up(name: &str) -> Result<()> {
    change_flags(name, libc::IFF_UP as u32, 0)
}

/// IPv4 and IPv6 addresses the kernel has on the interface (getifaddrs(3)),
/// as text. IPv6 link-local addresses are left out: every interface that
/// is up has one, and Linux does not answer IPv4 traffic because of it.
pub fn ip_addresses(name: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs allocates the list; freed below.
    if unsafe { libc::getifaddrs(&mut list) } != 0 {
        return out;
    }
    let mut entry = list;
    while !entry.is_null() {
        // SAFETY: entry is a node of the list getifaddrs returned.
        let node = unsafe { &*entry };
        entry = node.ifa_next;
        if node.ifa_addr.is_null() || node.ifa_name.is_null() {
            continue;
        }
        // SAFETY: ifa_name is a NUL-terminated string.
        let ifname = unsafe { std::ffi::CStr::from_ptr(node.ifa_name) };
        if ifname.to_bytes() != name.as_bytes() {
            continue;
        }
        // SAFETY: ifa_addr points to a sockaddr of the family it names.
        match unsafe { (*node.ifa_addr).sa_family } as i32 {
            libc::AF_INET => {
                // SAFETY: family AF_INET: a sockaddr_in.
                let sin = unsafe { &*(node.ifa_addr as *const libc::sockaddr_in) };
                out.push(std::net::Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)).to_string());
            }
            libc::AF_INET6 => {
                // SAFETY: family AF_INET6: a sockaddr_in6.
                let sin6 = unsafe { &*(node.ifa_addr as *const libc::sockaddr_in6) };
                let address = std::net::Ipv6Addr::from(sin6.sin6_addr.s6_addr);
                if address.segments()[0] & 0xffc0 != 0xfe80 {
                    out.push(address.to_string());
                }
            }
            _ => {}
        }
    }
    // SAFETY: list came from getifaddrs.
    unsafe { libc::freeifaddrs(list) };
    out
}

/// The warning a kernel-backed device prints when the kernel has an IP
/// address on the interface it attaches to: Linux then answers the same
/// traffic itself (ARP replies, TCP RSTs, ICMP unreachable).
pub fn address_warning(name: &str) -> Option<String> {
    let addresses = ip_addresses(name);
    (!addresses.is_empty()).then(|| {
        format!(
            "warning: {name} has the kernel IP address(es) {}: Linux will answer traffic meant for oxnet \
             itself (ARP, ICMP, TCP RST); attach oxnet to an interface without addresses \
             (docs/devices.md)",
            addresses.join(", ")
        )
    })
}

/// One host interface, for `oxnet devices`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interface {
    pub name: String,
    pub kind: String,
    pub mac: Option<[u8; 6]>,
    pub mtu: usize,
    pub up: bool,
    pub addresses: Vec<String>,
}

/// The interfaces of this network namespace, sorted by name.
pub fn list() -> Vec<Interface> {
    let Ok(entries) = std::fs::read_dir("/sys/class/net") else {
        return Vec::new();
    };
    let mut out: Vec<Interface> = entries
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .map(|name| Interface {
            kind: kind(&name),
            mac: mac(&name).ok(),
            mtu: mtu(&name).unwrap_or(0),
            up: link(&name).up,
            addresses: ip_addresses(&name),
            name,
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked_as_the_kernel_does() {
        for good in ["eth0", "veth-a", "tap.1", "a23456789012345"] {
            check_name(good).unwrap();
        }
        for bad in ["", ".", "..", "a/b", "a:b", "a b", "a234567890123456"] {
            assert!(check_name(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn macs_parse_and_bad_ones_do_not() {
        assert_eq!(parse_mac("02:00:0a:ff:00:01\n"), Some([2, 0, 10, 255, 0, 1]));
        for bad in [
            "",
            "02:00:0a:ff:00",
            "02:00:0a:ff:00:01:02",
            "02:00:0a:ff:00:1g",
            "002:00:0a:ff:00:01",
        ] {
            assert_eq!(parse_mac(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn loopback_is_listed_and_missing_interfaces_are_named() {
        let all = list();
        let lo = all.iter().find(|i| i.name == "lo").expect("lo listed");
        assert_eq!(lo.mac, Some([0; 6]));
        assert!(ifindex("lo").unwrap() >= 1);
        let err = ifindex("oxnet-nosuch0").unwrap_err().to_string();
        assert!(err.contains("oxnet-nosuch0") && err.contains("oxnet devices"), "{err}");
    }
}
