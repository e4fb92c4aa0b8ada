#import shapes/polyhedron

// A convex hull from its faces in `shape_data` (src/gpu/layout.rs, ShapeData): `count`
// triangles from entry `first`, three entries each, (a, n.x), (b, n.y), (c, n.z) relative to
// the hull's anchor. As for the wedges, an inside point projects onto the nearest face plane
// and an outside one onto the nearest triangle; a hull without interior (a polygon, segment
// or point) is never inside, and its normal is its first face's.
// Twin: src/reference/convex_hull.rs.
fn project_convex_hull(p: vec3<f32>, first: u32, count: u32, solid: bool) -> Projection {
    var s = convex_start();
    for (var k = 0u; k < count; k++) {
        let at = first + 3u * k;
        let a = shape_data[at];
        let b = shape_data[at + 1u];
        let c = shape_data[at + 2u];
        let n = vec3<f32>(a.w, b.w, c.w);
        if solid {
            convex_plane(&s, p, n, a.xyz);
        }
        convex_triangle(&s, p, n, a.xyz, b.xyz, c.xyz);
    }
    if solid {
        return convex_finish(s, p);
    }
    let n = shape_data[first];
    let flat_normal = vec3<f32>(n.w, shape_data[first + 1u].w, shape_data[first + 2u].w);
    return Projection(s.point, false, flat_normal);
}

// Its record (GpuShape::from_shape): p0.xyz = bit patterns of the first face entry, the face
// count and 1 for a solid hull.
fn project_convex_hull_record(s: Shape, p: vec3<f32>) -> Projection {
    let words = bitcast<vec3<u32>>(s.p0.xyz);
    return project_convex_hull(p, words.x, words.y, words.z != 0u);
}
