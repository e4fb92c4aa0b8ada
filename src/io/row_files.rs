//! Row inputs: query points (N, 3), spheres (N, 4) and segments (N, 2, 3), from `.npy`
//! (float32/float64 of either byte order, C or Fortran order; read chunk by chunk) or `.csv` (N values a line, each maybe in
//! double quotes; an optional header line, a byte-order mark, blank lines and `#` comments are
//! skipped; `nan`/`inf` cells are accepted).

use std::io::{BufRead, BufReader};
use std::ops::Range;
use std::path::{Path, PathBuf};

use super::mesh_file::MeshFormat;
use super::npy::{self, Dtype};
use super::npy_source::NpySource;
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
            "csv" | "txt" => Self::open_csv(path, layout, false),
            "xyz" => Self::open_csv(path, layout, true),
            // PCL's and Open3D's point clouds.
            "pcd" if N == 3 => Ok(Self::held(path, super::pcd::read_pcd_positions(path)?)),
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

    /// `leading`: rows may hold more than N cells, of which the first N are read.
    fn open_csv(path: &Path, layout: RowLayout<N>, leading: bool) -> Result<RowFile<N>> {
        // Spreadsheets quote cells ("1.5"): a quoted number is a number, a quoted name still
        // a header's.
        fn unquoted(cell: &str) -> &str {
            let cell = cell.trim();
            cell.strip_prefix('"')
                .and_then(|c| c.strip_suffix('"'))
                .map_or(cell, str::trim)
        }
        let file_name = path.display().to_string();
        let file = super::open_input(path)?;
        let mut rows = Vec::new();
        for (i, line) in BufReader::new(file).lines().enumerate() {
            let line = line.map_err(|source| Error::Read {
                path: path.to_path_buf(),
                source,
            })?;
            // A UTF-8 byte-order mark (spreadsheets write one) is no part of the first cell.
            let text = line.trim_start_matches('\u{feff}').trim();
            if text.is_empty() || text.starts_with('#') {
                continue;
            }
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
            if rows.is_empty() && i == 0 && cells.len() == N && parsed.iter().all(Option::is_none) {
                continue;
            }
            // Rows are numbered from 0 like the array's rows (and shape indices); the line
            // number, from 1 as an editor shows it, is in the message too.
            let row = rows.len();
            let bad_row = |field: String, problem: String| Error::BadRow {
                file: file_name.clone(),
                row,
                field,
                problem: format!("{problem} (line {})", i + 1),
            };
            if cells.len() != N {
                return Err(bad_row(
                    "columns".into(),
                    format!(
                        "expected {N} numbers separated by commas (or by spaces), found {}",
                        cells.len()
                    ),
                ));
            }
            let mut row = [0.0; N];
            for (k, (value, cell)) in parsed.iter().zip(&cells).enumerate() {
                row[k] = value.ok_or_else(|| {
                    bad_row(
                        format!("column {} ({})", k + 1, layout.names[k]),
                        format!("`{cell}` is not a number"),
                    )
                })?;
            }
            rows.push(row);
        }
        Ok(RowFile {
            path: path.to_path_buf(),
            rows: rows.len(),
            data: RowData::Memory(rows),
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
