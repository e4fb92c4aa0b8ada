//! Point Cloud Library's `.pcd` point clouds (what PCL and Open3D write), as query points:
//! the `x`, `y`, `z` fields of every point, other fields (normals, colours) left. Its three
//! encodings are read: `ascii`, `binary` (records one after another) and `binary_compressed`
//! (each field's values together, LZF-compressed).

use std::io::{BufRead, Read, Seek};
use std::ops::Range;
use std::path::Path;

use super::lzf::{LzfFile, LzfReader};
use super::records::PointRecords;
use crate::error::{Error, Result};

/// A header longer than this is not one (a binary file read as text).
const MOST_HEADER_BYTES: u64 = 1 << 16;

/// Where a `.pcd`'s points lie, by its encoding; each is read as the chunks ask.
pub(crate) enum PcdPoints {
    /// `binary`: records one after another, read in place.
    Records(PointRecords),
    /// `ascii`: `points` lines of `words` values from byte `start`, after `lines` header
    /// lines; x, y and z are the values at `columns`.
    Text {
        start: u64,
        lines: usize,
        words: usize,
        columns: [usize; 3],
        points: usize,
    },
    /// `binary_compressed`: each field's values together, LZF-compressed.
    Columns(Box<CompressedColumns>),
}

/// A `binary_compressed` `.pcd`'s x, y and z columns, inflated as the chunks ask.
pub(crate) struct CompressedColumns {
    lzf: LzfFile,
    points: usize,
    /// Each of x, y, z: where its values start in the inflated bytes, and a value's bytes.
    columns: [(u64, usize); 3],
    /// One forward reader a column, since the chunks come in order.
    readers: [Option<LzfReader>; 3],
}

impl CompressedColumns {
    pub fn points(&self) -> usize {
        self.points
    }

    /// The positions of points `range`.
    pub fn read(&mut self, range: Range<usize>) -> Result<Vec<[f64; 3]>, String> {
        let mut rows = vec![[0.0; 3]; range.len()];
        let mut bytes = Vec::new();
        for (axis, &(start, size)) in self.columns.iter().enumerate() {
            bytes.resize(range.len() * size, 0);
            let from = start + (range.start * size) as u64;
            self.lzf.read(&mut self.readers[axis], from, &mut bytes)?;
            for (row, value) in rows.iter_mut().zip(bytes.chunks_exact(size)) {
                row[axis] = float(value, size);
            }
        }
        Ok(rows)
    }
}

/// A `.pcd`'s header read and its data checked to be there: a binary file's records lie in
/// it, a compressed file's stream inflates to its records' bytes exactly (decoded once, in
/// bounded memory). An ascii file's lines are checked by the text reader.
pub(crate) fn open_points(path: &Path) -> Result<PcdPoints> {
    let bad = |problem: String| Error::BadFile {
        file: path.display().to_string(),
        problem,
    };
    let mut reader = std::io::BufReader::new(super::open_input(path)?);
    let layout = read_header(&mut reader).map_err(bad)?;
    let start = reader.stream_position().map_err(|e| bad(e.to_string()))?;
    let data_bytes = (layout.points as u64)
        .checked_mul(layout.record as u64)
        .ok_or_else(|| {
            bad(format!(
                "{} points of {} bytes overflow",
                layout.points, layout.record
            ))
        })?;
    match layout.data.as_str() {
        "binary" => {
            let scalar = |k: usize| match layout.fields[k].size {
                4 => ply_rs_bw::ply::ScalarType::Float,
                _ => ply_rs_bw::ply::ScalarType::Double,
            };
            let records = PointRecords {
                start,
                count: layout.points,
                stride: layout.record,
                coordinates: layout.xyz.map(|k| (layout.offsets[k], scalar(k))),
                big_endian: false,
            };
            records.check_within(path, "points").map(PcdPoints::Records)
        }
        "ascii" => {
            // Which of a line's words holds each of x, y, z.
            let (word_of, words) = starts(layout.fields.iter().map(|f| f.count));
            Ok(PcdPoints::Text {
                start,
                lines: layout.lines,
                words,
                columns: layout.xyz.map(|k| word_of[k]),
                points: layout.points,
            })
        }
        "binary_compressed" => {
            let sizes = read_exactly(&mut reader, 8, "its compressed sizes").map_err(bad)?;
            let compressed = u32::from_le_bytes(sizes[..4].try_into().expect("4 bytes")) as u64;
            let inflated = u32::from_le_bytes(sizes[4..].try_into().expect("4 bytes")) as u64;
            if inflated != data_bytes {
                return Err(bad(format!(
                    "its compressed data inflates to {inflated} bytes, but {} points of {} \
                     bytes take {data_bytes}",
                    layout.points, layout.record
                )));
            }
            // LZF makes at most 264 bytes of 2: a larger claim is not LZF.
            if inflated > compressed.saturating_mul(132) + 32 {
                return Err(bad(format!(
                    "{compressed} compressed bytes cannot inflate to {inflated}"
                )));
            }
            let len = super::input_len(path)?;
            let packed_start = start + 8;
            if packed_start + compressed > len {
                return Err(bad(format!(
                    "truncated: its compressed data takes {compressed} bytes, the file has {}",
                    len.saturating_sub(packed_start)
                )));
            }
            let lzf = LzfFile::open(path, packed_start, compressed, inflated).map_err(bad)?;
            // Each field's values lie together: field k's block starts at its offset times
            // the point count.
            let columns = layout.xyz.map(|k| {
                (
                    layout.offsets[k] as u64 * layout.points as u64,
                    layout.fields[k].size,
                )
            });
            Ok(PcdPoints::Columns(Box::new(CompressedColumns {
                lzf,
                points: layout.points,
                columns,
                readers: [None, None, None],
            })))
        }
        other => Err(bad(format!(
            "DATA {other}: expected ascii, binary or binary_compressed"
        ))),
    }
}

/// One field of a record: its name, bytes a value, type letter and values a point.
struct Field {
    name: String,
    size: usize,
    kind: char,
    count: usize,
}

/// What a header says: the encoding, the fields, where x, y and z are among them, each
/// field's offset in a record, the record's bytes and the points.
struct Layout {
    data: String,
    fields: Vec<Field>,
    xyz: [usize; 3],
    offsets: Vec<usize>,
    record: usize,
    points: usize,
    /// The header's lines.
    lines: usize,
}

/// A header, read up to and including its DATA line.
fn read_header(reader: &mut impl BufRead) -> Result<Layout, String> {
    let mut header = Header::default();
    let mut header_bytes = 0u64;
    let mut line = Vec::new();
    let mut line_number = 0;
    let data = loop {
        line.clear();
        line_number += 1;
        let read = reader
            .take(MOST_HEADER_BYTES - header_bytes)
            .read_until(b'\n', &mut line)
            .map_err(|e| format!("cannot read its header: {e}"))?;
        header_bytes += read as u64;
        if read == 0 || !line.ends_with(b"\n") {
            return Err(if header_bytes >= MOST_HEADER_BYTES {
                "no DATA line in its first 64 KiB: not a .pcd header".into()
            } else {
                "its header ends before its DATA line".into()
            });
        }
        let text = std::str::from_utf8(&line)
            .map_err(|_| format!("header line {line_number} is not text: not a .pcd file"))?;
        let mut words = text.split_whitespace();
        let Some(key) = words.next() else { continue };
        if key.starts_with('#') {
            continue;
        }
        let values: Vec<&str> = words.take_while(|w| !w.starts_with('#')).collect();
        if key.eq_ignore_ascii_case("DATA") {
            break values.first().map(|v| v.to_lowercase()).unwrap_or_default();
        }
        header
            .set(key, &values)
            .map_err(|problem| format!("header line {line_number} ({key}): {problem}"))?;
    };
    let fields = header.fields()?;
    let points = header.points()?;
    let column = |name: &str| -> Result<usize, String> {
        let k = fields.iter().position(|f| f.name == name).ok_or_else(|| {
            let names: Vec<&str> = fields.iter().map(|f| f.name.as_str()).collect();
            format!("no `{name}` field (it has {})", names.join(", "))
        })?;
        let f = &fields[k];
        if f.kind != 'F' || !(f.size == 4 || f.size == 8) || f.count != 1 {
            return Err(format!(
                "field `{name}` is TYPE {} SIZE {} COUNT {}: positions are read as one float \
                 (F) of 4 or 8 bytes",
                f.kind, f.size, f.count
            ));
        }
        Ok(k)
    };
    let xyz = [column("x")?, column("y")?, column("z")?];
    let (offsets, record) = starts(fields.iter().map(|f| f.size * f.count));
    Ok(Layout {
        data,
        fields,
        xyz,
        offsets,
        record,
        points,
        lines: line_number,
    })
}

#[derive(Default)]
struct Header {
    fields: Vec<String>,
    sizes: Vec<usize>,
    kinds: Vec<char>,
    counts: Option<Vec<usize>>,
    width: Option<usize>,
    height: Option<usize>,
    points: Option<usize>,
}

impl Header {
    fn set(&mut self, key: &str, values: &[&str]) -> Result<(), String> {
        let numbers = || -> Result<Vec<usize>, String> {
            values
                .iter()
                .map(|v| {
                    v.parse::<usize>()
                        .map_err(|_| format!("`{v}` is not a whole number"))
                })
                .collect()
        };
        let one = || -> Result<usize, String> {
            match numbers()?.as_slice() {
                [n] => Ok(*n),
                _ => Err("expected one number".into()),
            }
        };
        match key.to_uppercase().as_str() {
            "FIELDS" | "COLUMNS" => self.fields = values.iter().map(|v| v.to_string()).collect(),
            "SIZE" => self.sizes = numbers()?,
            "TYPE" => {
                self.kinds = values
                    .iter()
                    .map(|v| match v.to_uppercase().as_str() {
                        t @ ("F" | "I" | "U") => Ok(t.chars().next().expect("one letter")),
                        _ => Err(format!("`{v}` is not F, I or U")),
                    })
                    .collect::<Result<_, _>>()?
            }
            "COUNT" => self.counts = Some(numbers()?),
            "WIDTH" => self.width = Some(one()?),
            "HEIGHT" => self.height = Some(one()?),
            "POINTS" => self.points = Some(one()?),
            // VERSION and VIEWPOINT say nothing about positions as stored.
            _ => {}
        }
        Ok(())
    }

    fn fields(&self) -> Result<Vec<Field>, String> {
        let n = self.fields.len();
        if n == 0 {
            return Err("its header has no FIELDS".into());
        }
        let counts = self.counts.clone().unwrap_or_else(|| vec![1; n]);
        if self.sizes.len() != n || self.kinds.len() != n || counts.len() != n {
            return Err(format!(
                "its header gives {n} FIELDS but {} SIZE, {} TYPE and {} COUNT values",
                self.sizes.len(),
                self.kinds.len(),
                counts.len()
            ));
        }
        (0..n)
            .map(|k| {
                let size = self.sizes[k];
                if ![1, 2, 4, 8].contains(&size) || counts[k] == 0 || counts[k] > 1 << 16 {
                    return Err(format!(
                        "field `{}`: SIZE {size} COUNT {} (sizes are 1, 2, 4 or 8 bytes)",
                        self.fields[k], counts[k]
                    ));
                }
                Ok(Field {
                    name: self.fields[k].clone(),
                    size,
                    kind: self.kinds[k],
                    count: counts[k],
                })
            })
            .collect()
    }

    fn points(&self) -> Result<usize, String> {
        let grid = match (self.width, self.height) {
            (Some(w), Some(h)) => Some(
                w.checked_mul(h)
                    .ok_or_else(|| format!("WIDTH {w} × HEIGHT {h} overflows"))?,
            ),
            (Some(w), None) => Some(w),
            _ => None,
        };
        match (self.points, grid) {
            (Some(p), Some(g)) if p != g => Err(format!("POINTS {p}, but WIDTH × HEIGHT is {g}")),
            (Some(p), _) | (None, Some(p)) => Ok(p),
            (None, None) => Err("its header has neither POINTS nor WIDTH".into()),
        }
    }
}

/// Where each of `lengths` starts when they are laid end to end, and their total.
fn starts(lengths: impl Iterator<Item = usize>) -> (Vec<usize>, usize) {
    let mut total = 0;
    let starts = lengths
        .map(|length| {
            let here = total;
            total += length;
            here
        })
        .collect();
    (starts, total)
}

fn read_exactly(reader: &mut impl Read, bytes: u64, what: &str) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    reader
        .take(bytes)
        .read_to_end(&mut out)
        .map_err(|e| format!("cannot read {what}: {e}"))?;
    if (out.len() as u64) < bytes {
        return Err(format!(
            "truncated: {what} takes {bytes} bytes, the file has {}",
            out.len()
        ));
    }
    Ok(out)
}

/// A little-endian float of `size` bytes at the start of `bytes`.
fn float(bytes: &[u8], size: usize) -> f64 {
    if size == 8 {
        f64::from_le_bytes(bytes[..8].try_into().expect("8 bytes"))
    } else {
        f64::from(f32::from_le_bytes(bytes[..4].try_into().expect("4 bytes")))
    }
}
