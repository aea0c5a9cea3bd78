//! Test helpers: drive the model at register level, the way a driver would,
//! with offsets written out from the datasheet (no driver code involved).
#![allow(dead_code)]

use oxnet_driver::memory::DmaMemory;
use oxnet_driver::{MemoryKind, RegisterAccess};
use oxnet_sim::SimRegisters;

pub const CTRL: u32 = 0x00000;
pub const CTRL_LRST: u32 = 1 << 3;
pub const CTRL_RST: u32 = 1 << 26;
pub const STATUS: u32 = 0x00008;
pub const EEC: u32 = 0x10010;
pub const EEC_ARD: u32 = 1 << 9;
pub const EIMC: u32 = 0x00888;
pub const RDRXCTL: u32 = 0x02F00;
pub const RDRXCTL_CRCSTRIP: u32 = 1 << 1;
pub const RDRXCTL_DMAIDONE: u32 = 1 << 3;
pub const RXCTRL: u32 = 0x03000;
pub const RXPBSIZE0: u32 = 0x03C00;
pub const HLREG0: u32 = 0x04240;
pub const HLREG0_TXCRCEN: u32 = 1 << 0;
pub const HLREG0_RXCRCSTRP: u32 = 1 << 1;
pub const HLREG0_TXPADEN: u32 = 1 << 10;
pub const HLREG0_LPBK: u32 = 1 << 15;
pub const AUTOC: u32 = 0x042A0;
pub const LINKS: u32 = 0x042A4;
pub const MFLCN: u32 = 0x04294;
pub const FCRTL0: u32 = 0x03220;
pub const FCRTH0: u32 = 0x03260;
pub const FCCFG: u32 = 0x03D00;
pub const FCTRL: u32 = 0x05080;
pub const FCTRL_MPE: u32 = 1 << 8;
pub const FCTRL_UPE: u32 = 1 << 9;
pub const FCTRL_BAM: u32 = 1 << 10;
pub const RAL0: u32 = 0x0A200;
pub const RAH0: u32 = 0x0A204;
pub const DMATXCTL: u32 = 0x04A80;
pub const ENABLE: u32 = 1 << 25;

pub const RDBAL: u32 = 0x01000;
pub const RDBAH: u32 = 0x01004;
pub const RDLEN: u32 = 0x01008;
pub const RDH: u32 = 0x01010;
pub const SRRCTL: u32 = 0x01014;
pub const RDT: u32 = 0x01018;
pub const RXDCTL: u32 = 0x01028;
pub const SRRCTL_ADV_ONE_BUFFER: u32 = 1 << 25;

pub const TDBAL: u32 = 0x06000;
pub const TDBAH: u32 = 0x06004;
pub const TDLEN: u32 = 0x06008;
pub const TDH: u32 = 0x06010;
pub const TDT: u32 = 0x06018;
pub const TXDCTL: u32 = 0x06028;

pub const CRCERRS: u32 = 0x04000;
pub const GPRC: u32 = 0x04074;
pub const GPTC: u32 = 0x04080;
pub const GORCL: u32 = 0x04088;
pub const GORCH: u32 = 0x0408C;
pub const GOTCL: u32 = 0x04090;
pub const GOTCH: u32 = 0x04094;
pub const RUC: u32 = 0x040A4;
pub const MPC0: u32 = 0x03FA0;
pub const LXONTXC: u32 = 0x03F60;
pub const LXONRXCNT: u32 = 0x041A4;
pub const LXOFFTXC: u32 = 0x03F68;
pub const LXOFFRXCNT: u32 = 0x041A8;

/// RX write-back status bits (§7.1.6.2).
pub const RX_DD: u32 = 1 << 0;
pub const RX_EOP: u32 = 1 << 1;

/// Polls `offset` until `bit` is `set`, returning how many reads it took.
pub fn poll(regs: &SimRegisters, offset: u32, bit: u32, set: bool) -> usize {
    for reads in 1..=100 {
        if (regs.read32(offset) & bit != 0) == set {
            return reads;
        }
    }
    panic!("register {offset:#x} bit {bit:#x} never became {set}");
}

/// §4.6.3: reset, then wait for EEPROM auto-read and DMA init.
pub fn reset(regs: &SimRegisters) {
    regs.write32(CTRL, CTRL_RST);
    poll(regs, CTRL, CTRL_RST, false);
    poll(regs, EEC, EEC_ARD, true);
    poll(regs, RDRXCTL, RDRXCTL_DMAIDONE, true);
}

/// The 36-bit octet counter of a low/high pair.
pub fn read_octets(regs: &SimRegisters, low: u32, high: u32) -> u64 {
    let low = u64::from(regs.read32(low));
    low | (u64::from(regs.read32(high)) << 32)
}

/// An Ethernet frame without FCS: `len` bytes to `destination`, payload
/// bytes all `fill`.
pub fn frame(destination: [u8; 6], len: usize, fill: u8) -> Vec<u8> {
    let mut frame = destination.to_vec();
    frame.extend_from_slice(&[0x02, 0, 0, 0, 0, 0x99]); // source
    frame.extend_from_slice(&[0x88, 0xB5]); // IEEE local experimental EtherType
    frame.resize(len, fill);
    frame
}

/// A receive ring of queue 0 set up by hand in plain DMA memory.
pub struct RxRing {
    pub mem: DmaMemory,
    pub size: usize,
    pub buffer_size: usize,
    buffers_at: usize,
}

impl RxRing {
    fn descriptor(&self, i: usize) -> *mut u8 {
        assert!(i < self.size);
        // SAFETY: inside the allocation.
        unsafe { self.mem.virt().add(i * 16) }
    }

    fn dword(&self, i: usize, n: usize) -> u32 {
        // SAFETY: 16-byte descriptor inside the allocation.
        unsafe { std::ptr::read_volatile(self.descriptor(i).add(4 * n) as *const u32) }
    }

    /// Extended status (dword 2 of the write-back format).
    pub fn status(&self, i: usize) -> u32 {
        self.dword(i, 2)
    }

    /// PKT_LEN (dword 3 bits 15:0).
    pub fn length(&self, i: usize) -> usize {
        (self.dword(i, 3) & 0xFFFF) as usize
    }

    /// The first `len` bytes of descriptor `i`'s buffer.
    pub fn data(&self, i: usize, len: usize) -> Vec<u8> {
        // SAFETY: inside the allocation.
        unsafe { std::slice::from_raw_parts(self.mem.virt().add(self.buffers_at + i * self.buffer_size), len).to_vec() }
    }

    /// Puts descriptor `i` back in read format (buffer address, header 0).
    pub fn arm(&self, i: usize) {
        self.arm_with_address(i, self.mem.iova(self.buffers_at + i * self.buffer_size));
    }

    /// Read format with an arbitrary packet buffer address.
    pub fn arm_with_address(&self, i: usize, address: u64) {
        // SAFETY: 16-byte descriptor inside the allocation.
        unsafe {
            std::ptr::write_volatile(self.descriptor(i) as *mut u64, address);
            std::ptr::write_volatile(self.descriptor(i).add(8) as *mut u64, 0);
        }
    }
}

/// Sets up receive queue 0 with `size` descriptors of `buffer_kb` KB
/// buffers, CRC strip as given, broadcast accepted, RDT = `tail`, and
/// enables the receiver.
pub fn setup_rx(regs: &SimRegisters, size: usize, buffer_kb: usize, strip: bool, tail: usize) -> RxRing {
    let buffer_size = buffer_kb * 1024;
    let buffers_at = (size * 16).next_multiple_of(4096);
    let mem = DmaMemory::allocate(buffers_at + size * buffer_size, MemoryKind::Plain).unwrap();
    let ring = RxRing {
        mem,
        size,
        buffer_size,
        buffers_at,
    };
    for i in 0..size {
        ring.arm(i);
    }
    let base = ring.mem.iova(0);
    regs.write32(RDBAL, base as u32);
    regs.write32(RDBAH, (base >> 32) as u32);
    regs.write32(RDLEN, (size * 16) as u32);
    regs.write32(SRRCTL, SRRCTL_ADV_ONE_BUFFER | buffer_kb as u32);
    let (hlreg0, rdrxctl) = (regs.read32(HLREG0), regs.read32(RDRXCTL));
    if strip {
        regs.write32(HLREG0, hlreg0 | HLREG0_RXCRCSTRP);
        regs.write32(RDRXCTL, rdrxctl | RDRXCTL_CRCSTRIP);
    } else {
        regs.write32(HLREG0, hlreg0 & !HLREG0_RXCRCSTRP);
        regs.write32(RDRXCTL, rdrxctl & !RDRXCTL_CRCSTRIP);
    }
    regs.write32(FCTRL, FCTRL_BAM);
    regs.write32(RDH, 0);
    regs.write32(RXDCTL, ENABLE);
    poll(regs, RXDCTL, ENABLE, true);
    write_tail(regs, RDT, tail as u32);
    regs.write32(RXCTRL, 1);
    ring
}

/// A transmit ring of queue 0 with one buffer of `buffer_size` bytes per descriptor.
pub struct TxRing {
    pub mem: DmaMemory,
    pub size: usize,
    pub tail: usize,
    buffer_size: usize,
    buffers_at: usize,
}

/// Advanced data descriptor command bits (§7.2.3.2.4).
pub const DTYP_DATA: u32 = 0b0011 << 20;
pub const DCMD_EOP: u32 = 1 << 24;
pub const DCMD_IFCS: u32 = 1 << 25;
pub const DCMD_RS: u32 = 1 << 27;
pub const DCMD_DEXT: u32 = 1 << 29;

impl TxRing {
    fn descriptor(&self, i: usize) -> *mut u8 {
        assert!(i < self.size);
        // SAFETY: inside the allocation.
        unsafe { self.mem.virt().add(i * 16) }
    }

    /// Writes descriptor `tail` for `data` (copied into its buffer) with the
    /// given command bits, and moves the local tail on (not TDT).
    pub fn put(&mut self, data: &[u8], command: u32) {
        let i = self.tail;
        let offset = self.buffers_at + i * self.buffer_size;
        assert!(data.len() <= self.buffer_size);
        // SAFETY: buffer and descriptor inside the allocation.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), self.mem.virt().add(offset), data.len());
            self.put_raw(self.mem.iova(offset), command | data.len() as u32);
        }
    }

    /// Writes descriptor `tail` with any address and dword 2.
    pub fn put_raw(&mut self, address: u64, dword2: u32) {
        let desc = self.descriptor(self.tail);
        // SAFETY: 16-byte descriptor inside the allocation.
        unsafe {
            std::ptr::write_volatile(desc as *mut u64, address);
            std::ptr::write_volatile(desc.add(8) as *mut u32, dword2);
            std::ptr::write_volatile(desc.add(12) as *mut u32, 0);
        }
        self.tail = (self.tail + 1) % self.size;
    }

    /// One single-descriptor packet with EOP|IFCS (and RS if asked).
    pub fn put_packet(&mut self, data: &[u8], rs: bool) {
        let rs = if rs { DCMD_RS } else { 0 };
        self.put(data, DTYP_DATA | DCMD_DEXT | DCMD_EOP | DCMD_IFCS | rs);
    }

    /// Writes TDT = local tail.
    pub fn flush(&self, regs: &SimRegisters) {
        write_tail(regs, TDT, self.tail as u32);
    }

    /// DD (STA bit 0 of dword 3) of descriptor `i`.
    pub fn done(&self, i: usize) -> bool {
        // SAFETY: inside the allocation.
        unsafe { std::ptr::read_volatile(self.descriptor(i).add(12) as *const u32) & 1 != 0 }
    }
}

/// Sets up transmit queue 0 with `size` descriptors of 2 KB buffers,
/// CRC insertion and padding on, and enables the transmitter.
pub fn setup_tx(regs: &SimRegisters, size: usize) -> TxRing {
    let buffer_size = 2048;
    let buffers_at = (size * 16).next_multiple_of(4096);
    let mem = DmaMemory::allocate(buffers_at + size * buffer_size, MemoryKind::Plain).unwrap();
    let base = mem.iova(0);
    regs.write32(HLREG0, regs.read32(HLREG0) | HLREG0_TXCRCEN | HLREG0_TXPADEN);
    regs.write32(TDBAL, base as u32);
    regs.write32(TDBAH, (base >> 32) as u32);
    regs.write32(TDLEN, (size * 16) as u32);
    regs.write32(TDH, 0);
    regs.write32(TDT, 0);
    regs.write32(DMATXCTL, 1);
    regs.write32(TXDCTL, ENABLE);
    poll(regs, TXDCTL, ENABLE, true);
    TxRing {
        mem,
        size,
        tail: 0,
        buffer_size,
        buffers_at,
    }
}

/// Writes a tail register (RDT/TDT) as a driver must: a read barrier after
/// the statuses it has read (the slots it hands back were written back by
/// the device), a write barrier after its descriptor writes, then the
/// tail. The model checks both (its ordering.rs).
pub fn write_tail(regs: &SimRegisters, offset: u32, value: u32) {
    regs.acquire_after_status();
    regs.release_before_tail();
    regs.write32(offset, value);
}
