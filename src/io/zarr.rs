//! Zarr v3 grids (SPEC §8): a group holding the array `sdf` (nx, ny, nz) float32 in chunks of
//! `chunk` samples a side (fewer along an axis shorter than that), each zstd-compressed,
//! written as soon as the slab of x-planes that holds it is complete. The slab (`chunk` x-planes)
//! is all that is held, so any resolution streams. The store is built in a folder beside the
//! target and renamed into place by [`ZarrGrid::commit`]: a failed job leaves no partial store.
//!
//! Written by hand rather than through a Zarr library: one array, one codec chain and two
//! `zarr.json` files are all this needs (https://zarr-specs.readthedocs.io/en/latest/v3/core/).

use std::path::{Path, PathBuf};

use rayon::prelude::*;
use serde_json::{Map, Value, json};

use crate::error::{Error, Result};

/// The zstd level of every chunk: level 1 compresses a band grid's runs of ±W as well as the
/// default does, at twice its speed.
const ZSTD_LEVEL: i32 = 1;

/// The largest `--chunk`: a chunk of 256³ f32 is 64 MiB before compression.
pub const MAX_CHUNK: usize = 256;

/// How a grid is laid out in its store.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ZarrLayout {
    /// Samples along x, y, z.
    pub shape: [usize; 3],
    /// Samples a side of a chunk (`--chunk`).
    pub chunk: usize,
    /// The array's fill value: what a reader sees in a chunk that was not written.
    pub fill: f32,
    /// Leave out chunks whose every value is `fill` (a band grid's chunks entirely at +W).
    pub skip_fill_chunks: bool,
}

impl ZarrLayout {
    /// An SDF grid's layout: a dense grid fills with NaN (every chunk is written); a band grid
    /// of half-width `band` fills with +W and leaves out its chunks all at +W (SPEC §8).
    pub fn sdf_grid(shape: [usize; 3], chunk: usize, band: Option<f64>) -> ZarrLayout {
        ZarrLayout {
            shape,
            chunk,
            fill: band.map_or(f32::NAN, |w| w as f32),
            skip_fill_chunks: band.is_some(),
        }
    }

    /// Each axis's chunk length: `chunk`, or the axis's length where it is shorter.
    fn chunk_shape(&self) -> [usize; 3] {
        self.shape.map(|n| self.chunk.min(n))
    }

    /// Chunks along each axis.
    fn chunks(&self) -> [usize; 3] {
        let c = self.chunk_shape();
        std::array::from_fn(|a| self.shape[a].div_ceil(c[a]))
    }
}

/// A Zarr store being written; dropped without [`ZarrGrid::commit`], it removes itself.
pub struct ZarrGrid {
    target: PathBuf,
    temp: PathBuf,
    layout: ZarrLayout,
    /// The x-planes of the chunk row being filled, C order.
    slab: Vec<f32>,
    /// The chunk row (along x) that `slab` holds.
    slab_row: usize,
    /// Values appended so far.
    received: usize,
    /// Chunks written so far (a skipped chunk is not counted).
    pub chunks_written: usize,
    committed: bool,
}

/// Why a target that exists is not replaced by a store.
pub(crate) const NOT_A_STORE: &str = "exists and is not a Zarr store (no zarr.json): not replaced";

/// Whether `target` names a Zarr store (`.zarr`).
pub fn is_zarr(target: &Path) -> bool {
    target
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("zarr"))
}

impl ZarrGrid {
    /// Check `layout` and the target before any work is done, and start the store beside it.
    /// A target that exists is replaced at commit only if it is a Zarr store itself (it has a
    /// `zarr.json`); any other file or folder there is refused, not deleted.
    pub fn create(target: &Path, layout: ZarrLayout) -> Result<ZarrGrid> {
        let target = &super::temporary::written_path(target)?;
        let bad = |problem: String| Error::BadFile {
            file: target.display().to_string(),
            problem,
        };
        if !(1..=MAX_CHUNK).contains(&layout.chunk) {
            return Err(Error::Usage(format!(
                "--chunk must be 1 to {MAX_CHUNK} samples a side, got {}",
                layout.chunk
            )));
        }
        let folder = target.parent().filter(|p| !p.as_os_str().is_empty());
        if folder.is_some_and(|f| !f.is_dir()) {
            return Err(bad("its folder does not exist".into()));
        }
        // Another writer of the same target may swap it between the two looks (the path is
        // briefly absent while it moves the old store aside): only a target that is there
        // without zarr.json at every one of three looks is refused.
        let not_a_store = || target.exists() && !target.join("zarr.json").is_file();
        if (0..3).all(|_| not_a_store()) {
            return Err(bad(NOT_A_STORE.into()));
        }
        let [_, ny, nz] = layout.shape;
        let slab_values = layout.chunk_shape()[0] * ny * nz;
        let slab_bytes = slab_values as u64 * 4;
        if let Some(available) = crate::host_memory::host_available_bytes()
            && slab_bytes > available / 2
        {
            return Err(Error::Usage(format!(
                "--chunk {}: a slab of {} x-planes of {ny}×{nz} samples needs {} MiB, more than \
                 half the {} MiB available: use a smaller --chunk",
                layout.chunk,
                layout.chunk_shape()[0],
                slab_bytes >> 20,
                available >> 20
            )));
        }
        let name = target
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default();
        super::temporary::remove_stale(target);
        let temp = unique_sibling(target, &name, "partial").map_err(|source| Error::Write {
            path: target.to_path_buf(),
            source,
        })?;
        let grid = ZarrGrid {
            target: target.to_path_buf(),
            temp,
            layout,
            slab: Vec::with_capacity(slab_values),
            slab_row: 0,
            received: 0,
            chunks_written: 0,
            committed: false,
        };
        std::fs::create_dir(grid.temp.join("sdf")).map_err(|source| grid.write_error(source))?;
        Ok(grid)
    }

    /// Append the next values of the grid in C order (any number at a time).
    pub fn append(&mut self, mut values: &[f32]) -> Result<()> {
        let total = self.layout.shape.iter().product::<usize>();
        assert!(
            self.received + values.len() <= total,
            "more values than the grid holds"
        );
        self.received += values.len();
        while !values.is_empty() {
            let wanted = self.slab_len() - self.slab.len();
            let (now, rest) = values.split_at(wanted.min(values.len()));
            self.slab.extend_from_slice(now);
            values = rest;
            if self.slab.len() == self.slab_len() {
                self.write_slab()?;
            }
        }
        Ok(())
    }

    /// Values in the chunk row being filled (the last one may be thinner).
    fn slab_len(&self) -> usize {
        let [nx, ny, nz] = self.layout.shape;
        let cx = self.layout.chunk_shape()[0];
        let planes = cx.min(nx - self.slab_row * cx);
        planes * ny * nz
    }

    /// Cut the full slab into chunks, compress and write them on all cores.
    fn write_slab(&mut self) -> Result<()> {
        let [_, ny, nz] = self.layout.shape;
        let [cx, cy, cz] = self.layout.chunk_shape();
        let [_, chunks_y, chunks_z] = self.layout.chunks();
        let planes = self.slab.len() / (ny * nz);
        let (slab, layout, row) = (&self.slab, self.layout, self.slab_row);
        let row_dir = self.temp.join("sdf").join("c").join(row.to_string());
        let written: std::io::Result<Vec<bool>> = (0..chunks_y * chunks_z)
            .into_par_iter()
            .map(|index| {
                let (cj, ck) = (index / chunks_z, index % chunks_z);
                let mut chunk = vec![layout.fill; cx * cy * cz];
                let (j0, k0) = (cj * cy, ck * cz);
                let (rows_y, rows_z) = (cy.min(ny - j0), cz.min(nz - k0));
                for a in 0..planes {
                    for b in 0..rows_y {
                        let from = (a * ny + j0 + b) * nz + k0;
                        let to = (a * cy + b) * cz;
                        chunk[to..to + rows_z].copy_from_slice(&slab[from..from + rows_z]);
                    }
                }
                let fill = layout.fill.to_bits();
                if layout.skip_fill_chunks && chunk.iter().all(|v| v.to_bits() == fill) {
                    return Ok(false);
                }
                let bytes: Vec<u8> = chunk.iter().flat_map(|v| v.to_le_bytes()).collect();
                let compressed = zstd::bulk::compress(&bytes, ZSTD_LEVEL)?;
                let dir = row_dir.join(cj.to_string());
                super::temporary::writing(|| {
                    std::fs::create_dir_all(&dir)?;
                    std::fs::write(dir.join(ck.to_string()), compressed)
                })?;
                Ok(true)
            })
            .collect();
        let written = written.map_err(|source| self.write_error(source))?;
        self.chunks_written += written.iter().filter(|w| **w).count();
        self.slab.clear();
        self.slab_row += 1;
        Ok(())
    }

    /// Write the metadata (`attributes` on the group and on `sdf`) and move the store into
    /// place, replacing a store that was there; every value must have been appended.
    pub fn commit(mut self, attributes: Map<String, Value>) -> Result<()> {
        assert_eq!(
            self.received,
            self.layout.shape.iter().product::<usize>(),
            "every value is appended before commit"
        );
        let layout = self.layout;
        let fill = if layout.fill.is_nan() {
            json!("NaN")
        } else {
            json!(layout.fill)
        };
        let array = json!({
            "zarr_format": 3,
            "node_type": "array",
            "shape": layout.shape,
            "data_type": "float32",
            "chunk_grid": {
                "name": "regular",
                "configuration": { "chunk_shape": layout.chunk_shape() }
            },
            "chunk_key_encoding": { "name": "default", "configuration": { "separator": "/" } },
            "fill_value": fill,
            "codecs": [
                { "name": "bytes", "configuration": { "endian": "little" } },
                { "name": "zstd", "configuration": { "level": ZSTD_LEVEL, "checksum": false } }
            ],
            "attributes": attributes,
            "dimension_names": ["x", "y", "z"]
        });
        let group = json!({ "zarr_format": 3, "node_type": "group", "attributes": attributes });
        let write_json = |path: PathBuf, value: &Value| {
            let text = serde_json::to_string_pretty(value).expect("JSON of our own values");
            super::temporary::writing(|| std::fs::write(path, text))
        };
        let finished = write_json(self.temp.join("sdf").join("zarr.json"), &array)
            .and_then(|_| write_json(self.temp.join("zarr.json"), &group))
            .and_then(|_| self.replace_target());
        finished.map_err(|source| self.write_error(source))?;
        self.committed = true;
        super::temporary::forget(&self.temp);
        Ok(())
    }

    /// Rename the finished store onto the target; a store already there is moved aside first
    /// and removed once the new one is in place.
    /// Another writer of the same target (two threads of one Python process) may swap it
    /// between our steps: each step is retried, and the last store committed is the one left.
    fn replace_target(&self) -> std::io::Result<()> {
        let name = self
            .target
            .file_name()
            .unwrap_or_default()
            .to_string_lossy();
        let mut last = None;
        for _ in 0..32 {
            match std::fs::rename(&self.temp, &self.target) {
                Ok(()) => return Ok(()),
                // Renaming a folder onto a folder that is not empty fails: move that aside
                // (another writer may have moved it already, since the rename failed).
                Err(e)
                    if self.target.exists()
                        || e.kind() == std::io::ErrorKind::DirectoryNotEmpty =>
                {
                    last = Some(e)
                }
                Err(e) => return Err(e),
            }
            let old = unique_sibling(&self.target, &name, "old")?;
            std::fs::remove_dir(&old)?;
            super::temporary::forget(&old);
            match std::fs::rename(&self.target, &old) {
                Ok(()) => {
                    let _ = std::fs::remove_dir_all(&old);
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| std::io::Error::other("the target kept changing")))
    }

    fn write_error(&self, source: std::io::Error) -> Error {
        Error::Write {
            path: self.target.clone(),
            source,
        }
    }
}

/// A new empty folder `.NAME.WHAT-HOST-PID-N` beside `target`, N counting up in this process: two
/// stores being written to one target at once (threads of one process) never share one.
fn unique_sibling(target: &Path, name: &str, what: &str) -> std::io::Result<PathBuf> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    loop {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = target.with_file_name(format!(
            "{}-{n}",
            super::temporary::sibling_name(name, what)
        ));
        match std::fs::create_dir(&path) {
            Ok(()) => {
                super::temporary::track(&path);
                return Ok(path);
            }
            // A leftover of a crashed process that had our id: take the next number.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
}

impl Drop for ZarrGrid {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_dir_all(&self.temp);
            super::temporary::forget(&self.temp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The chunk file at (i, j, k), decompressed.
    fn chunk(store: &Path, [i, j, k]: [usize; 3]) -> Option<Vec<f32>> {
        let path = store.join(format!("sdf/c/{i}/{j}/{k}"));
        let bytes = std::fs::read(path).ok()?;
        let raw = zstd::stream::decode_all(&bytes[..]).unwrap();
        Some(
            raw.chunks_exact(4)
                .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
                .collect(),
        )
    }

    #[test]
    fn chunks_hold_the_grid_in_c_order_padded_with_the_fill() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("g.zarr");
        let shape = [5, 3, 4];
        let layout = ZarrLayout {
            shape,
            chunk: 2,
            fill: f32::NAN,
            skip_fill_chunks: false,
        };
        let mut grid = ZarrGrid::create(&target, layout).unwrap();
        let values: Vec<f32> = (0..60).map(|v| v as f32).collect();
        // Pieces that straddle slabs.
        for piece in values.chunks(7) {
            grid.append(piece).unwrap();
        }
        assert_eq!(grid.chunks_written, 3 * 2 * 2);
        grid.commit(Map::new()).unwrap();
        for i in 0..3 {
            for j in 0..2 {
                for k in 0..2 {
                    let got = chunk(&target, [i, j, k]).unwrap();
                    assert_eq!(got.len(), 8);
                    for (n, v) in got.iter().enumerate() {
                        let (x, y, z) = (2 * i + n / 4, 2 * j + (n / 2) % 2, 2 * k + n % 2);
                        if x < 5 && y < 3 && z < 4 {
                            assert_eq!(*v, values[(x * 3 + y) * 4 + z]);
                        } else {
                            assert!(v.is_nan(), "padding at {x},{y},{z} is the fill");
                        }
                    }
                }
            }
        }
        let meta: Value =
            serde_json::from_slice(&std::fs::read(target.join("sdf/zarr.json")).unwrap()).unwrap();
        assert_eq!(meta["fill_value"], "NaN");
        assert_eq!(
            meta["chunk_grid"]["configuration"]["chunk_shape"],
            json!([2, 2, 2])
        );
        assert!(
            !dir.path()
                .read_dir()
                .unwrap()
                .any(|e| { e.unwrap().file_name().to_string_lossy().contains("partial") })
        );
    }

    #[test]
    fn fill_chunks_are_left_out_when_asked() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("band.zarr");
        let layout = ZarrLayout {
            shape: [4, 4, 4],
            chunk: 2,
            fill: 0.5,
            skip_fill_chunks: true,
        };
        let mut grid = ZarrGrid::create(&target, layout).unwrap();
        let mut values = vec![0.5f32; 64];
        values[0] = -0.5;
        grid.append(&values).unwrap();
        assert_eq!(grid.chunks_written, 1);
        grid.commit(Map::new()).unwrap();
        assert!(chunk(&target, [0, 0, 0]).is_some());
        assert!(chunk(&target, [1, 1, 1]).is_none());
    }

    #[test]
    fn a_dropped_store_leaves_nothing_and_an_old_store_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("g.zarr");
        let layout = ZarrLayout {
            shape: [2, 2, 2],
            chunk: 64,
            fill: 0.0,
            skip_fill_chunks: false,
        };
        let mut grid = ZarrGrid::create(&target, layout).unwrap();
        grid.append(&[1.0; 4]).unwrap();
        drop(grid);
        assert_eq!(dir.path().read_dir().unwrap().count(), 0);

        for value in [1.0, 2.0] {
            let mut grid = ZarrGrid::create(&target, layout).unwrap();
            grid.append(&[value; 8]).unwrap();
            grid.commit(Map::new()).unwrap();
        }
        assert_eq!(chunk(&target, [0, 0, 0]).unwrap(), vec![2.0; 8]);
        assert_eq!(dir.path().read_dir().unwrap().count(), 1);
    }

    #[test]
    fn stores_written_to_one_target_at_once_leave_one_whole_store() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("g.zarr");
        let layout = ZarrLayout {
            shape: [4, 4, 4],
            chunk: 2,
            fill: f32::NAN,
            skip_fill_chunks: false,
        };
        std::thread::scope(|scope| {
            for value in 0..6 {
                let target = &target;
                scope.spawn(move || {
                    for _ in 0..5 {
                        let mut grid = ZarrGrid::create(target, layout).unwrap();
                        grid.append(&[value as f32; 64]).unwrap();
                        grid.commit(Map::new()).unwrap();
                    }
                });
            }
        });
        // Every chunk is from the one store committed last.
        let first = chunk(&target, [0, 0, 0]).unwrap();
        for c in [[0, 0, 0], [1, 0, 1], [1, 1, 1]] {
            assert_eq!(chunk(&target, c).unwrap(), first);
        }
        let names: Vec<_> = dir
            .path()
            .read_dir()
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["g.zarr"], "no partial or old folders left");
    }

    #[test]
    fn other_files_are_not_replaced_and_bad_chunks_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("data.zarr");
        std::fs::create_dir(&target).unwrap();
        std::fs::write(target.join("keep.txt"), "mine").unwrap();
        let layout = ZarrLayout {
            shape: [2, 2, 2],
            chunk: 64,
            fill: 0.0,
            skip_fill_chunks: false,
        };
        let error = ZarrGrid::create(&target, layout).err().unwrap().to_string();
        assert!(error.contains("not a Zarr store"), "{error}");
        assert!(target.join("keep.txt").is_file());
        let nowhere = dir.path().join("no/such/g.zarr");
        let error = ZarrGrid::create(&nowhere, layout)
            .err()
            .unwrap()
            .to_string();
        assert!(error.contains("folder does not exist"), "{error}");
        assert!(!dir.path().join("no").exists());
        for chunk in [0, MAX_CHUNK + 1] {
            let layout = ZarrLayout { chunk, ..layout };
            let target = dir.path().join("new.zarr");
            let error = ZarrGrid::create(&target, layout).err().unwrap().to_string();
            assert!(error.contains("--chunk"), "{error}");
        }
    }
}
