//! Query points: `.npy` (N, 3) float32/float64, read chunk by chunk, or `.csv` with three
//! columns (an optional header line, blank lines and `#` comments are skipped).

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::ops::Range;
use std::path::{Path, PathBuf};

use super::npy::{self, Dtype};
use crate::error::{Error, Result};

/// An opened points file; rows are read as the engine asks for them.
pub struct PointFile {
    path: PathBuf,
    rows: usize,
    data: PointData,
}

enum PointData {
    Npy {
        reader: BufReader<File>,
        dtype: Dtype,
        next_row: usize,
        data_offset: u64,
    },
    Memory(Vec<[f64; 3]>),
}

impl PointFile {
    pub fn open(path: &Path) -> Result<PointFile> {
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_lowercase)
            .unwrap_or_default();
        match ext.as_str() {
            "npy" => Self::open_npy(path),
            "csv" => Self::open_csv(path),
            _ => Err(Error::BadFile {
                file: path.display().to_string(),
                problem: "points must be a .npy (N, 3) array or a .csv file with 3 columns".into(),
            }),
        }
    }

    fn open_npy(path: &Path) -> Result<PointFile> {
        let file_name = path.display().to_string();
        let bad = |problem: String| Error::BadFile {
            file: file_name.clone(),
            problem,
        };
        let read_err = |source| Error::Read {
            path: path.to_path_buf(),
            source,
        };
        let file = File::open(path).map_err(read_err)?;
        let file_len = file.metadata().map_err(read_err)?.len();
        let mut reader = BufReader::with_capacity(1 << 20, file);
        let header = npy::read_header(&mut reader).map_err(bad)?;
        let dtype = Dtype::from_descr(&header.descr).map_err(bad)?;
        let rows = match header.shape[..] {
            [n, 3] => n,
            _ => {
                return Err(bad(format!(
                    "points must have shape (N, 3), found {:?}",
                    header.shape
                )));
            }
        };
        let expected = header.data_offset + (rows * 3 * dtype.size()) as u64;
        if file_len < expected {
            return Err(bad(format!(
                "truncated: the header promises {rows} rows ({expected} bytes) but the file has {file_len} bytes"
            )));
        }
        Ok(PointFile {
            path: path.to_path_buf(),
            rows,
            data: PointData::Npy {
                reader,
                dtype,
                next_row: 0,
                data_offset: header.data_offset,
            },
        })
    }

    fn open_csv(path: &Path) -> Result<PointFile> {
        let file_name = path.display().to_string();
        let file = File::open(path).map_err(|source| Error::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let mut rows = Vec::new();
        for (i, line) in BufReader::new(file).lines().enumerate() {
            let line = line.map_err(|source| Error::Read {
                path: path.to_path_buf(),
                source,
            })?;
            let text = line.trim();
            if text.is_empty() || text.starts_with('#') {
                continue;
            }
            let cells: Vec<&str> = text.split(',').map(str::trim).collect();
            let parsed: Vec<Option<f64>> = cells.iter().map(|c| parse_number(c)).collect();
            // A first line with no number at all is a header.
            if rows.is_empty() && i == 0 && parsed.iter().all(Option::is_none) {
                continue;
            }
            // Rows are numbered from 1 as a text editor shows lines.
            let bad_row = |field: String, problem: String| Error::BadRow {
                file: file_name.clone(),
                row: i + 1,
                field,
                problem,
            };
            if cells.len() != 3 {
                return Err(bad_row(
                    "columns".into(),
                    format!("expected 3 comma-separated numbers, found {}", cells.len()),
                ));
            }
            let mut point = [0.0; 3];
            for (axis, (value, cell)) in parsed.iter().zip(&cells).enumerate() {
                point[axis] = value.ok_or_else(|| {
                    bad_row(
                        format!("column {} ({})", axis + 1, ["x", "y", "z"][axis]),
                        format!("`{cell}` is not a number"),
                    )
                })?;
            }
            rows.push(point);
        }
        Ok(PointFile {
            path: path.to_path_buf(),
            rows: rows.len(),
            data: PointData::Memory(rows),
        })
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

    /// Rows `range` as f64 (NaN and infinities pass through: they become NaN result rows).
    pub fn read_rows(&mut self, range: Range<usize>, out: &mut Vec<[f64; 3]>) -> Result<()> {
        out.clear();
        match &mut self.data {
            PointData::Memory(rows) => out.extend_from_slice(&rows[range]),
            PointData::Npy {
                reader,
                dtype,
                next_row,
                data_offset,
            } => {
                let size = dtype.size();
                if *next_row != range.start {
                    let at = *data_offset + (range.start * 3 * size) as u64;
                    reader
                        .seek(SeekFrom::Start(at))
                        .map_err(|source| Error::Read {
                            path: self.path.clone(),
                            source,
                        })?;
                }
                let mut bytes = vec![0u8; range.len() * 3 * size];
                reader
                    .read_exact(&mut bytes)
                    .map_err(|source| Error::Read {
                        path: self.path.clone(),
                        source,
                    })?;
                *next_row = range.end;
                match dtype {
                    Dtype::F32 => out.extend(bytes.chunks_exact(12).map(|r| {
                        std::array::from_fn(|k| {
                            f32::from_le_bytes(r[4 * k..4 * k + 4].try_into().unwrap()) as f64
                        })
                    })),
                    Dtype::F64 => out.extend(bytes.chunks_exact(24).map(|r| {
                        std::array::from_fn(|k| {
                            f64::from_le_bytes(r[8 * k..8 * k + 8].try_into().unwrap())
                        })
                    })),
                }
            }
        }
        Ok(())
    }

    /// Read every row (for the reference and for small inputs).
    pub fn read_all(&mut self) -> Result<Vec<[f64; 3]>> {
        let mut out = Vec::new();
        self.read_rows(0..self.rows, &mut out)?;
        Ok(out)
    }
}

/// A CSV cell as a number; `nan`, `inf` and `-inf` are accepted (they give NaN result rows).
fn parse_number(cell: &str) -> Option<f64> {
    cell.parse::<f64>().ok()
}
