//! Generalized winding numbers of triangle meshes (Jacobson et al. 2013), evaluated fast with a
//! hierarchy (Barill et al. 2018): a cluster of triangles far from the query point contributes
//! through its dipole (area-weighted normal at its area centroid), a near one term by term.
//! Robust on meshes with holes, where pseudonormal signs are not. f64 on the host.

use half::f16;

use crate::bvh::LEAF_COUNT_BITS;
use crate::gpu::layout::TriangleHierarchy;
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

/// One cluster: a child of the hierarchy with its dipole.
#[derive(Clone, Copy, Debug)]
struct Cluster {
    /// Leaf: triangles `order[first .. first + count]`; inner: node `first` (count 0).
    first: u32,
    count: u32,
    /// Σ ½ (b − a) × (c − a) over the cluster's triangles.
    dipole: DVec3,
    /// Their area-weighted centroid.
    centre: DVec3,
    /// No triangle of the cluster is farther from `centre`: its distance from the centre of
    /// the child's box plus the box's half diagonal.
    radius: f64,
}

/// A mesh's winding-number hierarchy: the device's (winding_walk.wgsl), in f64. Its clusters
/// are the children of the hierarchy a mesh's scene gets on the device
/// (`layout::TriangleHierarchy`, built the same way from the same shifted corners), with the
/// centroids and dipoles the device has (rounded to f32) and their boxes decoded as the device
/// decodes them, so both take the same clusters whole.
pub struct WindingTree {
    order: Vec<u32>,
    /// Per node, its two clusters; empty for a mesh too small for a hierarchy (summed directly).
    nodes: Vec<[Cluster; 2]>,
}

impl WindingTree {
    pub fn new(mesh: &Mesh) -> WindingTree {
        let offset = mesh.centre();
        let corners = |t: usize| mesh.shifted_corners(t, offset);
        let count = mesh.triangles.len();
        let Some(hierarchy) = TriangleHierarchy::for_triangles(count, &corners, true) else {
            return WindingTree {
                order: (0..count as u32).collect(),
                nodes: Vec::new(),
            };
        };
        let words = &hierarchy.packed.words;
        let half_scale = hierarchy.packed.half_scale;
        let nodes = (0..hierarchy.node_count as usize)
            .map(|n| {
                [0, 1].map(|side| {
                    let [x, y, z, reference] = words[4 * n + side];
                    let box_centre = DVec3::new(
                        f32::from_bits(x) as f64,
                        f32::from_bits(y) as f64,
                        f32::from_bits(z) as f64,
                    );
                    let vector = |k: usize| {
                        let [x, y, z] = hierarchy.clusters[4 * n + 2 * side + k].map(f64::from);
                        DVec3::new(x, y, z)
                    };
                    let centroid = vector(0);
                    let packed = words[4 * n + 2 + side];
                    // As child_half_extents decodes them: normal f16s times the scale, in f32.
                    let half = [packed[0] & 0xffff, packed[0] >> 16, packed[1]]
                        .map(|bits| (f16::from_bits(bits as u16).to_f32() * half_scale) as f64);
                    Cluster {
                        first: reference >> LEAF_COUNT_BITS,
                        count: reference & ((1 << LEAF_COUNT_BITS) - 1),
                        dipole: vector(1),
                        centre: centroid + offset,
                        radius: (centroid - box_centre).length()
                            + DVec3::new(half[0], half[1], half[2]).length(),
                    }
                })
            })
            .collect();
        WindingTree {
            order: hierarchy.order,
            nodes,
        }
    }

    /// The winding number at `p`: clusters within `ACCURACY` radii term by term, the others as
    /// clusters.
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
                total += r.dot(cluster.dipole) / (4.0 * std::f64::consts::PI * distance.powi(3));
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
