// What the 8 lanes of a subgroup read of a resident scene together (query_subgroup.wgsl,
// bodies_subgroup.wgsl): a shape or a node's children loaded once between them, a texel a
// lane, then broadcast. Every lane must be active where these are called.
#import query_walk
#import shared/subgroup

// A shape: six texels, lanes 0–5 fetching one each.
fn load_shape(i: u32) -> Shape {
    let t = texel(6u * i + min(lane, 5u));
    let head = subgroupBroadcast(t, 0u);
    return Shape(head.x, head.y, 0u, 0u,
        bitcast<vec4<f32>>(subgroupBroadcast(t, 1u)),
        bitcast<vec4<f32>>(subgroupBroadcast(t, 2u)),
        bitcast<vec4<f32>>(subgroupBroadcast(t, 3u)),
        bitcast<vec4<f32>>(subgroupBroadcast(t, 4u)),
        bitcast<vec4<f32>>(subgroupBroadcast(t, 5u)));
}

// A node's two children: its first four texels, lanes 0–3 fetching one each.
fn load_children(node: u32) -> array<BvhChild, 2> {
    let t = texel(node_texel(node) + (lane & 3u));
    return array<BvhChild, 2>(
        child_of(subgroupBroadcast(t, 0u), subgroupBroadcast(t, 1u)),
        child_of(subgroupBroadcast(t, 2u), subgroupBroadcast(t, 3u)),
    );
}
