//! The few functions of libxdp (xdp-tools 1.3, Debian's `libxdp1`) that
//! oxnet uses, loaded with dlopen(3) at run time.
//!
//! Why dlopen: oxnet must build and run on machines without libxdp; only
//! opening an `af_xdp:` device needs it, and then the error names the
//! package to install and `af_packet:IF` as the fallback.
//!
//! What libxdp does for us: `xsk_umem__create` registers our UMEM and maps
//! the fill and completion rings, `xsk_socket__create` makes the XDP socket,
//! maps its RX and TX rings, binds it, and loads and attaches libxdp's
//! default redirect program (`xsk_def_xdp_prog.o`, which redirects the
//! queue to the socket through its `xsks_map`) behind libxdp's multi-program
//! dispatcher. The ring producer/consumer code of `<xdp/xsk.h>` is inline
//! in the header, not exported: oxnet does that part itself ([`super::ring`]).
//! The `xdp_multiprog__*` functions find and detach a program a crashed
//! oxnet left on an interface ([`super::stale`]).
//!
//! Every prototype below is copied by meaning from `/usr/include/xdp/xsk.h`
//! and `/usr/include/xdp/libxdp.h` of libxdp-dev 1.3.1.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::OnceLock;

/// `struct xsk_umem_config` (xsk.h).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct UmemConfig {
    pub fill_size: u32,
    pub comp_size: u32,
    pub frame_size: u32,
    pub frame_headroom: u32,
    pub flags: u32,
}

/// `struct xsk_socket_config` (xsk.h).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct SocketConfig {
    pub rx_size: u32,
    pub tx_size: u32,
    /// `libxdp_flags` (XSK_LIBXDP_FLAGS__INHIBIT_PROG_LOAD).
    pub libxdp_flags: u32,
    /// XDP_FLAGS_SKB_MODE / XDP_FLAGS_DRV_MODE (linux/if_link.h), 0 = let
    /// libxdp choose (native, falling back to generic).
    pub xdp_flags: u32,
    /// XDP_COPY / XDP_ZEROCOPY / XDP_USE_NEED_WAKEUP (linux/if_xdp.h).
    pub bind_flags: u16,
}

/// linux/if_link.h: attach the program in the generic (skb) path.
pub const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
/// linux/if_link.h: attach the program in the driver (native) path.
pub const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;

/// Opaque libxdp handles.
pub enum XskUmem {}
pub enum XskSocket {}
pub enum XdpMultiprog {}
pub enum XdpProgram {}

type PrintFn = unsafe extern "C" fn(c_int, *const c_char, *mut c_void) -> c_int;
type SetPrintFn = unsafe extern "C" fn(PrintFn) -> *mut c_void;

type UmemCreateFn = unsafe extern "C" fn(
    *mut *mut XskUmem,
    *mut c_void,
    u64,
    *mut super::ring::XskRing,
    *mut super::ring::XskRing,
    *const UmemConfig,
) -> c_int;
type UmemDeleteFn = unsafe extern "C" fn(*mut XskUmem) -> c_int;
type SocketCreateFn = unsafe extern "C" fn(
    *mut *mut XskSocket,
    *const c_char,
    u32,
    *mut XskUmem,
    *mut super::ring::XskRing,
    *mut super::ring::XskRing,
    *const SocketConfig,
) -> c_int;
type SocketDeleteFn = unsafe extern "C" fn(*mut XskSocket);
type SocketFdFn = unsafe extern "C" fn(*const XskSocket) -> c_int;
type MultiprogGetFromIfindexFn = unsafe extern "C" fn(c_int) -> *mut XdpMultiprog;
type MultiprogNextProgFn = unsafe extern "C" fn(*const XdpProgram, *const XdpMultiprog) -> *mut XdpProgram;
type MultiprogMainProgFn = unsafe extern "C" fn(*const XdpMultiprog) -> *mut XdpProgram;
type MultiprogIsLegacyFn = unsafe extern "C" fn(*const XdpMultiprog) -> bool;
type MultiprogDetachFn = unsafe extern "C" fn(*mut XdpMultiprog) -> c_int;
type MultiprogCloseFn = unsafe extern "C" fn(*mut XdpMultiprog);
type ProgramNameFn = unsafe extern "C" fn(*const XdpProgram) -> *const c_char;
type ProgramIdFn = unsafe extern "C" fn(*const XdpProgram) -> u32;
type GetErrorFn = unsafe extern "C" fn(*const c_void) -> std::ffi::c_long;

/// The functions oxnet calls, resolved once per process.
pub struct Libxdp {
    pub umem_create: UmemCreateFn,
    pub umem_delete: UmemDeleteFn,
    pub socket_create: SocketCreateFn,
    pub socket_delete: SocketDeleteFn,
    pub socket_fd: SocketFdFn,
    pub multiprog_get_from_ifindex: MultiprogGetFromIfindexFn,
    pub multiprog_next_prog: MultiprogNextProgFn,
    pub multiprog_main_prog: MultiprogMainProgFn,
    pub multiprog_is_legacy: MultiprogIsLegacyFn,
    pub multiprog_detach: MultiprogDetachFn,
    pub multiprog_close: MultiprogCloseFn,
    pub program_name: ProgramNameFn,
    pub program_id: ProgramIdFn,
    pub get_error: GetErrorFn,
}

// SAFETY: function pointers into a library that stays loaded for the
// whole process (never dlclose'd); libxdp's functions are thread-safe for
// distinct objects.
unsafe impl Send for Libxdp {}
// SAFETY: as above.
unsafe impl Sync for Libxdp {}

/// The soname of Debian's package `libxdp1`.
pub const SONAME: &str = "libxdp.so.1";

/// What to tell a user whose machine lacks libxdp.
pub fn missing_hint() -> &'static str {
    "install it with `apt-get install libxdp1` (xdp-tools 1.3 or later; it ships the default \
     redirect program xsk_def_xdp_prog.o), or use af_packet:IF instead"
}

/// libxdp, loaded on first use; an error says what is missing and what
/// to do.
pub fn get() -> Result<&'static Libxdp, String> {
    static LIB: OnceLock<Result<Libxdp, String>> = OnceLock::new();
    LIB.get_or_init(load).as_ref().map_err(Clone::clone)
}

fn dlerror() -> String {
    // SAFETY: dlerror returns NULL or a NUL-terminated string valid until
    // the next dl* call on this thread; copied at once.
    let e = unsafe { libc::dlerror() };
    if e.is_null() {
        "unknown dlopen error".into()
    } else {
        // SAFETY: non-null, NUL-terminated (above).
        unsafe { CStr::from_ptr(e) }.to_string_lossy().into_owned()
    }
}

/// Environment variable naming another libxdp to load (a path or soname;
/// for a libxdp outside the linker's path, and for the test of the
/// missing-library error).
pub const ENV: &str = "OXNET_LIBXDP";

fn load() -> Result<Libxdp, String> {
    let name = std::env::var(ENV).unwrap_or_else(|_| SONAME.to_string());
    let Ok(soname) = std::ffi::CString::new(name.as_str()) else {
        return Err(format!("{ENV}={name:?} is not a file name"));
    };
    // SAFETY: dlopen with a valid C string; the handle is kept for the
    // lifetime of the process (never closed).
    let handle = unsafe { libc::dlopen(soname.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    if handle.is_null() {
        return Err(format!(
            "{SONAME} could not be loaded ({}): {}",
            dlerror(),
            missing_hint()
        ));
    }
    let sym = |name: &str| -> Result<*mut c_void, String> {
        let c = std::ffi::CString::new(name).expect("no NUL in symbol name");
        // SAFETY: handle is a live dlopen handle; c is NUL-terminated.
        let p = unsafe { libc::dlsym(handle, c.as_ptr()) };
        if p.is_null() {
            Err(format!(
                "{SONAME} has no symbol {name} (too old a libxdp?): {}",
                missing_hint()
            ))
        } else {
            Ok(p)
        }
    };
    // SAFETY (every transmute below): the symbol is the libxdp 1.3 function
    // of that name, whose C prototype (xsk.h, libxdp.h) matches the Rust
    // function pointer type it is turned into.
    let lib = unsafe {
        Libxdp {
            umem_create: std::mem::transmute::<*mut c_void, UmemCreateFn>(sym("xsk_umem__create")?),
            umem_delete: std::mem::transmute::<*mut c_void, UmemDeleteFn>(sym("xsk_umem__delete")?),
            socket_create: std::mem::transmute::<*mut c_void, SocketCreateFn>(sym("xsk_socket__create")?),
            socket_delete: std::mem::transmute::<*mut c_void, SocketDeleteFn>(sym("xsk_socket__delete")?),
            socket_fd: std::mem::transmute::<*mut c_void, SocketFdFn>(sym("xsk_socket__fd")?),
            multiprog_get_from_ifindex: std::mem::transmute::<*mut c_void, MultiprogGetFromIfindexFn>(sym(
                "xdp_multiprog__get_from_ifindex",
            )?),
            multiprog_next_prog: std::mem::transmute::<*mut c_void, MultiprogNextProgFn>(sym(
                "xdp_multiprog__next_prog",
            )?),
            multiprog_main_prog: std::mem::transmute::<*mut c_void, MultiprogMainProgFn>(sym(
                "xdp_multiprog__main_prog",
            )?),
            multiprog_is_legacy: std::mem::transmute::<*mut c_void, MultiprogIsLegacyFn>(sym(
                "xdp_multiprog__is_legacy",
            )?),
            multiprog_detach: std::mem::transmute::<*mut c_void, MultiprogDetachFn>(sym("xdp_multiprog__detach")?),
            multiprog_close: std::mem::transmute::<*mut c_void, MultiprogCloseFn>(sym("xdp_multiprog__close")?),
            program_name: std::mem::transmute::<*mut c_void, ProgramNameFn>(sym("xdp_program__name")?),
            program_id: std::mem::transmute::<*mut c_void, ProgramIdFn>(sym("xdp_program__id")?),
            get_error: std::mem::transmute::<*mut c_void, GetErrorFn>(sym("libxdp_get_error")?),
        }
    };
    // libxdp and libbpf print their diagnostics to stderr by default; we
    // collect them instead and add them to our own error messages, which
    // say what they mean ([`take_messages`]).
    if let Ok(set_print) = sym("libxdp_set_print") {
        // SAFETY: libxdp_print_fn_t libxdp_set_print(libxdp_print_fn_t fn).
        let set_print = unsafe { std::mem::transmute::<*mut c_void, SetPrintFn>(set_print) };
        // SAFETY: collect has the libxdp_print_fn_t signature.
        unsafe { set_print(collect) };
    }
    let bpf = std::ffi::CString::new("libbpf.so.1").expect("no NUL");
    // SAFETY: RTLD_NOLOAD only returns the handle of the libbpf that
    // libxdp already loaded (or NULL); never closed.
    let libbpf = unsafe { libc::dlopen(bpf.as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD) };
    if !libbpf.is_null() {
        let name = std::ffi::CString::new("libbpf_set_print").expect("no NUL");
        // SAFETY: live handle, NUL-terminated name.
        let p = unsafe { libc::dlsym(libbpf, name.as_ptr()) };
        if !p.is_null() {
            // SAFETY: libbpf_print_fn_t libbpf_set_print(libbpf_print_fn_t),
            // same callback signature as libxdp's.
            let set_print = unsafe { std::mem::transmute::<*mut c_void, SetPrintFn>(p) };
            // SAFETY: collect has the libbpf_print_fn_t signature.
            unsafe { set_print(collect) };
        }
    }
    Ok(lib)
}

extern "C" {
    /// vsnprintf(3): `ap` is a `va_list`, which on the ABIs Linux runs on
    /// is passed to a function as one pointer-sized argument.
    fn vsnprintf(buf: *mut c_char, size: usize, fmt: *const c_char, ap: *mut c_void) -> c_int;
}

thread_local! {
    static MESSAGES: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
}

/// LIBXDP_WARN / LIBBPF_WARN = 0, INFO = 1, DEBUG = 2 (libxdp.h, libbpf.h).
const PRINT_INFO: c_int = 1;

unsafe extern "C" fn collect(level: c_int, fmt: *const c_char, ap: *mut c_void) -> c_int {
    if level > PRINT_INFO || fmt.is_null() {
        return 0;
    }
    // libbpf's notes about ELF sections it does not know (libxdp's
    // metadata sections) are noise, not causes.
    // SAFETY: fmt is a NUL-terminated format string from the library.
    if unsafe { CStr::from_ptr(fmt) }.to_bytes().starts_with(b"elf: skipping") {
        return 0;
    }
    let mut buf = [0 as c_char; 512];
    // SAFETY: buf is writable for its length; fmt and ap come from the
    // library's own printf-style call.
    let n = unsafe { vsnprintf(buf.as_mut_ptr(), buf.len(), fmt, ap) };
    if n > 0 {
        // SAFETY: vsnprintf NUL-terminates within buf.
        let text = unsafe { CStr::from_ptr(buf.as_ptr()) }
            .to_string_lossy()
            .trim()
            .to_string();
        MESSAGES.with(|m| {
            let mut m = m.borrow_mut();
            if m.len() < 4096 && !text.is_empty() {
                if !m.is_empty() {
                    m.push_str("; ");
                }
                m.push_str(&text);
            }
        });
    }
    0
}

/// The messages libxdp and libbpf printed on this thread since the last
/// call (empty if none).
pub fn take_messages() -> String {
    MESSAGES.with(|m| std::mem::take(&mut *m.borrow_mut()))
}
