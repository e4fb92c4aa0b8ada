//! A small f64 vector type for the reference module and the host-side shape preparation.

use std::ops::{Add, Div, Mul, Neg, Sub};

#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct DVec3 {
    pub x: f64,
    pub y: f64,
    pub z: f64,
}

impl DVec3 {
    pub const ZERO: DVec3 = DVec3::new(0.0, 0.0, 0.0);
    pub const X: DVec3 = DVec3::new(1.0, 0.0, 0.0);
    pub const Y: DVec3 = DVec3::new(0.0, 1.0, 0.0);
    pub const Z: DVec3 = DVec3::new(0.0, 0.0, 1.0);

    pub const fn new(x: f64, y: f64, z: f64) -> Self {
        DVec3 { x, y, z }
    }

    /// Component by component.
    pub fn min(self, o: DVec3) -> DVec3 {
        DVec3::new(self.x.min(o.x), self.y.min(o.y), self.z.min(o.z))
    }

    /// Component by component.
    pub fn max(self, o: DVec3) -> DVec3 {
        DVec3::new(self.x.max(o.x), self.y.max(o.y), self.z.max(o.z))
    }

    pub fn from_array(a: [f64; 3]) -> Self {
        DVec3::new(a[0], a[1], a[2])
    }
    pub fn to_array(self) -> [f64; 3] {
        [self.x, self.y, self.z]
    }
    pub fn to_f32(self) -> [f32; 3] {
        [self.x as f32, self.y as f32, self.z as f32]
    }
    pub fn dot(self, o: DVec3) -> f64 {
        self.x * o.x + self.y * o.y + self.z * o.z
    }
    pub fn cross(self, o: DVec3) -> DVec3 {
        DVec3::new(
            self.y * o.z - self.z * o.y,
            self.z * o.x - self.x * o.z,
            self.x * o.y - self.y * o.x,
        )
    }
    pub fn length_squared(self) -> f64 {
        self.dot(self)
    }
    /// Plain sqrt of the sum of squares: inputs are within f32's range, so the squares cannot
    /// overflow f64 (and `hypot` would triple the reference's cost).
    pub fn length(self) -> f64 {
        self.length_squared().sqrt()
    }
    /// Unit vector, or zero for the zero vector (the degenerate case is the caller's to define).
    pub fn normalize_or_zero(self) -> DVec3 {
        let len = self.length();
        if len > 0.0 { self / len } else { DVec3::ZERO }
    }
    pub fn abs(self) -> DVec3 {
        DVec3::new(self.x.abs(), self.y.abs(), self.z.abs())
    }
    pub fn max_abs(self) -> f64 {
        self.x.abs().max(self.y.abs()).max(self.z.abs())
    }
    pub fn is_finite(self) -> bool {
        self.x.is_finite() && self.y.is_finite() && self.z.is_finite()
    }
    /// The axis of the largest component, the first of equal ones.
    pub fn longest_axis(self) -> usize {
        if self.x >= self.y && self.x >= self.z {
            0
        } else if self.y >= self.z {
            1
        } else {
            2
        }
    }
    pub fn get(self, axis: usize) -> f64 {
        [self.x, self.y, self.z][axis]
    }
    pub fn with(self, axis: usize, value: f64) -> DVec3 {
        let mut a = self.to_array();
        a[axis] = value;
        DVec3::from_array(a)
    }
    pub fn clamp(self, lo: DVec3, hi: DVec3) -> DVec3 {
        DVec3::new(
            self.x.clamp(lo.x, hi.x),
            self.y.clamp(lo.y, hi.y),
            self.z.clamp(lo.z, hi.z),
        )
    }
}

impl Add for DVec3 {
    type Output = DVec3;
    fn add(self, o: DVec3) -> DVec3 {
        DVec3::new(self.x + o.x, self.y + o.y, self.z + o.z)
    }
}
impl std::ops::AddAssign for DVec3 {
    fn add_assign(&mut self, o: DVec3) {
        *self = *self + o;
    }
}
impl Sub for DVec3 {
    type Output = DVec3;
    fn sub(self, o: DVec3) -> DVec3 {
        DVec3::new(self.x - o.x, self.y - o.y, self.z - o.z)
    }
}
impl Mul<f64> for DVec3 {
    type Output = DVec3;
    fn mul(self, s: f64) -> DVec3 {
        DVec3::new(self.x * s, self.y * s, self.z * s)
    }
}
impl Div<f64> for DVec3 {
    type Output = DVec3;
    fn div(self, s: f64) -> DVec3 {
        DVec3::new(self.x / s, self.y / s, self.z / s)
    }
}
impl Neg for DVec3 {
    type Output = DVec3;
    fn neg(self) -> DVec3 {
        DVec3::new(-self.x, -self.y, -self.z)
    }
}

/// The least f32 at or above `x` (bounds that must not shrink when rounded to f32).
pub fn f32_up(x: f64) -> f32 {
    let f = x as f32;
    if f64::from(f) < x { f.next_up() } else { f }
}

/// The greatest f32 at or below `x`.
pub fn f32_down(x: f64) -> f32 {
    let f = x as f32;
    if f64::from(f) > x { f.next_down() } else { f }
}

/// A unit vector perpendicular to `axis`, chosen by a fixed rule so CPU and GPU agree:
/// cross `axis` with the coordinate axis it is least aligned with; `+X` for a zero axis.
pub fn any_perpendicular(axis: DVec3) -> DVec3 {
    let a = axis.abs();
    if a.x == 0.0 && a.y == 0.0 && a.z == 0.0 {
        return DVec3::X;
    }
    let helper = if a.x <= a.y && a.x <= a.z {
        DVec3::X
    } else if a.y <= a.z {
        DVec3::Y
    } else {
        DVec3::Z
    };
    axis.cross(helper).normalize_or_zero()
}

/// Below this fraction of the magnitude it was computed from, an offset from an axis is
/// rounding noise, whose direction may be anything (along the axis itself for a point on the
/// diagonal (1, 1, 0)): the point is on the axis, and every radial direction is closest. The
/// kernels use the same constant (the WGSL prelude's `ON_AXIS`), so twin and kernel decide
/// alike; treating a point this near the axis as on it moves an answer by at most this
/// fraction of the point's size, a tenth of SPEC §3's bound.
pub const ON_AXIS: f64 = 1.0 / (1u64 << 20) as f64;

/// Whether an offset of length `offset` from an axis, computed from magnitudes up to
/// `scale`, is rounding noise ([`ON_AXIS`]).
pub fn is_on_axis(offset: f64, scale: f64) -> bool {
    offset <= ON_AXIS * scale
}

/// A point seen from a unit axis through the origin (cylinders, cones, tori): its height `t`
/// along the axis, its offset `radial` from it, that offset's length `rho` and unit direction
/// `dir`; a point within [`ON_AXIS`] of the axis (relative to its own size) is on it, with
/// `radial` and `rho` zero and `dir` the fixed perpendicular. Twin: `axial` in
/// shaders/shared/math.wgsl.
pub struct Axial {
    pub t: f64,
    pub radial: DVec3,
    pub rho: f64,
    pub dir: DVec3,
}

pub fn axial(p: DVec3, axis: DVec3) -> Axial {
    let t = p.dot(axis);
    // Orthogonalised twice: for a point on or near the axis the first pass leaves a rounding
    // residue along it, which would tilt the radial direction off the side.
    let first = p - axis * t;
    let radial = first - axis * first.dot(axis);
    let rho = radial.length();
    // On the axis every radial direction is closest: take the fixed perpendicular.
    if is_on_axis(rho, p.length()) {
        return Axial {
            t,
            radial: DVec3::ZERO,
            rho: 0.0,
            dir: any_perpendicular(axis),
        };
    }
    Axial {
        t,
        radial,
        rho,
        dir: radial / rho,
    }
}

/// Rotation matrix columns (the local X, Y, Z axes in world space) of a quaternion
/// `[x, y, z, w]`; it is normalised here, so any non-zero quaternion gives a rotation.
pub fn quaternion_axes(q: [f64; 4]) -> [DVec3; 3] {
    let [x, y, z, w] = q;
    let norm2 = x * x + y * y + z * z + w * w;
    let s = if norm2 > 0.0 { 2.0 / norm2 } else { 0.0 };
    [
        DVec3::new(
            1.0 - s * (y * y + z * z),
            s * (x * y + w * z),
            s * (x * z - w * y),
        ),
        DVec3::new(
            s * (x * y - w * z),
            1.0 - s * (x * x + z * z),
            s * (y * z + w * x),
        ),
        DVec3::new(
            s * (x * z + w * y),
            s * (y * z - w * x),
            1.0 - s * (x * x + y * y),
        ),
    ]
}

// Geometry both the engine (packing, mesh tables) and the f64 reference use.

/// Twice the area below which a triangle counts as degenerate, relative to its longest edge²
/// (i.e. its width relative to its longest edge). Below it the triangle is answered by its
/// edges, which moves the answer by at most its width; above it the f64 normal's direction is
/// off by at most f64's epsilon over this ratio (the edges carry a rounding error relative to
/// their length). 1e-8, about √ε, keeps both below 1e-8 of the triangle's size: at 1e-14 a
/// triangle made collinear at 10^4 from the origin (so only rounding makes it 1e-12 wide) got a
/// normal 10^-4 off and answers 10^-4 off its plane (tests/edges.rs).
pub const DEGENERATE_RELATIVE_AREA: f64 = 1e-8;

/// Unit normal (right-handed a→b→c) computed in f64 on the host, so the GPU never forms an
/// ill-conditioned cross product in f32; zero for a degenerate triangle.
pub fn triangle_unit_normal(a: DVec3, b: DVec3, c: DVec3) -> DVec3 {
    let (e0, e1, e2) = (b - a, c - a, c - b);
    let n = e0.cross(e1);
    let longest = e0
        .length_squared()
        .max(e1.length_squared())
        .max(e2.length_squared());
    if n.length() <= DEGENERATE_RELATIVE_AREA * longest {
        DVec3::ZERO
    } else {
        n.normalize_or_zero()
    }
}

/// Unit axis and length of a cylinder; a == b is a disk perpendicular to Z.
pub fn cylinder_axis(a: DVec3, b: DVec3) -> (DVec3, f64) {
    let length = (b - a).length();
    if length > 0.0 {
        ((b - a) / length, length)
    } else {
        (DVec3::Z, 0.0)
    }
}

/// Unit quaternion `[x, y, z, w]` of the rotation whose columns are `axes` (Shepperd's method:
/// the largest of the four candidates keeps the division well conditioned).
pub fn matrix_to_quaternion(axes: [DVec3; 3]) -> [f64; 4] {
    let m = |row: usize, col: usize| axes[col].get(row);
    let trace = m(0, 0) + m(1, 1) + m(2, 2);
    let q = if trace > 0.0 {
        let s = (trace + 1.0).sqrt() * 2.0;
        [
            (m(2, 1) - m(1, 2)) / s,
            (m(0, 2) - m(2, 0)) / s,
            (m(1, 0) - m(0, 1)) / s,
            0.25 * s,
        ]
    } else if m(0, 0) > m(1, 1) && m(0, 0) > m(2, 2) {
        let s = (1.0 + m(0, 0) - m(1, 1) - m(2, 2)).sqrt() * 2.0;
        [
            0.25 * s,
            (m(0, 1) + m(1, 0)) / s,
            (m(0, 2) + m(2, 0)) / s,
            (m(2, 1) - m(1, 2)) / s,
        ]
    } else if m(1, 1) > m(2, 2) {
        let s = (1.0 + m(1, 1) - m(0, 0) - m(2, 2)).sqrt() * 2.0;
        [
            (m(0, 1) + m(1, 0)) / s,
            0.25 * s,
            (m(1, 2) + m(2, 1)) / s,
            (m(0, 2) - m(2, 0)) / s,
        ]
    } else {
        let s = (1.0 + m(2, 2) - m(0, 0) - m(1, 1)).sqrt() * 2.0;
        [
            (m(0, 2) + m(2, 0)) / s,
            (m(1, 2) + m(2, 1)) / s,
            0.25 * s,
            (m(1, 0) - m(0, 1)) / s,
        ]
    };
    let norm = q.iter().map(|c| c * c).sum::<f64>().sqrt();
    q.map(|c| c / norm)
}

/// An ellipsoid's frame with its semi-axes sorted longest first, as the closest-point solve
/// (`reference::project_ellipsoid`, its WGSL twin) wants them: the radii in that order and the
/// rotation taking the sorted frame to world space. Equal radii keep their X, Y, Z order; an odd
/// permutation flips the longest axis, so the frame stays a rotation (the solid is symmetric).
pub fn ellipsoid_frame(radii: DVec3, rotation: [f64; 4]) -> (DVec3, [f64; 4]) {
    let axes = quaternion_axes(rotation);
    let mut order = [0usize, 1, 2];
    // Stable: ties keep X before Y before Z.
    order.sort_by(|&i, &j| radii.get(j).total_cmp(&radii.get(i)));
    let inversions = (0..3)
        .flat_map(|i| (i + 1..3).map(move |j| (i, j)))
        .filter(|&(i, j)| order[i] > order[j])
        .count();
    let mut sorted_axes = order.map(|k| axes[k]);
    if inversions % 2 == 1 {
        sorted_axes[0] = -sorted_axes[0];
    }
    let sorted = DVec3::new(
        radii.get(order[0]),
        radii.get(order[1]),
        radii.get(order[2]),
    );
    (sorted, matrix_to_quaternion(sorted_axes))
}

/// SplitMix64 (Steele, Lea & Flood): one 64-bit state, a fixed sequence per seed.
pub(crate) struct SplitMix64(pub(crate) u64);

impl SplitMix64 {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1), 53 bits.
    pub(crate) fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// A standard normal deviate (Box–Muller).
    pub(crate) fn normal(&mut self) -> f64 {
        let u = 1.0 - self.unit(); // (0, 1]
        let v = self.unit();
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }
}
