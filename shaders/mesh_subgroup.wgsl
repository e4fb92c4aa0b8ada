// `nearest_triangle` for adapters whose subgroups are 8 lanes wide (lavapipe): the lanes of a
// subgroup walk the BVH together, a node opened when any lane needs it, and load each node
// and leaf once between them (a texel or a word a lane, then broadcast), where the lane-by-lane
// loads of software adapters would load it once per lane (shared/subgroup.wgsl).
#import mesh_walk
#import winding_walk
#import pseudonormal
#import shared/subgroup

// A node: four texels, lanes 0–3 fetching one each.
fn load_node(node: u32) -> array<vec4<u32>, 4> {
    let t = texel(node_texel(node) + (lane & 3u));
    return array<vec4<u32>, 4>(subgroupBroadcast(t, 0u), subgroupBroadcast(t, 1u), subgroupBroadcast(t, 2u),
        subgroupBroadcast(t, 3u));
}

// Triangles `slot` and `slot + 1`: six texels, lanes 0–5 fetching one each (the second is
// garbage unless `both`).
fn load_triangle_pair(slot: u32, both: bool) -> array<vec4<f32>, 6> {
    if TRIANGLE_RECORDS == INDEXED_RECORDS {
        return load_indexed_triangle_pair(slot);
    }
    let t = texel(3u * slot + min(lane, 5u));
    return array<vec4<f32>, 6>(
        bitcast<vec4<f32>>(subgroupBroadcast(t, 0u)),
        bitcast<vec4<f32>>(subgroupBroadcast(t, 1u)),
        bitcast<vec4<f32>>(subgroupBroadcast(t, 2u)),
        bitcast<vec4<f32>>(subgroupBroadcast(t, 3u)),
        bitcast<vec4<f32>>(subgroupBroadcast(t, 4u)),
        bitcast<vec4<f32>>(subgroupBroadcast(t, 5u)),
    );
}

// The same from indexed records: the pair's 12 record words (vertex indices and normals) from
// the four texels holding them, lanes 0–3 fetching one each, then its six corners, lanes 0–5
// fetching one vertex texel each, each set broadcast.
fn load_indexed_triangle_pair(slot: u32) -> array<vec4<f32>, 6> {
    let t = texel(((3u * slot) >> 1u) + (lane & 3u));
    let h = array<vec4<u32>, 4>(subgroupBroadcast(t, 0u), subgroupBroadcast(t, 1u), subgroupBroadcast(t, 2u),
        subgroupBroadcast(t, 3u));
    // An odd slot's record starts at the third word of its first texel.
    let odd = (slot & 1u) != 0u;
    let r0 = select(h[0], vec4<u32>(h[0].zw, h[1].xy), odd);
    let r1 = select(h[1], vec4<u32>(h[1].zw, h[2].xy), odd);
    let r2 = select(h[2], vec4<u32>(h[2].zw, h[3].xy), odd);
    // Lane k < 6 fetches corner k % 3 of triangle k / 3.
    var ids = array<u32, 6>(r0.x, r0.y, r0.z, r1.z, r1.w, r2.x);
    let v = texel(vertex_texel(ids[min(lane, 5u)]));
    let c = array<vec3<f32>, 6>(
        bitcast<vec3<f32>>(subgroupBroadcast(v, 0u).xyz),
        bitcast<vec3<f32>>(subgroupBroadcast(v, 1u).xyz),
        bitcast<vec3<f32>>(subgroupBroadcast(v, 2u).xyz),
        bitcast<vec3<f32>>(subgroupBroadcast(v, 3u).xyz),
        bitcast<vec3<f32>>(subgroupBroadcast(v, 4u).xyz),
        bitcast<vec3<f32>>(subgroupBroadcast(v, 5u).xyz),
    );
    let a = packed_from_corners(c[0], c[1], c[2], bitcast<vec3<f32>>(vec3<u32>(r0.w, r1.xy)));
    let b = packed_from_corners(c[3], c[4], c[5], bitcast<vec3<f32>>(r2.yzw));
    return array<vec4<f32>, 6>(a[0], a[1], a[2], b[0], b[1], b[2]);
}

// Node `node`'s two clusters (winding_walk.wgsl): twelve words, two a lane (the last four
// lanes' second words are the next node's, unused).
fn load_clusters(node: u32) -> array<Cluster, 2> {
    let at = 12u * node + lane;
    let w = lanes_16(sign_word(at), sign_word(at + 8u));
    return node_clusters(array<vec4<f32>, 3>(bitcast<vec4<f32>>(w[0]), bitcast<vec4<f32>>(w[1]), bitcast<vec4<f32>>(w[2])));
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn nearest_triangle_subgroup(
    @builtin(workgroup_id) group: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(local_invocation_index) local: u32,
    @builtin(subgroup_invocation_id) subgroup_lane: u32,
) {
    lane = subgroup_lane;
    let row = round_row(row_of(group, groups, local));
    let in_range = row_in_chunk(row);
    var p = vec3<f32>(0.0);
    var seed = NO_SLOT;
    var start = 0u;
    var bound2 = 0.0;
    if in_range {
        p = load_point(row);
        seed = round_seed(row);
        start = box_start_node(row);
        bound2 = walk_bound2(row);
    }
    let wanted = in_range && is_finite_vec3(p);
    let walk = walk_for(p, seed, start, bound2);
    let slot = nearest_slot(walk.point, walk.seed, wanted, shared_start(walk.start, wanted), walk.bound2);
    if !in_range {
        return;
    }
    if !wanted {
        write_nan_row(output_row(row));
        return;
    }
    write_row(output_row(row), p, walk, slot);
}

// winding_signs (mesh.wgsl) by whole subgroups.
@compute @workgroup_size(WORKGROUP_SIZE)
fn winding_signs_subgroup(
    @builtin(workgroup_id) group: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(local_invocation_index) local: u32,
    @builtin(subgroup_invocation_id) subgroup_lane: u32,
) {
    lane = subgroup_lane;
    let row = row_of(group, groups, local);
    var p = vec3<f32>(0.0);
    var wanted = false;
    if row_in_chunk(row) {
        p = load_point(row);
        wanted = hit_shape(output_row(row)) >= 0;
    }
    let w = sign_winding_number(p, wanted);
    if wanted {
        sign_row(output_row(row), w);
    }
}

// winding_numbers (mesh.wgsl) by whole subgroups.
@compute @workgroup_size(WORKGROUP_SIZE)
fn winding_numbers_subgroup(
    @builtin(workgroup_id) group: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(local_invocation_index) local: u32,
    @builtin(subgroup_invocation_id) subgroup_lane: u32,
) {
    lane = subgroup_lane;
    let row = row_of(group, groups, local);
    let in_range = row_in_chunk(row);
    var p = vec3<f32>(0.0);
    if in_range {
        p = load_point(row);
    }
    let w = winding_number(p, in_range && is_finite_vec3(p), parts_accuracy());
    if in_range {
        set_hit_distance(output_row(row), w);
    }
}
