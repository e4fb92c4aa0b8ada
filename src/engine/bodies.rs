//! Bodies against shapes (SPEC §9): each row a convex body, answered on the device by
//! `bodies.wgsl` against a resident scene (its nearest shape) or against its own target
//! (paired). Meshes are answered as scenes of their triangles ([`Engine::upload_body_targets`]).

use std::ops::Range;

use super::Engine;
use crate::bvh::bounding_ball;
use crate::error::{Error, Result};
use crate::fields::{
    Family, Fields, GpuBodyHit, PackedRows, PackedSink, mended_rows, points_moved,
};
use crate::gpu::layout::{GpuShape, ShapeData};
use crate::gpu::rows::RowSource;
use crate::gpu::scene::Hierarchy;
use crate::gpu::stream::Inputs;
use crate::gpu::{GpuScene, plan, scene};
use crate::math::DVec3;
use crate::mesh::FAR_RADII;
use crate::mesh::Mesh;
use crate::shape::{Shape, ShapeKind};

/// The nearest shape of a scene to each body: [`Engine::body_contacts`].
pub struct BodyContacts<'a> {
    /// Uploaded by [`Engine::upload_body_targets`].
    pub targets: &'a GpuScene,
    pub bodies: &'a [Shape],
    /// Fields of the `Bodies` family.
    pub fields: Fields,
}

/// Body i against target i: [`Engine::body_pairs`].
pub struct BodyPairs<'a> {
    pub bodies: &'a [Shape],
    pub targets: &'a [Shape],
    pub fields: Fields,
}

/// Device bytes of a body target (its record, its share of the axis-aligned hierarchy's
/// nodes), and host bytes its upload's build takes beside them. Measured (2026-11-30, lavapipe,
/// where device memory is the host's): `closest contacts` with the 2,097,152 triangles of a
/// torus as body targets peaked at 834 MB, about 400 bytes a triangle with the process and
/// the mesh; these, with the triangle made as a shape, count 376.
const BODY_TARGET_DEVICE_BYTES: u64 = 128;
const BODY_TARGET_BUILD_BYTES: u64 = 160;

/// Whether `kind` can be a body: the bounded convex kinds.
pub fn is_body_kind(kind: ShapeKind) -> bool {
    !matches!(
        kind,
        ShapeKind::Plane | ShapeKind::Line | ShapeKind::Ray | ShapeKind::Torus
    )
}

/// Refuse what cannot be a body (unbounded or not convex), naming `what` and the body's index.
pub fn check_bodies(bodies: &[Shape], what: &str) -> Result<()> {
    check_bodies_from(bodies, 0, what)
}

/// [`check_bodies`] of the bodies numbered from `first` (a chunk of a longer list).
pub fn check_bodies_from(bodies: &[Shape], first: usize, what: &str) -> Result<()> {
    match bodies.iter().position(|b| !is_body_kind(b.kind())) {
        Some(i) => Err(Error::Usage(format!(
            "{what}: shape {}: field `type`: a {} cannot be a body (bodies are bounded and \
             convex: sphere, capsule, box, aabb, cylinder, cone, ellipsoid, convex_hull, wedge, \
             corner_wedge, segment, triangle)",
            first + i,
            bodies[i].kind().name()
        ))),
        None => Ok(()),
    }
}

/// The largest coordinate or extent a body job answers (`Shape::scale`, bodies and targets
/// alike). The narrow phase multiplies up to four lengths in f32 (an ellipsoid's support and
/// depth: fourth powers overflow past ~4e9; hull volumes' cubes past ~7e12; squares past
/// ~1.8e19): tests/bodies.rs finds every kind pair within SPEC §3's bound with shapes up to
/// 2e8 across and 8e8 from the origin, where ellipsoids 2e10 across were answered 50 % too far
/// and at 1e18 hulls gave NaN normals.
pub const BODY_SCALE_LIMIT: f64 = 1e9;

/// Refuse shapes beyond [`BODY_SCALE_LIMIT`], naming `what` and the shape's index (rows with a
/// non-finite coordinate are answered as NaN rows, not refused).
pub fn check_body_scale(shapes: &[Shape], what: &str) -> Result<()> {
    check_body_scale_from(shapes, 0, what)
}

/// [`check_body_scale`] of the shapes numbered from `first` (a chunk of a longer list).
pub fn check_body_scale_from(shapes: &[Shape], first: usize, what: &str) -> Result<()> {
    let beyond = |s: &Shape| {
        let scale = s.scale();
        scale.is_finite() && scale > BODY_SCALE_LIMIT
    };
    match shapes.iter().position(beyond) {
        Some(i) => Err(Error::Usage(format!(
            "{what}: shape {}: a coordinate or extent of {:e} in this {}: body jobs answer \
             shapes within {BODY_SCALE_LIMIT:e} of the origin (their f32 arithmetic \
             multiplies up to four lengths); move the scene nearer the origin or scale it",
            first + i,
            shapes[i].scale(),
            shapes[i].kind().name()
        ))),
        None => Ok(()),
    }
}

/// [`check_body_scale`] for a mesh's triangles as body targets, naming the triangle.
pub fn check_mesh_body_scale(mesh: &Mesh) -> Result<()> {
    let (lo, hi) = mesh.bounds();
    if lo.max_abs().max(hi.max_abs()) <= BODY_SCALE_LIMIT {
        return Ok(());
    }
    let triangles: Vec<Shape> = (0..mesh.triangles.len())
        .map(|t| {
            let [a, b, c] = mesh.corners(t);
            Shape::Triangle { a, b, c }
        })
        .collect();
    check_body_scale(&triangles, "mesh triangles")
}

/// The first torus target facing a body other than a sphere, as (torus index, body index):
/// a torus is not convex, so only a sphere's centre projection answers it exactly. Paired,
/// target i faces body i only.
pub fn torus_conflict(bodies: &[Shape], targets: &[Shape], paired: bool) -> Option<(usize, usize)> {
    let not_sphere = |b: &Shape| b.kind() != ShapeKind::Sphere;
    let mut tori = targets
        .iter()
        .enumerate()
        .filter(|(_, t)| t.kind() == ShapeKind::Torus)
        .map(|(i, _)| i);
    if paired {
        tori.find(|&i| bodies.get(i).is_some_and(not_sphere))
            .map(|i| (i, i))
    } else {
        // One pass each (asked again for every torus, sphere bodies made it tori × bodies).
        Some((tori.next()?, bodies.iter().position(not_sphere)?))
    }
}

/// The refusal of [`torus_conflict`]'s pair, naming the target's index and field.
pub fn torus_refusal(torus: usize, body: usize, kind: ShapeKind) -> String {
    format!(
        "shape {torus}: field `type`: a torus is not convex, so only sphere bodies are answered \
         against it (body {body} is a {})",
        kind.name()
    )
}

/// Whether `bodies` bodies against a scene of `shapes` shapes walk its BVH 8 at a time
/// (`bodies_subgroup.wgsl`, where the engine has it): only where they are dense enough for 8
/// Morton neighbours to share most of their walks, at least 3 bodies per 4 shapes. Boxes
/// against 10^4 shapes on lavapipe: 0.70–0.75× the one-lane walk's rate at 5,000 bodies,
/// 1.15–1.2× at 10^4, 1.3× at 2·10^5 (docs/PERF.md).
pub(crate) fn walk_together(bodies: usize, shapes: usize) -> bool {
    4 * bodies as u64 >= 3 * shapes as u64
}

/// Each row's records, converted as they stream: its body (and its target, paired), hull
/// faces at `data_starts` (per record, in the order `ShapeData::for_paired` saw them), each
/// row's records moved by its `shifts` where there are any (`FarBodies`, `local_frames`).
fn records<'a>(
    rows: &'a [&'a [Shape]],
    data_starts: &'a [u32],
    shifts: &'a [DVec3],
) -> impl RowSource + 'a {
    let per_row = rows.len();
    move |range: Range<usize>, out: wgpu::WriteOnly<'_, [u8]>| {
        let (slots, _) = out.into_chunks::<{ std::mem::size_of::<GpuShape>() }>();
        let records = range.clone().flat_map(|row| {
            (0..per_row).map(move |k| {
                let shape = &rows[k][row];
                let shift = shifts.get(row).copied().unwrap_or(DVec3::ZERO);
                let mut record = GpuShape::from_shape_moved(shape, shift);
                if matches!(shape, Shape::ConvexHull(_)) {
                    record.set_data_start(data_starts[row * per_row + k]);
                }
                bytemuck::cast::<GpuShape, [u8; 96]>(record)
            })
        });
        slots.write_iter(records);
        Ok(())
    }
}

impl Engine {
    /// Upload shapes for body queries: an axis-aligned BVH over every kind (triangles too),
    /// which is what the body walk reads. A mesh is uploaded as its triangles.
    pub fn upload_body_targets(&self, shapes: &[Shape]) -> Result<GpuScene> {
        self.upload_body_targets_admitted(shapes, |_| Ok(()))
    }

    /// [`Engine::upload_body_targets`], asking `admit` first with the device bytes they will
    /// take, before any is allocated (a service's memory budget); its refusal is returned.
    pub fn upload_body_targets_admitted<E: From<Error>>(
        &self,
        shapes: &[Shape],
        admit: impl FnOnce(u64) -> std::result::Result<(), E>,
    ) -> std::result::Result<GpuScene, E> {
        check_body_scale(shapes, "targets")?;
        let _reserved = self.reserve_body_targets(shapes.len(), "shapes", 0)?;
        scene::upload(&self.gpu, shapes, Hierarchy::AxisAligned, admit)
    }

    /// Host memory for the upload of `count` body targets (`what`: shapes, or a mesh's
    /// triangles, which the upload first makes as shapes: `made` bytes each), reserved until
    /// it is dropped; a machine without it refuses the job before anything is built, as a
    /// mesh's upload does (a 16.7M-triangle mesh's body targets would take about 6 GB).
    fn reserve_body_targets(
        &self,
        count: usize,
        what: &str,
        made: u64,
    ) -> Result<crate::gpu::HostReservation> {
        let count = count as u64;
        self.gpu.reserve_memory(
            &format!("body targets of {count} {what}"),
            count * BODY_TARGET_DEVICE_BYTES,
            count * (BODY_TARGET_BUILD_BYTES + made),
        )
    }

    /// A mesh's triangles as body targets: shape i is triangle i.
    pub fn upload_mesh_body_targets(&self, mesh: &Mesh) -> Result<GpuScene> {
        self.upload_mesh_body_targets_admitted(mesh, |_| Ok(()))
    }

    /// [`Engine::upload_mesh_body_targets`], admitted as [`Engine::upload_body_targets_admitted`].
    pub fn upload_mesh_body_targets_admitted<E: From<Error>>(
        &self,
        mesh: &Mesh,
        admit: impl FnOnce(u64) -> std::result::Result<(), E>,
    ) -> std::result::Result<GpuScene, E> {
        mesh.check_built()?;
        check_mesh_body_scale(mesh)?;
        let made = std::mem::size_of::<Shape>() as u64;
        let _reserved = self.reserve_body_targets(mesh.triangles.len(), "triangles", made)?;
        // Moved into the scene's frame as they are made (one copy of a large mesh, not two).
        let (lo, hi) = mesh.bounds();
        let frame = scene::scene_frame(Some(((lo + hi) * 0.5, (hi - lo).length() * 0.5)));
        let triangles: Vec<Shape> = (0..mesh.triangles.len())
            .map(|t| {
                let [a, b, c] = mesh.corners(t).map(|v| v - frame);
                Shape::Triangle { a, b, c }
            })
            .collect();
        crate::shape::check_spans(&triangles)?;
        scene::upload_in_frame(&self.gpu, &triangles, frame, Hierarchy::AxisAligned, admit)
    }

    /// For each body, the nearest shape of `job.targets` (SPEC §9): the smallest distance
    /// (separation, or minus the penetration depth; ties to the lowest index), its witness
    /// points and normal; only `job.fields` computed. `sink` as for [`Engine::query_scene`].
    pub fn body_contacts(&self, job: BodyContacts<'_>, sink: &mut dyn PackedSink) -> Result<()> {
        let BodyContacts {
            targets,
            bodies,
            fields,
        } = job;
        check_family(fields)?;
        check_bodies(bodies, "bodies")?;
        check_body_scale(bodies, "bodies")?;
        if targets.oriented {
            return Err(Error::Usage(
                "body queries need targets uploaded by Engine::upload_body_targets".into(),
            ));
        }
        let torus_bit = 1 << ShapeKind::Torus as u32;
        if (targets.bvh_kinds | targets.linear_kinds) & torus_bit != 0
            && let Some(body) = bodies.iter().position(|b| b.kind() != ShapeKind::Sphere)
        {
            return Err(Error::Usage(format!(
                "bodies: body {body}: field `type`: the targets hold a torus, which is not \
                 convex: only sphere bodies are answered against it"
            )));
        }
        let frame = targets.frame;
        if frame == DVec3::ZERO {
            return self.bodies_in_frame(targets, bodies, fields, sink);
        }
        // A scene in a frame of its own: the bodies are moved into it, their witness points
        // back out.
        let moved: Vec<Shape> = bodies.iter().map(|b| b.translated(-frame)).collect();
        let mut moved_back = points_moved(frame, sink);
        self.bodies_in_frame(targets, &moved, fields, &mut moved_back)
    }

    /// [`Engine::body_contacts`] of bodies in the targets' frame.
    fn bodies_in_frame(
        &self,
        targets: &GpuScene,
        bodies: &[Shape],
        fields: Fields,
        sink: &mut dyn PackedSink,
    ) -> Result<()> {
        let far = FarBodies::of(bodies, targets);
        // Far bodies of a scene with unbounded shapes are answered apart, and skipped here.
        let apart = match &far {
            Some(far) if !targets.unbounded.is_empty() => {
                Some(self.far_answers_apart(targets, bodies, far)?)
            }
            _ => None,
        };
        let Some(far) = &far else {
            return self.nearest_bodies(targets, bodies, &[], fields, sink);
        };
        let skipped: Vec<DVec3>;
        let shifts = match &apart {
            Some((rows, _)) => {
                let mut shifts = far.shifts.clone();
                for &row in rows {
                    shifts[row] = DVec3::new(f64::NAN, f64::NAN, f64::NAN);
                }
                skipped = shifts;
                &skipped
            }
            None => &far.shifts,
        };
        // Moved rows are measured again from every field.
        let mut finish = mended_rows(fields, sink, |row, hit: &mut GpuBodyHit| {
            far_body_answer(hit, far.shifts[row]);
            if let Some((rows, answers)) = &apart
                && let Ok(k) = rows.binary_search(&row)
            {
                *hit = answers[k];
            }
        });
        let all = Fields::all(Family::Bodies);
        self.nearest_bodies(targets, bodies, shifts, all, &mut finish)
    }

    /// `bodies`, moved by `shifts` where there are any, against every shape of `targets`.
    fn nearest_bodies(
        &self,
        targets: &GpuScene,
        bodies: &[Shape],
        shifts: &[DVec3],
        fields: Fields,
        sink: &mut dyn PackedSink,
    ) -> Result<()> {
        self.walk_bodies(targets, bodies, shifts, fields, true, sink)
    }

    /// `bodies` moved by `shifts` against `targets`' BVH, and its linear ranges where
    /// `linear_ranges`.
    fn walk_bodies(
        &self,
        targets: &GpuScene,
        bodies: &[Shape],
        shifts: &[DVec3],
        fields: Fields,
        linear_ranges: bool,
        sink: &mut dyn PackedSink,
    ) -> Result<()> {
        let lists = [bodies];
        let (data, starts) = ShapeData::for_paired(bodies);
        let data = self.shape_data_buffer(data, &starts)?;
        let mut source = records(&lists, &starts, shifts);
        let job = plan::Job::BodyNearest {
            scene: targets,
            data: data.as_ref(),
            body_kinds: kind_bits(bodies),
            together: walk_together(bodies.len(), targets.count as usize),
            linear_ranges,
        };
        let plan = job.plan(&self.gpu, fields, crate::Mode::Surface)?;
        let inputs = Inputs {
            points: None,
            shapes: Some(&mut source),
        };
        self.run(&plan, bodies.len(), inputs, sink)
    }

    /// The far bodies of a scene with unbounded shapes (planes, lines, rays), whose distance a
    /// move would change: each is answered moved against the BVH's shapes (the bounded ones)
    /// and where it is against the unbounded ones, and the nearer answer kept (ties to the
    /// lower index, SPEC §9). Returns the far rows, ascending, and their answers.
    fn far_answers_apart(
        &self,
        targets: &GpuScene,
        bodies: &[Shape],
        far: &FarBodies,
    ) -> Result<(Vec<usize>, Vec<GpuBodyHit>)> {
        let rows: Vec<usize> = (0..bodies.len())
            .filter(|&row| far.shifts[row] != DVec3::ZERO)
            .collect();
        let far_bodies: Vec<Shape> = rows.iter().map(|&row| bodies[row].clone()).collect();
        let shifts: Vec<DVec3> = rows.iter().map(|&row| far.shifts[row]).collect();
        let all = Fields::all(Family::Bodies);
        let count = far_bodies.len();
        let mut answers = Vec::new();
        self.walk_bodies(
            targets,
            &far_bodies,
            &shifts,
            all,
            false,
            &mut into_hits(&mut answers, count),
        )?;
        for (hit, &shift) in answers.iter_mut().zip(&shifts) {
            far_body_answer(hit, shift);
        }
        let unbounded: Vec<Shape> = targets.unbounded.iter().map(|(_, s)| s.clone()).collect();
        let unbounded_scene = scene::upload(&self.gpu, &unbounded, Hierarchy::AxisAligned, |_| {
            Ok::<(), Error>(())
        })?;
        let mut beside = Vec::new();
        self.nearest_bodies(
            &unbounded_scene,
            &far_bodies,
            &[],
            all,
            &mut into_hits(&mut beside, count),
        )?;
        for (hit, mut other) in answers.iter_mut().zip(beside) {
            if other.shape < 0 {
                continue;
            }
            other.shape = targets.unbounded[other.shape as usize].0 as i32;
            let nearer = other.distance < hit.distance
                || (other.distance == hit.distance && other.shape < hit.shape);
            if hit.shape < 0 || nearer {
                *hit = other;
            }
        }
        Ok((rows, answers))
    }

    /// Body i against target i (SPEC §9 `--paired`), only `job.fields` computed; `sink` as for
    /// [`Engine::query_scene`].
    pub fn body_pairs(&self, job: BodyPairs<'_>, sink: &mut dyn PackedSink) -> Result<()> {
        let BodyPairs {
            bodies,
            targets,
            fields,
        } = job;
        check_family(fields)?;
        if bodies.len() != targets.len() {
            return Err(Error::Usage(format!(
                "paired bodies need as many targets as bodies ({} bodies, {} targets)",
                bodies.len(),
                targets.len()
            )));
        }
        check_bodies(bodies, "bodies")?;
        check_body_scale(bodies, "bodies")?;
        check_body_scale(targets, "targets")?;
        if let Some((torus, body)) = torus_conflict(bodies, targets, true) {
            return Err(Error::Usage(format!(
                "targets: {}",
                torus_refusal(torus, body, bodies[body].kind())
            )));
        }
        let interleaved: Vec<&Shape> = bodies
            .iter()
            .zip(targets)
            .flat_map(|(b, t)| [b, t])
            .collect();
        let owned: Vec<Shape>;
        let (data, starts) = if interleaved
            .iter()
            .any(|s| matches!(s, Shape::ConvexHull(_)))
        {
            owned = interleaved.into_iter().cloned().collect();
            ShapeData::for_paired(&owned)
        } else {
            (ShapeData::default(), Vec::new())
        };
        let data = self.shape_data_buffer(data, &starts)?;
        let lists = [bodies, targets];
        let frames = local_frames(bodies);
        let mut source = records(&lists, &starts, &frames);
        let job = plan::Job::BodyPaired {
            data: data.as_ref(),
            body_kinds: kind_bits(bodies),
            target_kinds: kind_bits(targets),
        };
        // Witness points are moved back from the frames: asked of the device whole.
        let device_fields = match frames.is_empty() {
            true => fields,
            false => Fields::all(Family::Bodies),
        };
        let plan = job.plan(&self.gpu, device_fields, crate::Mode::Surface)?;
        let inputs = Inputs {
            points: None,
            shapes: Some(&mut source),
        };
        if frames.is_empty() {
            return self.run(&plan, bodies.len(), inputs, sink);
        }
        let mut finish = mended_rows(fields, sink, |row, hit: &mut GpuBodyHit| {
            let shift = frames[row];
            if shift != DVec3::ZERO && hit.shape >= 0 {
                let back = |p: [f32; 3]| {
                    (DVec3::new(p[0] as f64, p[1] as f64, p[2] as f64) - shift).to_f32()
                };
                hit.point_body = back(hit.point_body);
                hit.point_target = back(hit.point_target);
            }
        });
        self.run(&plan, bodies.len(), inputs, &mut finish)
    }

    /// A per-row job's hull faces on the device, where any row has them.
    pub(super) fn shape_data_buffer(
        &self,
        data: ShapeData,
        starts: &[u32],
    ) -> Result<Option<wgpu::Buffer>> {
        if starts.is_empty() {
            return Ok(None);
        }
        let bytes = data.into_bytes();
        self.gpu.check_shape_data(bytes.len())?;
        Ok(Some(self.gpu.checked(|| {
            self.gpu.storage_buffer("per-row shape data", &bytes)
        })?))
    }
}

/// The kinds among `shapes`, a bit each (`BODY_KINDS`, `TARGET_KINDS`).
/// Bodies far from a scene (beyond `mesh::FAR_RADII` times the scene's radius and the body's
/// own from the scene's centre) see every shape at nearly one distance: the walk's bound, in
/// f32, culls nothing, and a body 10^7 radii from a mesh ran out of the walk's budget (a GPU
/// error for the whole job). Such a body is answered moved along the line between the centres
/// to that distance, where f32 tells the shapes apart, and its witness point moved back: its
/// contact with the moved body's nearest shape, whose separation is within SPEC §3 of its
/// own for the reason the far rows of pseudonormal signs are (docs/guide/shapes.md).
struct FarBodies {
    /// Each body's move (zero where it is not far).
    shifts: Vec<DVec3>,
}

impl FarBodies {
    /// `None` where no body is far from the ball about the scene's bounded shapes (or it has
    /// none, or they are scanned linearly beside unbounded ones: no walk to move them for).
    fn of(bodies: &[Shape], scene: &GpuScene) -> Option<FarBodies> {
        if scene.bvh_kinds == 0 && !scene.unbounded.is_empty() {
            return None;
        }
        let (centre, radius) = scene.ball?;
        let shifts = super::frames_where_far(bodies, |body| {
            let Some((body_centre, body_radius)) = bounding_ball(std::slice::from_ref(body)) else {
                return DVec3::ZERO;
            };
            let reach = FAR_RADII * (radius + body_radius);
            let from = body_centre - centre;
            let distance = from.length();
            if distance.is_finite() && distance > reach {
                from * ((reach - distance) / distance)
            } else {
                DVec3::ZERO
            }
        });
        (!shifts.is_empty()).then_some(FarBodies { shifts })
    }
}

/// Each pair's move into its body's frame (the body's centre to the origin), where the body
/// lies beyond `mesh::FAR_RADII` times its radius from the origin: the pair's records, each
/// rounded to f32 about its own anchor, then differ by what f32 holds about zero, not about
/// 10^8 (a capsule 0.25 from a sphere there was answered 0.75 deep). Empty where none moves.
fn local_frames(bodies: &[Shape]) -> Vec<DVec3> {
    super::frames_where_far(bodies, |body| {
        match bounding_ball(std::slice::from_ref(body)) {
            Some((centre, radius)) if centre.length() > FAR_RADII * radius => -centre,
            _ => DVec3::ZERO,
        }
    })
}

/// A sink putting `count` rows of every body field into `hits`.
fn into_hits(
    hits: &mut Vec<GpuBodyHit>,
    count: usize,
) -> impl FnMut(usize, PackedRows<'_>) -> Result<()> + '_ {
    hits.resize(count, GpuBodyHit::default());
    move |first, rows| {
        let got = rows.as_body_hits().expect("every body field was asked");
        hits[first..first + got.len()].copy_from_slice(got);
        Ok(())
    }
}

/// A moved body's contact (`FarBodies`) for the body where it is: its witness point moved
/// back, the separation and normal measured again between the witness points.
fn far_body_answer(hit: &mut GpuBodyHit, shift: DVec3) {
    if shift == DVec3::ZERO || hit.shape < 0 {
        return;
    }
    let wide = |v: [f32; 3]| DVec3::new(v[0] as f64, v[1] as f64, v[2] as f64);
    let body = wide(hit.point_body) - shift;
    let apart = body - wide(hit.point_target);
    let distance = apart.length();
    hit.point_body = body.to_f32();
    hit.distance = distance as f32;
    hit.normal = (apart * (1.0 / distance)).to_f32();
}

fn kind_bits(shapes: &[Shape]) -> u32 {
    shapes.iter().fold(0, |bits, s| bits | 1 << s.kind() as u32)
}

fn check_family(fields: Fields) -> Result<()> {
    if fields.family() != Family::Bodies {
        return Err(Error::Usage(
            "body queries answer the fields of the Bodies family".into(),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::torus_conflict;
    use crate::{DVec3, Shape};

    fn sphere() -> Shape {
        Shape::Sphere {
            center: DVec3::ZERO,
            radius: 1.0,
        }
    }

    fn torus() -> Shape {
        Shape::Torus {
            center: DVec3::ZERO,
            axis: DVec3::new(0.0, 0.0, 1.0),
            major_radius: 2.0,
            minor_radius: 0.5,
        }
    }

    fn capsule() -> Shape {
        Shape::Capsule {
            a: DVec3::ZERO,
            b: DVec3::new(1.0, 0.0, 0.0),
            radius: 0.5,
        }
    }

    /// The first torus and the first body that is no sphere; paired, the first torus whose
    /// own body is none. Many tori against many sphere bodies are answered in one pass each.
    #[test]
    fn torus_conflicts_name_the_first_torus_and_body() {
        let targets = [sphere(), sphere(), torus(), sphere(), torus()];
        let spheres = vec![sphere(); 5];
        assert_eq!(torus_conflict(&spheres, &targets, false), None);
        assert_eq!(torus_conflict(&spheres, &targets, true), None);
        let mut bodies = spheres.clone();
        bodies[3] = capsule();
        assert_eq!(torus_conflict(&bodies, &targets, false), Some((2, 3)));
        assert_eq!(torus_conflict(&bodies, &targets, true), None);
        bodies[4] = capsule();
        assert_eq!(torus_conflict(&bodies, &targets, true), Some((4, 4)));
        assert_eq!(torus_conflict(&bodies, &targets[..2], false), None);
        // 10^5 tori against 10^6 sphere bodies: 10^11 checks before, two passes now.
        let tori = vec![torus(); 100_000];
        let many = vec![sphere(); 1_000_000];
        assert_eq!(torus_conflict(&many, &tori, false), None);
    }
}
