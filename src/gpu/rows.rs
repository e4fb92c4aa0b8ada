//! The host ends of a job's rows: sources that write a chunk's inputs straight into mapped
//! buffers (points, paired shapes, segment pairs) and sinks that take its answers.

use std::ops::Range;

use super::layout::GpuShape;
use crate::error::Result;

use crate::math::DVec3;
use crate::points::{PointChunk, Points, read_chunk};
use crate::shape::Shape;

/// Fills rows `range` of a per-row input into `out` (exactly `range.len() * row_bytes`).
pub trait RowSource {
    fn fill(&mut self, range: Range<usize>, out: wgpu::WriteOnly<'_, [u8]>) -> Result<()>;
}

impl<F: FnMut(Range<usize>, wgpu::WriteOnly<'_, [u8]>) -> Result<()>> RowSource for F {
    fn fill(&mut self, range: Range<usize>, out: wgpu::WriteOnly<'_, [u8]>) -> Result<()> {
        self(range, out)
    }
}

/// A query point as the kernels read it: moved by `-offset` in f64 (a mesh's centre, so a
/// mesh far from the origin keeps its precision; zero for scenes) and rounded once to f32.
/// Every query point given in f64 (files, Python, the service, meshes) passes here.
pub fn query_point(p: [f64; 3], offset: DVec3) -> [f32; 3] {
    [p[0] - offset.x, p[1] - offset.y, p[2] - offset.z].map(|x| x as f32)
}

/// Rows a piece of a chunk is converted and written in: one task of the parallel fill.
const PIECE_ROWS: usize = 16 * 1024;

/// Writes `rows` into a chunk's point buffer as f32 triples, `convert`ed piece by piece on all
/// cores: each piece is converted into a scratch buffer and copied into the mapped buffer at
/// once (writing one f32 at a time into write-combined memory held a hardware GPU's mesh
/// queries to a third of their rate, and one core filling a chunk held the H100's to 4 GB/s:
/// docs/perf-history.md, H200 and H100).
fn write_converted<T: Sync>(
    rows: &[T],
    out: wgpu::WriteOnly<'_, [u8]>,
    convert: impl Fn(&T) -> [f32; 3] + Sync,
) {
    use rayon::prelude::*;
    fn write_piece<T>(
        rows: &[T],
        mut out: wgpu::WriteOnly<'_, [u8]>,
        convert: &impl Fn(&T) -> [f32; 3],
    ) {
        let converted: Vec<[f32; 3]> = rows.iter().map(convert).collect();
        out.copy_from_slice(bytemuck::cast_slice(&converted));
    }
    if rows.len() <= PIECE_ROWS {
        return write_piece(rows, out, &convert);
    }
    let mut pieces = Vec::with_capacity(rows.len().div_ceil(PIECE_ROWS));
    let mut rest = out;
    for piece in rows.chunks(PIECE_ROWS) {
        let (head, tail) = rest.split_at(piece.len() * 12);
        pieces.push((piece, SendPiece(head)));
        rest = tail;
    }
    pieces
        .into_par_iter()
        .for_each(|(rows, out)| write_piece(rows, out.0, &convert));
}

/// A piece of a mapped buffer, written on another thread.
struct SendPiece<'a>(wgpu::WriteOnly<'a, [u8]>);

// SAFETY: a `WriteOnly<'_, [u8]>` is a unique write-only borrow of bytes, like `&mut [u8]`
// (which is Send); wgpu-types 30 declares `Send` only for sized targets (its `Sync` has
// `?Sized`), so slices miss it.
unsafe impl Send for SendPiece<'_> {}

/// Writes f64 points into a chunk's point buffer through [`query_point`], on all cores.
pub fn write_query_points(points: &[[f64; 3]], offset: DVec3, out: wgpu::WriteOnly<'_, [u8]>) {
    write_converted(points, out, |&p| query_point(p, offset));
}

/// [`write_query_points`] for points gathered by an iterator (rows of a block picked by
/// index), converted in pieces on one core.
pub fn write_query_points_iter(
    points: impl Iterator<Item = [f64; 3]>,
    offset: DVec3,
    mut out: wgpu::WriteOnly<'_, [u8]>,
) {
    let mut converted: Vec<[f32; 3]> = Vec::with_capacity(4096);
    let mut written = 0;
    let mut flush = |converted: &mut Vec<[f32; 3]>| {
        let bytes: &[u8] = bytemuck::cast_slice(converted);
        out.slice(written..written + bytes.len())
            .copy_from_slice(bytes);
        written += bytes.len();
        converted.clear();
    };
    for p in points {
        converted.push(query_point(p, offset));
        if converted.len() == converted.capacity() {
            flush(&mut converted);
        }
    }
    flush(&mut converted);
}

impl Points<'_> {
    /// Rows `range` into a chunk's mapped point buffer, moved by `-offset` (a mesh's centre, a
    /// scene's frame): f32 rows copied as they are when there is no offset.
    pub fn write(
        &mut self,
        range: Range<usize>,
        offset: DVec3,
        chunk: &mut PointChunk,
        out: wgpu::WriteOnly<'_, [u8]>,
    ) -> Result<()> {
        match self.slice(range, chunk)? {
            PointSlice::F32(rows) if offset == DVec3::ZERO => write_converted(rows, out, |&p| p),
            PointSlice::F32(rows) => {
                write_converted(rows, out, |p| query_point(p.map(f64::from), offset))
            }
            PointSlice::F64(rows) => write_query_points(rows, offset, out),
        }
        Ok(())
    }

    /// Rows `range` as they are held: in memory, or read into `chunk`.
    fn slice<'b>(
        &'b mut self,
        range: Range<usize>,
        chunk: &'b mut PointChunk,
    ) -> Result<PointSlice<'b>> {
        Ok(match self {
            Points::F32(rows) => PointSlice::F32(&rows[range]),
            Points::F64(rows) => PointSlice::F64(&rows[range]),
            Points::Read(reader) => {
                read_chunk(*reader, range, chunk)?;
                match chunk {
                    PointChunk::F32(rows) => PointSlice::F32(rows),
                    PointChunk::F64(rows) => PointSlice::F64(rows),
                }
            }
        })
    }

    /// The points as a [`RowSource`] for a scene, moved by `-frame` (`GpuScene::frame`).
    pub(crate) fn source(&mut self, frame: DVec3) -> impl RowSource + '_ {
        let mut chunk = PointChunk::default();
        move |range: Range<usize>, out: wgpu::WriteOnly<'_, [u8]>| {
            self.write(range, frame, &mut chunk, out)
        }
    }

    /// The points as a [`RowSource`], row i moved by `-offsets[i]` in f64 (paired jobs' frames).
    pub(crate) fn source_in_frames<'a>(&'a mut self, offsets: &'a [DVec3]) -> impl RowSource + 'a {
        let mut chunk = PointChunk::default();
        move |range: Range<usize>, out: wgpu::WriteOnly<'_, [u8]>| {
            let offsets = &offsets[range.clone()];
            let framed: Vec<[f32; 3]> = match self.slice(range, &mut chunk)? {
                PointSlice::F32(rows) => (rows.iter().zip(offsets))
                    .map(|(p, &o)| query_point(p.map(f64::from), o))
                    .collect(),
                PointSlice::F64(rows) => (rows.iter().zip(offsets))
                    .map(|(&p, &o)| query_point(p, o))
                    .collect(),
            };
            write_converted(&framed, out, |&p| p);
            Ok(())
        }
    }
}

enum PointSlice<'a> {
    F32(&'a [[f32; 3]]),
    F64(&'a [[f64; 3]]),
}

/// Paired shapes, converted to their GPU form as they are written; `data_starts` says where
/// each shape's variable-size part lies in the job's resident `shape_data` (empty: none has
/// one; `layout::ShapeData::for_paired`).
/// Shape i is moved by `-offsets[i]` where there are any (paired jobs' frames).
pub fn shapes_from_slice<'a>(
    shapes: &'a [Shape],
    data_starts: &'a [u32],
    offsets: &'a [DVec3],
) -> impl RowSource + 'a {
    move |range: Range<usize>, out: wgpu::WriteOnly<'_, [u8]>| {
        let (rows, _) = out.into_chunks::<{ std::mem::size_of::<GpuShape>() }>();
        let first = range.start;
        rows.write_iter(shapes[range].iter().enumerate().map(|(k, s)| {
            let offset = offsets.get(first + k).copied().unwrap_or(DVec3::ZERO);
            let mut record = GpuShape::from_shape_moved(s, -offset);
            if matches!(s, Shape::ConvexHull(_)) {
                record.set_data_start(data_starts[first + k]);
            }
            bytemuck::cast::<GpuShape, [u8; 96]>(record)
        }));
        Ok(())
    }
}

/// Segment pairs, converted to their GPU records as they are written.
pub fn segment_pairs_from_slices<'a>(
    a: &'a [[DVec3; 2]],
    b: &'a [[DVec3; 2]],
) -> impl RowSource + 'a {
    move |range: Range<usize>, out: wgpu::WriteOnly<'_, [u8]>| {
        write_segment_pairs(
            a[range.clone()].iter().copied(),
            b[range].iter().copied(),
            out,
        );
        Ok(())
    }
}

/// Segment pairs `a[i]`, `b[i]` as their GPU records, into a chunk's mapped buffer.
pub fn write_segment_pairs(
    a: impl Iterator<Item = [DVec3; 2]>,
    b: impl Iterator<Item = [DVec3; 2]>,
    out: wgpu::WriteOnly<'_, [u8]>,
) {
    let (rows, _) = out.into_chunks::<{ std::mem::size_of::<GpuShape>() }>();
    rows.write_iter(
        a.zip(b)
            .map(|(a, b)| bytemuck::cast::<GpuShape, [u8; 96]>(GpuShape::from_segment_pair(a, b))),
    );
}
