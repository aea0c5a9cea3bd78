//! `struct sockaddr_in` / `sockaddr_in6` to and from oxnet's endpoints,
//! read and written through raw pointers as C passes them (unaligned
//! reads: C may hand any buffer).

use oxnet_stack::wire::{IpAddress, IpEndpoint};
use std::net::{Ipv4Addr, Ipv6Addr};

/// Reads the endpoint at `addr` (`len` bytes): EFAULT for a null
/// pointer, EINVAL for a length too short for its family, EAFNOSUPPORT
/// for a family other than AF_INET and AF_INET6.
///
/// # Safety
/// `addr` is null or points to `len` readable bytes.
pub unsafe fn read(addr: *const libc::sockaddr, len: libc::socklen_t) -> Result<IpEndpoint, i32> {
    if addr.is_null() {
        return Err(libc::EFAULT);
    }
    let len = len as usize;
    if len < std::mem::size_of::<libc::sa_family_t>() {
        return Err(libc::EINVAL);
    }
    let family = std::ptr::read_unaligned(addr.cast::<libc::sa_family_t>());
    match i32::from(family) {
        libc::AF_INET => {
            if len < std::mem::size_of::<libc::sockaddr_in>() {
                return Err(libc::EINVAL);
            }
            let sin = std::ptr::read_unaligned(addr.cast::<libc::sockaddr_in>());
            let ip = Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
            Ok(IpEndpoint::new(ip, u16::from_be(sin.sin_port)))
        }
        libc::AF_INET6 => {
            if len < std::mem::size_of::<libc::sockaddr_in6>() {
                return Err(libc::EINVAL);
            }
            let sin6 = std::ptr::read_unaligned(addr.cast::<libc::sockaddr_in6>());
            let ip = Ipv6Addr::from(sin6.sin6_addr.s6_addr);
            Ok(IpEndpoint::new(ip, u16::from_be(sin6.sin6_port)))
        }
        _ => Err(libc::EAFNOSUPPORT),
    }
}

/// Writes `ep` to `addr` as accept(2) does: at most `*len` bytes, and
/// `*len` set to the full size. Both null: nothing to write. EFAULT if
/// one only is null.
///
/// # Safety
/// `addr` is null or points to `*len` writable bytes; `len` is null or
/// points to a writable `socklen_t`.
pub unsafe fn write(ep: IpEndpoint, addr: *mut libc::sockaddr, len: *mut libc::socklen_t) -> Result<(), i32> {
    if addr.is_null() && len.is_null() {
        return Ok(());
    }
    if addr.is_null() || len.is_null() {
        return Err(libc::EFAULT);
    }
    let mut storage: libc::sockaddr_storage = std::mem::zeroed();
    let size = match ep.addr {
        IpAddress::V4(a) => {
            let sin = &mut *(&mut storage as *mut libc::sockaddr_storage).cast::<libc::sockaddr_in>();
            sin.sin_family = libc::AF_INET as libc::sa_family_t;
            sin.sin_port = ep.port.to_be();
            sin.sin_addr.s_addr = u32::from(a).to_be();
            std::mem::size_of::<libc::sockaddr_in>()
        }
        IpAddress::V6(a) => {
            let sin6 = &mut *(&mut storage as *mut libc::sockaddr_storage).cast::<libc::sockaddr_in6>();
            sin6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            sin6.sin6_port = ep.port.to_be();
            sin6.sin6_addr.s6_addr = a.octets();
            std::mem::size_of::<libc::sockaddr_in6>()
        }
    };
    let room = std::ptr::read_unaligned(len) as usize;
    std::ptr::copy_nonoverlapping(
        (&storage as *const libc::sockaddr_storage).cast::<u8>(),
        addr.cast::<u8>(),
        room.min(size),
    );
    std::ptr::write_unaligned(len, size as libc::socklen_t);
    Ok(())
}
