//! Row inputs: query points (N, 3), spheres (N, 4) and segments (N, 2, 3), from `.npy`
//! (float32/float64 of either byte order, C or Fortran order; read chunk by chunk) or `.csv` (N values a line, each maybe in
//! double quotes; an optional header line, a byte-order mark, blank lines and `#` comments are
//! skipped; `nan`/`inf` cells are accepted; every row checked when opened, a long file then read
//! again chunk by chunk rather than held), and points from `.pcd` and mesh files (a long binary
//! `.ply` or `.pcd` read in place, a long ascii `.pcd` or OBJ read again as text rows, a long
//! compressed `.pcd` inflated as the chunks ask, others held).

use std::io::{BufRead, BufReader};
use std::ops::Range;
use std::path::{Path, PathBuf};

use super::mesh_file::MeshFormat;
use super::npy::{self, Dtype};
use super::npy_source::NpySource;
use super::pcd::{CompressedColumns, PcdPoints};
use super::records::PointRecords;
use crate::error::{Error, Result};
use crate::points::{PointChunk, PointReader};

/// What one row holds: its `.npy` trailing shape and the name of each value.
#[derive(Clone, Copy, Debug)]
pub struct RowLayout<const N: usize> {
    /// Trailing dimensions of the `.npy` array, e.g. `[3]` for (N, 3) or `[2, 3]` for (N, 2, 3).
    pub npy_dims: &'static [usize],
    /// Names of the values, for error messages (`x`, `radius`, …).
    pub names: [&'static str; N],
    /// The array of an `.npz` of several that holds the rows.
    pub npz_array: &'static str,
    /// What a file of such rows is, for error messages.
    pub what: &'static str,
}

pub const POINTS: RowLayout<3> = RowLayout {
    npy_dims: &[3],
    names: ["x", "y", "z"],
    npz_array: "points",
    what: "points must be a .npy (N, 3) array (or one in a .npz) or a .csv (.txt, .xyz) file with 3 columns, or a point cloud (.pcd) or a point cloud's or mesh's vertices (.ply, .obj, .off, .stl, .glb, .gltf)",
};

pub const SPHERES: RowLayout<4> = RowLayout {
    npy_dims: &[4],
    names: ["cx", "cy", "cz", "radius"],
    npz_array: "spheres",
    what: "spheres must be a .npy (N, 4) array (cx, cy, cz, r; or one in a .npz) or a .csv (.txt) file with 4 columns",
};

pub const SEGMENTS: RowLayout<6> = RowLayout {
    npy_dims: &[2, 3],
    names: ["ax", "ay", "az", "bx", "by", "bz"],
    npz_array: "segments",
    what: "segments must be a .npy (N, 2, 3) array (or one in a .npz) or a .csv (.txt) file with 6 columns",
};

/// An opened file of rows of `N` values; rows are read as the engine asks for them.
pub struct RowFile<const N: usize> {
    path: PathBuf,
    rows: usize,
    data: RowData<N>,
}

/// Query points.
pub type PointFile = RowFile<3>;

enum RowData<const N: usize> {
    Npy {
        source: NpySource,
        dtype: Dtype,
        big_endian: bool,
        /// Fortran order: each of a row's values is a column of its own, `rows` long
        /// (`fortran_columns`).
        fortran: Option<Vec<usize>>,
        data_offset: u64,
    },
    Memory(Vec<[f64; N]>),
    /// A text file too long to hold, read from its checkpoints as the chunks ask.
    Text(TextRows<N>),
    /// A binary `.ply`'s or `.pcd`'s point records, read in place as the chunks ask.
    Records {
        reader: BufReader<std::fs::File>,
        records: PointRecords,
    },
    /// A `binary_compressed` `.pcd`'s position columns, inflated as the chunks ask.
    Columns(Box<CompressedColumns>),
}

/// Text files of more rows than this are read twice (checked and counted when opened, then
/// read chunk by chunk) rather than held: 4 Mi points hold 96 MiB as f64.
const HELD_TEXT_ROWS: usize = 1 << 22;

/// Rows between the places a streamed text file's reads may start from.
const TEXT_CHECKPOINT_ROWS: usize = 1 << 16;

/// The rows of a text file (`.csv`, `.txt`, `.xyz`, an ascii `.pcd`'s data): how a line is
/// read, and where to read.
struct TextRows<const N: usize> {
    layout: RowLayout<N>,
    cells: Cells<N>,
    /// Every `TEXT_CHECKPOINT_ROWS`-th row's place, row 0's first.
    checkpoints: Vec<TextPlace>,
    /// Where the last read ended, to read on from there (chunks come in order).
    cursor: Option<(BufReader<std::fs::File>, TextPlace)>,
}

/// How a text line's cells are read.
enum Cells<const N: usize> {
    /// Separated by commas, or on a line without one by spaces and tabs (CSV, `numpy.savetxt`,
    /// `.xyz`), maybe quoted, a header line of names skipped. `leading`: a row may hold more
    /// than N cells, of which the first N are read (`.xyz`).
    Delimited { leading: bool },
    /// A `.pcd`'s ascii records: `words` values a line, the row's values at `columns`.
    Pcd { words: usize, columns: [usize; N] },
    /// An OBJ's `v` statements' first N numbers; every other statement is left (a continued
    /// line is refused, to be read by the mesh reader).
    ObjVertices,
}

/// A row's place in a text file: its index, its line's byte offset and the line's index.
#[derive(Clone, Copy)]
struct TextPlace {
    row: usize,
    offset: u64,
    line: usize,
}

impl<const N: usize> TextRows<N> {
    /// Line `index` of the file (a row's, `row` being the count of rows before it): its
    /// values, or `None` for a blank line, a `#` comment or a first line that is a header.
    fn parse(&self, path: &Path, line: &str, index: usize, row: usize) -> Result<Option<[f64; N]>> {
        // Spreadsheets quote cells ("1.5"): a quoted number is a number, a quoted name still
        // a header's.
        fn unquoted(cell: &str) -> &str {
            let cell = cell.trim();
            cell.strip_prefix('"')
                .and_then(|c| c.strip_suffix('"'))
                .map_or(cell, str::trim)
        }
        // Rows are numbered from 0 like the array's rows (and shape indices); the line
        // number, from 1 as an editor shows it, is in the message too.
        let bad_row = |field: String, problem: String| Error::BadRow {
            file: path.display().to_string(),
            row,
            field,
            problem: format!("{problem} (line {})", index + 1),
        };
        if let Cells::ObjVertices = self.cells {
            // Read as the mesh reader reads it: a byte-order mark skipped at the file's start
            // only, a continuation checked before comments (a continued comment takes the next
            // line in), words split at ASCII whitespace (a vertical tab or a no-break space is
            // part of a word there).
            let raw = match index {
                0 => line.trim_start_matches('\u{feff}'),
                _ => line,
            };
            if super::mesh_file::continued_at(raw.as_bytes()).is_some() {
                return Err(bad_row("line".into(), "a continued line".into()));
            }
            let statement = raw.split('#').next().unwrap_or_default();
            let mut words = statement
                .split(|c: char| c.is_ascii_whitespace())
                .filter(|w| !w.is_empty());
            if words.next() != Some("v") {
                return Ok(None);
            }
            return self.values(words, bad_row).map(Some);
        }
        // A UTF-8 byte-order mark (spreadsheets write one) is no part of the first cell.
        let text = line.trim_start_matches('\u{feff}').trim();
        if text.is_empty() || text.starts_with('#') {
            return Ok(None);
        }
        let leading = match &self.cells {
            Cells::Delimited { leading } => *leading,
            Cells::ObjVertices => unreachable!("read above"),
            Cells::Pcd { words, columns } => {
                let cells: Vec<&str> = text.split_whitespace().collect();
                if cells.len() != *words {
                    return Err(bad_row(
                        "columns".into(),
                        format!(
                            "expected {words} values (the header's FIELDS and COUNT), found {}",
                            cells.len()
                        ),
                    ));
                }
                return self
                    .values(columns.iter().map(|&c| cells[c]), bad_row)
                    .map(Some);
            }
        };
        // Cells split at commas, or, on a line without one, at spaces and tabs: what
        // `numpy.savetxt` writes by default, and `.xyz` point clouds.
        let mut cells: Vec<&str> = if text.contains(',') {
            text.split(',').map(unquoted).collect()
        } else {
            text.split_whitespace().map(unquoted).collect()
        };
        if leading {
            cells.truncate(N);
        }
        let parsed: Vec<Option<f64>> = cells.iter().map(|c| c.parse::<f64>().ok()).collect();
        // A first line of N cells with no number at all is a header (one of another width,
        // `1;2;3`, is a row in another format, refused below rather than skipped).
        if row == 0 && index == 0 && cells.len() == N && parsed.iter().all(Option::is_none) {
            return Ok(None);
        }
        if cells.len() != N {
            return Err(bad_row(
                "columns".into(),
                format!(
                    "expected {N} numbers separated by commas (or by spaces), found {}",
                    cells.len()
                ),
            ));
        }
        let mut values = [0.0; N];
        for (k, (value, cell)) in parsed.iter().zip(&cells).enumerate() {
            values[k] = value.ok_or_else(|| {
                bad_row(
                    format!("column {} ({})", k + 1, self.layout.names[k]),
                    format!("`{cell}` is not a number"),
                )
            })?;
        }
        Ok(Some(values))
    }

    /// A row's N values, the first N of `words` (a missing one is no number), each named by
    /// its value's name in errors.
    fn values<'w>(
        &self,
        mut words: impl Iterator<Item = &'w str>,
        bad_row: impl Fn(String, String) -> Error,
    ) -> Result<[f64; N]> {
        let mut values = [0.0; N];
        for (k, value) in values.iter_mut().enumerate() {
            let word = words.next().unwrap_or_default();
            *value = word.parse::<f64>().map_err(|_| {
                bad_row(
                    self.layout.names[k].into(),
                    format!("`{word}` is not a number"),
                )
            })?;
        }
        Ok(values)
    }

    /// Rows `range` into `out`, read on from the last read's end or from the checkpoint
    /// before `range.start`.
    fn read(&mut self, path: &Path, range: Range<usize>, out: &mut Vec<[f64; N]>) -> Result<()> {
        use std::io::{Seek, SeekFrom};
        if range.is_empty() {
            return Ok(());
        }
        let read_err = |source| Error::Read {
            path: path.to_path_buf(),
            source,
        };
        let checkpoint =
            self.checkpoints[self.checkpoints.partition_point(|c| c.row <= range.start) - 1];
        let reusable = self
            .cursor
            .as_ref()
            .is_some_and(|(_, at)| (checkpoint.row..=range.start).contains(&at.row));
        if !reusable {
            let mut file = super::open_input(path)?;
            file.seek(SeekFrom::Start(checkpoint.offset))
                .map_err(read_err)?;
            self.cursor = Some((BufReader::new(file), checkpoint));
        }
        let (mut reader, mut at) = self.cursor.take().expect("set above");
        let mut line = String::new();
        while at.row < range.end {
            line.clear();
            let read = reader.read_line(&mut line).map_err(read_err)?;
            if read == 0 {
                return Err(Error::BadFile {
                    file: path.display().to_string(),
                    problem: format!(
                        "it ended before row {} when read again: it changed while the job ran",
                        at.row
                    ),
                });
            }
            if let Some(values) = self.parse(path, &line, at.line, at.row)? {
                if at.row >= range.start {
                    out.push(values);
                }
                at.row += 1;
            }
            at.offset += read as u64;
            at.line += 1;
        }
        self.cursor = Some((reader, at));
        Ok(())
    }
}

impl PointFile {
    /// Open a points file ((N, 3) or 3 columns).
    pub fn open(path: &Path) -> Result<PointFile> {
        RowFile::open_as(path, POINTS)
    }
}

impl<const N: usize> RowFile<N> {
    pub fn open_as(path: &Path, layout: RowLayout<N>) -> Result<RowFile<N>> {
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_lowercase)
            .unwrap_or_default();
        match ext.as_str() {
            "npy" => Self::open_npy(path, NpySource::npy_file(path)?, layout),
            // numpy's `savez` (stored) and `savez_compressed` (deflated): the only array, or
            // the one named for the rows (`points`, as `closest sample` writes it).
            "npz" => Self::open_npy(path, NpySource::npz_array(path, layout.npz_array)?, layout),
            // Text rows: spreadsheets' CSV, numpy.savetxt's `.txt`, point clouds' `.xyz`, whose
            // positions lead and may be followed by normals or colours.
            "csv" | "txt" => Self::open_csv(path, layout, false, HELD_TEXT_ROWS),
            "xyz" => Self::open_csv(path, layout, true, HELD_TEXT_ROWS),
            // PCL's and Open3D's point clouds: long ones read in place (binary), again as
            // text rows (ascii) or inflated as the chunks ask (compressed).
            "pcd" if N == 3 => Self::open_pcd(path, layout, HELD_TEXT_ROWS),
            // A scan's `.ply`: many points in binary records are read in place.
            "ply" if N == 3 => Self::open_ply(path, HELD_TEXT_ROWS),
            "obj" if N == 3 => Self::open_obj(path, layout, HELD_TEXT_ROWS),
            // A point cloud's vertices (a scan's `.ply`, an OBJ of `v` lines), as points
            // only: a mesh file's faces are left.
            _ if N == 3
                && let Some(format) = MeshFormat::of(path) =>
            {
                let vertices = super::mesh_file::read_positions(path, format)?;
                let rows = (0..vertices.len()).map(|k| vertices.get(k).to_array());
                Ok(Self::held(path, rows.collect()))
            }
            _ => Err(Error::BadFile {
                file: path.display().to_string(),
                problem: layout.what.into(),
            }),
        }
    }

    fn open_npy(path: &Path, mut source: NpySource, layout: RowLayout<N>) -> Result<RowFile<N>> {
        let file_name = source.describe(path);
        let bad = |problem: String| Error::BadFile {
            file: file_name.clone(),
            problem,
        };
        let header = source.header().map_err(bad)?;
        let (dtype, big_endian) = Dtype::from_any_order(&header.descr).map_err(bad)?;
        let rows = match header.shape.split_first() {
            Some((&n, rest)) if rest == layout.npy_dims => n,
            _ => {
                return Err(bad(format!(
                    "{}; found shape {:?}",
                    layout.what, header.shape
                )));
            }
        };
        let expected = (rows as u64)
            .checked_mul((N * dtype.size()) as u64)
            .and_then(|data| data.checked_add(header.data_offset))
            .ok_or_else(|| bad(format!("implausible row count {rows}")))?;
        if source.len() < expected {
            return Err(bad(format!(
                "truncated: the header promises {rows} rows ({expected} bytes) but the {} has {} bytes",
                source.holder(),
                source.len()
            )));
        }
        Ok(RowFile {
            path: path.to_path_buf(),
            rows,
            data: RowData::Npy {
                source,
                dtype,
                big_endian,
                fortran: header
                    .fortran_order
                    .then(|| npy::fortran_columns(layout.npy_dims)),
                data_offset: header.data_offset,
            },
        })
    }

    /// `leading`: rows may hold more than N cells, of which the first N are read. Every row is
    /// checked here, so that a bad one fails the job before any output; a file of more than
    /// `held_rows` rows is then read again chunk by chunk, not held.
    fn open_csv(
        path: &Path,
        layout: RowLayout<N>,
        leading: bool,
        held_rows: usize,
    ) -> Result<RowFile<N>> {
        let start = TextPlace {
            row: 0,
            offset: 0,
            line: 0,
        };
        Self::open_text(
            path,
            layout,
            Cells::Delimited { leading },
            start,
            None,
            held_rows,
        )
    }

    /// Text rows from `start` on, read as `cells` says, every one checked; `points`: the
    /// rows there must be (a `.pcd`'s header's count; lines after them are left).
    fn open_text(
        path: &Path,
        layout: RowLayout<N>,
        cells: Cells<N>,
        start: TextPlace,
        points: Option<usize>,
        held_rows: usize,
    ) -> Result<RowFile<N>> {
        use std::io::{Seek, SeekFrom};
        let text = TextRows {
            layout,
            cells,
            checkpoints: Vec::new(),
            cursor: None,
        };
        let mut file = super::open_input(path)?;
        file.seek(SeekFrom::Start(start.offset))
            .map_err(|source| Error::Read {
                path: path.to_path_buf(),
                source,
            })?;
        let mut reader = BufReader::new(file);
        let mut line = String::new();
        let (mut offset, mut index, mut rows) = (start.offset, start.line, 0usize);
        let mut checkpoints = Vec::new();
        let mut held = Some(Vec::new());
        while points.is_none_or(|points| rows < points) {
            line.clear();
            let read = reader.read_line(&mut line).map_err(|source| Error::Read {
                path: path.to_path_buf(),
                source,
            })?;
            if read == 0 {
                break;
            }
            if let Some(row) = text.parse(path, &line, index, rows)? {
                if rows % TEXT_CHECKPOINT_ROWS == 0 {
                    checkpoints.push(TextPlace {
                        row: rows,
                        offset,
                        line: index,
                    });
                }
                match &mut held {
                    Some(kept) if kept.len() < held_rows => kept.push(row),
                    _ => held = None,
                }
                rows += 1;
            }
            offset += read as u64;
            index += 1;
        }
        if let Some(points) = points
            && rows < points
        {
            return Err(Error::BadFile {
                file: path.display().to_string(),
                problem: format!(
                    "its header promises {points} points, but the file has {rows} rows"
                ),
            });
        }
        let data = match held {
            Some(kept) => RowData::Memory(kept),
            None => RowData::Text(TextRows {
                checkpoints,
                ..text
            }),
        };
        Ok(RowFile {
            path: path.to_path_buf(),
            rows,
            data,
        })
    }

    /// A `.ply`'s vertices: a binary file's records of more than `held_rows` points read in
    /// place as the chunks ask, any other held whole.
    fn open_ply(path: &Path, held_rows: usize) -> Result<RowFile<N>> {
        match super::mesh_file::ply_vertex_records(path)? {
            Some(records) if records.count > held_rows => Ok(Self::in_place(path, records)?),
            _ => {
                let vertices = super::mesh_file::read_positions(path, MeshFormat::Ply)?;
                let rows = (0..vertices.len()).map(|k| vertices.get(k).to_array());
                Ok(Self::held(path, rows.collect()))
            }
        }
    }

    /// An OBJ's `v` positions: a file of more than `held_rows` of them is read again as text
    /// rows (faces and every other statement left); one of fewer, or one the text rows cannot
    /// read (a continued line, a broken `v`), is held, read by the mesh reader.
    fn open_obj(path: &Path, layout: RowLayout<N>, held_rows: usize) -> Result<RowFile<N>> {
        /// `v 0 0 0` and its line's end.
        const SHORTEST_V_LINE: u64 = 8;
        let long = std::fs::metadata(path)
            .is_ok_and(|m| m.len() > (held_rows as u64).saturating_mul(SHORTEST_V_LINE));
        let start = TextPlace {
            row: 0,
            offset: 0,
            line: 0,
        };
        if long
            && let Ok(file) =
                Self::open_text(path, layout, Cells::ObjVertices, start, None, held_rows)
            && matches!(file.data, RowData::Text(_))
        {
            return Ok(file);
        }
        let vertices = super::mesh_file::read_positions(path, MeshFormat::Obj)?;
        let rows = (0..vertices.len()).map(|k| vertices.get(k).to_array());
        Ok(Self::held(path, rows.collect()))
    }

    /// A `.pcd`'s points: of more than `held_rows`, a binary file's records are read in place,
    /// an ascii file's lines again as text rows and a compressed file's columns inflated, as
    /// the chunks ask; fewer are held.
    fn open_pcd(path: &Path, layout: RowLayout<N>, held_rows: usize) -> Result<RowFile<N>> {
        let mut file = match super::pcd::open_points(path)? {
            PcdPoints::Records(records) => Self::in_place(path, records)?,
            PcdPoints::Text {
                start,
                lines,
                words,
                columns,
                points,
            } => {
                let cells = Cells::Pcd {
                    words,
                    columns: std::array::from_fn(|k| columns[k]),
                };
                let start = TextPlace {
                    row: 0,
                    offset: start,
                    line: lines,
                };
                return Self::open_text(path, layout, cells, start, Some(points), held_rows);
            }
            PcdPoints::Columns(columns) => RowFile {
                path: path.to_path_buf(),
                rows: columns.points(),
                data: RowData::Columns(columns),
            },
        };
        if file.rows <= held_rows {
            let rows = file.read_all()?;
            file.data = RowData::Memory(rows);
        }
        Ok(file)
    }

    fn in_place(path: &Path, records: PointRecords) -> Result<RowFile<N>> {
        Ok(RowFile {
            path: path.to_path_buf(),
            rows: records.count,
            data: RowData::Records {
                reader: BufReader::with_capacity(1 << 20, super::open_input(path)?),
                records,
            },
        })
    }

    /// Rows read whole, of a file whose rows are points (N is 3 where it is called).
    fn held(path: &Path, points: Vec<[f64; 3]>) -> RowFile<N> {
        let rows: Vec<[f64; N]> = points
            .into_iter()
            .map(|p| std::array::from_fn(|k| p[k]))
            .collect();
        RowFile {
            path: path.to_path_buf(),
            rows: rows.len(),
            data: RowData::Memory(rows),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn len(&self) -> usize {
        self.rows
    }

    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    /// The bytes of `.npy` rows `range` in C order (a Fortran-ordered file's: each value's
    /// column read and the rows put together).
    fn npy_bytes(&mut self, range: Range<usize>) -> Result<(Vec<u8>, Dtype)> {
        let rows = self.rows;
        let RowData::Npy {
            source,
            dtype,
            fortran,
            data_offset,
            ..
        } = &mut self.data
        else {
            unreachable!("called for .npy files only")
        };
        let size = dtype.size();
        let read_err = |source| Error::Read {
            path: self.path.clone(),
            source,
        };
        let mut bytes = vec![0u8; range.len() * N * size];
        if let Some(columns) = fortran {
            let mut column = vec![0u8; range.len() * size];
            for (c, &k) in columns.iter().enumerate() {
                let at = *data_offset + ((c * rows + range.start) * size) as u64;
                source.read_at(c, at, &mut column).map_err(read_err)?;
                for (row, value) in column.chunks_exact(size).enumerate() {
                    let to = (row * N + k) * size;
                    bytes[to..to + size].copy_from_slice(value);
                }
            }
        } else {
            let at = *data_offset + (range.start * N * size) as u64;
            source.read_at(0, at, &mut bytes).map_err(read_err)?;
        }
        Ok((bytes, *dtype))
    }

    /// Rows `range` as f64 (NaN and infinities pass through: they become NaN result rows).
    pub fn read_rows(&mut self, range: Range<usize>, out: &mut Vec<[f64; N]>) -> Result<()> {
        out.clear();
        match &mut self.data {
            RowData::Memory(rows) => out.extend_from_slice(&rows[range]),
            RowData::Text(text) => text.read(&self.path, range, out)?,
            RowData::Records { reader, records } => {
                let points = records.read(reader, range).map_err(|source| Error::Read {
                    path: self.path.clone(),
                    source,
                })?;
                out.extend(points.iter().map(|p| std::array::from_fn(|k| p[k])));
            }
            RowData::Columns(columns) => {
                let points = columns.read(range).map_err(|problem| Error::BadFile {
                    file: self.path.display().to_string(),
                    problem,
                })?;
                out.extend(points.iter().map(|p| std::array::from_fn(|k| p[k])));
            }
            &mut RowData::Npy { big_endian, .. } => {
                let (bytes, dtype) = self.npy_bytes(range)?;
                let size = dtype.size();
                let value = |b: &[u8]| match (dtype, big_endian) {
                    (Dtype::F16, false) => {
                        half::f16::from_le_bytes(b.try_into().expect("2 bytes")).to_f64()
                    }
                    (Dtype::F16, true) => {
                        half::f16::from_be_bytes(b.try_into().expect("2 bytes")).to_f64()
                    }
                    (Dtype::F32, false) => {
                        f32::from_le_bytes(b.try_into().expect("4 bytes")) as f64
                    }
                    (Dtype::F32, true) => f32::from_be_bytes(b.try_into().expect("4 bytes")) as f64,
                    (Dtype::F64, false) => f64::from_le_bytes(b.try_into().expect("8 bytes")),
                    (Dtype::F64, true) => f64::from_be_bytes(b.try_into().expect("8 bytes")),
                };
                out.extend(
                    bytes
                        .chunks_exact(N * size)
                        .map(|row| std::array::from_fn(|k| value(&row[k * size..(k + 1) * size]))),
                );
            }
        }
        Ok(())
    }

    /// Read every row.
    pub fn read_all(&mut self) -> Result<Vec<[f64; N]>> {
        let mut out = Vec::new();
        self.read_rows(0..self.rows, &mut out)?;
        Ok(out)
    }
}

/// A points file read chunk by chunk: a float32 `.npy` gives f32 rows as it holds them (no
/// round trip through f64), anything else f64 rows.
impl PointReader for PointFile {
    fn rows(&self) -> usize {
        self.rows
    }

    fn read(&mut self, range: Range<usize>, chunk: &mut PointChunk) -> Result<()> {
        if matches!(
            self.data,
            RowData::Npy {
                dtype: Dtype::F32,
                big_endian: false,
                ..
            }
        ) {
            let (bytes, _) = self.npy_bytes(range)?;
            let rows = chunk.f32_rows();
            rows.extend(bytes.chunks_exact(12).map(|row| {
                std::array::from_fn(|k| {
                    f32::from_le_bytes(row[4 * k..4 * k + 4].try_into().expect("4 bytes"))
                })
            }));
            Ok(())
        } else {
            self.read_rows(range, chunk.f64_rows())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// A binary `.ply` of many points reads its vertex records in place: the same rows as
    /// held, in order, out of order and again, in either byte order and with other properties
    /// and elements beside; one cut short fails the opening.
    #[test]
    fn long_binary_ply_vertices_are_read_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let rows = 5000;
        let write = |name: &str, big_endian: bool, cut: usize| {
            let order = if big_endian { "big" } else { "little" };
            let mut bytes = format!(
                "ply\nformat binary_{order}_endian 1.0\nelement vertex {rows}\n\
                 property float nx\nproperty double x\nproperty uchar red\nproperty short z\n\
                 property float y\nelement face 1\nproperty list uchar int vertex_indices\n\
                 end_header\n"
            )
            .into_bytes();
            let mut put = |b: &[u8]| match big_endian {
                true => bytes.extend(b.iter().rev()),
                false => bytes.extend(b),
            };
            for i in 0..rows {
                put(&0.5f32.to_le_bytes());
                put(&(i as f64 * 0.25 - 7.0).to_le_bytes());
                put(&[9]);
                put(&((i % 300) as i16 - 150).to_le_bytes());
                put(&(1.0f32 / (i + 1) as f32).to_le_bytes());
            }
            bytes.extend([3, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2]);
            bytes.truncate(bytes.len() - cut);
            let path = dir.path().join(name);
            std::fs::write(&path, bytes).unwrap();
            path
        };
        for big_endian in [false, true] {
            let path = write("cloud.ply", big_endian, 0);
            let mut held = PointFile::open_ply(&path, usize::MAX).unwrap();
            let mut in_place = PointFile::open_ply(&path, 1000).unwrap();
            assert!(matches!(held.data, RowData::Memory(_)));
            assert!(matches!(in_place.data, RowData::Records { .. }));
            assert_eq!((held.len(), in_place.len()), (rows, rows));
            let (mut want, mut got) = (Vec::new(), Vec::new());
            for range in [0..1700, 1700..rows, 40..41, 0..rows, 4999..5000, 0..0] {
                held.read_rows(range.clone(), &mut want).unwrap();
                in_place.read_rows(range.clone(), &mut got).unwrap();
                assert_eq!(want, got, "rows {range:?}, big endian {big_endian}");
            }
            assert_eq!(got.len(), 0);
            in_place.read_rows(3..4, &mut got).unwrap();
            assert_eq!(got, [[-6.25, 1.0 / 4.0f32 as f64, -147.0]]);
        }
        // Cut within the vertex records: refused when opened, naming the element.
        let cut = write("cut.ply", false, 13 + 7);
        let message = PointFile::open_ply(&cut, 1000).err().unwrap().to_string();
        assert!(
            message.contains("5000 `vertex` elements of 19 bytes"),
            "{message}"
        );
    }

    /// So are a `.pcd`'s points in each of its three encodings (x, y, z among other fields, of
    /// 4 and 8 bytes, NaN kept bit for bit): binary records in place, ascii lines read again,
    /// compressed columns inflated as asked. A file cut short, a bad line far past the rows
    /// held and a broken stream each fail the opening.
    #[test]
    fn long_pcd_points_are_read_as_the_chunks_ask() {
        let dir = tempfile::tempdir().unwrap();
        let rows = 3000;
        let header = |data: &str| {
            format!(
                "# .PCD v0.7\nVERSION 0.7\nFIELDS rgb x y z\nSIZE 4 8 4 4\nTYPE U F F F\n\
                 COUNT 1 1 1 1\nWIDTH {rows}\nHEIGHT 1\nVIEWPOINT 0 0 0 1 0 0 0\n\
                 POINTS {rows}\nDATA {data}\n"
            )
            .into_bytes()
        };
        // Each point's fields' bytes; a grid's repeats give LZF references.
        let fields = |i: usize| -> [Vec<u8>; 4] {
            [
                0xff00ffu32.to_le_bytes().to_vec(),
                (i as f64 / 3.0).to_le_bytes().to_vec(),
                (-((i % 50) as f32)).to_le_bytes().to_vec(),
                f32::NAN.to_le_bytes().to_vec(),
            ]
        };
        let mut binary = header("binary");
        binary.extend((0..rows).flat_map(|i| fields(i).concat()));
        let mut ascii = header("ascii");
        for i in 0..rows {
            if i % 700 == 3 {
                ascii.extend(b"\n");
            }
            let line = format!("16711935 {} {} nan\r\n", i as f64 / 3.0, -((i % 50) as f32));
            ascii.extend(line.as_bytes());
        }
        ascii.extend(b"trailing lines past POINTS are left\n");
        let columns: Vec<u8> = (0..4)
            .flat_map(|f| (0..rows).flat_map(move |i| fields(i)[f].clone()))
            .collect();
        let packed = crate::io::fuzz::lzf_compress(&columns);
        assert!(packed.len() < columns.len() / 2, "few LZF references");
        let mut compressed = header("binary_compressed");
        compressed.extend((packed.len() as u32).to_le_bytes());
        compressed.extend((columns.len() as u32).to_le_bytes());
        compressed.extend(&packed);

        let path = |name: &str, bytes: &[u8]| {
            let path = dir.path().join(name);
            std::fs::write(&path, bytes).unwrap();
            path
        };
        let bits = |rows: &[[f64; 3]]| -> Vec<[u64; 3]> {
            rows.iter().map(|r| r.map(f64::to_bits)).collect()
        };
        let mut first = None;
        for (name, bytes) in [
            ("binary.pcd", &binary),
            ("ascii.pcd", &ascii),
            ("compressed.pcd", &compressed),
        ] {
            let path = path(name, bytes);
            let mut held = PointFile::open_pcd(&path, POINTS, usize::MAX).unwrap();
            let mut asked = PointFile::open_pcd(&path, POINTS, 100).unwrap();
            assert!(matches!(held.data, RowData::Memory(_)), "{name}");
            assert!(
                matches!(
                    asked.data,
                    RowData::Records { .. } | RowData::Text(_) | RowData::Columns(_)
                ),
                "{name}"
            );
            assert_eq!((held.len(), asked.len()), (rows, rows), "{name}");
            let all = held.read_all().unwrap();
            let first = first.get_or_insert_with(|| all.clone());
            assert_eq!(bits(first), bits(&all), "{name} held");
            let mut got = Vec::new();
            for range in [0..1000, 1000..rows, 7..8, 2999..3000, 0..rows, 10..10] {
                asked.read_rows(range.clone(), &mut got).unwrap();
                assert_eq!(bits(&all[range.clone()]), bits(&got), "{name} {range:?}");
            }
            asked.read_rows(6..7, &mut got).unwrap();
            assert_eq!(got[0][..2], [2.0, -6.0], "{name}");
            assert!(got[0][2].is_nan(), "{name}");
        }

        let refused =
            |name: &str, bytes: &[u8]| match PointFile::open_pcd(&path(name, bytes), POINTS, 100) {
                Err(e) => e.to_string(),
                Ok(_) => panic!("{name} opened"),
            };
        let message = refused("cut.pcd", &binary[..binary.len() - 1]);
        assert!(message.contains("its 3000 points of 20 bytes"), "{message}");
        let text = String::from_utf8(ascii.clone()).unwrap();
        let message = refused("bad.pcd", text.replacen(" 800 ", " 800x ", 1).as_bytes());
        assert!(
            message.contains("bad.pcd: row 2400: x: `800x` is not a number (line 2416)"),
            "{message}"
        );
        let short = &text[..text.find("16711935 999.6666").unwrap()];
        let message = refused("short.pcd", short.as_bytes());
        assert!(
            message.contains("promises 3000 points, but the file has 2999 rows"),
            "{message}"
        );
        let message = refused("wide.pcd", text.replacen("nan\r", "nan 1\r", 1).as_bytes());
        assert!(
            message.contains("row 0: columns: expected 4 values"),
            "{message}"
        );
        let cut = compressed.len() - 3;
        let message = refused("cut_stream.pcd", &compressed[..cut]);
        assert!(
            message.contains("truncated: its compressed data"),
            "{message}"
        );
        // A reference first, before any byte it could refer to.
        let mut broken = compressed.clone();
        broken[header("binary_compressed").len() + 8] = 0xff;
        let message = refused("broken.pcd", &broken);
        assert!(message.contains("not LZF"), "{message}");
    }

    /// An OBJ of many `v` lines is read again as text rows, its other statements left: the
    /// same rows as the mesh reader's, in order and out of order. One with a continued line,
    /// or a broken `v`, is read by the mesh reader, whose error names the line.
    #[test]
    fn long_obj_vertices_are_read_again_not_held() {
        let dir = tempfile::tempdir().unwrap();
        let rows = 5000;
        let mut text = String::from("\u{feff}# a scan\nmtllib a.mtl\no cloud\n");
        for i in 0..rows {
            let (x, y, z) = (i as f64 * 0.25, -(i as f64) / 3.0, (i % 7) as f64);
            match i % 4 {
                0 => text += &format!("v {x} {y} {z}\n"),
                1 => text += &format!("v\t{x}  {y} {z} 1.0 # with w\r\n"),
                2 => text += &format!("v {x} {y} {z} 0.5 0.25 1\nvn 0 0 1\nvt 0.5 0.5\n"),
                _ => text += &format!("  v {x} {y} {z}\n\n# {i}\n"),
            }
            if i % 3 == 2 && i >= 2 {
                text += &format!("f {} {} {}\nvp 0.5\ng part\n", i - 1, i, i + 1);
            }
        }
        let path = dir.path().join("cloud.obj");
        std::fs::write(&path, &text).unwrap();
        let mut held = PointFile::open_obj(&path, POINTS, usize::MAX).unwrap();
        let mut streamed = PointFile::open_obj(&path, POINTS, 100).unwrap();
        assert!(matches!(held.data, RowData::Memory(_)));
        assert!(matches!(streamed.data, RowData::Text(_)));
        assert_eq!((held.len(), streamed.len()), (rows, rows));
        let all = held.read_all().unwrap();
        assert_eq!(all[4999], [4999.0 * 0.25, -4999.0 / 3.0, (4999 % 7) as f64]);
        let mut got = Vec::new();
        for range in [0..1000, 1000..rows, 7..9, 0..rows, 4999..5000] {
            streamed.read_rows(range.clone(), &mut got).unwrap();
            assert_eq!(got, all[range.clone()], "{range:?}");
        }

        let continued = text.replacen("v 40 ", "v \\\n40 ", 1);
        std::fs::write(&path, &continued).unwrap();
        let mut file = PointFile::open_obj(&path, POINTS, 100).unwrap();
        assert!(matches!(file.data, RowData::Memory(_)));
        assert_eq!(file.read_all().unwrap(), all);

        std::fs::write(&path, text.replacen("v 40 ", "v 4o ", 1)).unwrap();
        let message = match PointFile::open_obj(&path, POINTS, 100) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("opened"),
        };
        assert!(
            message.contains("line 483: a vertex needs three numbers"),
            "{message}"
        );
    }

    /// A file of text rows too long to hold is read chunk by chunk from its checkpoints: the
    /// same rows as held, in order, out of order and again, and a bad row past the rows held
    /// still fails the opening, naming its row and line.
    #[test]
    fn long_text_files_are_read_again_not_held() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("points.csv");
        let mut file = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
        writeln!(file, "\u{feff}x,y,z").unwrap();
        let rows = 3 * TEXT_CHECKPOINT_ROWS + 123;
        for i in 0..rows {
            if i % 1000 == 7 {
                writeln!(file, "# a comment\n").unwrap();
            }
            let t = i as f64;
            match i % 3 {
                0 => writeln!(file, "{t},{},\"{}\"", t * 0.5, -t).unwrap(),
                1 => writeln!(file, "{t} {}\t{}", t * 0.5, -t).unwrap(),
                _ => write!(file, "{t}, {}, {}\r\n", t * 0.5, -t).unwrap(),
            }
        }
        drop(file);
        let mut held = PointFile::open_csv(&path, POINTS, false, usize::MAX).unwrap();
        let mut streamed = PointFile::open_csv(&path, POINTS, false, 1000).unwrap();
        assert!(matches!(held.data, RowData::Memory(_)));
        assert!(matches!(streamed.data, RowData::Text(_)));
        assert_eq!((held.len(), streamed.len()), (rows, rows));
        let all = held.read_all().unwrap();
        assert_eq!(
            all[rows - 1],
            [
                (rows - 1) as f64,
                (rows - 1) as f64 * 0.5,
                -((rows - 1) as f64)
            ]
        );
        let mut out = Vec::new();
        let step = 50_000;
        let ranges = (0..rows)
            .step_by(step)
            .map(|start| start..(start + step).min(rows))
            .chain([
                7..9,
                rows - 1..rows,
                0..1,
                65_535..65_537,
                10..10,
                rows..rows,
            ]);
        for range in ranges {
            streamed.read_rows(range.clone(), &mut out).unwrap();
            assert_eq!(out, all[range.clone()], "{range:?}");
        }

        // A file cut short while a job reads it is an error, not fewer rows.
        let text = std::fs::read_to_string(&path).unwrap();
        let mut reopened = PointFile::open_csv(&path, POINTS, false, 1000).unwrap();
        let half = text[..text.len() / 2].rfind('\n').unwrap() + 1;
        std::fs::write(&path, &text[..half]).unwrap();
        let cut = reopened
            .read_rows(0..rows, &mut out)
            .unwrap_err()
            .to_string();
        assert!(cut.contains("changed while the job ran"), "{cut}");
        std::fs::write(&path, &text).unwrap();

        // A bad row far past the rows held fails the opening.
        let text = std::fs::read_to_string(&path).unwrap();
        let broken = text.replacen("150000,75000,\"-150000\"", "150000,75000,oops", 1);
        assert_ne!(broken, text);
        std::fs::write(&path, broken).unwrap();
        match PointFile::open_csv(&path, POINTS, false, 1000) {
            Err(Error::BadRow {
                row,
                field,
                problem,
                ..
            }) => {
                assert_eq!((row, field.as_str()), (150_000, "column 3 (z)"));
                assert!(
                    problem.contains("`oops` is not a number (line "),
                    "{problem}"
                );
            }
            Err(e) => panic!("{e}"),
            Ok(_) => panic!("opened"),
        }
    }
}
