//! How a mesh fits the device: the bytes a triangle costs there and while it is built, and
//! the plan (records, parts, clusters) an upload follows.

use super::*;
use crate::gpu::context::HostReservation;

/// Device bytes per triangle that bound a part: its packed record (48 bytes) and index words
/// (8), and at most one 64-byte hierarchy node per triangle, each within one binding.
pub(super) const PART_BYTES_PER_TRIANGLE: u64 = 64;

/// Texels per triangle that bound a part: its packed record (3) and at most one node (4) per
/// triangle, all within one texture.
pub(super) const PART_TEXELS_PER_TRIANGLE: u64 = 7;

/// The same for indexed records: the record (1.5), at most one node (4) and at most three
/// vertices of its own (3), rounded up.
pub(super) const INDEXED_PART_TEXELS_PER_TRIANGLE: u64 = 9;

/// Device bytes of indexed records per triangle (record, index words and about a quarter of a
/// hierarchy node), besides a texel (16) per vertex.
pub(super) const INDEXED_BYTES_PER_TRIANGLE: u64 = 48;

/// Host bytes per triangle a scene's build holds at its peak: the sorted entries (32), the
/// leaf order (8), nodes and spans, then the packed records beside the nodes (measured on the
/// 2M-triangle torus: about 150 with 56-byte entries, about 80 since; docs/perf-history.md). Kept
/// high: it only decides whether a build is refused up front.
pub(super) const BUILD_BYTES_PER_TRIANGLE: u64 = 160;

/// The most bytes a one-part mesh's pseudonormal table takes on the device (without vertex
/// indices beside `indexed` records, which hold them), built by the first query that signs
/// by pseudonormal.
pub(super) fn sign_data_bytes(mesh: &Mesh, indexed: bool) -> u64 {
    Pseudonormals::max_gpu_bytes(mesh.triangles.len(), mesh.vertices.len(), !indexed)
}

/// The most bytes a mesh's winding clusters take on the device if it has them: twelve words a
/// node, fewer nodes than triangles.
pub(super) fn cluster_bytes(mesh: &Mesh, clusters: bool) -> u64 {
    if clusters {
        48 * mesh.triangles.len() as u64
    } else {
        0
    }
}

/// Device bytes of the mesh's triangles, stored indexed or packed (hierarchy included).
pub(super) fn mesh_device_estimate(mesh: &Mesh, indexed: bool) -> u64 {
    let triangles = mesh.triangles.len() as u64;
    if indexed {
        triangles * INDEXED_BYTES_PER_TRIANGLE + 16 * mesh.vertices.len() as u64
    } else {
        triangles * PART_BYTES_PER_TRIANGLE
    }
}

/// How a mesh goes up (`Engine::plan_mesh`).
pub(super) struct MeshPlan {
    /// Its triangles are stored indexed, not packed.
    pub(super) indexed: bool,
    /// It fits one binding: one scene, and its sign data may go on the device.
    pub(super) one_part: bool,
    /// The most triangles a part holds otherwise.
    pub(super) cap: u64,
    /// Bytes its pseudonormal table may take on the device (`sign_data_bytes`; 0 for a mesh in
    /// parts).
    pub(super) sign_data: u64,
}

impl Engine {
    /// How the mesh goes up stored `indexed` or packed: in one part or in parts of at most
    /// `cap` triangles, and the pseudonormal table's bytes beside a one-part mesh.
    pub(super) fn mesh_layout(&self, mesh: &Mesh, indexed: bool) -> MeshPlan {
        let binding = self.gpu.binding_bytes;
        let triangles = mesh.triangles.len() as u64;
        let max_texels = self.gpu.max_texels;
        // Records and nodes are texels, the index tables one binding (`scene::upload_bindings`).
        let nodes_fit = triangles <= binding / PART_BYTES_PER_TRIANGLE
            && triangles <= max_texels / PART_TEXELS_PER_TRIANGLE;
        let (one_part, texels_per_triangle) = if indexed {
            // Records, at most one node a triangle, and the vertices.
            let record_texels =
                crate::gpu::scene_layout::triangle_record_words(mesh.triangles.len(), true) / 4;
            let texels = (record_texels + mesh.vertices.len()) as u64 + 4 * triangles;
            (
                nodes_fit && texels <= max_texels,
                INDEXED_PART_TEXELS_PER_TRIANGLE,
            )
        } else {
            (nodes_fit, PART_TEXELS_PER_TRIANGLE)
        };
        MeshPlan {
            indexed,
            one_part,
            cap: (binding / PART_BYTES_PER_TRIANGLE)
                .min(max_texels / texels_per_triangle)
                .max(1),
            sign_data: if one_part {
                sign_data_bytes(mesh, indexed)
            } else {
                0
            },
        }
    }

    /// The mesh's plan as `EngineOptions::mesh_records` asks, once the memory there is has
    /// been checked for it (and for its winding `clusters`, if asked), with that memory
    /// reserved until the upload drops the reservation.
    pub(super) fn plan_mesh(
        &self,
        mesh: &Mesh,
        clusters: bool,
    ) -> Result<(MeshPlan, HostReservation)> {
        let check = |indexed: bool| {
            let plan = self.mesh_layout(mesh, indexed);
            let triangles = mesh.triangles.len() as u64;
            self.gpu
                .reserve_memory(
                    &format!("a mesh of {triangles} triangles"),
                    mesh_device_estimate(mesh, indexed)
                        + plan.sign_data
                        + cluster_bytes(mesh, clusters),
                    triangles.min(plan.cap) * BUILD_BYTES_PER_TRIANGLE,
                )
                .map(|reservation| (plan, reservation))
        };
        match self.gpu.mesh_records {
            MeshRecords::Packed => check(false),
            MeshRecords::Indexed => check(true),
            MeshRecords::Auto
                if self.gpu.device_memory_is_hosts()
                    && mesh.triangles.len() >= MeshRecords::AUTO_INDEXED_TRIANGLES =>
            {
                check(true)
            }
            MeshRecords::Auto => check(false).or_else(|packed| check(true).map_err(|_| packed)),
        }
    }
}
