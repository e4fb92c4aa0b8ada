//! Generalized winding numbers of triangle meshes (Jacobson et al. 2013), evaluated fast with a
//! hierarchy (Barill et al. 2018): a cluster of triangles far from the query point contributes
//! through its dipole (area-weighted normal at its area centroid), a near one term by term.
//! Robust on meshes with holes, where pseudonormal signs are not. f64 on the host.

use crate::bvh::{self, Bounds, Item, LEAF_KIND_SHIFT};
use crate::math::DVec3;
use crate::mesh::{Mesh, triangle_winding_number};

/// A cluster farther than `ACCURACY` times its radius from the query point is taken as one
/// dipole (Barill et al.'s β). tests/winding.rs measures the error against the exact sum.
pub const ACCURACY: f64 = 6.0;
/// Signs (`WindingTree::is_inside`, and the device's `winding_signs`) first take clusters
/// whole past `COARSE_ACCURACY` radii, about six times cheaper on a grid around fandisk, and
/// evaluate again at `ACCURACY` only where that coarse number lies within `SIGN_MARGIN` of ½:
/// the sign is the fine one's wherever the coarse error is under the margin (tests/winding.rs
/// holds it under half the margin; its worst on fandisk is 0.085).
pub const COARSE_ACCURACY: f64 = 2.0;
pub const SIGN_MARGIN: f64 = 0.25;

/// One cluster: a BVH child with its dipole.
#[derive(Clone, Copy, Debug)]
struct Cluster {
    /// Leaf: triangles `order[first .. first + count]`; inner: node `first` (count 0).
    first: u32,
    count: u32,
    /// Σ ½ (b − a) × (c − a) over the cluster's triangles.
    normal: DVec3,
    area: f64,
    /// Area-weighted centroid (the box centre for a cluster of zero area).
    centre: DVec3,
    /// Distance from `centre` to the farthest corner of the cluster's box.
    radius: f64,
}

/// A mesh's winding-number hierarchy.
pub struct WindingTree {
    order: Vec<u32>,
    /// Per node, its two clusters; empty for a mesh of one triangle (summed directly).
    nodes: Vec<[Cluster; 2]>,
}

impl WindingTree {
    pub fn new(mesh: &Mesh) -> WindingTree {
        if mesh.triangles.len() < 2 {
            return WindingTree {
                order: (0..mesh.triangles.len() as u32).collect(),
                nodes: Vec::new(),
            };
        }
        // Items made as the build asks for them: a mesh's worth of them (56 bytes a triangle)
        // was the largest array of this build.
        let item = |t: usize| {
            let [a, b, c] = mesh.corners(t);
            Item {
                bounds: Bounds {
                    min: DVec3::new(
                        a.x.min(b.x).min(c.x),
                        a.y.min(b.y).min(c.y),
                        a.z.min(b.z).min(c.z),
                    ),
                    max: DVec3::new(
                        a.x.max(b.x).max(c.x),
                        a.y.max(b.y).max(c.y),
                        a.z.max(b.z).max(c.z),
                    ),
                },
                kind: 0,
            }
        };
        let bvh::Bvh {
            order,
            nodes: built_nodes,
            ..
        } = bvh::build_with(mesh.triangles.len(), &item, bvh::LEAF_SIZE, 0, 0);
        let placeholder = Cluster {
            first: 0,
            count: 0,
            normal: DVec3::ZERO,
            area: 0.0,
            centre: DVec3::ZERO,
            radius: 0.0,
        };
        let mut nodes = vec![[placeholder; 2]; built_nodes.len()];
        // Children are stored after their parents: fill from the back.
        for n in (0..built_nodes.len()).rev() {
            for side in 0..2 {
                let child = built_nodes[n].children[side];
                let count = if child.count > 0 {
                    child.count & ((1 << LEAF_KIND_SHIFT) - 1)
                } else {
                    0
                };
                let (normal, weighted, area) = if count > 0 {
                    let first = child.first as usize;
                    order[first..first + count as usize].iter().fold(
                        (DVec3::ZERO, DVec3::ZERO, 0.0),
                        |(normal, weighted, area), &t| {
                            let [a, b, c] = mesh.corners(t as usize);
                            let n2 = (b - a).cross(c - a) * 0.5;
                            let da = n2.length();
                            (normal + n2, weighted + (a + b + c) * (da / 3.0), area + da)
                        },
                    )
                } else {
                    let [l, r] = nodes[child.first as usize];
                    (
                        l.normal + r.normal,
                        l.centre * l.area + r.centre * r.area,
                        l.area + r.area,
                    )
                };
                let corner = |bits: usize| {
                    let pick = |k: usize| {
                        if bits >> k & 1 == 0 {
                            child.min[k]
                        } else {
                            child.max[k]
                        }
                    };
                    DVec3::new(pick(0) as f64, pick(1) as f64, pick(2) as f64)
                };
                let centre = if area > 0.0 {
                    weighted * (1.0 / area)
                } else {
                    (corner(0) + corner(7)) * 0.5
                };
                let radius = (0..8)
                    .map(|bits| (corner(bits) - centre).length())
                    .fold(0.0, f64::max);
                nodes[n][side] = Cluster {
                    first: child.first,
                    count,
                    normal,
                    area,
                    centre,
                    radius,
                };
            }
        }
        WindingTree { order, nodes }
    }

    /// The most bytes [`WindingTree::gpu_words`] takes for a mesh of `triangles`: a header,
    /// at most one node per triangle (a binary tree's inner nodes are fewer than its leaves)
    /// and three words per triangle.
    pub fn max_gpu_bytes(triangles: usize) -> u64 {
        16 * (1 + 4 * triangles.max(1) + 3 * triangles) as u64
    }

    /// The hierarchy as `winding_walk.wgsl` reads it, in vec4 words, coordinates moved by `-offset`
    /// before rounding to f32: a header (node count, first triangle word, triangle count),
    /// then per node its two clusters as (centre, radius), (normal, `first << LEAF_COUNT_BITS |
    /// count`), then the triangles in the tree's order as (a, b, c).
    pub fn gpu_words(&self, mesh: &Mesh, offset: DVec3) -> Vec<[u32; 4]> {
        let f = |v: DVec3, w: u32| {
            let v = v.to_f32();
            [v[0].to_bits(), v[1].to_bits(), v[2].to_bits(), w]
        };
        let node_words = 4 * self.nodes.len();
        let mut words = Vec::with_capacity(1 + node_words + 3 * self.order.len());
        words.push([
            self.nodes.len() as u32,
            (1 + node_words) as u32,
            self.order.len() as u32,
            0,
        ]);
        for node in &self.nodes {
            for c in node {
                words.push(f(c.centre - offset, (c.radius as f32).to_bits()));
            }
            for c in node {
                words.push(f(c.normal, (c.first << bvh::LEAF_COUNT_BITS) | c.count));
            }
        }
        for &t in &self.order {
            for corner in mesh.corners(t as usize) {
                words.push(f(corner - offset, 0));
            }
        }
        words
    }

    /// The winding number at `p`: clusters within `ACCURACY` radii term by term, the others as
    /// dipoles.
    pub fn winding_number(&self, mesh: &Mesh, p: DVec3) -> f64 {
        self.winding_number_within(mesh, p, ACCURACY)
    }

    /// Whether `p` is inside (winding number above ½), decided as the device decides: at
    /// `COARSE_ACCURACY`, and again at `ACCURACY` within `SIGN_MARGIN` of ½.
    pub fn is_inside(&self, mesh: &Mesh, p: DVec3) -> bool {
        let coarse = self.winding_number_within(mesh, p, COARSE_ACCURACY);
        if (coarse - 0.5).abs() > SIGN_MARGIN {
            return coarse > 0.5;
        }
        self.winding_number(mesh, p) > 0.5
    }

    /// The winding number at `p` with clusters taken whole past `accuracy` radii.
    pub fn winding_number_within(&self, mesh: &Mesh, p: DVec3, accuracy: f64) -> f64 {
        let Some(root) = self.nodes.first() else {
            return self
                .order
                .iter()
                .map(|&t| triangle_winding_number(mesh.corners(t as usize), p))
                .sum();
        };
        let mut total = 0.0;
        let mut stack: Vec<Cluster> = root.to_vec();
        while let Some(cluster) = stack.pop() {
            let r = cluster.centre - p;
            let distance = r.length();
            if distance > accuracy * cluster.radius {
                total += r.dot(cluster.normal) / (4.0 * std::f64::consts::PI * distance.powi(3));
            } else if cluster.count > 0 {
                let first = cluster.first as usize;
                for &t in &self.order[first..first + cluster.count as usize] {
                    total += triangle_winding_number(mesh.corners(t as usize), p);
                }
            } else {
                stack.extend_from_slice(&self.nodes[cluster.first as usize]);
            }
        }
        total
    }
}
