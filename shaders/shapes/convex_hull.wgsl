#import shapes/polyhedron

// A convex hull from its faces in `shape_data` (src/gpu/layout.rs, ShapeData): `count`
// faces from entry `first`, four entries each: the plane (unit normal, offset) and the corners
// a, b, c relative to the hull's anchor. As for the wedges, an inside point projects onto the
// nearest face plane and an outside one onto the nearest triangle; only faces that see the
// point (plane distance ≥ 0) and whose plane is nearer than the best triangle so far can hold
// it, so the others are skipped. A hull without interior (a polygon, segment or point) is
// never inside, and its normal is its first face's. Twin: src/reference/convex_hull.rs.
fn project_convex_hull(p: vec3<f32>, first: u32, count: u32, solid: bool) -> Projection {
    var s = convex_start();
    if solid {
        for (var k = 0u; k < count; k++) {
            let plane = shape_data[first + 4u * k];
            let d = dot(p, plane.xyz) - plane.w;
            if d > s.plane {
                s.plane = d;
                s.normal = plane.xyz;
            }
        }
        if s.plane < 0.0 {
            return convex_finish(s, p);
        }
    }
    for (var k = 0u; k < count; k++) {
        let at = first + 4u * k;
        let plane = shape_data[at];
        let d = dot(p, plane.xyz) - plane.w;
        if solid && (d < 0.0 || d * d >= s.dist2) {
            continue;
        }
        convex_triangle(&s, p, plane.xyz, shape_data[at + 1u].xyz, shape_data[at + 2u].xyz, shape_data[at + 3u].xyz);
    }
    if solid {
        return convex_finish(s, p);
    }
    return Projection(s.point, false, shape_data[first].xyz);
}

// Its record (GpuShape::from_shape): p0.xyz = bit patterns of the first face entry, the face
// count and 1 for a solid hull.
fn project_convex_hull_record(s: Shape, p: vec3<f32>) -> Projection {
    let words = bitcast<vec3<u32>>(s.p0.xyz);
    return project_convex_hull(p, words.x, words.y, words.z != 0u);
}
