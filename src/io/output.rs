//! Results files (SPEC §5): `.npz` with arrays `point`, `distance`, `shape`, `normal`, or
//! `.csv` with the same columns. Rows are appended chunk by chunk as a job produces them, so
//! memory stays bounded however many rows there are. Everything goes to a temporary file
//! beside the target, renamed into place on success: a failed job leaves no partial output.

use std::fs::File;
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use super::npy;
use crate::error::{Error, Result};
use crate::fields::{Field, Fields, PackedRows};

/// The element type of an output array.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ColumnType {
    F32,
    I32,
}

impl ColumnType {
    fn descr(self) -> &'static str {
        match self {
            ColumnType::F32 => "<f4",
            ColumnType::I32 => "<i4",
        }
    }
}

/// One named output array: `width` values per row (1, or 3 for vectors).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ColumnSpec {
    pub name: &'static str,
    pub width: usize,
    pub kind: ColumnType,
    /// The array's shape in the `.npz` when it is not (rows,) or (rows, width), e.g. a grid.
    pub shape: Option<Vec<usize>>,
}

impl ColumnSpec {
    pub const fn vector(name: &'static str) -> Self {
        ColumnSpec {
            name,
            width: 3,
            kind: ColumnType::F32,
            shape: None,
        }
    }
    pub const fn scalar(name: &'static str) -> Self {
        ColumnSpec {
            name,
            width: 1,
            kind: ColumnType::F32,
            shape: None,
        }
    }
    pub const fn index(name: &'static str) -> Self {
        ColumnSpec {
            name,
            width: 1,
            kind: ColumnType::I32,
            shape: None,
        }
    }

    fn npy_shape(&self, rows: usize) -> Vec<usize> {
        match (&self.shape, self.width) {
            (Some(shape), _) => shape.clone(),
            (None, 1) => vec![rows],
            (None, width) => vec![rows, width],
        }
    }
}

/// How a column reads row i of the chunk being appended.
pub enum Values<'a> {
    /// f32 values; the first `width` of the three are used.
    F32(Box<dyn Fn(usize) -> [f32; 3] + 'a>),
    I32(Box<dyn Fn(usize) -> i32 + 'a>),
    /// 32-bit words (f32 or i32 bits) as the device packed them: row i's values are
    /// `words[i * stride + offset ..][..width]`. Moved in bulk, on all cores; a column that is
    /// the whole row (`stride == width`) is written straight from `words`.
    Words {
        words: &'a [u32],
        stride: usize,
        offset: usize,
    },
}

/// Rows converted by one task of a parallel gather: enough to outweigh the task's cost.
const GATHER_PIECE_ROWS: usize = 1 << 16;

impl<'a> Values<'a> {
    pub fn vector(f: impl Fn(usize) -> [f32; 3] + 'a) -> Self {
        Values::F32(Box::new(f))
    }
    pub fn scalar(f: impl Fn(usize) -> f32 + 'a) -> Self {
        Values::F32(Box::new(move |i| [f(i), 0.0, 0.0]))
    }
    pub fn index(f: impl Fn(usize) -> i32 + 'a) -> Self {
        Values::I32(Box::new(f))
    }
    /// A column held whole: `width` words a row, one after another.
    pub fn column(words: &'a [u32], width: usize) -> Self {
        Values::Words {
            words,
            stride: width,
            offset: 0,
        }
    }
    /// A column of f32 values held whole.
    pub fn f32_column(values: &'a [f32], width: usize) -> Self {
        Values::column(bytemuck::cast_slice(values), width)
    }

    /// Rows `0..count` as little-endian bytes, `width` values each: borrowed from the words
    /// where they are laid out so already, else gathered into `scratch`.
    fn bytes<'s>(&'s self, count: usize, width: usize, scratch: &'s mut Vec<u8>) -> &'s [u8] {
        if let Values::Words {
            words,
            stride,
            offset: 0,
        } = *self
            && stride == width
            && cfg!(target_endian = "little")
        {
            return bytemuck::cast_slice(&words[..count * width]);
        }
        scratch.clear();
        self.extend_bytes(count, width, scratch);
        scratch
    }

    /// Rows `0..count` as little-endian bytes, `width` values each, appended to `out`.
    fn extend_bytes(&self, count: usize, width: usize, out: &mut Vec<u8>) {
        out.reserve(count * width * 4);
        match self {
            Values::F32(f) => {
                for i in 0..count {
                    for v in &f(i)[..width] {
                        out.extend_from_slice(&v.to_le_bytes());
                    }
                }
            }
            Values::I32(f) => {
                for i in 0..count {
                    out.extend_from_slice(&f(i).to_le_bytes());
                }
            }
            &Values::Words {
                words,
                stride,
                offset,
            } => {
                use rayon::prelude::*;
                let start = out.len();
                out.resize(start + count * width * 4, 0);
                let piece_bytes = GATHER_PIECE_ROWS * width * 4;
                out[start..]
                    .par_chunks_mut(piece_bytes)
                    .zip(words[..count * stride].par_chunks(GATHER_PIECE_ROWS * stride))
                    .for_each(|(bytes, rows)| {
                        for (value, row) in
                            bytes.chunks_exact_mut(4 * width).zip(rows.chunks(stride))
                        {
                            for (cell, word) in
                                value.chunks_exact_mut(4).zip(&row[offset..offset + width])
                            {
                                cell.copy_from_slice(&word.to_le_bytes());
                            }
                        }
                    });
            }
        }
    }

    /// Row i's values of `column` as CSV cells.
    fn push_cells(&self, i: usize, column: &ColumnSpec, cells: &mut Vec<String>) {
        let width = column.width;
        match self {
            Values::F32(f) => cells.extend(f(i)[..width].iter().map(|v| v.to_string())),
            Values::I32(f) => cells.push(f(i).to_string()),
            &Values::Words {
                words,
                stride,
                offset,
            } => {
                let row = &words[i * stride + offset..][..width];
                cells.extend(row.iter().map(|&w| match column.kind {
                    ColumnType::F32 => f32::from_bits(w).to_string(),
                    ColumnType::I32 => (w as i32).to_string(),
                }))
            }
        }
    }
}

/// The output columns of `fields`, in the family's default order.
pub fn field_columns(fields: Fields) -> Vec<ColumnSpec> {
    fields.selected().map(field_column).collect()
}

/// The output column of one field.
pub fn field_column(f: &Field) -> ColumnSpec {
    match (f.width, f.is_index) {
        (_, true) => ColumnSpec::index(f.name),
        (1, false) => ColumnSpec::scalar(f.name),
        _ => ColumnSpec::vector(f.name),
    }
}

/// The values of [`field_columns`] for a chunk of packed rows (which may hold more fields).
pub fn field_values<'a>(fields: Fields, rows: &PackedRows<'a>) -> Vec<Values<'a>> {
    fields
        .selected()
        .map(|f| {
            debug_assert!(rows.fields().contains(f.bit), "rows lack `{}`", f.name);
            Values::Words {
                words: rows.words(),
                stride: rows.fields().row_words(),
                offset: rows.fields().offset_words(f.bit),
            }
        })
        .collect()
}

/// An output being written; dropped without [`OutputFile::commit`], it removes itself.
pub struct OutputFile {
    target: PathBuf,
    temp: PathBuf,
    columns: Vec<ColumnSpec>,
    rows: usize,
    written: usize,
    writer: Option<Writer>,
}

enum Writer {
    Npz(NpzWriter),
    Csv(BufWriter<File>),
}

impl OutputFile {
    /// Check the target's format and that its folder is writable, and lay out `rows` rows of
    /// `columns`, before any work is done.
    pub fn create(target: &Path, rows: usize, columns: &[ColumnSpec]) -> Result<OutputFile> {
        OutputFile::create_with_constants(target, rows, columns, &[])
    }

    /// Whether `target` names a CSV output (else `.npz`).
    pub fn is_csv(target: &Path) -> bool {
        target
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| e.eq_ignore_ascii_case("csv"))
    }

    /// [`OutputFile::create`] plus small f64 arrays written at once (`.npz` only: a CSV has
    /// one table), such as a grid's `origin` and `spacing`.
    pub fn create_with_constants(
        target: &Path,
        rows: usize,
        columns: &[ColumnSpec],
        constants: &[(&'static str, Vec<f64>)],
    ) -> Result<OutputFile> {
        let ext = target
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_lowercase)
            .unwrap_or_default();
        if ext != "npz" && ext != "csv" {
            return Err(Error::BadFile {
                file: target.display().to_string(),
                problem: "the output must end in .npz or .csv".into(),
            });
        }
        let name = target
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default();
        let temp = target.with_file_name(format!(".{name}.partial-{}", std::process::id()));
        let write_error = |source| Error::Write {
            path: target.to_path_buf(),
            source,
        };
        // Readable too: derived outputs read columns back (`read_f32s`).
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&temp)
            .map_err(write_error)?;
        // From here on, dropping `output` removes the temporary file.
        let mut output = OutputFile {
            target: target.to_path_buf(),
            temp,
            columns: columns.to_vec(),
            rows,
            written: 0,
            writer: None,
        };
        let writer = if ext == "npz" {
            Writer::Npz(
                NpzWriter::new(Box::new(file), rows, columns, constants).map_err(write_error)?,
            )
        } else {
            let mut out = BufWriter::with_capacity(1 << 20, file);
            write_csv_header(&mut out, columns).map_err(write_error)?;
            Writer::Csv(out)
        };
        output.writer = Some(writer);
        Ok(output)
    }

    /// Append the next `count` rows; `values` follow the columns given to [`OutputFile::create`].
    pub fn append(&mut self, count: usize, values: &[Values<'_>]) -> Result<()> {
        assert_eq!(
            values.len(),
            self.columns.len(),
            "one value source per column"
        );
        assert!(
            self.written + count <= self.rows,
            "more rows than the output was laid out for"
        );
        let written = match self.writer.as_mut().expect("open until committed") {
            Writer::Npz(npz) => npz.append(count, &self.columns, values),
            Writer::Csv(out) => append_csv(out, count, &self.columns, values),
        };
        written.map_err(|source| self.write_error(source))?;
        self.written += count;
        Ok(())
    }

    /// Finish the file and move it into place; every row must have been appended.
    pub fn commit(mut self) -> Result<()> {
        assert_eq!(
            self.written, self.rows,
            "every row is appended before commit"
        );
        let finished = match self.writer.take().expect("committed once") {
            Writer::Npz(npz) => npz.finish(),
            Writer::Csv(mut out) => out.flush(),
        };
        finished
            .and_then(|_| std::fs::rename(&self.temp, &self.target))
            .map_err(|source| self.write_error(source))
    }

    /// Read back f32 values `first ..` of an `.npz` column already appended (for outputs
    /// derived from it, such as an SDF's VTK file and preview, without holding the array).
    pub fn read_f32s(&mut self, column: usize, first: u64, out: &mut [f32]) -> Result<()> {
        let Some(Writer::Npz(npz)) = self.writer.as_mut() else {
            return Err(Error::Usage(
                "derived outputs are read back from an .npz output only".into(),
            ));
        };
        let at = npz.entries[column].data_offset + first * 4;
        let read = (|| {
            npz.file.seek(SeekFrom::Start(at))?;
            npz.file.read_exact(bytemuck::cast_slice_mut(out))
        })();
        read.map_err(|source| self.write_error(source))
    }

    fn write_error(&self, source: std::io::Error) -> Error {
        Error::Write {
            path: self.target.clone(),
            source,
        }
    }
}

/// A file written beside its target and renamed into place by [`PendingFile::commit`]; dropped
/// uncommitted, it removes itself (no partial output).
pub struct PendingFile {
    target: PathBuf,
    temp: PathBuf,
    committed: bool,
}

impl PendingFile {
    /// Create the temporary file and write it with `write`.
    pub fn write(
        target: &Path,
        write: impl FnOnce(&mut BufWriter<File>) -> Result<()>,
    ) -> Result<PendingFile> {
        let name = target
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default();
        let pending = PendingFile {
            target: target.to_path_buf(),
            temp: target.with_file_name(format!(".{name}.partial-{}", std::process::id())),
            committed: false,
        };
        let error = |source| Error::Write {
            path: target.to_path_buf(),
            source,
        };
        let mut out =
            BufWriter::with_capacity(1 << 20, File::create(&pending.temp).map_err(error)?);
        write(&mut out)?;
        out.flush().map_err(error)?;
        Ok(pending)
    }

    pub fn commit(mut self) -> Result<()> {
        self.committed = true;
        std::fs::rename(&self.temp, &self.target).map_err(|source| Error::Write {
            path: self.target.clone(),
            source,
        })
    }
}

impl Drop for PendingFile {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_file(&self.temp);
        }
    }
}

impl Drop for OutputFile {
    fn drop(&mut self) {
        // Still present unless commit renamed it.
        let _ = std::fs::remove_file(&self.temp);
    }
}

fn csv_header(columns: &[ColumnSpec]) -> Vec<String> {
    columns
        .iter()
        .flat_map(|c| match c.width {
            1 => vec![c.name.to_string()],
            _ => ["x", "y", "z"]
                .iter()
                .take(c.width)
                .map(|axis| format!("{}_{axis}", c.name))
                .collect(),
        })
        .collect()
}

fn write_csv_header(out: &mut impl Write, columns: &[ColumnSpec]) -> std::io::Result<()> {
    writeln!(out, "{}", csv_header(columns).join(","))
}

fn append_csv(
    out: &mut impl Write,
    count: usize,
    columns: &[ColumnSpec],
    values: &[Values<'_>],
) -> std::io::Result<()> {
    let mut cells = Vec::new();
    for i in 0..count {
        cells.clear();
        for (column, values) in columns.iter().zip(values) {
            values.push_cells(i, column, &mut cells);
        }
        writeln!(out, "{}", cells.join(","))?;
    }
    Ok(())
}

/// A `.npz` (an uncompressed ZIP64 archive of `.npy` arrays) whose size is known up front: each
/// array's region is laid out at creation and filled as chunks arrive, so the arrays grow side
/// by side without holding any of them in memory. CRCs are computed on the way and the headers
/// written last.
struct NpzWriter {
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

/// Where an `.npz` is laid out: a file, or memory (the service's responses).
trait Storage: Read + Write + Seek + Send {}
impl<T: Read + Write + Seek + Send> Storage for T {}

/// An `.npz` of `columns` in memory, all `rows` rows given at once by `values`, plus small
/// f64 `constants` (the service's response bodies; byte for byte what a job writes to a file).
pub fn npz_in_memory(
    rows: usize,
    columns: &[ColumnSpec],
    constants: &[(&'static str, Vec<f64>)],
    values: &[Values<'_>],
) -> Vec<u8> {
    let memory = MemoryFile::default();
    let write = || -> std::io::Result<()> {
        let mut npz = NpzWriter::new(Box::new(memory.clone()), rows, columns, constants)?;
        npz.append(rows, columns, values)?;
        npz.finish()
    };
    write().expect("writing to memory does not fail");
    let cursor = std::mem::take(&mut *memory.0.lock().expect("not poisoned"));
    cursor.into_inner()
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
    fn new(
        mut file: Box<dyn Storage>,
        rows: usize,
        columns: &[ColumnSpec],
        constants: &[(&'static str, Vec<f64>)],
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
                    rows * c.width * 4,
                    None,
                )
            })
            .chain(
                constants
                    .iter()
                    .map(|(name, v)| (*name, "<f8", vec![v.len()], v.len() * 8, Some(v))),
            );
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
            if let Some(values) = values {
                let bytes: Vec<u8> = values.iter().flat_map(|x| x.to_le_bytes()).collect();
                file.write_all(&bytes)?;
                crc.update(&bytes);
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

    fn append(
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

    /// Write the local headers, the central directory and the end records.
    fn finish(mut self) -> std::io::Result<()> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fields::{DISTANCE, Family, NORMAL, POINT, SHAPE};

    /// Packed rows of every hit field with distinct words, `rows` of them.
    fn packed_words(rows: usize) -> Vec<u32> {
        (0..rows * 8)
            .map(|i| match i % 8 {
                7 => (i as u32 / 8).wrapping_mul(2_654_435_761) >> 1,
                _ => (i as f32 * 0.37 - 1.0e5).to_bits(),
            })
            .collect()
    }

    /// The same columns read row by row through closures (the slow path every source
    /// still has).
    fn values_by_row<'a>(fields: Fields, rows: &'a PackedRows<'a>) -> Vec<Values<'a>> {
        fields
            .selected()
            .map(|f| {
                let bit = f.bit;
                match (f.width, f.is_index) {
                    (_, true) => Values::index(move |i| rows.get(i, bit)[0] as i32),
                    (1, false) => Values::scalar(move |i| f32::from_bits(rows.get(i, bit)[0])),
                    _ => Values::vector(move |i| {
                        let w = rows.get(i, bit);
                        [w[0], w[1], w[2]].map(f32::from_bits)
                    }),
                }
            })
            .collect()
    }

    /// Every entry of an archive reads back whole, its CRC checked by an independent reader.
    fn assert_entries_read_back(npz: &[u8]) {
        let mut archive = zip::ZipArchive::new(std::io::Cursor::new(npz)).unwrap();
        for k in 0..archive.len() {
            let mut entry = archive.by_index(k).unwrap();
            let mut bytes = Vec::new();
            entry.read_to_end(&mut bytes).unwrap();
            assert_eq!(bytes.len() as u64, entry.size());
        }
    }

    #[test]
    fn bulk_columns_write_the_bytes_of_row_by_row_columns() {
        // More rows than one gather piece and one CRC piece, and a partial last piece.
        let rows = 3 * GATHER_PIECE_ROWS + 123;
        let words = packed_words(rows);
        let packed = PackedRows::new(Fields::all(Family::Hits), &words);
        for bits in [
            POINT | DISTANCE | NORMAL | SHAPE,
            DISTANCE,
            SHAPE,
            NORMAL | SHAPE,
            POINT,
        ] {
            let fields = Fields::from_bits(Family::Hits, bits);
            let columns = field_columns(fields);
            let bulk = npz_in_memory(rows, &columns, &[], &field_values(fields, &packed));
            let by_row = npz_in_memory(rows, &columns, &[], &values_by_row(fields, &packed));
            assert!(bulk == by_row, "fields {bits:#b}: the archives differ");
            assert_entries_read_back(&bulk);
        }
        // A column held whole is written as it is.
        let distances: Vec<f32> = (0..rows).map(|i| i as f32 * -0.5).collect();
        let column = [ColumnSpec::scalar("sdf")];
        assert!(
            npz_in_memory(rows, &column, &[], &[Values::f32_column(&distances, 1)])
                == npz_in_memory(rows, &column, &[], &[Values::scalar(|i| distances[i])])
        );
    }

    #[test]
    fn bulk_columns_write_csv_cells_of_their_type() {
        let words = packed_words(2);
        let packed = PackedRows::new(Fields::all(Family::Hits), &words);
        let fields = Fields::from_bits(Family::Hits, DISTANCE | SHAPE);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rows.csv");
        let mut out = OutputFile::create(&path, 2, &field_columns(fields)).unwrap();
        out.append(2, &field_values(fields, &packed)).unwrap();
        out.commit().unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let expected: Vec<String> = (0..2)
            .map(|i| {
                let hit = packed.hit(i);
                format!("{},{}", hit.distance, hit.shape)
            })
            .collect();
        assert_eq!(text.lines().skip(1).collect::<Vec<_>>(), expected);
    }
}
