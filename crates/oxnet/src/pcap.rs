//! A pcap file writer (the classic libpcap format that tcpdump, tshark and
//! Wireshark read: pcap-savefile(5)).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

/// Magic number of a pcap file with nanosecond time stamps.
const MAGIC_NANOSECONDS: u32 = 0xa1b2_3c4d;
/// LINKTYPE_ETHERNET.
const LINKTYPE_ETHERNET: u32 = 1;
/// Longest frame stored whole.
pub const SNAPLEN: u32 = 65_535;

/// Writes frames to a pcap file.
pub struct PcapWriter {
    out: BufWriter<File>,
    /// Frames written.
    pub frames: u64,
}

impl PcapWriter {
    /// Creates `path` and writes the file header.
    pub fn create(path: &Path) -> std::io::Result<PcapWriter> {
        let file = File::create(path)?;
        let mut out = BufWriter::with_capacity(1 << 20, file);
        // Global header: magic, version 2.4, time zone 0, accuracy 0,
        // snapshot length, link type; in our native byte order (the magic
        // tells readers which it is).
        out.write_all(&MAGIC_NANOSECONDS.to_ne_bytes())?;
        out.write_all(&2u16.to_ne_bytes())?;
        out.write_all(&4u16.to_ne_bytes())?;
        out.write_all(&0i32.to_ne_bytes())?;
        out.write_all(&0u32.to_ne_bytes())?;
        out.write_all(&SNAPLEN.to_ne_bytes())?;
        out.write_all(&LINKTYPE_ETHERNET.to_ne_bytes())?;
        Ok(PcapWriter { out, frames: 0 })
    }

    /// Appends one frame with the current time.
    pub fn write(&mut self, frame: &[u8]) -> std::io::Result<()> {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        let stored = frame.len().min(SNAPLEN as usize);
        self.out.write_all(&(now.as_secs() as u32).to_ne_bytes())?;
        self.out.write_all(&now.subsec_nanos().to_ne_bytes())?;
        self.out.write_all(&(stored as u32).to_ne_bytes())?;
        self.out.write_all(&(frame.len() as u32).to_ne_bytes())?;
        self.out.write_all(&frame[..stored])?;
        self.frames += 1;
        Ok(())
    }

    /// Flushes buffered frames to the file.
    pub fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

/// Reads back a pcap file written by [`PcapWriter`] or by tcpdump on this
/// machine (for tests): the frames. Both time resolutions are read
/// (magic 0xa1b2c3d4: microseconds, 0xa1b23c4d: nanoseconds), in this
/// machine's byte order.
pub fn read_frames(path: &Path) -> std::io::Result<Vec<Vec<u8>>> {
    const MAGIC_MICROSECONDS: u32 = 0xa1b2_c3d4;
    let data = std::fs::read(path)?;
    let bad = |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_string());
    let magic = data.get(0..4).map(|m| u32::from_ne_bytes(m.try_into().unwrap()));
    if data.len() < 24 || !matches!(magic, Some(MAGIC_NANOSECONDS | MAGIC_MICROSECONDS)) {
        return Err(bad("not a pcap file in this machine's byte order"));
    }
    let mut frames = Vec::new();
    let mut at = 24;
    while at < data.len() {
        if at + 16 > data.len() {
            return Err(bad("truncated record header"));
        }
        let len = u32::from_ne_bytes(data[at + 8..at + 12].try_into().unwrap()) as usize;
        at += 16;
        if at + len > data.len() {
            return Err(bad("truncated record"));
        }
        frames.push(data[at..at + len].to_vec());
        at += len;
    }
    Ok(frames)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_and_read_back() {
        let path = std::env::temp_dir().join(format!("oxnet-pcap-test-{}.pcap", std::process::id()));
        let mut w = PcapWriter::create(&path).unwrap();
        w.write(&[1, 2, 3]).unwrap();
        w.write(&[4; 60]).unwrap();
        w.flush().unwrap();
        let frames = read_frames(&path).unwrap();
        std::fs::remove_file(&path).ok();
        assert_eq!(frames, vec![vec![1, 2, 3], vec![4; 60]]);
    }
}
