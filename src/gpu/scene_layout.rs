//! How a scene or a mesh is laid out on the device: the shapes in their hierarchy's leaf order
//! and the kinds scanned linearly (`scene_layout`), the hierarchy's nodes, and a mesh's
//! triangles packed or indexed, with the winding clusters over the same hierarchy
//! (`TriangleHierarchy`). The records themselves are `layout.rs`'s.

use crate::bvh::{self, Bounds, GpuBvhNode, shape_bounds};
use crate::error::Result;
use crate::math::DVec3;
use crate::math::triangle_unit_normal;
use crate::shape::{Shape, ShapeKind};
use std::sync::atomic::{AtomicBool, Ordering};

use super::layout::{GpuShape, ShapeData};

/// A scene as the GPU holds it: the bounded shapes in the BVH's leaf order, then the shapes
/// scanned linearly grouped by kind, each carrying its scene index; per kind `[start, end, 0, 0]`
/// of its linear range, then one more entry `[root node, node count, kinds in the BVH (bit
/// per kind), 0]`; and the BVH nodes.
pub struct SceneLayout {
    pub shapes: Vec<GpuShape>,
    pub ranges: Vec<[u32; 4]>,
    pub nodes: Vec<GpuBvhNode>,
    /// The BVH's boxes are oriented (`bvh::Bvh::orient`): a hierarchy of triangles only.
    pub oriented: bool,
    pub data: ShapeData,
}

/// A scene's binding contents, as its kernel reads them (as 32-bit words, so that the large
/// ones are moved, not copied, into bytes).
pub struct SceneBindings {
    /// `shapes`: `GpuShape`s, or packed triangles (`packed_triangles`) for an oriented scene.
    pub records: Vec<u32>,
    /// `kind_ranges`; an oriented scene's last entry carries `half_scale` in `w`.
    pub ranges: Vec<[u32; 4]>,
    /// `nodes`: `GpuBvhNode`s, or `bvh::pack_oriented` words for an oriented scene.
    pub nodes: Vec<u32>,
    /// `shape_data` (`ShapeData`).
    pub data: Vec<u8>,
    /// The hierarchy's boxes are oriented: a triangle-only scene, run by `mesh.wgsl`.
    pub oriented: bool,
    /// An oriented scene's triangles are indexed (`indexed_triangles`), not packed.
    pub indexed: bool,
    /// An oriented scene's winding-number clusters, twelve words a node (`winding_clusters`),
    /// where asked; empty otherwise.
    pub clusters: Vec<u32>,
    /// An oriented scene's top levels on the host, where walks may start below the root
    /// (`TriangleHierarchy`); empty otherwise.
    pub top_nodes: bvh::TopNodes,
}

impl SceneBindings {
    /// Bit k set when kind k has shapes in the BVH (0: no BVH).
    pub fn bvh_kinds(&self) -> u32 {
        self.ranges.last().map_or(0, |r| r[2])
    }

    /// Bit k set when kind k has shapes scanned linearly.
    pub fn linear_kinds(&self) -> u32 {
        let kinds = &self.ranges[..self.ranges.len().saturating_sub(1)];
        kinds
            .iter()
            .enumerate()
            .filter(|(_, r)| r[1] > r[0])
            .fold(0, |bits, (k, _)| bits | 1 << k)
    }
}

impl SceneLayout {
    /// The bindings: triangle-only (oriented) scenes run `mesh.wgsl`, which reads packed
    /// triangles and nodes; the others run `query.wgsl`. Zero-size bindings are invalid, so an
    /// empty buffer still gets one record, never read.
    pub fn into_bindings(self) -> SceneBindings {
        let SceneLayout {
            mut shapes,
            mut ranges,
            mut nodes,
            oriented,
            data,
        } = self;
        let data = data.into_bytes();
        if nodes.is_empty() {
            nodes.push(GpuBvhNode::default());
        }
        if oriented {
            let packed = bvh::pack_oriented(&nodes);
            if let Some(root) = ranges.last_mut() {
                root[3] = packed.half_scale.to_bits();
            }
            SceneBindings {
                records: bytemuck::allocation::cast_vec(packed_triangles(&shapes)),
                ranges,
                nodes: bytemuck::allocation::cast_vec(packed.words),
                data,
                oriented,
                indexed: false,
                clusters: Vec::new(),
                top_nodes: bvh::TopNodes::default(),
            }
        } else {
            if shapes.is_empty() {
                shapes.push(GpuShape::default());
            }
            SceneBindings {
                records: bytemuck::allocation::cast_vec(shapes),
                ranges,
                nodes: bytemuck::allocation::cast_vec(nodes),
                data,
                oriented,
                indexed: false,
                clusters: Vec::new(),
                top_nodes: bvh::TopNodes::default(),
            }
        }
    }
}

/// The triangles of an oriented (triangle-only) scene as `mesh.wgsl` reads them: per triangle
/// `(a, n.x), (b − a, n.y), (c − a, n.z)` in leaf order, then the scene index of each slot and
/// the slot of each scene index, four per vec4 (as f32 bit patterns).
pub fn packed_triangles(shapes: &[GpuShape]) -> Vec<[f32; 4]> {
    packed_triangles_by(shapes.len(), &|slot| shapes[slot])
}

/// [`packed_triangles`] of `count` records, `record(slot)` giving each (with its scene index),
/// built on all cores.
fn packed_triangles_by(count: usize, record: &(dyn Fn(usize) -> GpuShape + Sync)) -> Vec<[f32; 4]> {
    use rayon::prelude::*;
    let words = count.div_ceil(4);
    let mut packed = vec![[0f32; 4]; count * 3 + 2 * words];
    let (triangles, index_words) = packed.split_at_mut(count * 3);
    let (indices, slots) = index_words.split_at_mut(words);
    let mut index_of_slot = vec![0u32; count];
    triangles
        .par_chunks_mut(3)
        .zip(index_of_slot.par_iter_mut())
        .enumerate()
        .for_each(|(slot, (out, index))| {
            let s = record(slot);
            debug_assert_eq!(s.kind, ShapeKind::Triangle as u32);
            let [a, e0, e1, n] = [s.anchor, s.p0, s.p1, s.p2];
            out[0] = [a[0], a[1], a[2], n[0]];
            out[1] = [e0[0], e0[1], e0[2], n[1]];
            out[2] = [e1[0], e1[1], e1[2], n[2]];
            *index = s.index;
        });
    for (slot, &index) in index_of_slot.iter().enumerate() {
        slots[index as usize / 4][index as usize % 4] = f32::from_bits(slot as u32);
        indices[slot / 4][slot % 4] = f32::from_bits(index);
    }
    packed
}

/// The bindings of a scene of `count` triangles, `corners(i)` giving triangle i's (already
/// shifted): the bytes `scene_layout` would give for their triangle shapes (tested), built
/// straight from the corners on all cores, without the shapes, records and copies in between
/// (for a mesh of millions of triangles those were most of the build's time and memory).
/// With `clusters`, the bindings carry the winding-number clusters over the hierarchy
/// ([`TriangleHierarchy::for_triangles`]).
pub fn triangle_bindings(
    count: usize,
    corners: &(dyn Fn(usize) -> [DVec3; 3] + Sync),
    clusters: bool,
) -> Result<SceneBindings> {
    let triangle = |i: usize| {
        let [a, b, c] = corners(i);
        Shape::Triangle { a, b, c }
    };
    let Some(hierarchy) = TriangleHierarchy::interruptible(count, corners, clusters)? else {
        let shapes: Vec<Shape> = (0..count).map(triangle).collect();
        return Ok(scene_layout(&shapes, true).into_bindings());
    };
    let order = &hierarchy.order;
    let records = packed_triangles_by(count, &|slot| GpuShape {
        index: order[slot],
        ..GpuShape::from_shape(&triangle(order[slot] as usize))
    });
    Ok(hierarchy.into_bindings(bytemuck::allocation::cast_vec(records), false))
}

/// [`triangle_bindings`] with indexed records (`indexed_triangles`): the same hierarchy, about
/// three quarters of the bytes (docs/perf-history.md). `corner_ids(i)` are triangle i's indices into `vertices`, the
/// corners as `corners(i)` gives them rounded to f32. Scenes too small for a hierarchy are
/// scanned linearly, packed, as by [`triangle_bindings`].
pub fn indexed_triangle_bindings(
    count: usize,
    corners: &(dyn Fn(usize) -> [DVec3; 3] + Sync),
    corner_ids: &(dyn Fn(usize) -> [u32; 3] + Sync),
    vertices: &[[f32; 3]],
    clusters: bool,
) -> Result<SceneBindings> {
    let Some(hierarchy) = TriangleHierarchy::interruptible(count, corners, clusters)? else {
        return triangle_bindings(count, corners, clusters);
    };
    let records = indexed_triangles(&hierarchy.order, corners, corner_ids);
    let mut bindings = hierarchy.into_bindings(records, true);
    bindings.nodes.extend(vertex_texels(vertices));
    Ok(bindings)
}

/// A triangle scene's oriented hierarchy, packed, the leaf order of its triangles and, where
/// asked, its children's clusters.
pub(crate) struct TriangleHierarchy {
    pub(crate) packed: bvh::PackedNodes,
    pub(crate) node_count: u32,
    pub(crate) order: Vec<u32>,
    /// Per node, its left then right child's winding cluster (`winding_clusters`); empty
    /// unless asked.
    pub(crate) clusters: Vec<[f32; 3]>,
    /// The hierarchy's top levels, kept on the host for walks' start nodes.
    pub(crate) top_nodes: bvh::TopNodes,
}

impl TriangleHierarchy {
    /// The hierarchy of `count` triangles, `corners(i)` giving triangle i's; `None` for a
    /// single triangle, scanned linearly. With `clusters`, each
    /// child's winding-number cluster too (winding_walk.wgsl).
    pub(crate) fn for_triangles(
        count: usize,
        corners: &(dyn Fn(usize) -> [DVec3; 3] + Sync),
        clusters: bool,
    ) -> Option<TriangleHierarchy> {
        let never = AtomicBool::new(false);
        TriangleHierarchy::build_until(count, corners, clusters, &never)
    }

    /// [`TriangleHierarchy::for_triangles`] that the caller's interrupt check can stop (a mesh
    /// of millions of triangles takes seconds to build): `Error::Interrupted`.
    fn interruptible(
        count: usize,
        corners: &(dyn Fn(usize) -> [DVec3; 3] + Sync),
        clusters: bool,
    ) -> Result<Option<TriangleHierarchy>> {
        crate::interrupt::polled(|stop| {
            TriangleHierarchy::build_until(count, corners, clusters, stop)
        })
    }

    /// The hierarchy; once `stop` is set, built anyhow and quickly or not at all (to be thrown away).
    fn build_until(
        count: usize,
        corners: &(dyn Fn(usize) -> [DVec3; 3] + Sync),
        clusters: bool,
        stop: &AtomicBool,
    ) -> Option<TriangleHierarchy> {
        if count < 2 {
            return None;
        }
        let stopped = || stop.load(Ordering::Relaxed);
        let item = |i: usize| {
            let [a, b, c] = corners(i);
            bvh::Item {
                bounds: shape_bounds(&Shape::Triangle { a, b, c }).expect("a triangle is bounded"),
                kind: ShapeKind::Triangle as u32,
            }
        };
        // Once stopped, thrown away (`interrupt::polled` answers Interrupted): nothing more
        // to make.
        let mut built = bvh::build_until(count, &item, bvh::TRIANGLE_LEAF_SIZE, 0, 0, stop)?;
        if stopped() {
            return None;
        }
        built.orient(&|members: &[u32]| match stopped() {
            true => None,
            false => fit_triangles_box(members, corners),
        });
        let clusters = if clusters && !stopped() {
            winding_clusters(&built, corners)
        } else {
            Vec::new()
        };
        if stopped() {
            return None;
        }
        Some(TriangleHierarchy {
            top_nodes: bvh::TopNodes::of(&built.nodes),
            packed: bvh::pack_oriented(&built.nodes),
            node_count: built.nodes.len() as u32,
            order: built.order,
            clusters,
        })
    }

    /// The bindings with the triangles' `records` (packed or `indexed`).
    fn into_bindings(self, records: Vec<u32>, indexed: bool) -> SceneBindings {
        let count = self.order.len() as u32;
        let mut ranges = vec![[count, count, 0, 0]; ShapeKind::ALL.len()];
        ranges.push([
            0,
            self.node_count,
            1 << ShapeKind::Triangle as u32,
            self.packed.half_scale.to_bits(),
        ]);
        SceneBindings {
            records,
            ranges,
            nodes: bytemuck::allocation::cast_vec(self.packed.words),
            data: ShapeData::default().into_bytes(),
            oriented: true,
            indexed,
            clusters: bytemuck::allocation::cast_vec(self.clusters),
            top_nodes: self.top_nodes,
        }
    }
}

/// Per node of `built` (root first), its left then right child's winding-number cluster
/// (Barill et al. 2018) as two vectors: the area-weighted centroid of the child's triangles
/// (its box's centre if they have no area) and their dipole Σ ½ (b − a) × (c − a), the far
/// field of their winding number; summed in f64 up the hierarchy and rounded once. The walk
/// (winding_walk.wgsl) bounds the cluster by the child's box.
fn winding_clusters(
    built: &bvh::Bvh,
    corners: &(dyn Fn(usize) -> [DVec3; 3] + Sync),
) -> Vec<[f32; 3]> {
    /// A child's sums: dipole, area-weighted centroid times the area, and area.
    type Sums = (DVec3, DVec3, f64);
    fn add(x: Sums, y: Sums) -> Sums {
        (x.0 + y.0, x.1 + y.1, x.2 + y.2)
    }
    /// The clusters of the subtree rooted at `node`, whose nodes are `node ..` (a node's left
    /// subtree follows it, then its right one: `out` holds theirs, four vectors a node); the
    /// two sides of a large subtree on two threads.
    fn subtree(
        built: &bvh::Bvh,
        corners: &(dyn Fn(usize) -> [DVec3; 3] + Sync),
        node: usize,
        out: &mut [[f32; 3]],
    ) -> Sums {
        let (own, below) = out.split_at_mut(4);
        let children = built.nodes[node].children;
        let is_leaf = |side: usize| children[side].count & ((1 << bvh::LEAF_KIND_SHIFT) - 1) > 0;
        let leaf = |side: usize| {
            let (start, end) = built.spans[node][side];
            built.order[start..end]
                .iter()
                .fold((DVec3::ZERO, DVec3::ZERO, 0.0), |sums, &t| {
                    let [a, b, c] = corners(t as usize);
                    let dipole = (b - a).cross(c - a) * 0.5;
                    let area = dipole.length();
                    add(sums, (dipole, (a + b + c) * (area / 3.0), area))
                })
        };
        // The right subtree's nodes start where the left one's end.
        let right_at = if is_leaf(1) {
            below.len()
        } else {
            4 * (children[1].first as usize - node - 1)
        };
        let (left_nodes, right_nodes) = below.split_at_mut(right_at);
        let mut left = move || {
            if is_leaf(0) {
                leaf(0)
            } else {
                subtree(built, corners, children[0].first as usize, left_nodes)
            }
        };
        let mut right = move || {
            if is_leaf(1) {
                leaf(1)
            } else {
                subtree(built, corners, children[1].first as usize, right_nodes)
            }
        };
        let (start, end) = (built.spans[node][0].0, built.spans[node][1].1);
        let sums = if end - start >= PARALLEL_CLUSTER_TRIANGLES {
            rayon::join(left, right)
        } else {
            (left(), right())
        };
        for (side, (dipole, weighted, area)) in [sums.0, sums.1].into_iter().enumerate() {
            // An oriented child's `min` holds its box's centre (`Bvh::orient`).
            let [x, y, z] = children[side].min.map(f64::from);
            let centroid = if area > 0.0 {
                weighted * (1.0 / area)
            } else {
                DVec3::new(x, y, z)
            };
            own[2 * side] = centroid.to_f32();
            own[2 * side + 1] = dipole.to_f32();
        }
        add(sums.0, sums.1)
    }
    let mut out = vec![[0f32; 3]; 4 * built.nodes.len()];
    if !built.nodes.is_empty() {
        subtree(built, corners, 0, &mut out);
    }
    out
}

/// Subtrees of at least this many triangles have their clusters summed on two threads.
const PARALLEL_CLUSTER_TRIANGLES: usize = 16 * 1024;

/// Words a triangle's indexed record takes: its corners' vertex indices and its unit normal.
const INDEXED_RECORD_WORDS: usize = 6;

/// The words of an oriented scene's records that are read as texels, before its index tables:
/// 12 a packed triangle, 6 an indexed one (rounded up to a texel).
pub fn triangle_record_words(count: usize, indexed: bool) -> usize {
    if indexed {
        (INDEXED_RECORD_WORDS * count).next_multiple_of(4)
    } else {
        12 * count
    }
}

/// The words [`indexed_triangles`] takes for `count` triangles.
fn indexed_triangles_words(count: usize) -> usize {
    triangle_record_words(count, true) + 2 * count.next_multiple_of(4)
}

/// The triangles of an oriented scene as `mesh_walk.wgsl` reads them with
/// `TRIANGLE_RECORDS = 1`: per triangle of the leaf order `order` its three vertex indices and
/// unit normal (computed in f64 from `corners`, as the packed records have it), read as texels;
/// then, each table starting on a vec4, the scene index of each slot and the slot of each
/// scene index (as in [`packed_triangles`]). The vertices are texels after the nodes
/// ([`vertex_texels`]).
pub fn indexed_triangles(
    order: &[u32],
    corners: &(dyn Fn(usize) -> [DVec3; 3] + Sync),
    corner_ids: &(dyn Fn(usize) -> [u32; 3] + Sync),
) -> Vec<u32> {
    use rayon::prelude::*;
    let count = order.len();
    let record_words = triangle_record_words(count, true);
    let mut words = vec![0u32; indexed_triangles_words(count)];
    let (records, tables) = words.split_at_mut(record_words);
    let (indices, slots) = tables.split_at_mut(count.next_multiple_of(4));
    records
        .par_chunks_mut(INDEXED_RECORD_WORDS)
        .zip(order.par_iter())
        .for_each(|(out, &t)| {
            let [a, b, c] = corners(t as usize);
            let n = triangle_unit_normal(a, b, c).to_f32();
            out[..3].copy_from_slice(&corner_ids(t as usize));
            out[3..].copy_from_slice(&n.map(f32::to_bits));
        });
    for (slot, &t) in order.iter().enumerate() {
        indices[slot] = t;
        slots[t as usize] = slot as u32;
    }
    words
}

/// Indexed records' vertices as texels, one each (the fourth word unused): a corner is one
/// texel fetch (`indexed_vertex` in mesh_walk.wgsl).
pub fn vertex_texels(vertices: &[[f32; 3]]) -> Vec<u32> {
    use rayon::prelude::*;
    let mut words = vec![0u32; 4 * vertices.len()];
    words
        .par_chunks_mut(4)
        .zip(vertices.par_iter())
        .for_each(|(out, v)| out[..3].copy_from_slice(&v.map(f32::to_bits)));
    words
}

/// The oriented box of a hierarchy child holding triangles `members`, if it is small enough
/// to be worth fitting (`ORIENTED_MAX_TRIANGLES`).
fn fit_triangles_box(
    members: &[u32],
    corners: &(dyn Fn(usize) -> [DVec3; 3] + Sync),
) -> Option<bvh::OrientedBox> {
    if members.len() > ORIENTED_MAX_TRIANGLES {
        return None;
    }
    // The corners once, for both passes (each is a gather from the mesh's vertices).
    let mut points = Vec::with_capacity(3 * members.len());
    let mut normal = DVec3::ZERO;
    for &t in members {
        let [a, b, c] = corners(t as usize);
        normal += (b - a).cross(c - a);
        points.extend_from_slice(&[a, b, c]);
    }
    bvh::fit_oriented_box(&points, normal)
}

/// A hierarchy pays once a scene has more bounded shapes than this many per bounded kind: each
/// leaf visit runs the code of every kind in the hierarchy on software adapters, so the break-even
/// grows with the kinds (measured on lavapipe: about 50 shapes for four kinds, docs/perf-history.md).
const LINEAR_SCAN_PER_KIND: usize = 12;

/// Children holding more triangles keep axis-aligned boxes: fitting is a pass over every
/// corner below a child, so it would cost a pass over the mesh per level, and near the root an
/// oriented box around a large curved patch is hardly tighter (docs/perf-history.md).
const ORIENTED_MAX_TRIANGLES: usize = 256;

/// `use_bvh: false` scans every kind linearly (the brute-force path, for comparisons).
pub fn scene_layout(shapes: &[Shape], use_bvh: bool) -> SceneLayout {
    scene_layout_with(shapes, use_bvh, true)
}

/// [`scene_layout`], with triangle-only hierarchies oriented or not (`orient_triangles`):
/// the body walk (`bodies.wgsl`) reads axis-aligned boxes and plain records only.
pub fn scene_layout_with(shapes: &[Shape], use_bvh: bool, orient_triangles: bool) -> SceneLayout {
    let bounded: Vec<(usize, Bounds)> = shapes
        .iter()
        .enumerate()
        .filter_map(|(i, s)| shape_bounds(s).map(|b| (i, b)))
        .collect();
    let bounded_kinds = bounded
        .iter()
        .fold(0u32, |bits, &(i, _)| bits | 1 << shapes[i].kind() as u32);
    let in_bvh =
        use_bvh && bounded.len() > LINEAR_SCAN_PER_KIND * bounded_kinds.count_ones() as usize;
    let mut layout = SceneLayout {
        shapes: Vec::new(),
        ranges: Vec::new(),
        nodes: Vec::new(),
        oriented: false,
        data: ShapeData::default(),
    };
    let mut bvh_entry = [0u32; 4];
    if in_bvh {
        let items: Vec<bvh::Item> = bounded
            .iter()
            .map(|&(i, bounds)| bvh::Item {
                bounds,
                kind: shapes[i].kind() as u32,
            })
            .collect();
        // Meshes: boxes that follow the surface. An axis-aligned box around tiny tilted
        // triangles stands out of the surface by their size, so far more leaves qualify for a
        // query point than hold its answer (docs/perf-history.md).
        let triangles: Option<Vec<[DVec3; 3]>> = if !orient_triangles {
            None
        } else {
            bounded
                .iter()
                .map(|&(i, _)| match shapes[i] {
                    Shape::Triangle { a, b, c } => Some([a, b, c]),
                    _ => None,
                })
                .collect()
        };
        let leaf_size = if triangles.is_some() {
            bvh::TRIANGLE_LEAF_SIZE
        } else {
            bvh::LEAF_SIZE
        };
        let mut built = bvh::build(&items, leaf_size, 0, 0);
        if let Some(triangles) = &triangles {
            built.orient(&|members: &[u32]| fit_triangles_box(members, &|k| triangles[k]));
            layout.oriented = true;
        }
        for &k in &built.order {
            let i = bounded[k as usize].0;
            let record = layout.data.record(&shapes[i]);
            layout.shapes.push(GpuShape {
                index: i as u32,
                ..record
            });
        }
        bvh_entry = [0, built.nodes.len() as u32, bounded_kinds, 0];
        layout.nodes = built.nodes;
    }
    for kind in ShapeKind::ALL {
        let start = layout.shapes.len() as u32;
        let linear = shapes
            .iter()
            .enumerate()
            .filter(|(_, s)| s.kind() == kind && !(in_bvh && shape_bounds(s).is_some()));
        for (i, s) in linear {
            let record = layout.data.record(s);
            layout.shapes.push(GpuShape {
                index: i as u32,
                ..record
            });
        }
        layout
            .ranges
            .push([start, layout.shapes.len() as u32, 0, 0]);
    }
    layout.ranges.push(bvh_entry);
    layout
}
