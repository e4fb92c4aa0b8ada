// `nearest_triangle` for adapters whose subgroups are 8 lanes wide (lavapipe): the lanes of a
// subgroup walk the BVH together, a node opened when any lane needs it, and load each node
// and leaf once between them (a texel or a word a lane, then broadcast), where the lane-by-lane
// loads of software adapters would load it once per lane (shared/subgroup.wgsl).
#import mesh_walk
#import winding_walk
#import pseudonormal
#import shared/subgroup

// Word `i` of the sign data (4 words a vec4).
fn winding_word(i: u32) -> u32 {
    return sign_data[i >> 2u][i & 3u];
}

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

// The same from indexed records: the pair's 12 record words (vertex indices and normals), 2 a
// lane, then its six corners' 18 coordinates, 3 a lane, each set broadcast.
fn load_indexed_triangle_pair(slot: u32) -> array<vec4<f32>, 6> {
    let at = INDEXED_RECORD_WORDS * slot + lane;
    let record_words = lanes_16(triangle_word(at), triangle_word(at + 8u));
    // Words 0–5 and 6–11: triangle 0's and 1's vertex indices and normal.
    var words = array<u32, 12>(
        record_words[0].x, record_words[0].y, record_words[0].z, record_words[0].w,
        record_words[1].x, record_words[1].y, record_words[1].z, record_words[1].w,
        record_words[2].x, record_words[2].y, record_words[2].z, record_words[2].w,
    );
    // Coordinate word k is component k % 3 of corner k / 3 (triangle corner / 3).
    var coordinates = array<u32, 3>(0u, 0u, 0u);
    let vertices = index_table_word() + 2u * round_up_4(params.shape_count);
    for (var j = 0u; j < 3u; j++) {
        let k = min(lane + 8u * j, 17u);
        let corner = k / 3u;
        let vertex = words[INDEXED_RECORD_WORDS * (corner / 3u) + corner % 3u];
        coordinates[j] = triangle_word(vertices + 3u * vertex + k % 3u);
    }
    let c = lanes_24(coordinates[0], coordinates[1], coordinates[2]);
    let corner = array<vec3<f32>, 6>(
        c[0].xyz, vec3<f32>(c[0].w, c[1].xy), vec3<f32>(c[1].zw, c[2].x),
        c[2].yzw, c[3].xyz, vec3<f32>(c[3].w, c[4].xy),
    );
    let n0 = bitcast<vec3<f32>>(vec3<u32>(words[3], words[4], words[5]));
    let n1 = bitcast<vec3<f32>>(vec3<u32>(words[9], words[10], words[11]));
    let a = packed_from_corners(corner[0], corner[1], corner[2], n0);
    let b = packed_from_corners(corner[3], corner[4], corner[5], n1);
    return array<vec4<f32>, 6>(a[0], a[1], a[2], b[0], b[1], b[2]);
}

// A winding-tree node (after the one-vec4 header): 16 words, 2 a lane.
fn load_winding_node(node: u32) -> array<vec4<u32>, 4> {
    let at = 4u + 16u * node + lane;
    return lanes_16(winding_word(at), winding_word(at + 8u));
}

// Triangles `t` and `t + 1` of the winding tree, as load_triangle_pair.
fn load_winding_triangle_pair(t: u32, both: bool) -> array<vec4<f32>, 6> {
    let at = 4u * (winding_triangles + 3u * t) + lane;
    return lanes_24(winding_word(at), winding_word(at + 8u), winding_word(at + 16u));
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
    if in_range {
        p = load_point(row);
        seed = round_seed(row);
    }
    let wanted = in_range && is_finite_vec3(p);
    let slot = nearest_slot(p, seed, wanted);
    if !in_range {
        return;
    }
    if !wanted {
        write_nan_row(output_row(row));
        return;
    }
    write_row(output_row(row), p, slot);
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
