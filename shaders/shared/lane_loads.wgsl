// What a lane walking alone reads of a resident scene (query.wgsl, bodies.wgsl): shapes,
// hull faces and BVH children, each from texels (`shared/texels.wgsl`, `query_walk.wgsl`).
#import query_walk

// One lane at a time: every shape is the lane's own.
fn load_shape(i: u32) -> Shape {
    return load_own_shape(i);
}

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

fn load_children(node: u32) -> array<BvhChild, 2> {
    let at = node_texel(node);
    return array<BvhChild, 2>(child_of(texel(at), texel(at + 1u)), child_of(texel(at + 2u), texel(at + 3u)));
}
