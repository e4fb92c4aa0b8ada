//! Fixed-size binary records of points, read in place (a binary `.ply`'s leading vertex
//! element, a binary `.pcd`'s points), and the PLY scalar types they and PLY payloads are
//! decoded by.

use std::io::{BufReader, Read, Seek};
use std::ops::Range;
use std::path::Path;

use crate::error::{Error, Result};

/// Fixed-size binary records of points (a binary `.ply`'s leading vertex element, a binary
/// `.pcd`'s points): `count` records of `stride` bytes from byte `start`, each coordinate at
/// its offset in the record, of its type.
pub(crate) struct PointRecords {
    pub start: u64,
    pub count: usize,
    pub stride: usize,
    pub coordinates: [(usize, ply_rs_bw::ply::ScalarType); 3],
    pub big_endian: bool,
}

impl PointRecords {
    /// The coordinates in `record`.
    fn position(&self, record: &[u8]) -> [f64; 3] {
        self.coordinates.clone().map(|(at, scalar)| {
            let mut bytes = &record[at..];
            read_ply_scalar(&mut bytes, &scalar, self.big_endian).expect("within the record")
        })
    }

    /// `self` if the records lie within `path`'s bytes, else the error naming them (`what`).
    pub fn check_within(self, path: &Path, what: &str) -> Result<PointRecords> {
        let len = super::input_len(path)?;
        let end = (self.count as u64)
            .checked_mul(self.stride as u64)
            .and_then(|bytes| bytes.checked_add(self.start));
        if end.is_none_or(|end| end > len) {
            return Err(Error::BadFile {
                file: path.display().to_string(),
                problem: format!(
                    "truncated: its {} {what} of {} bytes from byte {} run past the file's {len} bytes",
                    self.count, self.stride, self.start
                ),
            });
        }
        Ok(self)
    }

    pub fn read(
        &self,
        reader: &mut BufReader<std::fs::File>,
        range: Range<usize>,
    ) -> std::io::Result<Vec<[f64; 3]>> {
        let mut bytes = vec![0; range.len() * self.stride];
        reader.seek(std::io::SeekFrom::Start(
            self.start + (range.start * self.stride) as u64,
        ))?;
        reader.read_exact(&mut bytes)?;
        Ok(bytes
            .chunks_exact(self.stride)
            .map(|record| self.position(record))
            .collect())
    }
}

pub(super) fn ply_scalar_size(scalar: &ply_rs_bw::ply::ScalarType) -> usize {
    use ply_rs_bw::ply::ScalarType;
    match scalar {
        ScalarType::Char | ScalarType::UChar => 1,
        ScalarType::Short | ScalarType::UShort => 2,
        ScalarType::Int | ScalarType::UInt | ScalarType::Float => 4,
        ScalarType::Double => 8,
    }
}

/// One binary PLY scalar, as f64 (exact for every integer type).
pub(super) fn read_ply_scalar<R: std::io::Read>(
    reader: &mut R,
    scalar: &ply_rs_bw::ply::ScalarType,
    big_endian: bool,
) -> std::io::Result<f64> {
    use ply_rs_bw::ply::ScalarType;
    let mut bytes = [0u8; 8];
    let n = ply_scalar_size(scalar);
    reader.read_exact(&mut bytes[..n])?;
    if big_endian {
        bytes[..n].reverse();
    }
    let b = bytes;
    Ok(match scalar {
        ScalarType::Char => b[0] as i8 as f64,
        ScalarType::UChar => b[0] as f64,
        ScalarType::Short => i16::from_le_bytes([b[0], b[1]]) as f64,
        ScalarType::UShort => u16::from_le_bytes([b[0], b[1]]) as f64,
        ScalarType::Int => i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64,
        ScalarType::UInt => u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64,
        ScalarType::Float => f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64,
        ScalarType::Double => f64::from_le_bytes(b),
    })
}
