//! A bounding-volume hierarchy over a scene's bounded shapes (all kinds together), built on the
//! CPU with a binned surface-area heuristic and flattened for the GPU (`shaders/query.wgsl`,
//! `scan_bvh`). Every leaf holds shapes of one kind, so the kernel runs that kind's code alone.
//! Unbounded kinds (plane, line, ray) are not in it: they are scanned linearly.

use bytemuck::{Pod, Zeroable};

use crate::math::DVec3;
use crate::shape::Shape;

/// Deepest a traversal can go; the kernel's stack has this many entries. Builds stay well
/// below it (median splits past `MEDIAN_DEPTH`, so depth ≤ 34 + log2(n)), and the kernel
/// reports an overflow rather than answer wrongly.
pub const STACK_SIZE: usize = 64;
/// Past this depth every split is a median split, so depth ≤ MEDIAN_DEPTH + log2(n / LEAF).
const MEDIAN_DEPTH: usize = 32;
/// Shapes per leaf, at most.
pub const LEAF_SIZE: usize = 4;
/// Triangles per leaf, at most, in triangle-only hierarchies (`mesh.wgsl`, which tests a
/// leaf's triangles in a loop of their own: larger leaves, fewer node steps; measured in
/// docs/perf-history.md).
pub const TRIANGLE_LEAF_SIZE: usize = 6;
/// Where a leaf's kind sits in `GpuBvhChild::count` (above its shape count).
pub const LEAF_KIND_SHIFT: u32 = 8;
const BINS: usize = 12;

/// An axis-aligned box in f64.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bounds {
    pub min: DVec3,
    pub max: DVec3,
}

impl Bounds {
    pub const EMPTY: Bounds = Bounds {
        min: DVec3::new(f64::INFINITY, f64::INFINITY, f64::INFINITY),
        max: DVec3::new(f64::NEG_INFINITY, f64::NEG_INFINITY, f64::NEG_INFINITY),
    };

    /// The box from `min` to `max`, held in f32 (exactly the same in f64).
    fn of_f32(min: [f32; 3], max: [f32; 3]) -> Bounds {
        let wide = |v: [f32; 3]| DVec3::new(v[0] as f64, v[1] as f64, v[2] as f64);
        Bounds {
            min: wide(min),
            max: wide(max),
        }
    }
    fn of_points(points: &[DVec3]) -> Bounds {
        points.iter().fold(Bounds::EMPTY, |b, p| b.grow_point(*p))
    }
    fn grow_point(self, p: DVec3) -> Bounds {
        Bounds {
            min: DVec3::new(
                self.min.x.min(p.x),
                self.min.y.min(p.y),
                self.min.z.min(p.z),
            ),
            max: DVec3::new(
                self.max.x.max(p.x),
                self.max.y.max(p.y),
                self.max.z.max(p.z),
            ),
        }
    }
    fn union(self, o: Bounds) -> Bounds {
        self.grow_point(o.min).grow_point(o.max)
    }
    fn expand(self, r: f64) -> Bounds {
        let d = DVec3::new(r, r, r);
        Bounds {
            min: self.min - d,
            max: self.max + d,
        }
    }
    fn centre(self) -> DVec3 {
        (self.min + self.max) * 0.5
    }
    fn half_area(self) -> f64 {
        let e = self.max - self.min;
        if e.x < 0.0 {
            0.0
        } else {
            e.x * e.y + e.y * e.z + e.z * e.x
        }
    }
}

/// The ball about the shapes' box (its centre, its half diagonal) where every shape is bounded
/// and there is one.
pub fn bounding_ball(shapes: &[Shape]) -> Option<(DVec3, f64)> {
    let mut all = Bounds::EMPTY;
    for shape in shapes {
        all = all.union(shape_bounds(shape)?);
    }
    (!shapes.is_empty()).then(|| {
        (
            (all.min + all.max) * 0.5,
            (all.max - all.min).length() * 0.5,
        )
    })
}

/// The ball about the box of `shapes`' bounded ones, `None` where none is bounded.
pub fn bounded_ball(shapes: &[Shape]) -> Option<(DVec3, f64)> {
    let all = (shapes.iter().filter_map(shape_bounds)).fold(Bounds::EMPTY, Bounds::union);
    (all.min.x <= all.max.x).then(|| {
        (
            (all.min + all.max) * 0.5,
            (all.max - all.min).length() * 0.5,
        )
    })
}

/// Bounds of a shape, `None` for the unbounded kinds.
pub fn shape_bounds(shape: &Shape) -> Option<Bounds> {
    let oriented = |center: DVec3, h: DVec3, rotation: [f64; 4]| {
        let axes = Shape::axes(rotation);
        let reach = axes[0].abs() * h.x + axes[1].abs() * h.y + axes[2].abs() * h.z;
        Bounds {
            min: center - reach,
            max: center + reach,
        }
    };
    Some(match *shape {
        Shape::Sphere { center, radius } => Bounds::of_points(&[center]).expand(radius),
        Shape::Aabb { min, max } => Bounds { min, max },
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
        } => oriented(center, half_extents, rotation),
        Shape::Segment { a, b } => Bounds::of_points(&[a, b]),
        Shape::Triangle { a, b, c } => Bounds::of_points(&[a, b, c]),
        Shape::Capsule { a, b, radius }
        | Shape::Cylinder { a, b, radius }
        | Shape::Cone { a, b, radius } => Bounds::of_points(&[a, b]).expand(radius),
        Shape::Torus {
            center,
            axis,
            major_radius,
            minor_radius,
        } => {
            // The circle reaches major·sin(angle to the axis) along each coordinate axis.
            let reach = |u: f64| major_radius * (1.0 - u * u).max(0.0).sqrt() + minor_radius;
            let r = DVec3::new(reach(axis.x), reach(axis.y), reach(axis.z));
            Bounds {
                min: center - r,
                max: center + r,
            }
        }
        Shape::Ellipsoid {
            center,
            radii,
            rotation,
        } => {
            let axes = Shape::axes(rotation);
            let scaled = [axes[0] * radii.x, axes[1] * radii.y, axes[2] * radii.z];
            let reach = |i: usize| {
                scaled
                    .iter()
                    .map(|a| a.get(i) * a.get(i))
                    .sum::<f64>()
                    .sqrt()
            };
            let r = DVec3::new(reach(0), reach(1), reach(2));
            Bounds {
                min: center - r,
                max: center + r,
            }
        }
        Shape::ConvexHull(ref hull) => Bounds::of_points(&hull.points),
        Shape::Plane { .. } | Shape::Line { .. } | Shape::Ray { .. } => return None,
    })
}

/// One child of a node as the GPU sees it: its box and what it holds. A leaf (`count > 0`)
/// holds shapes `first .. first + n` of one kind, `count = n | kind << LEAF_KIND_SHIFT`; an
/// inner child (`count == 0`) is node `first`. Indices are absolute in the scene's buffers.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct GpuBvhChild {
    pub min: [f32; 3],
    pub first: u32,
    pub max: [f32; 3],
    pub count: u32,
}

/// An inner node: both children's boxes, so a traversal tests a box when it meets it in its
/// parent and only boxes worth opening cost a step (software adapters pay for every step).
/// In an oriented hierarchy (`Bvh::orient`) a child's `min` holds its box's centre, `max` its
/// half extents and `rotations` the box's orientation (a unit quaternion `[x, y, z, w]`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct GpuBvhNode {
    pub children: [GpuBvhChild; 2],
    pub rotations: [[f32; 4]; 2],
}

/// f32 bounds that contain the f64 ones (rounded outwards), so the kernel's pruning bound
/// never exceeds the true distance.
fn outward(b: Bounds) -> ([f32; 3], [f32; 3]) {
    let (down, up) = (crate::math::f32_down, crate::math::f32_up);
    (
        [down(b.min.x), down(b.min.y), down(b.min.z)],
        [up(b.max.x), up(b.max.y), up(b.max.z)],
    )
}

/// A built hierarchy: the shape order (leaf order) and the inner nodes, root first.
pub struct Bvh {
    /// Positions in the input slice, in leaf order.
    pub order: Vec<u32>,
    pub nodes: Vec<GpuBvhNode>,
    pub depth: usize,
    /// Per node and side, the range of `order` under that child.
    pub spans: Vec<[(usize, usize); 2]>,
}

/// A box in any orientation, in f64: centre, unit quaternion `[x, y, z, w]`, half extents.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OrientedBox {
    pub centre: DVec3,
    pub rotation: [f64; 4],
    pub half: DVec3,
}

impl Bvh {
    /// Replace every child's axis-aligned box by an oriented one: `fit` gets the positions (in
    /// the input slice) of the shapes under a child and returns a box holding them, or `None`
    /// to keep the axis-aligned box (stored as an identity-rotated box). Boxes are rounded to
    /// f32 so that they still hold the shapes, with a margin for the kernel's f32 rotation.
    pub fn orient(&mut self, fit: &(dyn Fn(&[u32]) -> Option<OrientedBox> + Sync)) {
        use rayon::prelude::*;
        let order = &self.order;
        self.nodes
            .par_iter_mut()
            .zip(self.spans.par_iter())
            .with_min_len(64)
            .for_each(|(node, spans)| {
                for (side, &(start, end)) in spans.iter().enumerate() {
                    let child = &mut node.children[side];
                    let aabb = Bounds {
                        min: DVec3::new(
                            child.min[0] as f64,
                            child.min[1] as f64,
                            child.min[2] as f64,
                        ),
                        max: DVec3::new(
                            child.max[0] as f64,
                            child.max[1] as f64,
                            child.max[2] as f64,
                        ),
                    };
                    let fitted = fit(&order[start..end]).filter(|b| {
                        let volume = |h: DVec3| (h.x + 1e-12) * (h.y + 1e-12) * (h.z + 1e-12);
                        volume(b.half) < volume((aabb.max - aabb.min) * 0.5)
                    });
                    let oriented = fitted.unwrap_or(OrientedBox {
                        centre: aabb.centre(),
                        rotation: [0.0, 0.0, 0.0, 1.0],
                        half: (aabb.max - aabb.min) * 0.5,
                    });
                    let (centre, rotation, half) = round_box(&oriented);
                    child.min = centre;
                    child.max = half;
                    node.rotations[side] = rotation;
                }
            });
    }
}

/// An f32 box holding the f64 one: the rounded rotation and centre are kept, and the half
/// extents grown to cover the f64 box's corners as seen through them, plus a relative margin
/// of 1e-6 for the kernel's f32 arithmetic.
fn round_box(b: &OrientedBox) -> ([f32; 3], [f32; 4], [f32; 3]) {
    let q = b.rotation.map(|c| c as f32);
    let norm = q.iter().map(|c| c * c).sum::<f32>().sqrt();
    let q = q.map(|c| c / norm);
    let centre = [b.centre.x as f32, b.centre.y as f32, b.centre.z as f32];
    let c32 = DVec3::new(centre[0] as f64, centre[1] as f64, centre[2] as f64);
    let axes32 = Shape::axes(q.map(|c| c as f64));
    let axes64 = Shape::axes(b.rotation);
    let mut half = [0f64; 3];
    for corner in 0..8 {
        let v = axes64.iter().enumerate().fold(b.centre, |v, (k, axis)| {
            let sign = if corner >> k & 1 == 0 { -1.0 } else { 1.0 };
            v + *axis * (sign * b.half.get(k))
        });
        for (h, axis) in half.iter_mut().zip(&axes32) {
            *h = h.max(axis.dot(v - c32).abs());
        }
    }
    let reach = c32.max_abs() + half.iter().fold(0f64, |m, h| m.max(*h));
    let half = half.map(|h| crate::math::f32_up(h + 1e-6 * reach));
    (centre, q, half)
}

/// Angles of the second axis about the first that `fit_oriented_box` tries, besides the
/// points' own principal direction.
const FIT_ANGLES: usize = 4;

/// The tightest of a few boxes around `points` whose first axis is `normal`: the second axis
/// is tried at four angles about it and along the points' principal direction in the plane
/// across `normal` (which fits a wedge of slivers, as in a fan, that the fixed angles leave
/// up to a fifth of its length wide). For nearly flat sets of triangles this box is thin where
/// an axis-aligned one is not.
///
/// The fit is most of a mesh layout's host time (a pass over every corner below each child of
/// up to `ORIENTED_MAX_TRIANGLES` triangles), so the points are projected once onto the plane
/// (coordinates from the first point, which keeps the moments free of cancellation however
/// far the mesh lies from the origin), and each direction's extent is then two multiplies a
/// point over those coordinates.
pub fn fit_oriented_box(points: &[DVec3], normal: DVec3) -> Option<OrientedBox> {
    let w = normal.normalize_or_zero();
    if w == DVec3::ZERO || points.is_empty() {
        return None;
    }
    let u0 = crate::math::any_perpendicular(w);
    let v0 = w.cross(u0);
    let origin = points[0];
    let mut plane = PlanePoints {
        x: vec![0.0; points.len()],
        y: vec![0.0; points.len()],
    };
    let (mut w_lo, mut w_hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for ((&p, x), y) in points.iter().zip(&mut plane.x).zip(&mut plane.y) {
        let d = p - origin;
        let t = w.dot(d);
        // Plain comparisons, not `f64::min`'s NaN handling: the points are finite.
        lower(&mut w_lo, t);
        raise(&mut w_hi, t);
        (*x, *y) = (u0.dot(d), v0.dot(d));
    }
    let principal = plane.principal_angle();
    let mut best: Option<(f64, OrientedBox)> = None;
    for step in 0..=FIT_ANGLES {
        let angle = match step {
            FIT_ANGLES => principal,
            _ => step as f64 * std::f64::consts::FRAC_PI_8,
        };
        let (sin, cos) = angle.sin_cos();
        // u = u0·cos + v0·sin; v = w × u = v0·cos − u0·sin.
        let (u_lo, u_hi) = plane.extent(cos, sin);
        let (v_lo, v_hi) = plane.extent(-sin, cos);
        let u = u0 * cos + v0 * sin;
        let axes = [u, w.cross(u), w];
        let half = DVec3::new(u_hi - u_lo, v_hi - v_lo, w_hi - w_lo) * 0.5;
        let volume = (half.x + 1e-12) * (half.y + 1e-12) * (half.z + 1e-12);
        if best.is_none_or(|(b, _)| volume < b) {
            let centre = origin
                + axes[0] * ((u_lo + u_hi) * 0.5)
                + axes[1] * ((v_lo + v_hi) * 0.5)
                + w * ((w_lo + w_hi) * 0.5);
            best = Some((
                volume,
                OrientedBox {
                    centre,
                    rotation: crate::math::matrix_to_quaternion(axes),
                    half,
                },
            ));
        }
    }
    best.map(|(_, b)| b)
}

/// Points' coordinates in a plane (from one of them), as columns.
struct PlanePoints {
    x: Vec<f64>,
    y: Vec<f64>,
}

impl PlanePoints {
    /// The least and greatest of `a·x + b·y` over the points.
    fn extent(&self, a: f64, b: f64) -> (f64, f64) {
        let pairs = self.x.len() / 2 * 2;
        let (xs, ys) = (&self.x[..pairs], &self.y[..pairs]);
        // SAFETY: SSE2, which `extent_of_pairs` enables on x86-64, is part of every x86-64
        // processor (elsewhere the function is plain code).
        #[allow(unused_unsafe)]
        let (mut lo, mut hi) = unsafe { extent_of_pairs(xs, ys, a, b) };
        for (x, y) in self.x[pairs..].iter().zip(&self.y[pairs..]) {
            let t = a * x + b * y;
            lower(&mut lo, t);
            raise(&mut hi, t);
        }
        (lo, hi)
    }

    /// The angle from the x axis (towards y) of the major axis of the points' spread: half
    /// the angle of the covariance's (cxx - cyy, 2 cxy).
    fn principal_angle(&self) -> f64 {
        let n = self.x.len() as f64;
        let mean_x = self.x.iter().sum::<f64>() / n;
        let mean_y = self.y.iter().sum::<f64>() / n;
        let (mut cxx, mut cyy, mut cxy) = (0.0, 0.0, 0.0);
        for (x, y) in self.x.iter().zip(&self.y) {
            let (x, y) = (x - mean_x, y - mean_y);
            cxx += x * x;
            cyy += y * y;
            cxy += x * y;
        }
        0.5 * (2.0 * cxy).atan2(cxx - cyy)
    }
}

/// [`PlanePoints::extent`] over an even number of points, two at a time in SSE2's lanes (part
/// of every x86-64 processor): the fit's inner loop, run ten times over each child's corners.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse2")]
fn extent_of_pairs(xs: &[f64], ys: &[f64], a: f64, b: f64) -> (f64, f64) {
    use std::arch::x86_64::*;
    let (a2, b2) = (_mm_set1_pd(a), _mm_set1_pd(b));
    let (mut lo, mut hi) = (_mm_set1_pd(f64::INFINITY), _mm_set1_pd(f64::NEG_INFINITY));
    for (x, y) in xs.chunks_exact(2).zip(ys.chunks_exact(2)) {
        let t = _mm_add_pd(
            _mm_mul_pd(a2, _mm_set_pd(x[1], x[0])),
            _mm_mul_pd(b2, _mm_set_pd(y[1], y[0])),
        );
        lo = _mm_min_pd(t, lo);
        hi = _mm_max_pd(t, hi);
    }
    let (mut l, mut h) = ([0.0; 2], [0.0; 2]);
    // SAFETY: each array holds the two f64s stored.
    unsafe {
        _mm_storeu_pd(l.as_mut_ptr(), lo);
        _mm_storeu_pd(h.as_mut_ptr(), hi);
    }
    (l[0].min(l[1]), h[0].max(h[1]))
}

/// [`PlanePoints::extent`] over an even number of points, two at a time.
#[cfg(not(target_arch = "x86_64"))]
fn extent_of_pairs(xs: &[f64], ys: &[f64], a: f64, b: f64) -> (f64, f64) {
    let (mut lo, mut hi) = ([f64::INFINITY; 2], [f64::NEG_INFINITY; 2]);
    for (x, y) in xs.chunks_exact(2).zip(ys.chunks_exact(2)) {
        for k in 0..2 {
            let t = a * x[k] + b * y[k];
            lower(&mut lo[k], t);
            raise(&mut hi[k], t);
        }
    }
    (lo[0].min(lo[1]), hi[0].max(hi[1]))
}

/// One shape to build over: its bounds and its kind (leaves hold one kind).
#[derive(Clone, Copy, Debug)]
pub struct Item {
    pub bounds: Bounds,
    pub kind: u32,
}

/// An item being sorted into the hierarchy, with its position in the input: its bounds rounded
/// outwards to f32 (32 bytes, not 56: the build's largest array). The child boxes do not
/// change, since rounding outwards commutes with taking unions; centres, and so the splits,
/// may move in the last bits for shapes whose bounds f32 does not hold.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct Entry {
    min: [f32; 3],
    index: u32,
    max: [f32; 3],
    kind: u32,
}

const _: () = assert!(std::mem::size_of::<Entry>() == 32);

impl Entry {
    fn new(bounds: Bounds, index: u32, kind: u32) -> Entry {
        let (min, max) = outward(bounds);
        Entry {
            min,
            index,
            max,
            kind,
        }
    }
    fn bounds(&self) -> Bounds {
        Bounds::of_f32(self.min, self.max)
    }
    fn centre(&self) -> DVec3 {
        self.bounds().centre()
    }
}

/// Spans at least this long build their two sides on two threads.
const PARALLEL_SPAN: usize = 16 * 1024;

/// Build over `items` (at least two), at most `leaf_size` items per leaf. `shape_offset` and
/// `node_offset` are where this hierarchy's shapes and nodes will sit in the scene buffers.
/// Large spans build their two sides in parallel; the result does not depend on the threads.
pub fn build(items: &[Item], leaf_size: usize, shape_offset: u32, node_offset: u32) -> Bvh {
    build_with(
        items.len(),
        &|i| items[i],
        leaf_size,
        shape_offset,
        node_offset,
    )
}

/// [`build`] over `count` items that `item(i)` makes as they are needed (a mesh's triangles
/// need not all be held as items first).
pub fn build_with(
    count: usize,
    item: &(dyn Fn(usize) -> Item + Sync),
    leaf_size: usize,
    shape_offset: u32,
    node_offset: u32,
) -> Bvh {
    let never = std::sync::atomic::AtomicBool::new(false);
    build_until(count, item, leaf_size, shape_offset, node_offset, &never)
        .expect("a build that is never stopped ends")
}

/// [`build_with`], or `None` once `stop` is set: the caller was interrupted and would throw
/// the hierarchy away, so no span is split after it (a 2M-triangle build went on for 0.3–0.5 s
/// after a Ctrl-C when it split the rest at their middles).
pub fn build_until(
    count: usize,
    item: &(dyn Fn(usize) -> Item + Sync),
    leaf_size: usize,
    shape_offset: u32,
    node_offset: u32,
    stop: &std::sync::atomic::AtomicBool,
) -> Option<Bvh> {
    use rayon::prelude::*;
    assert!(count >= 2, "a hierarchy needs two shapes or more");
    assert!(
        u32::try_from(count).is_ok(),
        "a hierarchy holds fewer than 2^32 shapes"
    );
    let mut entries: Vec<Entry> = (0..count)
        .into_par_iter()
        .with_min_len(4096)
        .map(|i| {
            let Item { bounds, kind } = item(i);
            Entry::new(bounds, i as u32, kind)
        })
        .collect();
    let builder = Builder {
        leaf_size,
        shape_offset,
        stop,
    };
    // The root's range is split unconditionally, so that the root is an inner node.
    let measured = Measured::of(&entries);
    let tree = builder.inner(&mut entries, measured, 0, 1);
    if builder.stopped() {
        return None;
    }
    let depth = tree.depth;
    let mut nodes = tree.joined();
    // Inner children hold their node's offset from their parent until here.
    for (n, node) in nodes.iter_mut().enumerate() {
        for child in &mut node.children {
            if child.count == 0 {
                child.first += node_offset + n as u32;
            }
        }
    }
    let order = into_order(entries);
    let spans = child_spans(&nodes, shape_offset, node_offset);
    Some(Bvh {
        order,
        nodes,
        depth,
        spans,
    })
}

/// The entries' input positions in their order, written over the entries themselves (the
/// build's largest array, not held twice).
fn into_order(entries: Vec<Entry>) -> Vec<u32> {
    const WORDS: usize = std::mem::size_of::<Entry>() / 4;
    const INDEX: usize = std::mem::offset_of!(Entry, index) / 4;
    let count = entries.len();
    let mut words: Vec<u32> = bytemuck::allocation::cast_vec(entries);
    for i in 0..count {
        words[i] = words[WORDS * i + INDEX];
    }
    words.truncate(count);
    words.shrink_to_fit();
    words
}

/// Per node and side, the range of the leaf order under that child: a leaf's own, an inner
/// child's from its node's (children follow their parents, so a pass from the last node
/// finds every child's range before its parent's).
fn child_spans(
    nodes: &[GpuBvhNode],
    shape_offset: u32,
    node_offset: u32,
) -> Vec<[(usize, usize); 2]> {
    let mut spans = vec![[(0, 0); 2]; nodes.len()];
    for n in (0..nodes.len()).rev() {
        spans[n] = nodes[n].children.map(|child| {
            if child.count == 0 {
                let below = spans[(child.first - node_offset) as usize];
                (below[0].0, below[1].1)
            } else {
                let first = (child.first - shape_offset) as usize;
                (
                    first,
                    first + (child.count & ((1 << LEAF_KIND_SHIFT) - 1)) as usize,
                )
            }
        });
    }
    spans
}

struct Builder<'a> {
    leaf_size: usize,
    shape_offset: u32,
    stop: &'a std::sync::atomic::AtomicBool,
}

/// The nodes of a subtree in preorder, inner children referring to their nodes relatively.
/// Subtrees built on their own threads are kept as pieces, moved into their parent and joined
/// once: copying them into each parent in turn held every level's nodes twice (a large mesh's
/// build held ~1.5× its nodes over the entries).
struct Subtree {
    /// Consecutive nodes in preorder.
    pieces: Vec<Vec<GpuBvhNode>>,
    len: usize,
    depth: usize,
}

impl Subtree {
    /// Its nodes in one vector of exactly their size. Each piece is freed once
    /// copied, and the freed memory handed back every `JOIN_RETURN_BYTES` (the pieces are
    /// small blocks that the allocator would otherwise keep), so the join holds little more
    /// than the joined nodes.
    fn joined(self) -> Vec<GpuBvhNode> {
        const JOIN_RETURN_BYTES: usize = 8 << 20;
        let mut whole = Vec::with_capacity(self.len);
        let mut freed = 0;
        for piece in self.pieces {
            whole.extend_from_slice(&piece);
            freed += piece.capacity() * std::mem::size_of::<GpuBvhNode>();
            drop(piece);
            if freed >= JOIN_RETURN_BYTES {
                crate::host_memory::return_free_memory();
                freed = 0;
            }
        }
        whole
    }
}

impl Builder<'_> {
    /// Whether the caller stopped the build: what is built after it is thrown away.
    fn stopped(&self) -> bool {
        self.stop.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The inner node over `span` (at `offset` in the whole entry list, `level` deep, its
    /// bounds `measured`): split it, then each side becomes a leaf or a subtree. Spans too
    /// short to build their sides on two threads push their nodes onto one piece.
    fn inner(
        &self,
        span: &mut [Entry],
        measured: Measured,
        offset: usize,
        level: usize,
    ) -> Subtree {
        if self.stopped() {
            // Not a subtree of `span`: `build_until` answers None.
            return Subtree {
                pieces: Vec::new(),
                len: 0,
                depth: level,
            };
        }
        if span.len() < PARALLEL_SPAN {
            let mut piece = Vec::new();
            let depth = self.inner_into(span, measured, offset, level, &mut piece);
            let len = piece.len();
            return Subtree {
                pieces: vec![piece],
                len,
                depth,
            };
        }
        let (mid, sides) = self.split_inner(span, measured, level);
        let (left, right) = span.split_at_mut(mid);
        let (left, right) = rayon::join(
            || self.child(left, sides[0], offset, level + 1),
            || self.child(right, sides[1], offset + mid, level + 1),
        );
        let mut tree = Subtree {
            pieces: vec![vec![GpuBvhNode::default()]],
            len: 1,
            depth: level + 1,
        };
        for (side, (mut record, below)) in [left, right].into_iter().enumerate() {
            if let Some(below) = below {
                record.first = tree.len as u32;
                tree.depth = tree.depth.max(below.depth);
                tree.len += below.len;
                tree.pieces.extend(below.pieces);
            }
            tree.pieces[0][0].children[side] = record;
        }
        tree
    }

    /// [`Builder::inner`] on one thread, its nodes pushed onto `piece`; returns its depth.
    fn inner_into(
        &self,
        span: &mut [Entry],
        measured: Measured,
        offset: usize,
        level: usize,
        piece: &mut Vec<GpuBvhNode>,
    ) -> usize {
        if self.stopped() {
            // Nothing under this node: `build_until` answers None.
            return level;
        }
        let (mid, sides) = self.split_inner(span, measured, level);
        let root = piece.len();
        piece.push(GpuBvhNode::default());
        let mut depth = level + 1;
        let (left, right) = span.split_at_mut(mid);
        for (side, (span, measured, offset)) in
            [(left, sides[0], offset), (right, sides[1], offset + mid)]
                .into_iter()
                .enumerate()
        {
            let measured = measured.unwrap_or_else(|| Measured::of(span));
            let (mut record, is_leaf) = self.child_record(span, measured.bounds, offset);
            if !is_leaf {
                record.first = (piece.len() - root) as u32;
                depth = depth.max(self.inner_into(span, measured, offset, level + 1, piece));
            }
            piece[root].children[side] = record;
        }
        depth
    }

    /// Where `span` splits, and each side's bounds where the split measured them: by kind for
    /// a small span of mixed kinds (or the root), by `split` otherwise.
    fn split_inner(
        &self,
        span: &mut [Entry],
        measured: Measured,
        level: usize,
    ) -> (usize, [Option<Measured>; 2]) {
        let mixed = |span: &[Entry]| span.iter().any(|e| e.kind != span[0].kind);
        if span.len() <= self.leaf_size && mixed(span) {
            (split_by_kind(span), [None, None])
        } else {
            split(span, measured, level)
        }
    }

    /// A child over `span` (its bounds `measured` where the split already knew them): its
    /// record, and the subtree below it unless it is a leaf.
    fn child(
        &self,
        span: &mut [Entry],
        measured: Option<Measured>,
        offset: usize,
        level: usize,
    ) -> (GpuBvhChild, Option<Subtree>) {
        let measured = measured.unwrap_or_else(|| Measured::of(span));
        let (record, is_leaf) = self.child_record(span, measured.bounds, offset);
        if is_leaf {
            return (record, None);
        }
        (record, Some(self.inner(span, measured, offset, level)))
    }

    /// A child's record over `span`, whose box is `bounds`, and whether it is a leaf (then
    /// sorted into scene order and complete; an inner child's `first` is left to its caller).
    fn child_record(
        &self,
        span: &mut [Entry],
        bounds: Bounds,
        offset: usize,
    ) -> (GpuBvhChild, bool) {
        let (min, max) = outward(bounds);
        let kind = span[0].kind;
        let mut record = GpuBvhChild {
            min,
            max,
            ..GpuBvhChild::default()
        };
        let is_leaf = span.len() <= self.leaf_size && span.iter().all(|e| e.kind == kind);
        if is_leaf {
            // In scene order: kernels then resolve ties within a leaf by position.
            span.sort_unstable_by_key(|e| e.index);
            record.first = self.shape_offset + offset as u32;
            record.count = span.len() as u32 | kind << LEAF_KIND_SHIFT;
        }
        (record, is_leaf)
    }
}

/// A span's bounds and the bounds of its entries' centres: what a split needs, known from
/// the parent's bins where it binned, measured otherwise (min and max are exact, so both ways
/// give the same boxes).
#[derive(Clone, Copy)]
struct Measured {
    bounds: Bounds,
    centres: Bounds,
}

impl Measured {
    const EMPTY: Measured = Measured {
        bounds: Bounds::EMPTY,
        centres: Bounds::EMPTY,
    };

    fn of(span: &[Entry]) -> Measured {
        span.iter().fold(Measured::EMPTY, |m, e| m.with(e))
    }

    fn with(self, e: &Entry) -> Measured {
        Measured {
            bounds: self.bounds.union(e.bounds()),
            centres: self.centres.grow_point(e.centre()),
        }
    }
}

/// Partition a small span of mixed kinds: the first kind's shapes to the left.
fn split_by_kind(span: &mut [Entry]) -> usize {
    let kind = span[0].kind;
    let mut left = 0;
    for i in 0..span.len() {
        if span[i].kind == kind {
            span.swap(i, left);
            left += 1;
        }
    }
    left
}

/// An entry's centre along `axis`, exactly as `Entry::centre` gives it.
fn centre_along(e: &Entry, axis: usize) -> f64 {
    (f64::from(e.min[axis]) + f64::from(e.max[axis])) * 0.5
}

/// A bin of a split: its entries' bounds (f32, as the entries hold them) and their centres'
/// (f64). Min and max are exact, so these are the boxes `Measured::with` would give, at a
/// fraction of the work.
#[derive(Clone, Copy)]
struct Bin {
    min: [f32; 3],
    max: [f32; 3],
    centre_min: [f64; 3],
    centre_max: [f64; 3],
    count: usize,
}

impl Bin {
    const EMPTY: Bin = Bin {
        min: [f32::INFINITY; 3],
        max: [f32::NEG_INFINITY; 3],
        centre_min: [f64::INFINITY; 3],
        centre_max: [f64::NEG_INFINITY; 3],
        count: 0,
    };

    /// Selects (`lower`, `raise`), not `f32::min`'s NaN handling, in the build's hottest loop;
    /// the same answers, since a bin's bounds start infinite and a comparison with NaN leaves
    /// them as they are either way.
    fn add(&mut self, e: &Entry) {
        for k in 0..3 {
            lower(&mut self.min[k], e.min[k]);
            raise(&mut self.max[k], e.max[k]);
            let c = centre_along(e, k);
            lower(&mut self.centre_min[k], c);
            raise(&mut self.centre_max[k], c);
        }
        self.count += 1;
    }

    fn join(mut self, other: &Bin) -> Bin {
        for k in 0..3 {
            lower(&mut self.min[k], other.min[k]);
            raise(&mut self.max[k], other.max[k]);
            lower(&mut self.centre_min[k], other.centre_min[k]);
            raise(&mut self.centre_max[k], other.centre_max[k]);
        }
        self.count += other.count;
        self
    }

    fn bounds(&self) -> Bounds {
        Bounds::of_f32(self.min, self.max)
    }

    fn measured(&self) -> Measured {
        Measured {
            bounds: self.bounds(),
            centres: Bounds {
                min: DVec3::from_array(self.centre_min),
                max: DVec3::from_array(self.centre_max),
            },
        }
    }
}

/// `*bound = min(*bound, value)`, leaving `bound` where `value` is NaN. A select, not a
/// branch: one instruction (`minss`, `minsd`), where a branch on data is often mispredicted.
fn lower<T: PartialOrd + Copy>(bound: &mut T, value: T) {
    *bound = if value < *bound { value } else { *bound };
}

/// `*bound = max(*bound, value)`, leaving `bound` where `value` is NaN.
fn raise<T: PartialOrd + Copy>(bound: &mut T, value: T) {
    *bound = if value > *bound { value } else { *bound };
}

/// Partition `span` (its bounds `measured`) and return the size of the left part (never 0 or
/// all), with each side's bounds where the binning measured them.
fn split(span: &mut [Entry], measured: Measured, level: usize) -> (usize, [Option<Measured>; 2]) {
    let centres = measured.centres;
    let extent = centres.max - centres.min;
    let axis = extent.longest_axis();
    let (lo, width) = (centres.min.get(axis), extent.get(axis));
    let median = |span: &mut [Entry]| {
        let mid = span.len() / 2;
        span.select_nth_unstable_by(mid, |a, b| {
            centre_along(a, axis).total_cmp(&centre_along(b, axis))
        });
        (mid, [None, None])
    };
    if width <= 0.0 || level >= MEDIAN_DEPTH {
        return median(span);
    }
    // A multiply, not a divide, per entry: both passes below bin by this same function.
    let per_width = BINS as f64 / width;
    let bin_of = |e: &Entry| (((centre_along(e, axis) - lo) * per_width) as usize).min(BINS - 1);
    let mut bins = [Bin::EMPTY; BINS];
    // Each entry's bin, kept for the partition below (the binning is most of a split's time).
    let mut bin_of_entry: Vec<u8> = Vec::with_capacity(span.len());
    for e in span.iter() {
        let bin = bin_of(e);
        bins[bin].add(e);
        bin_of_entry.push(bin as u8);
    }
    // Cost of splitting after bin k: area·count of each side, the sides swept once from each
    // end. A side holding an empty bin is passed over (with no such split, the
    // median): the builder always did so, its union with an empty bin's box being unbounded,
    // and costing those sides too moved no mesh query's time beyond noise (perf-history), so
    // the trees stay as they were.
    let mut right_of = [Bin::EMPTY; BINS];
    let mut right_gaps = [false; BINS];
    for k in (0..BINS - 1).rev() {
        right_of[k] = right_of[k + 1].join(&bins[k + 1]);
        right_gaps[k] = right_gaps[k + 1] || bins[k + 1].count == 0;
    }
    let mut best = (f64::INFINITY, 0);
    let mut left_of = [Bin::EMPTY; BINS];
    let mut left_gaps = false;
    for k in 0..BINS - 1 {
        left_of[k] = if k == 0 {
            bins[0]
        } else {
            left_of[k - 1].join(&bins[k])
        };
        left_gaps |= bins[k].count == 0;
        let (left_side, right_side) = (&left_of[k], &right_of[k]);
        if left_side.count == 0 || right_side.count == 0 || left_gaps || right_gaps[k] {
            continue;
        }
        let cost = left_side.bounds().half_area() * left_side.count as f64
            + right_side.bounds().half_area() * right_side.count as f64;
        if cost < best.0 {
            best = (cost, k);
        }
    }
    if best.0.is_infinite() {
        return median(span);
    }
    let mut left = 0;
    for i in 0..span.len() {
        if bin_of_entry[i] as usize <= best.1 {
            span.swap(i, left);
            bin_of_entry.swap(i, left);
            left += 1;
        }
    }
    (
        left,
        [
            Some(left_of[best.1].measured()),
            Some(right_of[best.1].measured()),
        ],
    )
}

/// Bits of a packed child reference (`first << LEAF_COUNT_BITS | leaf count`) that hold the
/// leaf count (0 for an inner node).
pub const LEAF_COUNT_BITS: u32 = 3;
const _: () =
    assert!(LEAF_SIZE < 1 << LEAF_COUNT_BITS && TRIANGLE_LEAF_SIZE < 1 << LEAF_COUNT_BITS);

/// An oriented hierarchy as `mesh.wgsl` reads it: four vec4s of words per node, the left and
/// right children's centres (f32) each beside its packed reference, then per child its half
/// extents as normal f16 multiples of `half_scale` (rounded up) and its rotation as an snorm16
/// quaternion of norm at most 1, used as it is. Two thirds of the loads of `GpuBvhNode` for
/// the same boxes.
pub struct PackedNodes {
    pub words: Vec<[u32; 4]>,
    pub half_scale: f32,
}

/// What the kernel's `rotate(q, v)` computes, in f64. For a quaternion of norm s ≤ 1 it is
/// s²·R(q)·v + (1 − s²)·v, a map that never lengthens a vector, so box distances measured
/// through it stay below true distances without normalising q.
fn kernel_rotate(q: [f64; 4], v: DVec3) -> DVec3 {
    let u = DVec3::new(q[0], q[1], q[2]);
    let t = u.cross(v) * 2.0;
    v + t * q[3] + u.cross(t)
}

/// Pack the nodes of an oriented hierarchy (`Bvh::orient`). Each box is refitted around the
/// f32 box it replaces, as the kernel sees it through the quantised rotation, so it still
/// holds its shapes.
pub fn pack_oriented(nodes: &[GpuBvhNode]) -> PackedNodes {
    // Shrunk a little and truncated, so the norm stays at most 1 after the kernel's decoding.
    let quantise = |q: [f32; 4]| q.map(|c| (c as f64 * (1.0 - 1e-5) * 32767.0).trunc() as i16);
    let decode = |q: [i16; 4]| q.map(|c| (c as f64 / 32767.0).max(-1.0));
    let v = |a: [f32; 3]| DVec3::new(a[0] as f64, a[1] as f64, a[2] as f64);
    // Half extents seen through the quantised rotation, with the margin `round_box` gives
    // for the kernel's f32 arithmetic.
    let refit = |child: &GpuBvhChild, rotation: [f32; 4], quantised: [i16; 4]| {
        let (centre, half) = (v(child.min), v(child.max));
        let axes = Shape::axes(rotation.map(f64::from));
        let [x, y, z, w] = decode(quantised);
        let inverse = [-x, -y, -z, w];
        let mut refitted = [0f64; 3];
        for corner in 0..8 {
            let offset = axes.iter().enumerate().fold(DVec3::ZERO, |o, (k, axis)| {
                let sign = if corner >> k & 1 == 0 { -1.0 } else { 1.0 };
                o + *axis * (sign * half.get(k))
            });
            let local = kernel_rotate(inverse, offset);
            for (k, h) in refitted.iter_mut().enumerate() {
                *h = h.max(local.get(k).abs());
            }
        }
        let reach = centre.max_abs() + refitted.iter().fold(0f64, |m, h| m.max(*h));
        refitted.map(|h| h + 1e-6 * reach)
    };
    let boxes: Vec<[([i16; 4], [f64; 3]); 2]> = nodes
        .iter()
        .map(|node| {
            [0, 1].map(|side| {
                let q = quantise(node.rotations[side]);
                (q, refit(&node.children[side], node.rotations[side], q))
            })
        })
        .collect();
    // A power of two that brings the largest half extent to 2^14 (f16 reaches 65504).
    let largest = boxes
        .iter()
        .flatten()
        .flat_map(|(_, half)| *half)
        .fold(0f64, f64::max);
    let half_scale = if largest > 0.0 {
        2f64.powi(largest.log2().ceil() as i32 - 14) as f32
    } else {
        1.0
    };
    // Rounded up, and never below the smallest normal f16: the kernel decodes normal ones.
    let up_f16 = |x: f64| {
        let h = half::f16::from_f64(x / half_scale as f64);
        let bits = h.to_bits();
        let bits = if (h.to_f64() * half_scale as f64) < x {
            bits + 1
        } else {
            bits
        };
        bits.max(half::f16::MIN_POSITIVE.to_bits())
    };
    let snorm = |a: i16, b: i16| (a as u16 as u32) | (b as u16 as u32) << 16;
    let mut words = Vec::with_capacity(nodes.len() * 4);
    for (node, boxes) in nodes.iter().zip(&boxes) {
        for child in &node.children {
            let leaf_count = child.count & ((1 << LEAF_KIND_SHIFT) - 1);
            let [x, y, z] = child.min.map(f32::to_bits);
            words.push([x, y, z, child.first << LEAF_COUNT_BITS | leaf_count]);
        }
        for (q, half) in boxes {
            let [hx, hy, hz] = half.map(|h| up_f16(h) as u32);
            words.push([hx | hy << 16, hz, snorm(q[0], q[1]), snorm(q[2], q[3])]);
        }
    }
    PackedNodes { words, half_scale }
}

/// Levels of an oriented hierarchy that [`TopNodes`] keeps on the host: at most 2^12 − 1
/// nodes (about 0.8 MB), deeper than a band's walks start on the shared meshes (6–9 levels).
pub const TOP_LEVELS: usize = 12;

/// The top levels of an oriented hierarchy (`Bvh::orient`), kept on the host to find where a
/// walk near a point may start ([`TopNodes::start_node`]). Empty: every walk starts at the
/// root.
#[derive(Clone, Debug, Default)]
pub struct TopNodes {
    /// Per node kept (the root first), its two children.
    nodes: Vec<[TopChild; 2]>,
}

#[derive(Clone, Copy, Debug)]
struct TopChild {
    /// The child's f32 box (`round_box`: it holds the child's triangles in f64 through these
    /// axes).
    centre: DVec3,
    axes: [DVec3; 3],
    half: DVec3,
    /// An inner child kept too: its node index (from the root) and its position in `nodes`.
    kept: Option<(u32, usize)>,
}

impl TopChild {
    fn distance(&self, p: DVec3) -> f64 {
        let d = p - self.centre;
        (0..3)
            .map(|k| {
                (self.axes[k].dot(d).abs() - self.half.get(k))
                    .max(0.0)
                    .powi(2)
            })
            .sum::<f64>()
            .sqrt()
    }
}

impl TopNodes {
    /// The top [`TOP_LEVELS`] levels of the oriented hierarchy `nodes` (root first, node 0).
    pub fn of(nodes: &[GpuBvhNode]) -> TopNodes {
        fn keep(nodes: &[GpuBvhNode], node: usize, level: usize, top: &mut TopNodes) -> usize {
            let at = top.nodes.len();
            let placeholder = TopChild {
                centre: DVec3::ZERO,
                axes: [DVec3::ZERO; 3],
                half: DVec3::ZERO,
                kept: None,
            };
            top.nodes.push([placeholder; 2]);
            for side in 0..2 {
                let child = nodes[node].children[side];
                let inner = child.count & ((1 << LEAF_KIND_SHIFT) - 1) == 0;
                let kept = (inner && level + 1 < TOP_LEVELS).then(|| {
                    (
                        child.first,
                        keep(nodes, child.first as usize, level + 1, top),
                    )
                });
                let v = |a: [f32; 3]| DVec3::new(a[0].into(), a[1].into(), a[2].into());
                top.nodes[at][side] = TopChild {
                    centre: v(child.min),
                    axes: Shape::axes(nodes[node].rotations[side].map(f64::from)),
                    half: v(child.max),
                    kept,
                };
            }
            at
        }
        let mut top = TopNodes::default();
        if !nodes.is_empty() {
            keep(nodes, 0, 0, &mut top);
        }
        top
    }

    /// The deepest kept node whose subtree holds every triangle within `radius` of `p` (the
    /// hierarchy's frame), found by descending from `from` (the root: `WalkStart::ROOT`; a
    /// node found for a ball holding this one) while only one child's box lies that near. A
    /// walk for a nearest triangle within `radius` of `p` finds from there what it finds from
    /// the root, ties included.
    pub fn start_node(&self, from: WalkStart, p: DVec3, radius: f64) -> WalkStart {
        let mut start = from;
        while let Some(children) = self.nodes.get(start.at) {
            let near = children.map(|c| c.distance(p) <= radius);
            let next = match near {
                [true, false] => children[0].kept,
                [false, true] => children[1].kept,
                _ => None,
            };
            let Some((node, at)) = next else {
                break;
            };
            start = WalkStart {
                node,
                at,
                depth: start.depth + 1,
            };
        }
        start
    }
}

/// Where a walk starts (`TopNodes::start_node`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WalkStart {
    /// The node, counted from the root (0: the root).
    pub node: u32,
    /// Its position in `TopNodes`.
    at: usize,
    pub depth: usize,
}

impl WalkStart {
    pub const ROOT: WalkStart = WalkStart {
        node: 0,
        at: 0,
        depth: 0,
    };
}
