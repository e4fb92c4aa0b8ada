// `nearest_triangle` for adapters whose subgroups are 8 lanes wide (lavapipe): the lanes of a
// subgroup walk the BVH together, a node opened when any lane needs it, and load each node
// and leaf once between them (a word a lane, then broadcast), where the lane-by-lane loads of
// software adapters would load it once per lane (shared/subgroup.wgsl).
#import mesh_walk
#import winding_walk
#import shared/subgroup

// Word `i` of the nodes (4 vec4 a node).
fn node_word(i: u32) -> u32 {
    return nodes[i >> 2u][i & 3u];
}

fn triangle_word(i: u32) -> f32 {
    return triangles[i >> 2u][i & 3u];
}

fn lanes_0_3_f(w: f32) -> vec4<f32> {
    return bitcast<vec4<f32>>(lanes_0_3(bitcast<u32>(w)));
}

fn lanes_4_7_f(w: f32) -> vec4<f32> {
    return bitcast<vec4<f32>>(lanes_4_7(bitcast<u32>(w)));
}

fn load_node(node: u32) -> array<vec4<u32>, 4> {
    let at = 16u * node + lane;
    let heads = node_word(at);
    let shapes = node_word(at + 8u);
    return array<vec4<u32>, 4>(
        lanes_0_3(heads),
        lanes_4_7(heads),
        lanes_0_3(shapes),
        lanes_4_7(shapes),
    );
}

// Triangles `slot` and `slot + 1`: 24 words, 3 a lane (the second is garbage unless `both`).
fn load_triangle_pair(slot: u32, both: bool) -> array<vec4<f32>, 6> {
    let at = 12u * slot + lane;
    let w0 = triangle_word(at);
    let w1 = triangle_word(at + 8u);
    let w2 = triangle_word(at + 16u);
    return array<vec4<f32>, 6>(
        lanes_0_3_f(w0),
        lanes_4_7_f(w0),
        lanes_0_3_f(w1),
        lanes_4_7_f(w1),
        lanes_0_3_f(w2),
        lanes_4_7_f(w2),
    );
}

fn winding_word(i: u32) -> u32 {
    return winding[i >> 2u][i & 3u];
}

fn load_winding_node(node: u32) -> array<vec4<u32>, 4> {
    let at = 4u + 16u * node + lane;
    let centres = winding_word(at);
    let heads = winding_word(at + 8u);
    return array<vec4<u32>, 4>(
        lanes_0_3(centres),
        lanes_4_7(centres),
        lanes_0_3(heads),
        lanes_4_7(heads),
    );
}

// Triangles `t` and `t + 1` of the winding tree: 24 words, 3 a lane (the second is garbage
// unless `both`).
fn load_winding_triangle_pair(t: u32, both: bool) -> array<vec4<f32>, 6> {
    let at = 4u * (winding_triangles + 3u * t) + lane;
    let w0 = bitcast<f32>(winding_word(at));
    let w1 = bitcast<f32>(winding_word(at + 8u));
    let w2 = bitcast<f32>(winding_word(at + 16u));
    return array<vec4<f32>, 6>(
        lanes_0_3_f(w0),
        lanes_4_7_f(w0),
        lanes_0_3_f(w1),
        lanes_4_7_f(w1),
        lanes_0_3_f(w2),
        lanes_4_7_f(w2),
    );
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
    let in_range = row < params.row_count;
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
        write_nan_row(row);
        return;
    }
    write_row(row, p, slot);
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
    if row < params.row_count {
        p = load_point(row);
        wanted = hits[row].shape >= 0;
    }
    let w = winding_number(p, wanted);
    if wanted {
        sign_row(row, w);
    }
}
