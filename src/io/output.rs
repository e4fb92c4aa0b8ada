//! Results files (SPEC §5): `.npz` with arrays `point`, `distance`, `shape`, `normal`, or
//! `.csv` with the same columns; a grid may go to a Zarr store instead (`io::zarr`). Rows are appended chunk by chunk as a job produces them, so
//! memory stays bounded however many rows there are. Everything goes to a temporary file
//! beside the target, renamed into place on success: a failed job leaves no partial output.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use super::columns::{ColumnSpec, Values};
use super::npz::NpzWriter;
use super::zarr::{ZarrGrid, ZarrLayout};
use crate::error::{Error, Result};

/// An output being written; dropped without [`OutputFile::commit`], it removes itself.
pub struct OutputFile {
    target: PathBuf,
    temp: PathBuf,
    columns: Vec<ColumnSpec>,
    rows: usize,
    written: usize,
    writer: Option<Writer>,
    /// A Zarr store's attributes, written at commit (grid constants and what the job decides,
    /// such as its sign method).
    attributes: serde_json::Map<String, serde_json::Value>,
}

enum Writer {
    Npz(NpzWriter),
    Csv(BufWriter<File>),
    /// One f32 grid column; the store keeps its own folder beside the target.
    Zarr(ZarrGrid),
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

    /// [`OutputFile::create`] plus small arrays written at once (`.npz` only: a CSV has one
    /// table), such as a grid's `origin` and `spacing`.
    pub fn create_with_constants(
        target: &Path,
        rows: usize,
        columns: &[ColumnSpec],
        constants: &[super::npz::Constant],
    ) -> Result<OutputFile> {
        let ext = target
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_lowercase)
            .unwrap_or_default();
        if ext != "npz" && ext != "csv" {
            return Err(Error::BadFile {
                file: target.display().to_string(),
                problem: TABLE_EXTENSIONS.into(),
            });
        }
        let target = &super::temporary::written_path(target)?;
        let name = target
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default();
        // Checked before any row is computed: a job that cannot fit fails now, not when the
        // disk fills hours later. An `.npz` is known to the byte; a CSV's values take at
        // least two bytes each (a digit and a comma or the line's end).
        let row_bytes: u64 = columns
            .iter()
            .map(|c| match ext.as_str() {
                "npz" => (c.width * c.kind.item_bytes()) as u64,
                _ => 2 * c.width as u64,
            })
            .sum();
        let size = match ext.as_str() {
            "npz" => Size::Exactly,
            _ => Size::AtLeast,
        };
        check_room(target, (rows as u64).saturating_mul(row_bytes), size)?;
        let temp = super::temporary::partial_file_beside(target, &name);
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
            .map_err(|source| {
                super::temporary::forget(&temp);
                write_error(source)
            })?;
        // From here on, dropping `output` removes the temporary file.
        let mut output = OutputFile {
            target: target.to_path_buf(),
            temp,
            columns: columns.to_vec(),
            rows,
            written: 0,
            writer: None,
            attributes: serde_json::Map::new(),
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

    /// A grid of `layout.shape` as the f32 array `sdf` of a Zarr store (SPEC §8), appended in C
    /// order like a one-column output; `constants` become the store's attributes.
    pub fn create_zarr(
        target: &Path,
        layout: ZarrLayout,
        constants: &[super::npz::Constant],
    ) -> Result<OutputFile> {
        let store = ZarrGrid::create(target, layout)?;
        let attributes = constants
            .iter()
            .map(|c| (c.name.to_string(), c.to_json()))
            .collect();
        Ok(OutputFile {
            target: target.to_path_buf(),
            // The store removes its own folder; nothing of this name is made.
            temp: PathBuf::new(),
            columns: vec![ColumnSpec {
                shape: Some(layout.shape.to_vec()),
                ..ColumnSpec::scalar("sdf")
            }],
            rows: layout.shape.iter().product(),
            written: 0,
            writer: Some(Writer::Zarr(store)),
            attributes,
        })
    }

    /// Set a Zarr store's attribute `name` (other formats have none: ignored).
    pub fn set_attribute(&mut self, name: &str, value: serde_json::Value) {
        if matches!(self.writer, Some(Writer::Zarr(_))) {
            self.attributes.insert(name.to_string(), value);
        }
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
            Writer::Zarr(store) => {
                let mut scratch = Vec::new();
                let bytes = values[0].bytes(count, 1, &mut scratch);
                // A column of words is read in place; anything else is gathered once.
                match bytemuck::try_cast_slice::<u8, f32>(bytes) {
                    Ok(floats) => store.append(floats)?,
                    Err(_) => store.append(&bytemuck::pod_collect_to_vec::<u8, f32>(bytes))?,
                }
                Ok(())
            }
        };
        written.map_err(|source| self.write_error(source))?;
        self.written += count;
        Ok(())
    }

    /// Append `count` rows to `column` alone, in an `.npz` laid out with no common rows
    /// (`rows` 0) whose columns each give their own `shape`.
    pub fn append_column(
        &mut self,
        column: usize,
        count: usize,
        values: &Values<'_>,
    ) -> Result<()> {
        assert_eq!(
            self.rows, 0,
            "columns of their own length are laid out with no common rows"
        );
        let written = match self.writer.as_mut().expect("open until committed") {
            Writer::Npz(npz) => npz.append_to(column, count, &self.columns[column], values),
            Writer::Csv(_) | Writer::Zarr(_) => {
                return Err(Error::Usage(
                    "arrays of different lengths are written to an .npz only".into(),
                ));
            }
        };
        written.map_err(|source| self.write_error(source))
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
            Writer::Zarr(store) => return store.commit(std::mem::take(&mut self.attributes)),
        };
        finished
            .and_then(|_| std::fs::rename(&self.temp, &self.target))
            .map_err(|source| self.write_error(source))?;
        super::temporary::forget(&self.temp);
        Ok(())
    }

    /// Read back f32 values `first ..` of an `.npz` column already appended (for outputs
    /// derived from it, such as an SDF's VTK file and preview, without holding the array).
    pub fn read_f32s(&mut self, column: usize, first: u64, out: &mut [f32]) -> Result<()> {
        let Some(Writer::Npz(npz)) = self.writer.as_mut() else {
            return Err(Error::Usage(
                "derived outputs are read back from an .npz output only".into(),
            ));
        };
        let read = npz.read_f32s(column, first, out);
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
    /// A scratch file beside `target`, open to write and read back, removed when the guard
    /// drops (it is never committed).
    pub fn scratch(target: &Path) -> Result<(PendingFile, BufWriter<File>)> {
        let pending = PendingFile::beside(target)?;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&pending.temp)
            .map_err(|source| Error::Write {
                path: target.to_path_buf(),
                source,
            })?;
        Ok((pending, BufWriter::with_capacity(1 << 20, file)))
    }

    fn beside(target: &Path) -> Result<PendingFile> {
        let target = super::temporary::written_path(target)?;
        let name = target
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default();
        let temp = super::temporary::partial_file_beside(&target, &name);
        Ok(PendingFile {
            target,
            temp,
            committed: false,
        })
    }

    /// Create the temporary file and write it with `write`.
    pub fn write(
        target: &Path,
        write: impl FnOnce(&mut BufWriter<File>) -> Result<()>,
    ) -> Result<PendingFile> {
        let pending = PendingFile::beside(target)?;
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
        std::fs::rename(&self.temp, &self.target).map_err(|source| Error::Write {
            path: self.target.clone(),
            source,
        })?;
        self.committed = true;
        super::temporary::forget(&self.temp);
        Ok(())
    }
}

impl Drop for PendingFile {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_file(&self.temp);
            super::temporary::forget(&self.temp);
        }
    }
}

impl Drop for OutputFile {
    fn drop(&mut self) {
        // Still present unless commit renamed it.
        let _ = std::fs::remove_file(&self.temp);
        super::temporary::forget(&self.temp);
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

/// A table a job will write (`.npz` or `.csv`, [`OutputFile::create`]), checked before any
/// work, so that a misnamed output is refused before a large input's load, not after it.
pub fn check_table_target(path: &Path) -> Result<()> {
    check_target(path, &["npz", "csv"], TABLE_EXTENSIONS)
}

/// The problem named for a table output of another extension.
const TABLE_EXTENSIONS: &str = "the output must end in .npz or .csv";

/// A file a job will write, checked before any work: it ends in one of `extensions` (else
/// `wrong_extension` is the problem named) and its folder exists.
pub fn check_target(path: &Path, extensions: &[&str], wrong_extension: &str) -> Result<()> {
    let bad = |problem: &str| Error::BadFile {
        file: path.display().to_string(),
        problem: problem.into(),
    };
    let matches = path
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| extensions.iter().any(|x| e.eq_ignore_ascii_case(x)));
    if !matches {
        return Err(bad(wrong_extension));
    }
    let written = super::temporary::written_path(path)?;
    let folder = written.parent().filter(|p| !p.as_os_str().is_empty());
    if folder.is_some_and(|f| !f.is_dir()) {
        return Err(bad("its folder does not exist"));
    }
    let is_store = super::zarr::is_zarr(path);
    match std::fs::metadata(&written) {
        Err(_) => Ok(()),
        Ok(_) if is_store && written.join("zarr.json").is_file() => Ok(()),
        Ok(_) if is_store => Err(bad(super::zarr::NOT_A_STORE)),
        Ok(found) if found.is_file() => Ok(()),
        Ok(found) if found.is_dir() => Err(bad("is a folder: not replaced")),
        Ok(_) => Err(bad(
            "is not a regular file (a device or a pipe): not replaced",
        )),
    }
}

/// Refuses an output of `bytes` that the free space of `target`'s filesystem cannot hold
/// (what an unprivileged writer may use); where that is unknown, nothing is refused.
fn check_room(target: &Path, bytes: u64, size: Size) -> Result<()> {
    let dir = match target.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    room_for(target, bytes, size, free_bytes(dir))
}

/// Whether an output's bytes are known exactly (binary) or only bounded below (text).
#[derive(Clone, Copy)]
enum Size {
    Exactly,
    AtLeast,
}

fn room_for(target: &Path, bytes: u64, size: Size, free: Option<u64>) -> Result<()> {
    let takes = match size {
        Size::Exactly => "takes",
        Size::AtLeast => "takes at least",
    };
    match free {
        Some(free) if bytes > free => Err(Error::Write {
            path: target.to_path_buf(),
            source: std::io::Error::new(
                std::io::ErrorKind::StorageFull,
                format!(
                    "the output {takes} {} and its filesystem has {} free",
                    readable_bytes(bytes),
                    readable_bytes(free)
                ),
            ),
        }),
        _ => Ok(()),
    }
}

/// Bytes in the largest decimal unit under them: a full small disk read "0.00 GB".
fn readable_bytes(bytes: u64) -> String {
    const UNITS: [(f64, &str); 3] = [(1e9, "GB"), (1e6, "MB"), (1e3, "kB")];
    UNITS
        .iter()
        .find(|(unit, _)| bytes as f64 >= *unit)
        .map_or_else(
            || format!("{bytes} bytes"),
            |(unit, name)| format!("{:.2} {name}", bytes as f64 / unit),
        )
}

/// The bytes an unprivileged process may still write on `dir`'s filesystem, where it says.
#[cfg(unix)]
fn free_bytes(dir: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    let mut stats = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `path` is a NUL-terminated string and `stats` a buffer statvfs fills on success.
    if unsafe { libc::statvfs(path.as_ptr(), stats.as_mut_ptr()) } != 0 {
        return None;
    }
    // SAFETY: statvfs returned 0, so it filled `stats`.
    let stats = unsafe { stats.assume_init() };
    // Some FUSE and pseudo filesystems report no size at all: unknown, not full.
    if stats.f_blocks == 0 {
        return None;
    }
    // fsblkcnt_t and c_ulong are narrower than u64 on some targets.
    #[allow(clippy::unnecessary_cast)]
    Some((stats.f_bavail as u64).saturating_mul(stats.f_frsize as u64))
}

#[cfg(not(unix))]
fn free_bytes(_dir: &Path) -> Option<u64> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fields::{DISTANCE, Family, NORMAL, POINT, SHAPE};

    use crate::fields::{Fields, PackedRows};
    use crate::io::columns::{GATHER_PIECE_ROWS, field_columns, field_values};
    use crate::io::npz::npz_in_memory;
    use std::io::Read;

    #[test]
    fn an_output_larger_than_the_free_space_is_refused_before_it_is_made() {
        let target = Path::new("out/s.npz");
        let message = room_for(target, 124_554_051_555, Size::Exactly, Some(50_000_000_000))
            .expect_err("too large")
            .to_string();
        assert_eq!(
            message,
            "cannot write out/s.npz: the output takes 124.55 GB and its filesystem has 50.00 GB free"
        );
        room_for(target, 50_000_000_000, Size::Exactly, Some(50_000_000_000))
            .expect("fits exactly");
        // A small filesystem's figures keep their digits.
        let message = room_for(target, 1_200_000, Size::AtLeast, Some(640))
            .expect_err("too large")
            .to_string();
        assert!(
            message.ends_with("takes at least 1.20 MB and its filesystem has 640 bytes free"),
            "{message}"
        );
        room_for(target, u64::MAX, Size::Exactly, None)
            .expect("unknown free space refuses nothing");
        assert!(free_bytes(Path::new(".")).is_some_and(|free| free > 0));
        // Through `OutputFile::create`: a 2^32-row sample file of 29-byte rows, in a folder
        // whose filesystem has less room than that, is refused and leaves nothing behind.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("huge.npz");
        let rows = u32::MAX as usize;
        let free = free_bytes(dir.path()).expect("statvfs");
        if free < rows as u64 * 29 {
            let columns = [
                ColumnSpec::vector("points"),
                ColumnSpec::scalar("sdf"),
                ColumnSpec::vector("normal"),
                ColumnSpec {
                    kind: super::super::ColumnType::U8,
                    ..ColumnSpec::scalar("kind")
                },
            ];
            let error = OutputFile::create(&path, rows, &columns)
                .err()
                .expect("refused");
            assert!(
                error.to_string().contains("the output takes 124.55 GB"),
                "{error}"
            );
            assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        }
        // A CSV's size is bounded below: 2^32 rows of 8 values take at least 68.72 GB.
        let path = dir.path().join("huge.csv");
        if free < rows as u64 * 16 {
            let columns = [
                ColumnSpec::vector("point"),
                ColumnSpec::scalar("distance"),
                ColumnSpec::vector("normal"),
                ColumnSpec::scalar("shape"),
            ];
            let error = OutputFile::create(&path, rows, &columns)
                .err()
                .expect("refused");
            assert!(
                error
                    .to_string()
                    .contains("the output takes at least 68.72 GB"),
                "{error}"
            );
            assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        }
    }

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
