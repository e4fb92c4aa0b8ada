//! A deviation map: a mesh coloured by its vertices' deviations from another mesh, seen from
//! three sides (a turntable about the vertical axis y, 120° apart), as one PNG.
//!
//! A small rasteriser of our own: each triangle filled with its corners' colours interpolated,
//! shaded by how squarely it faces the viewer, behind a depth test. One pass over the
//! triangles per view, no GPU pipeline needed.

use std::io::Write;

use crate::error::Result;
use crate::mesh::{Mesh, Sign};
use crate::{DVec3, sdf::write_rgb_png};

/// Pixels a side of one view.
const VIEW: usize = 360;
const BACKGROUND: [u8; 3] = [48, 48, 52];
/// A vertex without a finite deviation.
const NO_VALUE: [f32; 3] = [140.0, 140.0, 140.0];

/// Write the three views side by side: unsigned deviations from blue (0) through yellow to red
/// (the largest), signed ones from blue (the deepest inside) through white (0) to red.
pub fn write_turntable(
    mesh: &Mesh,
    deviations: &[f32],
    sign: Sign,
    out: &mut dyn Write,
) -> Result<()> {
    let largest = deviations
        .iter()
        .filter(|d| d.is_finite())
        .fold(0f32, |m, d| m.max(d.abs()));
    let scale = if largest > 0.0 { largest } else { 1.0 };
    let colours: Vec<[f32; 3]> = deviations
        .iter()
        .map(|&d| {
            if !d.is_finite() {
                NO_VALUE
            } else if sign == Sign::None {
                ramp(
                    &[[40, 80, 200], [250, 220, 60], [200, 30, 30]],
                    d.abs() / scale,
                )
            } else {
                ramp(
                    &[[40, 80, 200], [245, 245, 245], [200, 30, 30]],
                    0.5 + 0.5 * d / scale,
                )
            }
        })
        .collect();
    let (lo, hi) = mesh.bounds();
    let centre = (lo + hi) * 0.5;
    let radius = ((hi - lo) * 0.5).length().max(f64::MIN_POSITIVE);
    let (width, height) = (3 * VIEW, VIEW);
    let mut image = Image {
        width,
        pixels: vec![BACKGROUND; width * height],
        depth: vec![f64::INFINITY; width * height],
    };
    for view in 0..3 {
        let (sin, cos) = (view as f64 * std::f64::consts::TAU / 3.0).sin_cos();
        // Turn about y, then look down −z: x right, y up; screen x, screen y (down), depth.
        let project = |p: DVec3| {
            let p = p - centre;
            let turned = DVec3::new(cos * p.x + sin * p.z, p.y, -sin * p.x + cos * p.z);
            let to_pixel = |v: f64| (v / radius * 0.48 + 0.5) * VIEW as f64;
            DVec3::new(
                to_pixel(turned.x) + (view * VIEW) as f64,
                VIEW as f64 - to_pixel(turned.y),
                -turned.z,
            )
        };
        for t in 0..mesh.triangles.len() {
            let corners = mesh.corners(t);
            let normal = (corners[1] - corners[0])
                .cross(corners[2] - corners[0])
                .normalize_or_zero();
            // The viewer looks down the turned −z: the world direction (−sin, 0, cos).
            let facing = normal.dot(DVec3::new(-sin, 0.0, cos)).abs();
            let shade = (0.45 + 0.55 * facing) as f32;
            let [a, b, c] = mesh.triangles[t].map(|k| k as usize);
            let colour = |k: usize| colours.get(k).copied().unwrap_or(NO_VALUE);
            image.fill(
                [
                    project(corners[0]),
                    project(corners[1]),
                    project(corners[2]),
                ],
                [colour(a), colour(b), colour(c)],
                shade,
                view,
            );
        }
    }
    write_rgb_png(out, width, height, image.pixels.as_flattened())
}

/// Three views' pixels and depths, side by side.
struct Image {
    width: usize,
    pixels: Vec<[u8; 3]>,
    depth: Vec<f64>,
}

impl Image {
    /// Fill a projected triangle in `view`'s panel: colours and depth interpolated, nearer wins.
    fn fill(&mut self, p: [DVec3; 3], colours: [[f32; 3]; 3], shade: f32, view: usize) {
        let area = (p[1].x - p[0].x) * (p[2].y - p[0].y) - (p[2].x - p[0].x) * (p[1].y - p[0].y);
        // Seen edge-on, a triangle covers no pixel (and NaN corners none either).
        if area.is_nan() || area.abs() <= 1e-12 {
            return;
        }
        let panel = (view * VIEW) as f64..((view + 1) * VIEW) as f64;
        let lo =
            |a: fn(&DVec3) -> f64, min: f64| p.iter().map(a).fold(f64::INFINITY, f64::min).max(min);
        let hi = |a: fn(&DVec3) -> f64, max: f64| {
            p.iter().map(a).fold(f64::NEG_INFINITY, f64::max).min(max)
        };
        let (x0, x1) = (lo(|v| v.x, panel.start), hi(|v| v.x, panel.end - 1.0));
        let (y0, y1) = (lo(|v| v.y, 0.0), hi(|v| v.y, VIEW as f64 - 1.0));
        if !(x0 <= x1 && y0 <= y1) {
            return;
        }
        let edge =
            |a: DVec3, b: DVec3, x: f64, y: f64| (b.x - a.x) * (y - a.y) - (x - a.x) * (b.y - a.y);
        for y in y0.floor() as usize..=y1.ceil().min(VIEW as f64 - 1.0) as usize {
            for x in x0.floor() as usize..=x1.ceil().min(panel.end - 1.0) as usize {
                let (px, py) = (x as f64 + 0.5, y as f64 + 0.5);
                let w = [
                    edge(p[1], p[2], px, py) / area,
                    edge(p[2], p[0], px, py) / area,
                    edge(p[0], p[1], px, py) / area,
                ];
                if w.iter().any(|w| *w < -1e-9) {
                    continue;
                }
                let z = w[0] * p[0].z + w[1] * p[1].z + w[2] * p[2].z;
                let at = y * self.width + x;
                if z < self.depth[at] {
                    self.depth[at] = z;
                    self.pixels[at] = std::array::from_fn(|c| {
                        let v = w[0] as f32 * colours[0][c]
                            + w[1] as f32 * colours[1][c]
                            + w[2] as f32 * colours[2][c];
                        (v * shade).round().clamp(0.0, 255.0) as u8
                    });
                }
            }
        }
    }
}

/// The colour at `t` in 0..=1 along evenly spaced `stops`.
fn ramp(stops: &[[u8; 3]], t: f32) -> [f32; 3] {
    let t = t.clamp(0.0, 1.0) * (stops.len() - 1) as f32;
    let k = (t as usize).min(stops.len() - 2);
    let w = t - k as f32;
    std::array::from_fn(|c| {
        let (a, b) = (f32::from(stops[k][c]), f32::from(stops[k + 1][c]));
        a + (b - a) * w
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ramp_runs_through_its_stops() {
        let stops = [[0, 0, 0], [100, 200, 50], [200, 0, 250]];
        assert_eq!(ramp(&stops, 0.0), [0.0, 0.0, 0.0]);
        assert_eq!(ramp(&stops, 0.5), [100.0, 200.0, 50.0]);
        assert_eq!(ramp(&stops, 1.0), [200.0, 0.0, 250.0]);
        assert_eq!(ramp(&stops, 2.0), [200.0, 0.0, 250.0]);
        assert_eq!(ramp(&stops, 0.25), [50.0, 100.0, 25.0]);
    }
}
