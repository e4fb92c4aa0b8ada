#import shared/types

// |v| where its square overflows f32 too (components beyond ~1.8e19): scaled down first,
// with no branch (software adapters run both sides of one).
fn safe_length(v: vec3<f32>) -> f32 {
    let m = max_abs(v);
    let s = select(1.0, 1.0 / m, m > 1.0e18);
    return length(v * s) / s;
}

fn max_abs(v: vec3<f32>) -> f32 {
    return max(max(abs(v.x), abs(v.y)), abs(v.z));
}

// A power of two that brings `m` (finite, ≥ 0) into [2^60, 2^61) where it is at least 2^60,
// else 1: what it scales keeps finite squares and products in f32, and is scaled exactly
// (what falls below f32's normals is far below SPEC §3's bound at such a scale).
fn down_scale(m: f32) -> f32 {
    let exponent = i32((bitcast<u32>(m) >> 23u) & 0xffu) - 127;
    return select(1.0, bitcast<f32>(u32(187 - exponent) << 23u), exponent >= 60);
}

// The exponent e (21 ≤ e ≤ 126) of the power of two above `m` (finite, ≥ 0) where m ≥ 2^20,
// else 0. Kernels that multiply three or four lengths (past f32's range once a side passes
// ~1e9) measure a shape in units of 2^e, which is exact: only exponents change. Below 2^20
// such products stay far inside f32 and nothing is scaled, so neither is a point far from a
// small shape scaled past f32's range.
fn size_exponent(m: f32) -> i32 {
    let e = i32((bitcast<u32>(m) >> 23u) & 0xffu) - 126;
    return select(0, min(e, 126), e > 20);
}

// 2^e for −126 ≤ e ≤ 127, exactly (a division may round on some adapters).
fn pow2(e: i32) -> f32 {
    return bitcast<f32>(u32(e + 127) << 23u);
}

fn unit_or_zero(v: vec3<f32>) -> vec3<f32> {
    let len = length(v);
    return select(vec3<f32>(0.0), v / len, len > 0.0);
}

// Bit test, so it survives compilers that assume finite math.
fn is_finite_f32(x: f32) -> bool {
    return (bitcast<u32>(x) & 0x7f800000u) != 0x7f800000u;
}

fn is_finite_vec3(v: vec3<f32>) -> bool {
    return is_finite_f32(v.x) && is_finite_f32(v.y) && is_finite_f32(v.z);
}

// Twin of math::any_perpendicular: cross with the least-aligned coordinate axis; +X for zero.
fn any_perpendicular(axis: vec3<f32>) -> vec3<f32> {
    let a = abs(axis);
    if all(a == vec3<f32>(0.0)) {
        return vec3<f32>(1.0, 0.0, 0.0);
    }
    var helper = vec3<f32>(0.0, 0.0, 1.0);
    if a.x <= a.y && a.x <= a.z {
        helper = vec3<f32>(1.0, 0.0, 0.0);
    } else if a.y <= a.z {
        helper = vec3<f32>(0.0, 1.0, 0.0);
    }
    return normalize(cross(axis, helper));
}

// A point seen from a unit axis through the origin (cylinders, cones, tori): its height `t`
// along the axis, its offset `radial` from it, that offset's length `rho` and unit direction
// `dir`. Twin: math::axial.
struct Axial {
    t: f32,
    radial: vec3<f32>,
    rho: f32,
    dir: vec3<f32>,
}

fn axial(p: vec3<f32>, axis: vec3<f32>) -> Axial {
    let t = dot(p, axis);
    // Orthogonalised twice: for a point on or near the axis the first pass leaves a rounding
    // residue along it, which would tilt the radial direction off the side.
    let first = p - axis * t;
    let radial = first - axis * dot(first, axis);
    let rho = safe_length(radial);
    // Within ON_AXIS of the axis (relative to the point's size) the offset is rounding noise,
    // its direction anything: on the axis every radial direction is closest, take the fixed
    // perpendicular (twin: src/math.rs, `axial` and `ON_AXIS`).
    if is_on_axis(rho, safe_length(p)) {
        return Axial(t, vec3<f32>(0.0), 0.0, any_perpendicular(axis));
    }
    return Axial(t, radial, rho, radial / rho);
}

// Whether an offset of length `offset` from an axis, computed from magnitudes up to `scale`,
// is rounding noise (twin: `is_on_axis` in src/math.rs).
fn is_on_axis(offset: f32, scale: f32) -> bool {
    return offset <= ON_AXIS * scale;
}

// v rotated by the unit quaternion q = (x, y, z, w).
fn rotate(q: vec4<f32>, v: vec3<f32>) -> vec3<f32> {
    let t = 2.0 * cross(q.xyz, v);
    return v + q.w * t + cross(q.xyz, t);
}

// A projection made in a frame rotated by the unit quaternion q, back in the unrotated one.
fn rotated_projection(q: vec4<f32>, local: Projection) -> Projection {
    return Projection(rotate(q, local.point), local.inside, rotate(q, local.normal));
}
