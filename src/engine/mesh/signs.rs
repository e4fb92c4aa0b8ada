//! Signs of mesh answers: pseudonormals on the host or as rows are answered, winding numbers
//! on the device (or the host, where the device cannot hold the tree).

use super::*;
use crate::sync::computed_once;

impl GpuMesh {
    /// Whether the device walks this mesh's winding numbers: every part has its hierarchy's
    /// clusters there.
    pub(crate) fn winding_on_device(&self) -> bool {
        self.parts.iter().all(|part| part.scene.clusters.is_some())
    }

    /// Shift a chunk's answers back to world coordinates and sign them as `sign` asks, on the
    /// host (meshes in parts, or whose sign data the device cannot hold; winding rows come
    /// marked by `mark_inside_on_host`). `points` are the chunk's query points as given; rows
    /// signed by pseudonormal far from the mesh were answered at their proxies
    /// (`FarRows::walked_from`).
    pub(super) fn finish(&self, points: &[[f64; 3]], hits: &mut [GpuHit], sign: Sign) {
        use rayon::prelude::*;
        // Built on first use: only pseudonormal signs on the host need them.
        let normals = (sign == Sign::Pseudonormal)
            .then(|| computed_once(&self.normals, || Pseudonormals::new(&self.mesh)));
        let far = self.far_rows();
        hits.par_iter_mut()
            .zip(points.par_iter())
            .with_min_len(1024)
            .for_each(|(hit, p)| {
                if hit.shape < 0 {
                    return;
                }
                let q = DVec3::new(
                    hit.point[0] as f64,
                    hit.point[1] as f64,
                    hit.point[2] as f64,
                ) + self.offset;
                hit.point = q.to_f32();
                let t = hit.shape as usize;
                let (s, normal) = match (sign, normals) {
                    (Sign::Winding, _) => {
                        // The device marked the inside by the distance's sign bit (−0 on the
                        // surface) and left the rest as it was.
                        let inside = hit.distance.is_sign_negative();
                        hit.distance = hit.distance.abs();
                        (if inside { -1.0 } else { 1.0 }, face_normal(&self.mesh, t))
                    }
                    (_, Some(normals)) => {
                        let p = DVec3::new(p[0], p[1], p[2]);
                        match far.proxy(p) {
                            // The parts were asked from the proxy: the row's own distance
                            // and normal to the proxy's nearest, its sign at the proxy.
                            Some(proxy) => {
                                let along = p - q;
                                hit.distance = along.length() as f32;
                                hit.normal = (along * (1.0 / along.length())).to_f32();
                                normals.sign(&self.mesh, t, proxy)
                            }
                            None => normals.sign(&self.mesh, t, p),
                        }
                    }
                    (_, None) => return,
                };
                hit.distance *= s as f32;
                hit.normal = if hit.distance != 0.0 {
                    hit.normal.map(|x| x * s as f32)
                } else {
                    normal.to_f32()
                };
            });
    }

    /// The pseudonormal table on the device, built and uploaded on first use; `None` where the
    /// mesh has several parts, is too small for a hierarchy (query.wgsl scans it, unsigned) or
    /// the table would not fit one binding: the host signs then. A large mesh's table takes
    /// seconds: it is made on a thread Ctrl-C stops (`interrupt::polled`), and uploaded here.
    pub(super) fn pseudonormal_buffer(&self, engine: &Engine) -> Result<Option<&wgpu::Buffer>> {
        if let Some(buffer) = self.device_normals.get() {
            return Ok(Some(buffer));
        }
        let Some(vertex_indices) = self.pseudonormal_layout(engine) else {
            return Ok(None);
        };
        let words = crate::interrupt::polled(|stop| {
            Pseudonormals::gpu_words_until(&self.mesh, vertex_indices, stop)
        })?
        .ok_or(Error::Interrupted)?;
        self.upload_pseudonormals(engine, words).map(Some)
    }

    /// Whether the device takes the mesh's pseudonormal table, and then whether the table
    /// holds the triangles' vertex indices (not where the records, indexed, hold them).
    pub(super) fn pseudonormal_layout(&self, engine: &Engine) -> Option<bool> {
        let (triangles, vertices) = (self.mesh.triangles.len(), self.mesh.vertices.len());
        let [part] = self.parts.as_slice() else {
            return None;
        };
        let vertex_indices = !part.scene.indexed;
        let fits = Pseudonormals::max_gpu_bytes(triangles, vertices, vertex_indices)
            <= engine.gpu.binding_bytes;
        (part.scene.oriented && fits).then_some(vertex_indices)
    }

    /// The table's `words` on the device, kept (a table another thread uploaded first wins).
    pub(super) fn upload_pseudonormals(
        &self,
        engine: &Engine,
        words: Vec<u32>,
    ) -> Result<&wgpu::Buffer> {
        let buffer = engine
            .gpu
            .checked(|| engine.gpu.storage_buffer_words("pseudonormals", words))?;
        let buffer = crate::gpu::turn::InTurn::new(buffer, &engine.gpu.turn);
        Ok(self.device_normals.get_or_init(|| buffer))
    }

    /// The f64 twin of its winding clusters on the device (hierarchies of the same parts),
    /// which signs by winding number where the device does not; built on first use.
    pub fn host_winding(&self) -> &WindingTree {
        computed_once(&self.host_winding, || match self.parts.as_slice() {
            [_] => WindingTree::new(&self.mesh),
            parts => {
                let parts: Vec<&[u32]> = parts.iter().map(|p| p.triangles.as_slice()).collect();
                WindingTree::in_parts(&self.mesh, &parts)
            }
        })
    }

    /// Mark the rows inside by winding number on the host, as the device does: the distance's
    /// sign bit set (−0 on the surface).
    pub(super) fn mark_inside_on_host(&self, points: &[[f64; 3]], hits: &mut [GpuHit]) {
        use rayon::prelude::*;
        let tree = self.host_winding();
        hits.par_iter_mut()
            .zip(points.par_iter())
            .with_min_len(256)
            .for_each(|(hit, p)| {
                let p = DVec3::new(p[0], p[1], p[2]);
                if hit.shape >= 0 && tree.is_inside(&self.mesh, p) {
                    hit.distance = -hit.distance;
                }
            });
    }
}

/// The sign a query of `fields` applies: signs change only distances and normals.
pub(super) fn applied_sign(sign: Sign, fields: Fields) -> Sign {
    use crate::fields::{DISTANCE, NORMAL};
    if fields.contains(DISTANCE | NORMAL) {
        sign
    } else {
        Sign::None
    }
}

impl Engine {
    /// The method `choice` names for `mesh` ([`GpuMesh::resolve_sign`]). Where `auto` is
    /// still to check the mesh, the pseudonormal table (if the device has none yet) is built
    /// beside the check: the check is mostly one thread's work (igea: about 0.2 s, the table
    /// 70–100 ms on the other core), and a mesh's first signed query wants the table whatever
    /// `auto` picks, except winding numbers on a closed mesh that crosses itself. Ctrl-C stops
    /// both (seconds on a mesh of millions of triangles) between their passes.
    pub fn resolve_sign(&self, mesh: &GpuMesh, choice: SignChoice) -> Result<Sign> {
        let host_mesh = !mesh.mesh.triangles.is_empty();
        if choice == SignChoice::Auto && host_mesh && mesh.auto_sign.get().is_none() {
            // Both take seconds on a mesh of millions of triangles: made on threads Ctrl-C
            // stops, the table uploaded here (the device's calls stay on the job's thread).
            let layout = match mesh.device_normals.get() {
                Some(_) => None,
                None => mesh.pseudonormal_layout(self),
            };
            let (_, words) = crate::interrupt::polled(|stop| {
                rayon::join(
                    || mesh.auto_sign_until(stop).is_some(),
                    || {
                        layout.map(|indices| {
                            Pseudonormals::gpu_words_until(&mesh.mesh, indices, stop)
                        })
                    },
                )
            })?;
            if let Some(words) = words {
                mesh.upload_pseudonormals(self, words.ok_or(Error::Interrupted)?)?;
            }
        }
        Ok(mesh.resolve_sign(choice))
    }

    /// How the device signs `mesh`'s rows by `sign`: `None` where it cannot, for a mesh in
    /// parts or whose sign data does not fit one binding (the host signs then).
    pub(super) fn device_sign<'a>(
        &self,
        mesh: &'a GpuMesh,
        sign: Sign,
    ) -> Result<Option<DeviceSign<'a>>> {
        if mesh.parts.len() > 1 {
            return Ok(None);
        }
        Ok(match sign {
            Sign::None => Some(DeviceSign::None),
            Sign::Winding => mesh.parts[0]
                .scene
                .clusters
                .as_ref()
                .map(DeviceSign::Winding),
            Sign::Pseudonormal => mesh
                .pseudonormal_buffer(self)?
                .map(DeviceSign::Pseudonormal),
        })
    }

    /// The mesh's winding number at each of `points` (the sum of its parts'), walked on the
    /// device at the coarse accuracy or the `fine` one; `None` where a part has no hierarchy
    /// there.
    pub(crate) fn winding_numbers(
        &self,
        mesh: &GpuMesh,
        points: &[[f64; 3]],
        fine: bool,
    ) -> Result<Option<Vec<f64>>> {
        if !mesh.winding_on_device() {
            return Ok(None);
        }
        let rows: Vec<u32> = (0..points.len() as u32).collect();
        let mut total = vec![0f64; points.len()];
        self.add_part_winding_numbers(mesh, points, &rows, fine, &mut total)?;
        Ok(Some(total))
    }

    /// Mark the rows of `block` inside by the sum of the parts' winding numbers, walked on the
    /// device, as the host's `WindingTree::is_inside` decides over the same parts: the coarse
    /// sum, and the fine one for the rows whose coarse sum lies within `SIGN_MARGIN` of ½. The
    /// distance's sign bit is set (−0 on the surface); a row whose walk outgrew its stack in
    /// any part becomes an overflow row, as on the device.
    pub(super) fn mark_inside_on_device(
        &self,
        mesh: &GpuMesh,
        block: &[[f64; 3]],
        best: &mut [GpuHit],
    ) -> Result<()> {
        use crate::winding::SIGN_MARGIN;
        let rows: Vec<u32> = (0..block.len() as u32)
            .filter(|&i| best[i as usize].shape >= 0)
            .collect();
        let mut total = vec![0f64; block.len()];
        self.add_part_winding_numbers(mesh, block, &rows, false, &mut total)?;
        let unsure: Vec<u32> = rows
            .iter()
            .copied()
            // NaN (a walk that outgrew its stack) included: the fine walk tells.
            .filter(|&i| {
                (total[i as usize] - 0.5).abs() <= SIGN_MARGIN || total[i as usize].is_nan()
            })
            .collect();
        for &i in &unsure {
            total[i as usize] = 0.0;
        }
        self.add_part_winding_numbers(mesh, block, &unsure, true, &mut total)?;
        for &i in &rows {
            let (w, hit) = (total[i as usize], &mut best[i as usize]);
            if w.is_nan() {
                *hit = GpuHit {
                    shape: crate::fields::TRAVERSAL_OVERFLOW,
                    ..GpuHit::default()
                };
            } else if w > 0.5 {
                hit.distance = -hit.distance;
            }
        }
        Ok(())
    }
}

/// Rows signed by pseudonormal on the host (a mesh in parts, or small enough to be scanned)
/// far from the mesh are asked from their proxies, as the device walks its own far rows
/// (pseudonormal.wgsl, `walk_for`): the f32 nearest from the row itself is a tie among
/// triangles on every side there.
pub(super) struct FarRows {
    centre: DVec3,
    radius: f64,
}

impl GpuMesh {
    /// Its far rows' bounds (`Pseudonormals::far_radius` from the parts' boxes, which hold the
    /// mesh's, about its centre, the offset).
    pub(super) fn far_rows(&self) -> FarRows {
        let boxes = self.parts.iter().map(|part| part.bounds);
        let (lo, hi) = boxes
            .reduce(|(lo, hi), (a, b)| (lo.min(a), hi.max(b)))
            .unwrap_or((self.offset, self.offset));
        FarRows {
            centre: self.offset,
            radius: crate::mesh::FAR_RADII * 0.5 * (hi - lo).length(),
        }
    }
}

impl FarRows {
    /// The point at the far radius on the ray from the mesh's centre through `p`, where `p`
    /// lies beyond it.
    pub(super) fn proxy(&self, p: DVec3) -> Option<DVec3> {
        let from_centre = p - self.centre;
        // In units of its largest coordinate: its length may overflow.
        let largest = from_centre.max_abs();
        let unit = from_centre * (1.0 / largest);
        let far = largest > 0.0 && unit.length() * largest > self.radius;
        (self.radius > 0.0 && far).then(|| self.centre + unit * (self.radius / unit.length()))
    }

    /// The points the parts are asked from for `block`, signed by `sign`: far rows' proxies
    /// where it is by pseudonormal.
    pub(super) fn walked_from<'b>(
        &self,
        block: &'b [[f64; 3]],
        sign: Sign,
        proxies: &'b mut Vec<[f64; 3]>,
    ) -> &'b [[f64; 3]] {
        if sign != Sign::Pseudonormal {
            return block;
        }
        proxies.clear();
        proxies.extend(block.iter().map(|&p| {
            let p = DVec3::from_array(p);
            self.proxy(p).unwrap_or(p).to_array()
        }));
        proxies
    }
}
