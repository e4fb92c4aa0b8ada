//! Sphere contacts for collision response (SPEC §2): for a sphere (c, r) the nearest shape of
//! the scene in surface mode, seen from c, gives the contact point q, the outward normal n and
//! the depth r − d (positive when overlapping). Moving the sphere by depth·n resolves the
//! overlap with that shape: its centre ends at distance r from it. The queries are
//! `engine::contacts`.

use crate::error::{Error, Result};
use crate::fields::{Family, Fields, GpuHit, PackedRows, pack_hits};

/// One sphere's contact.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Contact {
    /// Closest point of the nearest shape to the sphere's centre.
    pub point: [f32; 3],
    /// r − d: positive when the sphere overlaps the shape.
    pub depth: f32,
    /// Outward normal at the contact (zero for a centre exactly on a curve).
    pub normal: [f32; 3],
    /// The nearest shape; −1 for a sphere with a non-finite centre or radius.
    pub shape: i32,
}

impl Contact {
    /// The contact of a sphere of `radius` from the hit of its centre.
    pub fn from_hit(hit: &GpuHit, radius: f32) -> Contact {
        if hit.shape < 0 || !radius.is_finite() {
            let nan = f32::NAN;
            return Contact {
                point: [nan; 3],
                depth: nan,
                normal: [nan; 3],
                shape: -1,
            };
        }
        Contact {
            point: hit.point,
            depth: radius - hit.distance,
            normal: hit.normal,
            shape: hit.shape,
        }
    }
}

/// A radius that is not a sphere's: negative (NaN and infinities give NaN rows instead).
pub fn check_radius(row: usize, radius: f64, file: &str) -> Result<()> {
    if radius < 0.0 {
        return Err(Error::BadRow {
            file: file.to_string(),
            row,
            field: "radius".into(),
            problem: format!("must be ≥ 0 (found {radius})"),
        });
    }
    Ok(())
}

/// The hit fields a contacts job needs from the device: its bits are the hits' (depth comes
/// from the distance).
pub fn contact_device_fields(fields: Fields) -> Fields {
    debug_assert_eq!(fields.family(), Family::Contacts);
    Fields::from_bits(Family::Hits, fields.bits())
}

/// A chunk's contacts packed with `fields` (family `Contacts`) into `out`, from the packed
/// hits of their centres and each row's radius.
pub fn pack_contacts(
    fields: Fields,
    hits: &PackedRows<'_>,
    radius: impl Fn(usize) -> f32,
    out: &mut Vec<u32>,
) {
    let contacts: Vec<GpuHit> = (0..hits.len())
        .map(|i| {
            let c = Contact::from_hit(&hits.hit(i), radius(i));
            GpuHit {
                point: c.point,
                distance: c.depth,
                normal: c.normal,
                shape: c.shape,
            }
        })
        .collect();
    // A contacts row packs as a hits row of the same bits.
    pack_hits(
        Fields::from_bits(Family::Hits, fields.bits()),
        &contacts,
        out,
    );
}
