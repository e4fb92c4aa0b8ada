//! Sphere contacts (SPEC §2): the nearest shape to each centre in surface mode, turned into
//! contact point, depth and normal (`crate::contacts`).

use std::cell::RefCell;
use std::collections::VecDeque;
use std::ops::Range;

use super::{Engine, SceneQuery};
use crate::Mode;
use crate::contacts::{check_radius, contact_device_fields, pack_contacts};
use crate::error::Result;
use crate::fields::{Fields, PackedRows, PackedSink};
use crate::gpu::GpuScene;
use crate::points::{PointChunk, PointReader, Points, check_rows};

/// Sphere contacts with a scene: [`Engine::sphere_contacts`].
pub struct SphereContacts<'a> {
    pub scene: &'a GpuScene,
    pub spheres: Spheres<'a>,
    /// Fields of the `Contacts` family.
    pub fields: Fields,
}

/// Spheres `[cx, cy, cz, r]` as a front end has them: a slice, or a reader (which checks its
/// radii and names its rows in its errors).
pub enum Spheres<'a> {
    Slice(&'a [[f32; 4]]),
    /// float64 spheres, their centres rounded to f32 only once moved into the scene's frame.
    SliceF64(&'a [[f64; 4]]),
    Read(&'a mut dyn SphereReader),
}

/// Spheres read chunk by chunk.
pub trait SphereReader {
    fn rows(&self) -> usize;
    fn read(&mut self, range: Range<usize>, spheres: &mut Vec<[f64; 4]>) -> Result<()>;
}

/// The centres of a chunk go up as query points; its radii wait, chunk after chunk, until its
/// answers come back (two chunks are in flight at most).
struct Centres<'a, 'b> {
    spheres: Spheres<'a>,
    rows: Vec<[f64; 4]>,
    /// Each chunk's first row and radii.
    radii: &'b RefCell<VecDeque<(usize, Vec<f32>)>>,
}

impl PointReader for Centres<'_, '_> {
    fn rows(&self) -> usize {
        match &self.spheres {
            Spheres::Slice(s) => s.len(),
            Spheres::SliceF64(s) => s.len(),
            Spheres::Read(reader) => reader.rows(),
        }
    }

    fn read(&mut self, range: Range<usize>, chunk: &mut PointChunk) -> Result<()> {
        let first = range.start;
        let radii = match &mut self.spheres {
            Spheres::Slice(spheres) => {
                let spheres = &spheres[range];
                for (k, s) in spheres.iter().enumerate() {
                    check_radius(first + k, s[3] as f64, "spheres")?;
                }
                chunk
                    .f32_rows()
                    .extend(spheres.iter().map(|s| [s[0], s[1], s[2]]));
                spheres.iter().map(|s| s[3]).collect()
            }
            Spheres::SliceF64(spheres) => {
                let spheres = &spheres[range];
                for (k, s) in spheres.iter().enumerate() {
                    check_radius(first + k, s[3], "spheres")?;
                }
                chunk
                    .f64_rows()
                    .extend(spheres.iter().map(|s| [s[0], s[1], s[2]]));
                spheres.iter().map(|s| s[3] as f32).collect()
            }
            Spheres::Read(reader) => {
                let asked = range.len();
                reader.read(range, &mut self.rows)?;
                check_rows("sphere reader", asked, self.rows.len())?;
                chunk
                    .f64_rows()
                    .extend(self.rows.iter().map(|s| [s[0], s[1], s[2]]));
                self.rows.iter().map(|s| s[3] as f32).collect()
            }
        };
        self.radii.borrow_mut().push_back((first, radii));
        Ok(())
    }
}

impl Engine {
    /// Contacts of spheres with a scene (SPEC §2): for each sphere the nearest shape to its
    /// centre in surface mode, as contact point, depth and normal; only `job.fields` computed.
    /// `sink` as for [`Engine::query_scene`].
    pub fn sphere_contacts(
        &self,
        job: SphereContacts<'_>,
        sink: &mut dyn PackedSink,
    ) -> Result<()> {
        let SphereContacts {
            scene,
            spheres,
            fields,
        } = job;
        let radii = RefCell::new(VecDeque::new());
        let mut centres = Centres {
            spheres,
            rows: Vec::new(),
            radii: &radii,
        };
        let mut packed = Vec::new();
        let query = SceneQuery {
            scene,
            points: Points::Read(&mut centres),
            mode: Mode::Surface,
            fields: contact_device_fields(fields),
        };
        self.query_scene(query, &mut |first: usize, hits: PackedRows<'_>| {
            let mut waiting = radii.borrow_mut();
            // Chunks come back in the order they went up: drop those before this one.
            while waiting
                .front()
                .is_some_and(|(start, r)| start + r.len() <= first)
            {
                waiting.pop_front();
            }
            let (start, chunk) = waiting
                .front()
                .expect("a chunk's radii wait for its answers");
            pack_contacts(fields, &hits, |i| chunk[first - start + i], &mut packed);
            sink.take(first, PackedRows::new(fields, &packed))
        })
    }
}
