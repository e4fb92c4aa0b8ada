// Eberly's robust closest point on an ellipsoid: the point reflected into the first octant,
// the one root of a monotone function bracketed and bisected to the last bit, so flat and
// needle ellipsoids are as exact as round ones. Twin: src/reference/ellipsoid.rs.

// Enough halvings to exhaust an f32 bracket.
const ELLIPSOID_BISECTIONS: u32 = 160u;

// The root t > 0 of sum((n_i / (t + m_i))^2) = 1 by bisection, for 2 or 3 terms (n.z = 0
// drops the third); `g` is its value at t = 1. Solving for t = s + 1 rather than Eberly's s
// keeps the relative precision near the medial sheet, where s + 1 would cancel.
fn ellipsoid_root(m: vec3<f32>, n: vec3<f32>, z_last: f32, g: f32) -> f32 {
    var t0 = z_last;
    var t1 = 1.0;
    if g >= 0.0 {
        // max|n| * |n / max|n||: no overflow on the way.
        let big = max(max(abs(n.x), abs(n.y)), abs(n.z));
        t1 = big * length(n / big);
    }
    var t = t0;
    for (var i = 0u; i < ELLIPSOID_BISECTIONS; i++) {
        t = 0.5 * (t0 + t1);
        if t == t0 || t == t1 {
            break;
        }
        let ratio = n / (vec3<f32>(t) + m);
        let value = dot(ratio, ratio) - 1.0;
        if value > 0.0 {
            t0 = t;
        } else if value < 0.0 {
            t1 = t;
        } else {
            break;
        }
    }
    return t;
}

// (a/b)^2 - 1 without cancellation.
fn excess(a: f32, b: f32) -> f32 {
    return (a - b) * (a + b) / (b * b);
}

// Closest point on the ellipse with semi-axes e.x >= e.y > 0 to y (both >= 0).
fn closest_on_ellipse(e: vec2<f32>, y: vec2<f32>) -> vec2<f32> {
    if y.y > 0.0 {
        if y.x > 0.0 {
            let z = y / e;
            let g = dot(z, z) - 1.0;
            if g == 0.0 {
                return y;
            }
            let r0 = (e.x / e.y) * (e.x / e.y);
            let m0 = excess(e.x, e.y);
            let t = ellipsoid_root(vec3<f32>(m0, 0.0, 0.0), vec3<f32>(r0 * z.x, z.y, 0.0), z.y, g);
            return vec2<f32>(r0 * y.x / (t + m0), y.y / t);
        }
        return vec2<f32>(0.0, e.y);
    }
    let numer = e.x * y.x;
    let denom = e.x * e.x - e.y * e.y;
    if numer < denom {
        let x0 = numer / denom;
        return vec2<f32>(e.x * x0, e.y * sqrt(1.0 - x0 * x0));
    }
    return vec2<f32>(e.x, 0.0);
}

// Closest point on the ellipsoid with semi-axes e.x >= e.y >= e.z > 0 to y (every y_i >= 0).
fn closest_in_octant(e: vec3<f32>, y: vec3<f32>) -> vec3<f32> {
    if y.z > 0.0 {
        if y.y > 0.0 {
            if y.x > 0.0 {
                let z = y / e;
                let g = dot(z, z) - 1.0;
                if g == 0.0 {
                    return y;
                }
                let r = vec3<f32>((e.x / e.z) * (e.x / e.z), (e.y / e.z) * (e.y / e.z), 1.0);
                let m = vec3<f32>(excess(e.x, e.z), excess(e.y, e.z), 0.0);
                let t = ellipsoid_root(m, r * z, z.z, g);
                return r * y / (vec3<f32>(t) + m);
            }
            let x = closest_on_ellipse(e.yz, y.yz);
            return vec3<f32>(0.0, x);
        }
        if y.x > 0.0 {
            let x = closest_on_ellipse(e.xz, y.xz);
            return vec3<f32>(x.x, 0.0, x.y);
        }
        return vec3<f32>(0.0, 0.0, e.z);
    }
    // On the plane of the two longer axes: inside a region near the centre the closest point
    // leaves the plane towards the shortest axis.
    let denom = vec2<f32>(e.x * e.x - e.z * e.z, e.y * e.y - e.z * e.z);
    let numer = e.xy * y.xy;
    if numer.x < denom.x && numer.y < denom.y {
        let xde = numer / denom;
        let discr = 1.0 - dot(xde, xde);
        if discr > 0.0 {
            return vec3<f32>(e.xy * xde, e.z * sqrt(discr));
        }
    }
    return vec3<f32>(closest_on_ellipse(e.xy, y.xy), 0.0);
}

// Solid ellipsoid centred at the local origin, semi-axes `e` sorted longest first.
fn project_ellipsoid(p: vec3<f32>, e: vec3<f32>) -> Projection {
    let y = abs(p);
    let x = closest_in_octant(e, y);
    let point = select(x, -x, p < vec3<f32>(0.0));
    let z = y / e;
    let inside = dot(z, z) - 1.0 < 0.0;
    let gradient = point / (e * e);
    let len = length(gradient);
    let normal = select(vec3<f32>(0.0), gradient / len, len > 0.0);
    return Projection(point, inside, normal);
}

// Its record (GpuShape::from_shape): p0.xyz = radii sorted longest first, p1 = the rotation
// of that sorted frame.
fn project_ellipsoid_record(s: Shape, p: vec3<f32>) -> Projection {
    let q = s.p1;
    return rotated_projection(q, project_ellipsoid(rotate(vec4<f32>(-q.xyz, q.w), p), s.p0.xyz));
}
