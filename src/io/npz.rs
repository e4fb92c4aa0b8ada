//! The `.npz` writer: an uncompressed ZIP64 archive of `.npy` arrays, laid out up front and
//! filled side by side as chunks arrive (numpy, Python's zipfile and `unzip -t` read it). Its
//! bytes are reproducible: the same rows give the same file.

use std::io::{Read, Seek, SeekFrom, Write};

use super::columns::{ColumnSpec, Values};
use super::npy;

/// A `.npz` (an uncompressed ZIP64 archive of `.npy` arrays) whose size is known up front: each
/// array's region is laid out at creation and filled as chunks arrive, so the arrays grow side
/// by side without holding any of them in memory. CRCs are computed on the way and the headers
/// written last.
pub(super) struct NpzWriter {
    file: Box<dyn Storage>,
    /// Where the arrays end and the central directory starts.
    end_of_data: u64,
    entries: Vec<NpzEntry>,
    scratch: Vec<u8>,
}

struct NpzEntry {
    name: String,
    /// Where the array's values start.
    data_offset: u64,
    /// Where the entry's local header starts.
    header_offset: u64,
    /// Where its next row goes.
    next_offset: u64,
    /// The whole `.npy` (header and data).
    size: u64,
    crc: crc32fast::Hasher,
}

// ZIP record signatures and the fixed parts of the records we write (APPNOTE 6.3).
const LOCAL_HEADER: u32 = 0x0403_4b50;
const CENTRAL_HEADER: u32 = 0x0201_4b50;
const ZIP64_END: u32 = 0x0606_4b50;
const ZIP64_LOCATOR: u32 = 0x0706_4b50;
const END_OF_DIRECTORY: u32 = 0x0605_4b50;
/// "Version needed to extract" for ZIP64.
const ZIP64_VERSION: u16 = 45;
const LOCAL_HEADER_BYTES: u64 = 30;
/// The ZIP64 extra field of a local header: tag, length, sizes (uncompressed, compressed).
const LOCAL_EXTRA_BYTES: u16 = 4 + 16;
/// The ZIP64 extra field of a central header: the two sizes and the local header's offset.
const CENTRAL_EXTRA_BYTES: u16 = 4 + 24;
/// 1980-01-01 00:00, the earliest DOS date: archives are byte-for-byte reproducible.
const DOS_DATE: u16 = (1 << 5) | 1;

/// A small array written whole when an `.npz` is laid out (a grid's `origin`, `spacing`,
/// `shape`).
#[derive(Clone, Debug)]
pub struct Constant {
    pub name: &'static str,
    descr: &'static str,
    bytes: Vec<u8>,
    /// The array's shape: (len,), or () for a scalar.
    shape: Vec<usize>,
}

impl Constant {
    pub fn f64s(name: &'static str, values: &[f64]) -> Constant {
        Constant {
            name,
            descr: "<f8",
            bytes: values.iter().flat_map(|x| x.to_le_bytes()).collect(),
            shape: vec![values.len()],
        }
    }

    pub fn i64s(name: &'static str, values: &[i64]) -> Constant {
        Constant {
            name,
            descr: "<i8",
            bytes: values.iter().flat_map(|x| x.to_le_bytes()).collect(),
            shape: vec![values.len()],
        }
    }

    /// One f64 as a 0-d array (numpy's scalar: `float(npz["name"])` reads it).
    pub fn f64_scalar(name: &'static str, value: f64) -> Constant {
        Constant {
            shape: Vec::new(),
            ..Constant::f64s(name, &[value])
        }
    }

    /// One i64 as a 0-d array.
    pub fn i64_scalar(name: &'static str, value: i64) -> Constant {
        Constant {
            shape: Vec::new(),
            ..Constant::i64s(name, &[value])
        }
    }

    /// The values as a JSON array (a Zarr store's attribute).
    pub fn to_json(&self) -> serde_json::Value {
        let words = self
            .bytes
            .chunks_exact(8)
            .map(|b| b.try_into().expect("8 bytes"));
        match self.descr {
            "<f8" => words
                .map(|w| serde_json::Value::from(f64::from_le_bytes(w)))
                .collect(),
            "<i8" => words
                .map(|w| serde_json::Value::from(i64::from_le_bytes(w)))
                .collect(),
            other => unreachable!("constants are f8 or i8, not {other}"),
        }
    }
}

/// Where an `.npz` is laid out: a file, or memory (the service's responses).
pub(super) trait Storage: Read + Write + Seek + Send {}
impl<T: Read + Write + Seek + Send> Storage for T {}

/// An `.npz` of `columns` in memory, all `rows` rows given at once by `values`, plus small
/// `constants` (the service's response bodies; byte for byte what a job writes to a file).
pub fn npz_in_memory(
    rows: usize,
    columns: &[ColumnSpec],
    constants: &[Constant],
    values: &[Values<'_>],
) -> Vec<u8> {
    let mut npz = NpzInMemory::new(rows, columns, constants);
    npz.append(rows, values);
    npz.finish()
}

/// An `.npz` built in memory as chunks arrive ([`npz_in_memory`] a chunk at a time), so that a
/// large answer is held once, not also as the values it is made of.
pub struct NpzInMemory {
    writer: NpzWriter,
    memory: MemoryFile,
    columns: Vec<ColumnSpec>,
}

impl NpzInMemory {
    /// Room for the columns' data is taken at once (headers grow it by a little).
    pub fn new(rows: usize, columns: &[ColumnSpec], constants: &[Constant]) -> NpzInMemory {
        let data: usize = columns.iter().map(|c| c.data_bytes(rows)).sum();
        let memory = MemoryFile(std::sync::Arc::new(std::sync::Mutex::new(
            std::io::Cursor::new(Vec::with_capacity(data)),
        )));
        let writer = NpzWriter::new(Box::new(memory.clone()), rows, columns, constants)
            .expect("writing to memory does not fail");
        NpzInMemory {
            writer,
            memory,
            columns: columns.to_vec(),
        }
    }

    /// The next `count` rows of every column.
    pub fn append(&mut self, count: usize, values: &[Values<'_>]) {
        self.writer
            .append(count, &self.columns, values)
            .expect("writing to memory does not fail");
    }

    /// The archive's bytes, its headers written.
    pub fn finish(self) -> Vec<u8> {
        self.writer
            .finish()
            .expect("writing to memory does not fail");
        let cursor = std::mem::take(&mut *self.memory.0.lock().expect("not poisoned"));
        cursor.into_inner()
    }
}

/// A growable in-memory file the writer and its caller share.
#[derive(Clone, Default)]
struct MemoryFile(std::sync::Arc<std::sync::Mutex<std::io::Cursor<Vec<u8>>>>);

impl Read for MemoryFile {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.0.lock().expect("not poisoned").read(buf)
    }
}

impl Write for MemoryFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("not poisoned").write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Seek for MemoryFile {
    fn seek(&mut self, to: SeekFrom) -> std::io::Result<u64> {
        self.0.lock().expect("not poisoned").seek(to)
    }
}

impl NpzWriter {
    pub(super) fn new(
        mut file: Box<dyn Storage>,
        rows: usize,
        columns: &[ColumnSpec],
        constants: &[Constant],
    ) -> std::io::Result<NpzWriter> {
        let mut entries = Vec::with_capacity(columns.len() + constants.len());
        let mut offset = 0u64;
        // Columns first (`append` fills them in order), then the constants, written now.
        let arrays = columns
            .iter()
            .map(|c| {
                (
                    c.name,
                    c.kind.descr(),
                    c.npy_shape(rows),
                    c.data_bytes(rows),
                    None,
                )
            })
            .chain(constants.iter().map(|c| {
                (
                    c.name,
                    c.descr,
                    c.shape.clone(),
                    c.bytes.len(),
                    Some(&c.bytes),
                )
            }));
        for (array, descr, shape, data, values) in arrays {
            let name = format!("{array}.npy");
            let mut npy_header = Vec::new();
            npy::write_header(&mut npy_header, descr, &shape)?;
            let data = data as u64;
            let header_offset = offset;
            let npy_offset =
                header_offset + LOCAL_HEADER_BYTES + name.len() as u64 + LOCAL_EXTRA_BYTES as u64;
            file.seek(SeekFrom::Start(npy_offset))?;
            file.write_all(&npy_header)?;
            let mut crc = crc32fast::Hasher::new();
            crc.update(&npy_header);
            let size = npy_header.len() as u64 + data;
            let mut next_offset = npy_offset + npy_header.len() as u64;
            if let Some(bytes) = values {
                file.write_all(bytes)?;
                crc.update(bytes);
                next_offset += bytes.len() as u64;
            }
            entries.push(NpzEntry {
                name,
                data_offset: npy_offset + npy_header.len() as u64,
                header_offset,
                next_offset,
                size,
                crc,
            });
            offset = npy_offset + size;
        }
        Ok(NpzWriter {
            file,
            end_of_data: offset,
            entries,
            scratch: Vec::new(),
        })
    }

    pub(super) fn append(
        &mut self,
        count: usize,
        columns: &[ColumnSpec],
        values: &[Values<'_>],
    ) -> std::io::Result<()> {
        for ((entry, column), values) in self.entries.iter_mut().zip(columns).zip(values) {
            let bytes = values.bytes(count, column.width, &mut self.scratch);
            entry.crc = parallel_crc(&entry.crc, bytes);
            self.file.seek(SeekFrom::Start(entry.next_offset))?;
            self.file.write_all(bytes)?;
            entry.next_offset += bytes.len() as u64;
        }
        Ok(())
    }

    /// Append `count` rows to one column alone (an archive whose arrays differ in length).
    pub(super) fn append_to(
        &mut self,
        column: usize,
        count: usize,
        spec: &ColumnSpec,
        values: &Values<'_>,
    ) -> std::io::Result<()> {
        let entry = &mut self.entries[column];
        let bytes = values.bytes(count, spec.width, &mut self.scratch);
        entry.crc = parallel_crc(&entry.crc, bytes);
        self.file.seek(SeekFrom::Start(entry.next_offset))?;
        self.file.write_all(bytes)?;
        entry.next_offset += bytes.len() as u64;
        Ok(())
    }

    /// Read back f32 values `first ..` of column `column`, already appended.
    pub(super) fn read_f32s(
        &mut self,
        column: usize,
        first: u64,
        out: &mut [f32],
    ) -> std::io::Result<()> {
        let at = self.entries[column].data_offset + first * 4;
        self.file.seek(SeekFrom::Start(at))?;
        self.file.read_exact(bytemuck::cast_slice_mut(out))
    }

    /// Write the local headers, the central directory and the end records.
    pub(super) fn finish(mut self) -> std::io::Result<()> {
        let end_of_data = self.end_of_data;
        let crcs: Vec<u32> = self
            .entries
            .iter()
            .map(|e| e.crc.clone().finalize())
            .collect();
        for (entry, &crc) in self.entries.iter().zip(&crcs) {
            let mut header = Vec::new();
            put32(&mut header, LOCAL_HEADER);
            put16(&mut header, ZIP64_VERSION);
            entry.put_common(&mut header, crc);
            put16(&mut header, entry.name.len() as u16);
            put16(&mut header, LOCAL_EXTRA_BYTES);
            header.extend_from_slice(entry.name.as_bytes());
            put16(&mut header, 0x0001);
            put16(&mut header, LOCAL_EXTRA_BYTES - 4);
            put64(&mut header, entry.size);
            put64(&mut header, entry.size);
            self.file.seek(SeekFrom::Start(entry.header_offset))?;
            self.file.write_all(&header)?;
        }

        let mut directory = Vec::new();
        for (entry, &crc) in self.entries.iter().zip(&crcs) {
            put32(&mut directory, CENTRAL_HEADER);
            put16(&mut directory, ZIP64_VERSION); // made by: MS-DOS attributes, spec 4.5
            put16(&mut directory, ZIP64_VERSION);
            entry.put_common(&mut directory, crc);
            put16(&mut directory, entry.name.len() as u16);
            put16(&mut directory, CENTRAL_EXTRA_BYTES);
            put16(&mut directory, 0); // comment length
            put16(&mut directory, 0); // disk number
            put16(&mut directory, 0); // internal attributes
            put32(&mut directory, 0); // external attributes
            put32(&mut directory, u32::MAX); // local header offset: in the ZIP64 field
            directory.extend_from_slice(entry.name.as_bytes());
            put16(&mut directory, 0x0001);
            put16(&mut directory, CENTRAL_EXTRA_BYTES - 4);
            put64(&mut directory, entry.size);
            put64(&mut directory, entry.size);
            put64(&mut directory, entry.header_offset);
        }
        let count = self.entries.len() as u64;
        let directory_size = directory.len() as u64;
        let zip64_end_offset = end_of_data + directory_size;
        put32(&mut directory, ZIP64_END);
        put64(&mut directory, 44); // size of the rest of this record
        put16(&mut directory, ZIP64_VERSION);
        put16(&mut directory, ZIP64_VERSION);
        put32(&mut directory, 0); // this disk
        put32(&mut directory, 0); // disk of the directory
        put64(&mut directory, count);
        put64(&mut directory, count);
        put64(&mut directory, directory_size);
        put64(&mut directory, end_of_data);
        put32(&mut directory, ZIP64_LOCATOR);
        put32(&mut directory, 0);
        put64(&mut directory, zip64_end_offset);
        put32(&mut directory, 1); // disks
        put32(&mut directory, END_OF_DIRECTORY);
        put16(&mut directory, 0);
        put16(&mut directory, 0);
        put16(&mut directory, count as u16);
        put16(&mut directory, count as u16);
        put32(&mut directory, clamp32(directory_size));
        put32(&mut directory, clamp32(end_of_data));
        put16(&mut directory, 0); // comment length
        self.file.seek(SeekFrom::Start(end_of_data))?;
        self.file.write_all(&directory)?;
        self.file.flush()
    }
}

/// `crc` carried on over `bytes`, pieces of them hashed on all cores and combined in order.
fn parallel_crc(crc: &crc32fast::Hasher, bytes: &[u8]) -> crc32fast::Hasher {
    use rayon::prelude::*;
    const PIECE_BYTES: usize = 1 << 20;
    bytes
        .par_chunks(PIECE_BYTES)
        .map(|piece| {
            let mut h = crc32fast::Hasher::new();
            h.update(piece);
            h
        })
        .collect::<Vec<_>>()
        .into_iter()
        .fold(crc.clone(), |mut whole, piece| {
            whole.combine(&piece);
            whole
        })
}

impl NpzEntry {
    /// Flags, method, time, date, CRC and the two 32-bit sizes (which defer to ZIP64).
    fn put_common(&self, out: &mut Vec<u8>, crc: u32) {
        put16(out, 0); // flags
        put16(out, 0); // stored
        put16(out, 0); // time
        put16(out, DOS_DATE);
        put32(out, crc);
        put32(out, u32::MAX);
        put32(out, u32::MAX);
    }
}

/// A 32-bit field, or the marker that sends readers to the ZIP64 record.
fn clamp32(value: u64) -> u32 {
    u32::try_from(value).unwrap_or(u32::MAX)
}

fn put16(out: &mut Vec<u8>, v: u16) {
    out.extend_from_slice(&v.to_le_bytes());
}
fn put32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}
fn put64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}
