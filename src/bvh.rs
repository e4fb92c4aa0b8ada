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
/// Shapes per leaf.
const LEAF_SIZE: usize = 4;
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
        Shape::Capsule { a, b, radius } | Shape::Cylinder { a, b, radius } => {
            Bounds::of_points(&[a, b]).expand(radius)
        }
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
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct GpuBvhNode {
    pub children: [GpuBvhChild; 2],
}

/// f32 bounds that contain the f64 ones (rounded outwards), so the kernel's pruning bound
/// never exceeds the true distance.
fn outward(b: Bounds) -> ([f32; 3], [f32; 3]) {
    let down = |x: f64| {
        let f = x as f32;
        if f as f64 > x { f.next_down() } else { f }
    };
    let up = |x: f64| {
        let f = x as f32;
        if (f as f64) < x { f.next_up() } else { f }
    };
    (
        [down(b.min.x), down(b.min.y), down(b.min.z)],
        [up(b.max.x), up(b.max.y), up(b.max.z)],
    )
}

/// A built hierarchy: the shape order (leaf order) and the inner nodes, root first.
pub struct Bvh {
    /// Positions in the input slice, in leaf order.
    pub order: Vec<usize>,
    pub nodes: Vec<GpuBvhNode>,
    pub depth: usize,
}

/// One shape to build over: its bounds and its kind (leaves hold one kind).
#[derive(Clone, Copy, Debug)]
pub struct Item {
    pub bounds: Bounds,
    pub kind: u32,
}

type Entry = (usize, Item, DVec3);

/// Build over `items` (at least two). `shape_offset` and `node_offset` are where this
/// hierarchy's shapes and nodes will sit in the scene buffers.
pub fn build(items: &[Item], shape_offset: u32, node_offset: u32) -> Bvh {
    assert!(items.len() >= 2, "a hierarchy needs two shapes or more");
    let mut entries: Vec<Entry> = items
        .iter()
        .enumerate()
        .map(|(i, it)| (i, *it, it.bounds.centre()))
        .collect();
    let mut nodes = vec![GpuBvhNode::default()];
    let mut depth = 0;
    // (where the child record goes: node and side, entry range, depth); the root's range is
    // split unconditionally so that the root is an inner node.
    let mut work = Vec::new();
    let mid = split(&mut entries, 1);
    work.push(((0usize, 0usize), 0usize, mid, 2usize));
    work.push(((0, 1), mid, entries.len(), 2));
    while let Some(((parent, side), start, end, level)) = work.pop() {
        depth = depth.max(level);
        let span = &mut entries[start..end];
        let node_bounds = span.iter().fold(Bounds::EMPTY, |b, e| b.union(e.1.bounds));
        let (min, max) = outward(node_bounds);
        let kind = span[0].1.kind;
        let one_kind = span.iter().all(|e| e.1.kind == kind);
        let child = &mut nodes[parent].children[side];
        *child = GpuBvhChild {
            min,
            max,
            ..GpuBvhChild::default()
        };
        if one_kind && span.len() <= LEAF_SIZE {
            child.first = shape_offset + start as u32;
            child.count = span.len() as u32 | kind << LEAF_KIND_SHIFT;
            continue;
        }
        let node = nodes.len();
        nodes[parent].children[side].first = node_offset + node as u32;
        nodes.push(GpuBvhNode::default());
        let mid = start
            + if span.len() <= LEAF_SIZE {
                split_by_kind(span)
            } else {
                split(span, level)
            };
        work.push(((node, 0), start, mid, level + 1));
        work.push(((node, 1), mid, end, level + 1));
    }
    Bvh {
        order: entries.iter().map(|e| e.0).collect(),
        nodes,
        depth,
    }
}

/// Partition a small span of mixed kinds: the first kind's shapes to the left.
fn split_by_kind(span: &mut [Entry]) -> usize {
    let kind = span[0].1.kind;
    let mut left = 0;
    for i in 0..span.len() {
        if span[i].1.kind == kind {
            span.swap(i, left);
            left += 1;
        }
    }
    left
}

/// Partition `span` and return the size of the left part (never 0 or all).
fn split(span: &mut [Entry], level: usize) -> usize {
    let centres = span.iter().fold(Bounds::EMPTY, |b, it| b.grow_point(it.2));
    let extent = centres.max - centres.min;
    let axis = if extent.x >= extent.y && extent.x >= extent.z {
        0
    } else if extent.y >= extent.z {
        1
    } else {
        2
    };
    let (lo, width) = (centres.min.get(axis), extent.get(axis));
    let median = |span: &mut [Entry]| {
        let mid = span.len() / 2;
        span.select_nth_unstable_by(mid, |a, b| a.2.get(axis).total_cmp(&b.2.get(axis)));
        mid
    };
    if width <= 0.0 || level >= MEDIAN_DEPTH {
        return median(span);
    }
    let bin_of = |c: DVec3| (((c.get(axis) - lo) / width * BINS as f64) as usize).min(BINS - 1);
    let mut bins = [(Bounds::EMPTY, 0usize); BINS];
    for it in span.iter() {
        let b = &mut bins[bin_of(it.2)];
        *b = (b.0.union(it.1.bounds), b.1 + 1);
    }
    // Cost of splitting after bin k: area·count of each side.
    let mut best = (f64::INFINITY, 0);
    for k in 0..BINS - 1 {
        let (l, r) = (&bins[..=k], &bins[k + 1..]);
        let side = |s: &[(Bounds, usize)]| {
            s.iter()
                .fold((Bounds::EMPTY, 0), |(b, n), x| (b.union(x.0), n + x.1))
        };
        let ((lb, ln), (rb, rn)) = (side(l), side(r));
        if ln == 0 || rn == 0 {
            continue;
        }
        let cost = lb.half_area() * ln as f64 + rb.half_area() * rn as f64;
        if cost < best.0 {
            best = (cost, k);
        }
    }
    if best.0.is_infinite() {
        return median(span);
    }
    let mut left = 0;
    for i in 0..span.len() {
        if bin_of(span[i].2) <= best.1 {
            span.swap(i, left);
            left += 1;
        }
    }
    left
}
