//! Query points as every front end has them (`Points`): f32 or f64 rows in memory, or a reader
//! that gives each chunk's rows in the precision it read. How they reach the device is
//! `gpu::rows`'s (`Points::write`).

use std::ops::Range;

use crate::error::Result;

/// Query points, as every front end has them: f32 or f64 rows in memory (numpy arrays, request
/// bodies, slices), or a reader that gives each chunk's rows in the precision it read (`.npy`
/// and CSV files). Every job takes them this one way; each row reaches the device with at most
/// one conversion: f32 rows as they are (after a mesh's shift, in f64), f64 rows rounded once
/// by `gpu::query_point`.
pub enum Points<'a> {
    F32(&'a [[f32; 3]]),
    F64(&'a [[f64; 3]]),
    Read(&'a mut dyn PointReader),
}

/// Points read chunk by chunk: `read` puts rows `range` into `chunk`, as f32 or f64.
pub trait PointReader {
    /// How many rows there are.
    fn rows(&self) -> usize;
    fn read(&mut self, range: Range<usize>, chunk: &mut PointChunk) -> Result<()>;
}

/// One chunk of rows a [`PointReader`] read, in its precision.
#[derive(Debug)]
pub enum PointChunk {
    F32(Vec<[f32; 3]>),
    F64(Vec<[f64; 3]>),
}

impl Default for PointChunk {
    fn default() -> Self {
        PointChunk::F64(Vec::new())
    }
}

impl PointChunk {
    /// The chunk as f32 rows, emptied, for a reader to fill.
    pub fn f32_rows(&mut self) -> &mut Vec<[f32; 3]> {
        if !matches!(self, PointChunk::F32(_)) {
            *self = PointChunk::F32(Vec::new());
        }
        let PointChunk::F32(rows) = self else {
            unreachable!()
        };
        rows.clear();
        rows
    }

    /// The chunk as f64 rows, emptied, for a reader to fill.
    pub fn f64_rows(&mut self) -> &mut Vec<[f64; 3]> {
        if !matches!(self, PointChunk::F64(_)) {
            *self = PointChunk::F64(Vec::new());
        }
        let PointChunk::F64(rows) = self else {
            unreachable!()
        };
        rows.clear();
        rows
    }
}

impl PointChunk {
    pub fn len(&self) -> usize {
        match self {
            PointChunk::F32(rows) => rows.len(),
            PointChunk::F64(rows) => rows.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Rows `range` from `reader` into `chunk`: a reader that gives another number of rows is an
/// error, never rows copied past a buffer's end.
pub(crate) fn read_chunk(
    reader: &mut dyn PointReader,
    range: Range<usize>,
    chunk: &mut PointChunk,
) -> Result<()> {
    let asked = range.len();
    reader.read(range, chunk)?;
    check_rows("point reader", asked, chunk.len())
}

/// A reader's rows for a chunk: exactly as many as asked.
pub(crate) fn check_rows(what: &str, asked: usize, given: usize) -> Result<()> {
    if given == asked {
        Ok(())
    } else {
        Err(crate::Error::Usage(format!(
            "{what}: asked for {asked} rows of a chunk, it gave {given}"
        )))
    }
}

impl<'a> From<&'a [[f32; 3]]> for Points<'a> {
    fn from(rows: &'a [[f32; 3]]) -> Self {
        Points::F32(rows)
    }
}

impl<'a> From<&'a [[f64; 3]]> for Points<'a> {
    fn from(rows: &'a [[f64; 3]]) -> Self {
        Points::F64(rows)
    }
}

impl<'a> From<&'a Vec<[f32; 3]>> for Points<'a> {
    fn from(rows: &'a Vec<[f32; 3]>) -> Self {
        Points::F32(rows)
    }
}

impl<'a> From<&'a Vec<[f64; 3]>> for Points<'a> {
    fn from(rows: &'a Vec<[f64; 3]>) -> Self {
        Points::F64(rows)
    }
}

impl<'a, const N: usize> From<&'a [[f32; 3]; N]> for Points<'a> {
    fn from(rows: &'a [[f32; 3]; N]) -> Self {
        Points::F32(rows)
    }
}

impl<'a, const N: usize> From<&'a [[f64; 3]; N]> for Points<'a> {
    fn from(rows: &'a [[f64; 3]; N]) -> Self {
        Points::F64(rows)
    }
}

impl<'a, R: PointReader> From<&'a mut R> for Points<'a> {
    fn from(reader: &'a mut R) -> Self {
        Points::Read(reader)
    }
}

impl Points<'_> {
    pub fn len(&self) -> usize {
        match self {
            Points::F32(rows) => rows.len(),
            Points::F64(rows) => rows.len(),
            Points::Read(reader) => reader.rows(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Rows `range` in f64, for the host's share of a job (a mesh in parts, host signs):
    /// borrowed where they are f64 already, else converted into `scratch`.
    pub fn f64_rows<'s>(
        &'s mut self,
        range: Range<usize>,
        chunk: &'s mut PointChunk,
        scratch: &'s mut Vec<[f64; 3]>,
    ) -> Result<&'s [[f64; 3]]> {
        let widen = |rows: &[[f32; 3]], scratch: &'s mut Vec<[f64; 3]>| -> &'s [[f64; 3]] {
            scratch.clear();
            scratch.extend(rows.iter().map(|p| p.map(|x| x as f64)));
            scratch
        };
        Ok(match self {
            Points::F32(rows) => widen(&rows[range], scratch),
            Points::F64(rows) => &rows[range],
            Points::Read(reader) => {
                read_chunk(*reader, range, chunk)?;
                match chunk {
                    PointChunk::F32(rows) => widen(rows, scratch),
                    PointChunk::F64(rows) => rows,
                }
            }
        })
    }
}
