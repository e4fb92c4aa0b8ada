//! Results files (SPEC §5): `.npz` with arrays `point`, `distance`, `shape`, `normal`, or
//! `.csv` with the same columns. Written to a temporary file beside the target and renamed
//! into place on success, so a failed job leaves no partial output.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use zip::write::SimpleFileOptions;

use super::npy;
use crate::error::{Error, Result};
use crate::gpu::GpuHit;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    Npz,
    Csv,
}

/// An output being prepared; dropped without [`OutputFile::commit`], it removes itself.
pub struct OutputFile {
    target: PathBuf,
    temp: PathBuf,
    file: Option<File>,
    format: Format,
}

impl OutputFile {
    /// Check the target's format and that its folder is writable, before any work is done.
    pub fn create(target: &Path) -> Result<OutputFile> {
        let ext = target
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_lowercase)
            .unwrap_or_default();
        let format = match ext.as_str() {
            "npz" => Format::Npz,
            "csv" => Format::Csv,
            _ => {
                return Err(Error::BadFile {
                    file: target.display().to_string(),
                    problem: "the output must end in .npz or .csv".into(),
                });
            }
        };
        let name = target
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default();
        let temp = target.with_file_name(format!(".{name}.partial-{}", std::process::id()));
        let file = File::create(&temp).map_err(|source| Error::Write {
            path: target.to_path_buf(),
            source,
        })?;
        Ok(OutputFile {
            target: target.to_path_buf(),
            temp,
            file: Some(file),
            format,
        })
    }

    /// Write the hits and move the file into place.
    pub fn commit(self, hits: &[GpuHit]) -> Result<()> {
        self.commit_columns(hits.len(), &hit_columns(hits))
    }

    /// Write `rows` rows of named columns (SPEC §5) and move the file into place.
    pub fn commit_columns(mut self, rows: usize, columns: &[Column<'_>]) -> Result<()> {
        let file = self.file.take().expect("an output is committed once");
        let written = match self.format {
            Format::Npz => write_npz(file, rows, columns),
            Format::Csv => write_csv(file, rows, columns),
        };
        written
            .and_then(|_| std::fs::rename(&self.temp, &self.target))
            .map_err(|source| Error::Write {
                path: self.target.clone(),
                source,
            })
    }
}

/// One named output array: `width` values per row (1, or 3 for vectors).
pub struct Column<'a> {
    pub name: &'static str,
    pub width: usize,
    pub values: Values<'a>,
}

/// How a column reads row i.
pub enum Values<'a> {
    /// f32 values; the first `width` of the three are used.
    F32(Box<dyn Fn(usize) -> [f32; 3] + 'a>),
    I32(Box<dyn Fn(usize) -> i32 + 'a>),
}

impl<'a> Column<'a> {
    pub fn vector(name: &'static str, f: impl Fn(usize) -> [f32; 3] + 'a) -> Self {
        Column {
            name,
            width: 3,
            values: Values::F32(Box::new(f)),
        }
    }
    pub fn scalar(name: &'static str, f: impl Fn(usize) -> f32 + 'a) -> Self {
        Column {
            name,
            width: 1,
            values: Values::F32(Box::new(move |i| [f(i), 0.0, 0.0])),
        }
    }
    pub fn index(name: &'static str, f: impl Fn(usize) -> i32 + 'a) -> Self {
        Column {
            name,
            width: 1,
            values: Values::I32(Box::new(f)),
        }
    }

    /// Row i as little-endian bytes (`width` values).
    fn row_bytes(&self, i: usize) -> ([u8; 12], usize) {
        let mut out = [0u8; 12];
        match &self.values {
            Values::F32(f) => {
                let v = f(i);
                for k in 0..self.width {
                    out[4 * k..4 * k + 4].copy_from_slice(&v[k].to_le_bytes());
                }
            }
            Values::I32(f) => out[..4].copy_from_slice(&f(i).to_le_bytes()),
        }
        (out, 4 * self.width)
    }
}

/// The columns of point-query results: `point`, `distance`, `shape`, `normal`.
pub fn hit_columns(hits: &[GpuHit]) -> Vec<Column<'_>> {
    vec![
        Column::vector("point", |i| hits[i].point),
        Column::scalar("distance", |i| hits[i].distance),
        Column::index("shape", |i| hits[i].shape),
        Column::vector("normal", |i| hits[i].normal),
    ]
}

impl Drop for OutputFile {
    fn drop(&mut self) {
        // Still present unless commit renamed it.
        let _ = std::fs::remove_file(&self.temp);
    }
}

/// One array of the archive, its rows written straight from the column (no intermediate copy).
fn npy_entry(
    zip: &mut zip::ZipWriter<BufWriter<File>>,
    rows: usize,
    column: &Column<'_>,
) -> std::io::Result<()> {
    let data_len = (rows * column.width * 4) as u64;
    let options = SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Stored)
        .large_file(data_len >= u32::MAX as u64 / 2);
    zip.start_file(format!("{}.npy", column.name), options)?;
    let descr = match column.values {
        Values::F32(_) => "<f4",
        Values::I32(_) => "<i4",
    };
    let shape: &[usize] = if column.width == 1 {
        &[rows]
    } else {
        &[rows, column.width]
    };
    npy::write_header(zip, descr, shape)?;
    // Batched, so the archive's CRC and buffering see large writes.
    let mut batch = Vec::with_capacity(1 << 20);
    for i in 0..rows {
        let (bytes, len) = column.row_bytes(i);
        batch.extend_from_slice(&bytes[..len]);
        if batch.len() >= (1 << 20) - 12 {
            zip.write_all(&batch)?;
            batch.clear();
        }
    }
    zip.write_all(&batch)
}

fn write_npz(file: File, rows: usize, columns: &[Column<'_>]) -> std::io::Result<()> {
    let mut zip = zip::ZipWriter::new(BufWriter::with_capacity(1 << 20, file));
    for column in columns {
        npy_entry(&mut zip, rows, column)?;
    }
    zip.finish()?.flush()
}

fn write_csv(file: File, rows: usize, columns: &[Column<'_>]) -> std::io::Result<()> {
    let mut out = BufWriter::new(file);
    let header: Vec<String> = columns
        .iter()
        .flat_map(|c| match c.width {
            1 => vec![c.name.to_string()],
            _ => ["x", "y", "z"]
                .iter()
                .take(c.width)
                .map(|axis| format!("{}_{axis}", c.name))
                .collect(),
        })
        .collect();
    writeln!(out, "{}", header.join(","))?;
    for i in 0..rows {
        let mut cells = Vec::with_capacity(header.len());
        for column in columns {
            match &column.values {
                Values::F32(f) => cells.extend(f(i)[..column.width].iter().map(|v| v.to_string())),
                Values::I32(f) => cells.push(f(i).to_string()),
            }
        }
        writeln!(out, "{}", cells.join(","))?;
    }
    out.flush()
}
