//! Sphere contacts (SPEC §2): the nearest shape to each centre in surface mode, turned into
//! contact point, depth and normal (`crate::contacts`).

use super::Engine;
use crate::Mode;
use crate::contacts::{Contact, check_radius, contact_device_fields, pack_contacts};
use crate::error::Result;
use crate::fields::{Columns, Fields, PackedRows};
use crate::gpu::GpuScene;

impl Engine {
    /// [`Engine::sphere_contacts`], only `fields` (family `Contacts`) computed and returned.
    pub fn sphere_contacts_fields(
        &self,
        scene: &GpuScene,
        spheres: &[[f32; 4]],
        fields: Fields,
    ) -> Result<Columns> {
        for (row, s) in spheres.iter().enumerate() {
            check_radius(row, s[3] as f64, "spheres")?;
        }
        let centres: Vec<[f32; 3]> = spheres.iter().map(|s| [s[0], s[1], s[2]]).collect();
        let mut packed = Vec::new();
        Columns::collect(fields, spheres.len(), |sink| {
            self.query_scene_fields_stream(
                scene,
                crate::Points::F32(&centres),
                Mode::Surface,
                contact_device_fields(fields),
                &mut |first: usize, hits: PackedRows<'_>| {
                    pack_contacts(fields, &hits, |i| spheres[first + i][3], &mut packed);
                    sink.take(first, PackedRows::new(fields, &packed))
                },
            )
        })
    }

    /// Contacts of spheres `[cx, cy, cz, r]` with a scene.
    pub fn sphere_contacts(&self, scene: &GpuScene, spheres: &[[f32; 4]]) -> Result<Vec<Contact>> {
        for (row, s) in spheres.iter().enumerate() {
            check_radius(row, s[3] as f64, "spheres")?;
        }
        let centres: Vec<[f32; 3]> = spheres.iter().map(|s| [s[0], s[1], s[2]]).collect();
        let hits = self.query_scene(scene, &centres, Mode::Surface)?;
        Ok(hits
            .iter()
            .zip(spheres)
            .map(|(hit, s)| Contact::from_hit(hit, s[3]))
            .collect())
    }
}
