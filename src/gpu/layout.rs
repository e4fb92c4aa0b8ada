//! Host twins of the WGSL structs in `shaders/shared/types.wgsl`. `tests/shaders.rs` checks
//! every offset and size against naga's layout of the composed shader.

use bytemuck::{Pod, Zeroable};

use crate::Mode;
pub use crate::fields::{GpuHit, GpuSegmentHit};
use crate::hull::ConvexHull;
use crate::math::DVec3;
use crate::math::{cylinder_axis, ellipsoid_frame, triangle_unit_normal};
use crate::shape::Shape;

/// One shape in its local frame. Per kind (all derived in f64, then rounded once):
///
/// | kind | anchor | p0 | p1, p2, p3 |
/// |---|---|---|---|
/// | sphere | center | w = radius | – |
/// | aabb | center | xyz = half extents | – |
/// | box, wedge, corner_wedge | center | xyz = half extents | p1 = unit rotation quaternion `[x, y, z, w]` |
/// | plane | normal · offset | xyz = unit normal | – |
/// | segment | a | xyz = b − a | – |
/// | line | a | xyz = unit(b − a) | – |
/// | ray | origin | xyz = unit direction | – |
/// | triangle | a | xyz = b − a | p1 = c − a, p2 = unit normal (zero if degenerate) |
/// | capsule | a | xyz = b − a, w = radius | – |
/// | cylinder, cone | a | xyz = unit axis (Z when a == b), w = length | p1.w = radius |
/// | torus | center | xyz = unit axis, w = major radius | p1.w = minor radius |
/// | ellipsoid | center | xyz = radii sorted longest first | p1 = unit rotation quaternion of that sorted frame (`math::ellipsoid_frame`) |
/// | convex_hull | hull anchor | x, y, z = bit patterns of the first `shape_data` entry, the face count, 1 if solid | – |
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct GpuShape {
    pub kind: u32,
    /// Index in the user's scene (scenes are uploaded sorted by kind).
    pub index: u32,
    pub _pad: [u32; 2],
    pub anchor: [f32; 4],
    pub p0: [f32; 4],
    pub p1: [f32; 4],
    pub p2: [f32; 4],
    pub p3: [f32; 4],
}

/// A scene's texel texture (`Context::texture_texels`, shared/texels.wgsl) has rows of
/// `1 << TEXEL_ROW_BITS` texels, in layers of `1 << TEXEL_LAYER_ROW_BITS` rows (4 MiB).
pub const TEXEL_ROW_BITS: u32 = 12;
pub const TEXEL_LAYER_ROW_BITS: u32 = 6;

/// Rows per seed row in `mesh.wgsl`'s first round.
pub const SEED_STRIDE: usize = 8;
/// Rounds of `mesh.wgsl`: every SEED_STRIDE²-th row, then every SEED_STRIDE-th, then the rest.
pub const SEED_ROUNDS: u32 = 3;

/// Per-dispatch uniforms.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct Params {
    pub row_count: u32,
    pub shape_count: u32,
    pub mode: u32,
    pub nan_bits: u32,
    pub first_row: u32,
    /// The round of a job dispatched in rounds (`mesh.wgsl`).
    pub round: u32,
    pub round_count: u32,
    /// First word of the hits buffer where rows that do not read their shape back keep it
    /// for later rounds and passes (0: not kept).
    pub kept_shapes: u32,
    /// The chunk's grid header (`GridSamples::header`) when its rows are an SDF grid's
    /// samples: a uniform, which software adapters read once, where a storage word read in
    /// control flow costs a loop over the lanes every time.
    pub grid: [u32; super::grid::HEADER_WORDS],
}

impl Params {
    pub fn new(row_count: u32, shape_count: u32, mode: Mode, first_row: u32) -> Self {
        Params {
            row_count,
            shape_count,
            mode: mode as u32,
            nan_bits: f32::NAN.to_bits(),
            first_row,
            round: 0,
            round_count: 1,
            kept_shapes: 0,
            grid: [0; super::grid::HEADER_WORDS],
        }
    }
}

fn v4(v: DVec3, w: f64) -> [f32; 4] {
    [v.x as f32, v.y as f32, v.z as f32, w as f32]
}

impl GpuShape {
    /// A segment pair in the record the `segment_pairs` kernel reads: anchor a0, then
    /// a1 − a0, b0 − a0 and b1 − a0, differences taken in f64.
    pub fn from_segment_pair(a: [DVec3; 2], b: [DVec3; 2]) -> GpuShape {
        let a0 = a[0];
        GpuShape {
            anchor: v4(a0, 0.0),
            p0: v4(a[1] - a0, 0.0),
            p1: v4(b[0] - a0, 0.0),
            p2: v4(b[1] - a0, 0.0),
            ..GpuShape::default()
        }
    }

    /// The local-frame form the kernels read; `reference::project_point` derives the same
    /// parameters in f64.
    pub fn from_shape(shape: &Shape) -> GpuShape {
        Self::from_shape_moved(shape, DVec3::ZERO)
    }

    /// [`GpuShape::from_shape`] moved by `shift`, added to its anchor in f64 before rounding
    /// (every kind's record is relative to its anchor).
    pub fn from_shape_moved(shape: &Shape, shift: DVec3) -> GpuShape {
        // A plane's and a line's records are anchored at their points nearest the origin:
        // moved, at the moved one's (`Shape::translated`), so a frame's centre near them
        // leaves their anchors near it too (a plane 0.25 below a body 10^7 from the origin,
        // paired with it, kept its anchor 10^5 away along the plane).
        if shift != DVec3::ZERO && matches!(shape, Shape::Plane { .. } | Shape::Line { .. }) {
            return Self::from_shape(&shape.translated(shift));
        }
        let (anchor, p0, p1, p2, p3) = match *shape {
            Shape::Sphere { center, radius } => (
                center,
                v4(DVec3::ZERO, radius),
                [0.0; 4],
                [0.0; 4],
                [0.0; 4],
            ),
            Shape::Aabb { min, max } => (
                (min + max) * 0.5,
                v4((max - min) * 0.5, 0.0),
                [0.0; 4],
                [0.0; 4],
                [0.0; 4],
            ),
            Shape::Box {
                center,
                half_extents,
                rotation,
            }
            | Shape::Wedge {
                center,
                half_extents,
                rotation,
            }
            | Shape::CornerWedge {
                center,
                half_extents,
                rotation,
            } => {
                let [x, y, z, w] = rotation;
                let norm = (x * x + y * y + z * z + w * w).sqrt();
                let q = [x / norm, y / norm, z / norm, w / norm].map(|c| c as f32);
                (center, v4(half_extents, 0.0), q, [0.0; 4], [0.0; 4])
            }
            Shape::Plane { normal, offset } => (
                normal * offset,
                v4(normal, 0.0),
                [0.0; 4],
                [0.0; 4],
                [0.0; 4],
            ),
            Shape::Segment { a, b } => (a, v4(b - a, 0.0), [0.0; 4], [0.0; 4], [0.0; 4]),
            Shape::Line { a, b } => (
                a,
                v4((b - a).normalize_or_zero(), 0.0),
                [0.0; 4],
                [0.0; 4],
                [0.0; 4],
            ),
            Shape::Ray { origin, direction } => (
                origin,
                v4(direction.normalize_or_zero(), 0.0),
                [0.0; 4],
                [0.0; 4],
                [0.0; 4],
            ),
            Shape::Triangle { a, b, c } => (
                a,
                v4(b - a, 0.0),
                v4(c - a, 0.0),
                v4(triangle_unit_normal(a, b, c), 0.0),
                [0.0; 4],
            ),
            Shape::Capsule { a, b, radius } => (a, v4(b - a, radius), [0.0; 4], [0.0; 4], [0.0; 4]),
            Shape::Cylinder { a, b, radius } | Shape::Cone { a, b, radius } => {
                let (axis, length) = cylinder_axis(a, b);
                (
                    a,
                    v4(axis, length),
                    v4(DVec3::ZERO, radius),
                    [0.0; 4],
                    [0.0; 4],
                )
            }
            Shape::Torus {
                center,
                axis,
                major_radius,
                minor_radius,
            } => (
                center,
                v4(axis, major_radius),
                v4(DVec3::ZERO, minor_radius),
                [0.0; 4],
                [0.0; 4],
            ),
            Shape::Ellipsoid {
                center,
                radii,
                rotation,
            } => {
                let (sorted, frame) = ellipsoid_frame(radii, rotation);
                let q = frame.map(|c| c as f32);
                (center, v4(sorted, 0.0), q, [0.0; 4], [0.0; 4])
            }
            // The faces go to `shape_data` (`ShapeData::record` sets where).
            Shape::ConvexHull(ref hull) => {
                let words = [0, hull.faces.len() as u32, hull.solid as u32, 0];
                (
                    hull.anchor,
                    words.map(f32::from_bits),
                    [0.0; 4],
                    [0.0; 4],
                    [0.0; 4],
                )
            }
        };
        GpuShape {
            kind: shape.kind() as u32,
            index: 0,
            _pad: [0; 2],
            anchor: v4(
                if shift == DVec3::ZERO {
                    anchor
                } else {
                    anchor + shift
                },
                0.0,
            ),
            p0,
            p1,
            p2,
            p3,
        }
    }
}

impl GpuShape {
    /// Where a convex hull record's faces start in `shape_data` (p0.x, as a bit pattern).
    pub fn set_data_start(&mut self, entry: u32) {
        self.p0[0] = f32::from_bits(entry);
    }
}

/// The variable-size parts of shape records, bound as `shape_data` (`array<vec4<f32>>`): a
/// convex hull's faces, four entries each: the plane `(unit normal, normal · a)`, then the
/// corners a, b, c relative to the hull's anchor, counter-clockwise seen from outside.
#[derive(Debug, Default)]
pub struct ShapeData {
    pub entries: Vec<[f32; 4]>,
}

impl ShapeData {
    /// The record of `shape`, its variable-size part appended here.
    pub fn record(&mut self, shape: &Shape) -> GpuShape {
        let mut record = GpuShape::from_shape(shape);
        if let Shape::ConvexHull(hull) = shape {
            record.set_data_start(self.entries.len() as u32);
            self.push_hull(hull);
        }
        record
    }

    fn push_hull(&mut self, hull: &ConvexHull) {
        let anchor = hull.anchor;
        for f in &hull.faces {
            let a = f.a - anchor;
            self.entries.push(v4(f.normal, f.normal.dot(a)));
            for corner in [a, f.b - anchor, f.c - anchor] {
                self.entries.push(v4(corner, 0.0));
            }
        }
    }

    /// The data of a paired job's shapes and, per shape, where its part starts (empty when no
    /// shape has one): paired rows are converted as they stream, the data is uploaded once.
    pub fn for_paired(shapes: &[Shape]) -> (ShapeData, Vec<u32>) {
        let mut data = ShapeData::default();
        if !shapes.iter().any(|s| matches!(s, Shape::ConvexHull(_))) {
            return (data, Vec::new());
        }
        let starts = shapes
            .iter()
            .map(|s| {
                let start = data.entries.len() as u32;
                if let Shape::ConvexHull(hull) = s {
                    data.push_hull(hull);
                }
                start
            })
            .collect();
        (data, starts)
    }

    /// The binding's bytes (one unread entry when empty: zero-size bindings are invalid).
    pub fn into_bytes(mut self) -> Vec<u8> {
        if self.entries.is_empty() {
            self.entries.push([0.0; 4]);
        }
        bytemuck::cast_slice(&self.entries).to_vec()
    }
}
