#import shapes/polyhedron

// A convex hull from its faces in `shape_data` (src/gpu/layout.rs, ShapeData): `count`
// faces from entry `first`, four entries each: the plane (unit normal, offset) and the corners
// a, b, c relative to the hull's anchor. As for the wedges, an inside point projects onto the
// nearest face plane and an outside one onto the nearest triangle; only faces that see the
// point (plane distance ≥ 0) and whose plane is nearer than the best triangle so far can hold
// it, so the others are skipped. A hull without interior (a polygon, segment or point) is
// never inside, and its normal is its first face's. Twin: src/reference/convex_hull.rs.
// Faces come through the kernel's `load_hull_plane` / `load_hull_face`, which the subgroup
// kernel shares between its lanes, so every lane runs every step of both loops.
fn project_convex_hull(p: vec3<f32>, first: u32, count: u32, solid: bool) -> Projection {
    var plane_distance = -F32_BIG;
    var normal = vec3<f32>(0.0);
    if solid {
        for (var k = 0u; k < count; k++) {
            let plane = load_hull_plane(first + 4u * k);
            let d = dot(p, plane.xyz) - plane.w;
            if d > plane_distance {
                plane_distance = d;
                normal = plane.xyz;
            }
        }
    }
    let inside = solid && plane_distance < 0.0;
    var point = vec3<f32>(0.0);
    if any_lane(!inside) {
        // Squares compared at a power-of-two scale where a far point's would overflow (the
        // same bits nearer than 2^60).
        let f = down_scale(max_abs(p));
        var dist2 = F32_BIG;
        for (var k = 0u; k < count; k++) {
            let face = load_hull_face(first + 4u * k);
            let plane = face[0];
            if k == 0u && !solid {
                normal = plane.xyz;
            }
            let d = dot(p, plane.xyz) - plane.w;
            if inside || (solid && (d < 0.0 || (d * f) * (d * f) >= dist2)) {
                continue;
            }
            let a = face[1].xyz;
            let q = a + project_triangle(p - a, face[2].xyz - a, face[3].xyz - a, plane.xyz).point;
            let q_d2 = dot((p - q) * f, (p - q) * f);
            if q_d2 < dist2 {
                dist2 = q_d2;
                point = q;
            }
        }
    }
    if inside {
        return Projection(p - normal * plane_distance, true, normal);
    }
    return Projection(point, false, normal);
}

// Its record (GpuShape::from_shape): p0.xyz = bit patterns of the first face entry, the face
// count and 1 for a solid hull.
fn project_convex_hull_record(s: Shape, p: vec3<f32>) -> Projection {
    let words = bitcast<vec3<u32>>(s.p0.xyz);
    return project_convex_hull(p, words.x, words.y, words.z != 0u);
}
