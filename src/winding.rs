//! Generalized winding numbers of triangle meshes (Jacobson et al. 2013), evaluated fast with a
//! hierarchy (Barill et al. 2018): a cluster of triangles far from the query point contributes
//! through its dipole (area-weighted normal at its area centroid), a near one term by term.
//! Robust on meshes with holes, where pseudonormal signs are not. f64 on the host.

use half::f16;

use crate::bvh::LEAF_COUNT_BITS;
use crate::gpu::scene_layout::TriangleHierarchy;
use crate::math::DVec3;
use crate::mesh::{Mesh, triangle_winding_number};

/// A cluster farther than `ACCURACY` times its radius from the query point is taken as one
/// dipole (Barill et al.'s β). tests/winding.rs measures the error against the exact sum.
pub const ACCURACY: f64 = 6.0;
/// How far a winding number at `ACCURACY` may lie from the exact sum: tests/winding.rs holds
/// the hierarchy's error under it on the shared meshes.
pub const ERROR: f64 = 0.01;
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
/// (`scene_layout::TriangleHierarchy`, built the same way from the same shifted corners), with the
/// centroids and dipoles the device has (rounded to f32) and their boxes decoded as the device
/// decodes them, so both take the same clusters whole. A mesh in parts has a hierarchy per
/// part, as on the device, and its winding number is the sum of theirs.
pub struct WindingTree {
    /// The mesh's triangles in the hierarchies' leaf order, part after part.
    order: Vec<u32>,
    /// Per node, its two clusters, part after part.
    nodes: Vec<[Cluster; 2]>,
    /// Where a walk starts: each part's root node's two clusters, or for a part too small for
    /// a hierarchy all its triangles as one cluster, always summed term by term.
    roots: Vec<Cluster>,
}

impl WindingTree {
    /// The hierarchy of the whole mesh, as a mesh of one part has it on the device.
    pub fn new(mesh: &Mesh) -> WindingTree {
        let all: Vec<u32> = (0..mesh.triangles.len() as u32).collect();
        WindingTree::in_parts(mesh, &[&all])
    }

    /// The hierarchies of a mesh's `parts`, each listing its triangles as the device's part
    /// does (ascending).
    pub fn in_parts(mesh: &Mesh, parts: &[&[u32]]) -> WindingTree {
        let offset = mesh.centre();
        let mut tree = WindingTree {
            order: Vec::new(),
            nodes: Vec::new(),
            roots: Vec::new(),
        };
        for part in parts {
            let corners = |k: usize| mesh.shifted_corners(part[k] as usize, offset);
            let (first_slot, first_node) = (tree.order.len() as u32, tree.nodes.len() as u32);
            let Some(hierarchy) = TriangleHierarchy::for_triangles(part.len(), &corners, true)
            else {
                tree.roots.push(Cluster {
                    first: first_slot,
                    count: part.len() as u32,
                    dipole: DVec3::ZERO,
                    centre: DVec3::ZERO,
                    radius: f64::INFINITY,
                });
                tree.order.extend_from_slice(part);
                continue;
            };
            let words = &hierarchy.packed.words;
            let half_scale = hierarchy.packed.half_scale;
            tree.nodes
                .extend((0..hierarchy.node_count as usize).map(|n| {
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
                        let count = reference & ((1 << LEAF_COUNT_BITS) - 1);
                        let first = reference >> LEAF_COUNT_BITS;
                        Cluster {
                            first: first + if count > 0 { first_slot } else { first_node },
                            count,
                            dipole: vector(1),
                            centre: centroid + offset,
                            radius: (centroid - box_centre).length()
                                + DVec3::new(half[0], half[1], half[2]).length(),
                        }
                    })
                }));
            tree.order
                .extend(hierarchy.order.iter().map(|&k| part[k as usize]));
            tree.roots
                .extend_from_slice(&tree.nodes[first_node as usize]);
        }
        tree
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
        let mut total = 0.0;
        let mut stack = self.roots.clone();
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
