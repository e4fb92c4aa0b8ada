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
    pub fn commit(mut self, hits: &[GpuHit]) -> Result<()> {
        let file = self.file.take().expect("an output is committed once");
        let written = match self.format {
            Format::Npz => write_npz(file, hits),
            Format::Csv => write_csv(file, hits),
        };
        written
            .and_then(|_| std::fs::rename(&self.temp, &self.target))
            .map_err(|source| Error::Write {
                path: self.target.clone(),
                source,
            })
    }
}

impl Drop for OutputFile {
    fn drop(&mut self) {
        // Still present unless commit renamed it.
        let _ = std::fs::remove_file(&self.temp);
    }
}

/// Convenience: create, write and commit in one call.
pub fn write_hits(target: &Path, hits: &[GpuHit]) -> Result<()> {
    OutputFile::create(target)?.commit(hits)
}

/// One array of the archive, its rows written straight from the hits (no intermediate copy).
fn npy_entry(
    zip: &mut zip::ZipWriter<BufWriter<File>>,
    name: &str,
    descr: &str,
    shape: &[usize],
    row_bytes: usize,
    rows: impl Iterator<Item = [u8; 12]>,
) -> std::io::Result<()> {
    let data_len = (shape[0] * row_bytes) as u64;
    let options = SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Stored)
        .large_file(data_len >= u32::MAX as u64 / 2);
    zip.start_file(format!("{name}.npy"), options)?;
    npy::write_header(zip, descr, shape)?;
    // Batched, so the archive's CRC and buffering see large writes.
    let mut batch = Vec::with_capacity(1 << 20);
    for row in rows {
        batch.extend_from_slice(&row[..row_bytes]);
        if batch.len() >= (1 << 20) - 12 {
            zip.write_all(&batch)?;
            batch.clear();
        }
    }
    zip.write_all(&batch)
}

fn vec3_bytes(v: [f32; 3]) -> [u8; 12] {
    bytemuck::cast(v)
}

fn scalar_bytes(x: [u8; 4]) -> [u8; 12] {
    let mut out = [0; 12];
    out[..4].copy_from_slice(&x);
    out
}

fn write_npz(file: File, hits: &[GpuHit]) -> std::io::Result<()> {
    let n = hits.len();
    let mut zip = zip::ZipWriter::new(BufWriter::with_capacity(1 << 20, file));
    let rows = || hits.iter();
    npy_entry(
        &mut zip,
        "point",
        "<f4",
        &[n, 3],
        12,
        rows().map(|h| vec3_bytes(h.point)),
    )?;
    npy_entry(
        &mut zip,
        "distance",
        "<f4",
        &[n],
        4,
        rows().map(|h| scalar_bytes(h.distance.to_le_bytes())),
    )?;
    npy_entry(
        &mut zip,
        "shape",
        "<i4",
        &[n],
        4,
        rows().map(|h| scalar_bytes(h.shape.to_le_bytes())),
    )?;
    npy_entry(
        &mut zip,
        "normal",
        "<f4",
        &[n, 3],
        12,
        rows().map(|h| vec3_bytes(h.normal)),
    )?;
    zip.finish()?.flush()
}

fn write_csv(file: File, hits: &[GpuHit]) -> std::io::Result<()> {
    let mut out = BufWriter::new(file);
    writeln!(
        out,
        "point_x,point_y,point_z,distance,shape,normal_x,normal_y,normal_z"
    )?;
    for h in hits {
        let [px, py, pz] = h.point;
        let [nx, ny, nz] = h.normal;
        writeln!(
            out,
            "{px},{py},{pz},{},{},{nx},{ny},{nz}",
            h.distance, h.shape
        )?;
    }
    out.flush()
}
