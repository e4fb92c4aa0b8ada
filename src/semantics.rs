//! The query semantics both the engine and the f64 oracle follow: SPEC §2's modes and its rule
//! for rows that get no answer, and SPEC §3's error bound.

use crate::error::{Error, Result};
use crate::math::DVec3;

/// Query mode (SPEC §2).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(u32)]
pub enum Mode {
    /// Inside a solid the point is its own closest point (d = 0); otherwise d ≥ 0 to the boundary.
    #[default]
    Solid = 0,
    /// q is always on the boundary; d is negative inside solids and below planes.
    Surface = 1,
}

impl Mode {
    /// A mode by name (`solid`, `surface`); anything else is a usage error listing them.
    pub fn parse(name: &str) -> Result<Mode> {
        [Mode::Solid, Mode::Surface]
            .into_iter()
            .find(|m| m.name() == name)
            .ok_or_else(|| {
                Error::Usage(format!(
                    "mode: unknown mode `{name}`; the valid ones are solid, surface"
                ))
            })
    }

    pub fn name(self) -> &'static str {
        match self {
            Mode::Solid => "solid",
            Mode::Surface => "surface",
        }
    }
}

/// SPEC §3's bound: every GPU distance and closest point lies within this of the f64
/// reference, for `scale` the largest absolute coordinate of the query point and the shape.
pub fn tolerance(scale: f64) -> f64 {
    1e-5 * scale.max(1e-3)
}

/// How far from the origin the points a job makes itself (grid samples, training samples)
/// may lie: every one of them is then queryable, with room for the device's own sums (a grid
/// sample is `origin + i·spacing` in f32). A box or width that would reach farther is refused.
pub const MADE_POINT_LIMIT: f64 = 1e38;

/// How far a shape or mesh may span: kernels that square one of its own lengths (segments,
/// triangles, capsules, cones, ellipsoids, hulls, mesh triangles) overflow f32 past ~1.8e19,
/// so files, Python and the service refuse a larger one rather than answer it wrong. Where a
/// shape lies is not limited: a small one 1e30 from the origin is answered.
pub const SPAN_LIMIT: f64 = 1e18;

/// Whether points made `reach` from the origin would pass [`MADE_POINT_LIMIT`] (NaN does).
pub fn beyond_made_point_limit(reach: f64) -> bool {
    reach.is_nan() || reach > MADE_POINT_LIMIT
}

/// Whether a query point gets an answer: finite once converted to the GPU's f32 (SPEC §2's
/// NaN/inf rule; coordinates beyond f32's range count as infinite).
pub fn is_queryable(p: DVec3) -> bool {
    p.is_finite() && p.max_abs() <= f32::MAX as f64
}
