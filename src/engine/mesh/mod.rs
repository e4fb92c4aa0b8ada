//! Mesh queries: a mesh uploaded once (`GpuMesh`) and answered through its triangle scene,
//! shifted back and signed on the host (pseudonormals) or the device (winding numbers). The
//! rooms: how a mesh fits the device (`budget.rs`), meshes cut into parts (`parts.rs`), signs
//! (`signs.rs`) and the query jobs (`query.rs`); the upload is here.

mod budget;
mod grid_samples;
mod parts;
mod query;
mod signs;

pub use query::MeshQuery;

use budget::*;
use parts::*;
use signs::*;

use super::Engine;
use crate::auto_sign::{AutoSign, SignChoice, auto_sign};
use crate::bvh::WalkStart;
use crate::error::{Error, Result};
use crate::fields::{Family, Fields, PackedRows, PackedSink, pack_hits};
use crate::gpu::plan::DeviceSign;
use crate::gpu::stream::Inputs;
use crate::gpu::{GpuHit, GpuScene, MeshRecords, write_query_points_iter};
use crate::math::DVec3;
use crate::mesh::{Mesh, Pseudonormals, Sign, face_normal};
use crate::points::{PointChunk, Points};
use crate::winding::WindingTree;

/// A mesh uploaded once and queried many times: its triangles live on the device as a scene
/// (one BVH), moved in f64 so the mesh's centre is the origin before they are rounded to f32, so
/// a mesh far from the origin keeps its precision. Query points take the same shift.
///
/// A mesh whose triangles or hierarchy would not fit one storage binding is cut into spatial
/// parts that each do (SPEC §4 "Size"): every part is a scene of its own, each block of query
/// rows is answered by every part in turn and the nearest answer kept, ties to the lower
/// triangle index as everywhere.
pub struct GpuMesh {
    mesh: Mesh,
    offset: DVec3,
    parts: Vec<MeshPart>,
    /// The pseudonormal table on the device (`Pseudonormals::gpu_words`), uploaded on the
    /// first query that signs by pseudonormal, where it fits one binding beside a one-part
    /// mesh.
    device_normals: std::sync::OnceLock<crate::gpu::turn::InTurn<wgpu::Buffer>>,
    /// The same on the host, which signs by pseudonormal where it does not.
    normals: std::sync::OnceLock<Pseudonormals>,
    /// The winding-number hierarchy on the host, which signs by winding number where the
    /// device does not: a mesh in parts, too small for a hierarchy or uploaded without its
    /// clusters (`Engine::upload_mesh_with`).
    host_winding: std::sync::OnceLock<WindingTree>,
    /// What `--sign auto` picks for the mesh, checked on first use.
    auto_sign: std::sync::OnceLock<AutoSign>,
    /// `auto_sign::is_closed_cycle`, checked on first use (before the host mesh is released).
    closed_cycle: std::sync::OnceLock<bool>,
    /// `auto_sign::HoleCaps`, made on first use (before the host mesh is released).
    hole_caps: std::sync::OnceLock<crate::auto_sign::HoleCaps>,
}

/// A mesh's parts on the device, built from its host copy ([`Engine::build_mesh`]).
pub(crate) struct BuiltMesh {
    offset: DVec3,
    parts: Vec<MeshPart>,
}

impl BuiltMesh {
    /// The mesh on the device, with `mesh`, the host copy it was built from.
    pub(crate) fn with_mesh(self, mesh: Mesh) -> GpuMesh {
        GpuMesh {
            device_normals: std::sync::OnceLock::new(),
            normals: std::sync::OnceLock::new(),
            host_winding: std::sync::OnceLock::new(),
            auto_sign: std::sync::OnceLock::new(),
            closed_cycle: std::sync::OnceLock::new(),
            hole_caps: std::sync::OnceLock::new(),
            offset: self.offset,
            mesh,
            parts: self.parts,
        }
    }
}

/// The largest mesh `Engine::upload_mesh_checking_signs` checks beside its build.
const CHECK_BESIDE_BUILD_MAX_TRIANGLES: usize = 1 << 21;

/// One part of a mesh on the device: a scene of some of its triangles.
struct MeshPart {
    scene: GpuScene,
    /// The least and greatest corner of its triangles' box, in world coordinates.
    bounds: (DVec3, DVec3),
    /// The mesh's index of each of the scene's triangles, ascending (empty: all of them, in
    /// order).
    triangles: Vec<u32>,
}

impl GpuMesh {
    /// What `auto` picks for this mesh, and why (checked once, on the host's copy: jobs that
    /// release it decide before the upload, `SignChoice::resolve`).
    pub fn auto_sign(&self) -> &AutoSign {
        self.auto_sign_until(&crate::mesh::NEVER_STOPPED)
            .expect("a check never stopped ends")
    }

    /// [`GpuMesh::auto_sign`] made on a thread this thread's check (Python's Ctrl-C) stops
    /// (`interrupt::polled`): seconds on a mesh of millions of triangles.
    pub fn auto_sign_interruptible(&self) -> Result<&AutoSign> {
        if let Some(auto) = self.auto_sign.get() {
            return Ok(auto);
        }
        crate::interrupt::polled(|stop| self.auto_sign_until(stop).is_some())?;
        Ok(self.auto_sign())
    }

    /// [`GpuMesh::auto_sign`], or `None` (nothing kept) once `stop` is set.
    pub(crate) fn auto_sign_until(
        &self,
        stop: &std::sync::atomic::AtomicBool,
    ) -> Option<&AutoSign> {
        debug_assert!(
            !self.mesh.triangles.is_empty(),
            "the host mesh was released"
        );
        if let Some(auto) = self.auto_sign.get() {
            return Some(auto);
        }
        let auto = crate::auto_sign::auto_sign_until(&self.mesh, stop)?;
        self.closed_cycle.get_or_init(|| auto.closed_cycle);
        Some(self.auto_sign.get_or_init(|| auto))
    }

    /// Where a walk for the nearest triangle within `radius` of `p` may start on the device,
    /// searched from `from` (the root, or where one for a ball holding this one starts):
    /// `bvh::TopNodes::start_node`; the root for a mesh in parts.
    pub(crate) fn walk_start(&self, from: WalkStart, p: DVec3, radius: f64) -> WalkStart {
        match self.parts.as_slice() {
            [part] => part
                .scene
                .top_nodes
                .start_node(from, p - self.offset, radius),
            _ => WalkStart::ROOT,
        }
    }

    /// Whether the winding number is constant off the surface (`auto_sign::is_closed_cycle`):
    /// where it is, a box that meets no triangle has one sign.
    pub fn is_closed_cycle(&self) -> bool {
        debug_assert!(
            self.closed_cycle.get().is_some() || !self.mesh.triangles.is_empty(),
            "the host mesh was released before its cycle was checked"
        );
        *crate::sync::computed_once(&self.closed_cycle, || {
            crate::auto_sign::is_closed_cycle(&self.mesh)
        })
    }

    /// Its holes capped (`auto_sign::HoleCaps`): where the winding number's sign may change off
    /// the surface of a mesh that is not a closed cycle.
    pub fn hole_caps(&self) -> &crate::auto_sign::HoleCaps {
        debug_assert!(
            self.hole_caps.get().is_some() || !self.mesh.triangles.is_empty(),
            "the host mesh was released before its holes were capped"
        );
        crate::sync::computed_once(&self.hole_caps, || {
            crate::auto_sign::HoleCaps::of(&self.mesh)
        })
    }

    /// The method `choice` names for this mesh.
    pub fn resolve_sign(&self, choice: SignChoice) -> Sign {
        match choice {
            SignChoice::Method(sign) => sign,
            SignChoice::Auto => self.auto_sign().sign,
        }
    }

    pub fn mesh(&self) -> &Mesh {
        &self.mesh
    }

    /// Bytes it holds on the device, its winding clusters and its pseudonormal table counted
    /// whether or not a query has built the table yet (a budget must not be overrun later by a
    /// signed query).
    pub fn device_bytes(&self) -> u64 {
        let sign_data = match self.parts.as_slice() {
            [part] => sign_data_bytes(&self.mesh, part.scene.indexed),
            _ => 0,
        };
        self.triangle_bytes() + sign_data
    }

    /// Bytes its triangles, hierarchies and winding clusters hold on the device (the
    /// pseudonormal table aside).
    pub fn triangle_bytes(&self) -> u64 {
        self.parts.iter().map(|p| p.scene.device_bytes()).sum()
    }

    /// How its triangles are stored on the device: `Packed` or `Indexed` (never `Auto`).
    pub fn records(&self) -> MeshRecords {
        if self.parts.iter().any(|p| p.scene.indexed) {
            MeshRecords::Indexed
        } else {
            MeshRecords::Packed
        }
    }

    /// Its largest absolute coordinate, the mesh's part of SPEC §3's tolerance scale.
    pub fn scale(&self) -> f64 {
        self.parts
            .iter()
            .map(|part| part.bounds.0.max_abs().max(part.bounds.1.max_abs()))
            .fold(0.0, f64::max)
    }

    /// Storage bindings the triangles are spread over (one, unless the mesh is larger than
    /// one binding holds).
    pub fn part_count(&self) -> usize {
        self.parts.len()
    }
}

impl Engine {
    /// Upload a mesh: its BVH is built once, on the CPU, and stays on the device, ready for
    /// queries of any sign.
    pub fn upload_mesh(&self, mesh: Mesh) -> Result<GpuMesh> {
        self.upload_mesh_admitted(mesh, |_| Ok(()))
    }

    /// [`Engine::upload_mesh`], asking `admit` first with the device bytes the mesh will take
    /// ([`GpuMesh::device_bytes`]), before any is allocated; its refusal is returned.
    pub fn upload_mesh_admitted<E: From<Error>>(
        &self,
        mesh: Mesh,
        admit: impl FnOnce(u64) -> std::result::Result<(), E>,
    ) -> std::result::Result<GpuMesh, E> {
        self.upload_mesh_with(mesh, true, admit)
    }

    /// [`Engine::upload_mesh`], with `auto`'s check (`GpuMesh::auto_sign`) made on another
    /// thread while the hierarchy is built, for callers whose first query will likely sign by
    /// `auto` (Python's `sdf`, `sample` and band grids default to it): the check is mostly one
    /// thread's work (igea: about 0.2 s), the build leaves a core idle for much of its time,
    /// and the first signed query then finds the sign decided. Meshes larger than
    /// `CHECK_BESIDE_BUILD_MAX_TRIANGLES` are checked on first use as before: the check's own
    /// memory (about 150 bytes a triangle) would add to the build's peak.
    pub fn upload_mesh_checking_signs(&self, mesh: Mesh) -> Result<GpuMesh> {
        let beside = self.checks_auto_beside_build(&mesh);
        self.upload_mesh_with_check(mesh, true, beside, |_| Ok::<(), Error>(()))
    }

    /// [`Engine::upload_mesh_admitted`], with the winding clusters over its hierarchy only if
    /// `clusters` (a one-shot job that signs otherwise does not need them; winding signs are
    /// then the host's).
    pub(crate) fn upload_mesh_with<E: From<Error>>(
        &self,
        mesh: Mesh,
        clusters: bool,
        admit: impl FnOnce(u64) -> std::result::Result<(), E>,
    ) -> std::result::Result<GpuMesh, E> {
        self.upload_mesh_with_check(mesh, clusters, false, admit)
    }

    /// [`Engine::upload_mesh_with`], and `auto`'s check beside the build where `check_auto`.
    fn upload_mesh_with_check<E: From<Error>>(
        &self,
        mesh: Mesh,
        clusters: bool,
        check_auto: bool,
        admit: impl FnOnce(u64) -> std::result::Result<(), E>,
    ) -> std::result::Result<GpuMesh, E> {
        mesh.check_built()?;
        let offset = mesh.centre();
        // The check shares the mesh: a build that fails or is interrupted returns at once,
        // and the check, not joined, ends on its own (seconds, on millions of triangles).
        let mesh = std::sync::Arc::new(mesh);
        // A thread the system refuses leaves the check to the first signed query. The thread
        // holds `ended` until it ends, so the wait for it wakes then.
        let check = check_auto
            .then(|| {
                let mesh = mesh.clone();
                let (ended, ending) = std::sync::mpsc::channel::<()>();
                std::thread::Builder::new()
                    .name("closest-auto-check".into())
                    .spawn(move || {
                        let _ended = ended;
                        crate::sync::in_process_pool(|| auto_sign(&mesh))
                    })
                    .ok()
                    .map(|thread| (thread, ending))
            })
            .flatten();
        let parts = self.upload_mesh_parts(&mesh, offset, clusters, admit)?;
        // Ctrl-C while the check ends (it may outlast the build by seconds) is heard at once;
        // a panic in the check is the caller's, as if it had run on this thread.
        let auto = match check {
            Some((thread, ending)) => Some(crate::interrupt::join_asking(thread, &ending)?),
            None => None,
        };
        // Joined, the check holds no copy: the mesh comes back without one.
        let mesh = std::sync::Arc::try_unwrap(mesh).unwrap_or_else(|shared| (*shared).clone());
        let uploaded = BuiltMesh { offset, parts }.with_mesh(mesh);
        if let Some(auto) = auto {
            uploaded.closed_cycle.get_or_init(|| auto.closed_cycle);
            uploaded.auto_sign.get_or_init(|| auto);
        }
        Ok(uploaded)
    }

    /// [`Engine::upload_mesh`]'s device side from a borrowed host mesh, which
    /// [`BuiltMesh::with_mesh`] then joins: the host mesh stays free to read (sampled, say)
    /// while it is built.
    pub(crate) fn build_mesh(&self, mesh: &Mesh) -> Result<BuiltMesh> {
        mesh.check_built()?;
        let offset = mesh.centre();
        let parts = self.upload_mesh_parts(mesh, offset, true, |_| Ok::<(), Error>(()))?;
        Ok(BuiltMesh { offset, parts })
    }

    /// The mesh's parts, each a scene on the device, its triangles moved by `-offset`.
    fn upload_mesh_parts<E: From<Error>>(
        &self,
        mesh: &Mesh,
        offset: DVec3,
        clusters: bool,
        admit: impl FnOnce(u64) -> std::result::Result<(), E>,
    ) -> std::result::Result<Vec<MeshPart>, E> {
        // The memory reserved is held until the parts are built and uploaded.
        let (
            MeshPlan {
                indexed,
                one_part,
                cap,
                sign_data,
            },
            _reserved,
        ) = self.plan_mesh(mesh, clusters)?;
        // Parts are built one at a time: the build's peak is the largest part's.
        if one_part {
            let scene = self.upload_mesh_part(mesh, offset, indexed, None, clusters, |bytes| {
                admit(bytes + sign_data)
            })?;
            return Ok(vec![MeshPart {
                scene,
                bounds: mesh.bounds(),
                triangles: Vec::new(),
            }]);
        }
        // Admitted by the bound before anything is built: the parts' sizes are known only
        // once each is.
        admit(mesh_device_estimate(mesh, indexed) + cluster_bytes(mesh, clusters))?;
        let mut parts = Vec::new();
        for indices in spatial_parts(mesh, cap as usize) {
            let scene =
                self.upload_mesh_part(mesh, offset, indexed, Some(&indices), clusters, |_| {
                    Ok::<(), Error>(())
                })?;
            parts.push(MeshPart {
                scene,
                bounds: mesh.triangles_bounds(indices.iter().copied()),
                triangles: indices,
            });
        }
        Ok(parts)
    }

    /// The holes' caps, where a job signed by winding number may take the pseudonormal sign
    /// wherever they say it is the same (`HoleCaps::pseudonormal_sign_holds`): the mesh capped
    /// is closed, and the device holds the pseudonormal table (built now where the host mesh
    /// is still here). `None` where it may not.
    pub(crate) fn winding_by_pseudonormal<'a>(
        &self,
        mesh: &'a GpuMesh,
    ) -> Result<Option<&'a crate::auto_sign::HoleCaps>> {
        let released = mesh.mesh.triangles.is_empty();
        let caps = match mesh.hole_caps.get() {
            Some(caps) => caps,
            None if !released => mesh.hole_caps(),
            None => return Ok(None),
        };
        if !caps.capped_closed() || (released && mesh.device_normals.get().is_none()) {
            return Ok(None);
        }
        Ok(self.device_sign(mesh, Sign::Pseudonormal)?.map(|_| caps))
    }

    /// Upload `mesh` for a one-shot job (the CLI's query or grid) whose one query signs by
    /// `sign` and computes `fields` (`closed_cycle`: whether it is one, where `auto` found
    /// out already): with the winding clusters only if it signs by winding
    /// number; with the sign data the device needs to answer alone built now; and with the
    /// host's copy of the mesh released where the device does answer alone. Kept where the
    /// host takes part: a mesh in parts, or sign data the device cannot hold (a grid the device
    /// cannot sample is answered from host-made rows on the same device path). On a CPU
    /// adapter the first dispatch, whose shader compilation takes tens of MiB when the
    /// driver's cache is cold, comes when everything else is resident (docs/perf-history.md, issue
    /// 14). The mesh must then be queried with that sign and fields only (and, signed by winding
    /// number, by pseudonormal where `winding_by_pseudonormal` allows).
    pub(crate) fn upload_mesh_for_job(
        &self,
        mesh: Mesh,
        sign: Sign,
        fields: Fields,
        closed_cycle: Option<bool>,
    ) -> Result<GpuMesh> {
        let sign = applied_sign(sign, fields);
        let mut mesh =
            self.upload_mesh_with(mesh, sign == Sign::Winding, |_| Ok::<(), Error>(()))?;
        if let Some(closed) = closed_cycle {
            mesh.closed_cycle.get_or_init(|| closed);
        }
        self.prepare_job_signs(&mut mesh, sign)?;
        Ok(mesh)
    }

    /// [`Engine::upload_mesh_for_job`] for a job that signs by `auto`, whose check runs beside
    /// the build (as `upload_mesh_checking_signs`) on meshes up to
    /// `CHECK_BESIDE_BUILD_MAX_TRIANGLES` (`Engine::checks_auto_beside_build`; larger ones are
    /// checked first, as load time): the hierarchy's winding clusters go up whatever the check
    /// finds, as winding signs would need them.
    pub(crate) fn upload_mesh_for_auto_job(
        &self,
        mesh: Mesh,
        fields: Fields,
    ) -> Result<(GpuMesh, AutoSign)> {
        let mut uploaded =
            self.upload_mesh_with_check(mesh, true, true, |_| Ok::<(), Error>(()))?;
        let auto = uploaded.auto_sign().clone();
        self.prepare_job_signs(&mut uploaded, applied_sign(auto.sign, fields))?;
        Ok((uploaded, auto))
    }

    /// Whether `auto`'s check of `mesh` runs beside its build (`upload_mesh_checking_signs`,
    /// `upload_mesh_for_auto_job`): not on meshes whose check's memory would add much to the
    /// build's peak.
    pub(crate) fn checks_auto_beside_build(&self, mesh: &Mesh) -> bool {
        mesh.triangles.len() <= CHECK_BESIDE_BUILD_MAX_TRIANGLES
    }

    /// The rest of a one-shot job's upload: the sign data the device needs to answer `sign`
    /// alone built now, and the host's copy of the mesh released where it does.
    fn prepare_job_signs(&self, mesh: &mut GpuMesh, sign: Sign) -> Result<()> {
        if mesh.parts.len() == 1 && self.device_sign(mesh, sign)?.is_some() {
            // Band grids ask what their sign needs after the upload: whether the mesh is a
            // closed cycle where they sign, its holes' caps where they sign by winding number
            // (nothing else reads the caps: an unsigned job does not pay for them).
            match sign {
                Sign::None => {}
                Sign::Pseudonormal => {
                    mesh.is_closed_cycle();
                }
                Sign::Winding => {
                    if !mesh.is_closed_cycle() {
                        mesh.hole_caps();
                    }
                    // Built now, while the host mesh is here to build the table from.
                    self.winding_by_pseudonormal(mesh)?;
                }
            }
            mesh.mesh = Mesh::default();
        }
        Ok(())
    }
}
