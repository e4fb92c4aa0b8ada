// What a lane walking alone reads of a resident scene (query.wgsl, bodies.wgsl): shapes,
// hull faces and BVH children, each from texels (`shared/texels.wgsl`, `query_walk.wgsl`).
#import query_walk
#import shared/own_hull_faces

// One lane at a time: every shape is the lane's own.
fn load_shape(i: u32) -> Shape {
    return load_own_shape(i);
}

fn load_children(node: u32) -> array<BvhChild, 2> {
    let at = node_texel(node);
    return array<BvhChild, 2>(child_of(texel(at), texel(at + 1u)), child_of(texel(at + 2u), texel(at + 3u)));
}
