// Convex hull faces a lane reads alone (query.wgsl, both body kernels: GJK and EPA run a body
// each, so their lanes leave their loops apart and cannot share loads).
#import query_walk

// A convex hull face's plane, and the whole face (plane, a, b, c): texels of a resident scene,
// else `shape_data`.
fn load_hull_plane(at: u32) -> vec4<f32> {
    let first = hull_faces_texel();
    if first != 0u {
        return bitcast<vec4<f32>>(texel(first + at));
    }
    return shape_data[at];
}

fn load_hull_face(at: u32) -> array<vec4<f32>, 4> {
    let first = hull_faces_texel();
    if first != 0u {
        let t = first + at;
        return array<vec4<f32>, 4>(bitcast<vec4<f32>>(texel(t)), bitcast<vec4<f32>>(texel(t + 1u)),
            bitcast<vec4<f32>>(texel(t + 2u)), bitcast<vec4<f32>>(texel(t + 3u)));
    }
    return array<vec4<f32>, 4>(shape_data[at], shape_data[at + 1u], shape_data[at + 2u], shape_data[at + 3u]);
}
