// Nearest triangle, one lane at a time: every adapter (see mesh_walk.wgsl).
#import mesh_walk
#import winding_walk
#import pseudonormal
#import shared/one_lane

fn load_node(node: u32) -> array<vec4<u32>, 4> {
    let at = node_texel(node);
    return array<vec4<u32>, 4>(texel(at), texel(at + 1u), texel(at + 2u), texel(at + 3u));
}

// Triangles `slot` and, if `both`, `slot + 1` (records 3..6 are zero otherwise).
fn load_triangle_pair(slot: u32, both: bool) -> array<vec4<f32>, 6> {
    if TRIANGLE_RECORDS == INDEXED_RECORDS {
        let a = triangle_records(slot);
        var b = array<vec4<f32>, 3>(vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0));
        if both {
            b = triangle_records(slot + 1u);
        }
        return array<vec4<f32>, 6>(a[0], a[1], a[2], b[0], b[1], b[2]);
    }
    let a = triangle_records(slot);
    var t = array<vec4<f32>, 6>(a[0], a[1], a[2], vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0));
    if both {
        let b = triangle_records(slot + 1u);
        t[3] = b[0];
        t[4] = b[1];
        t[5] = b[2];
    }
    return t;
}

// Node `node`'s two clusters (winding_walk.wgsl): words 12 node .. + 12 of the sign data.
fn load_clusters(node: u32) -> array<Cluster, 2> {
    let at = 3u * node;
    return node_clusters(array<vec4<f32>, 3>(bitcast<vec4<f32>>(sign_data[at]), bitcast<vec4<f32>>(sign_data[at + 1u]),
        bitcast<vec4<f32>>(sign_data[at + 2u])));
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn nearest_triangle(
    @builtin(workgroup_id) group: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(local_invocation_index) local: u32,
) {
    let row = round_row(row_of(group, groups, local));
    if !row_in_chunk(row) {
        return;
    }
    let p = load_point(row);
    if !is_finite_vec3(p) {
        write_nan_row(output_row(row));
        return;
    }
    let walk = walk_for(p, round_seed(row), box_start_node(row), walk_bound2(row));
    write_row(output_row(row), p, walk, nearest_slot(walk.point, walk.seed, true, walk.start, walk.bound2));
}

// Signs the answered rows of a chunk by winding number (after the nearest-triangle rounds).
@compute @workgroup_size(WORKGROUP_SIZE)
fn winding_signs(
    @builtin(workgroup_id) group: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(local_invocation_index) local: u32,
) {
    let row = row_of(group, groups, local);
    if !row_in_chunk(row) || hit_shape(output_row(row)) < 0 {
        return;
    }
    sign_row(output_row(row), sign_winding_number(load_point(row), true));
}

// This part's winding number at each row's point, as the row's distance (FIELDS is the
// distance alone), at parts_accuracy(): a mesh in parts is signed by the sum of its parts'
// (GpuMesh, as WindingTree::is_inside decides over the same parts).
@compute @workgroup_size(WORKGROUP_SIZE)
fn winding_numbers(
    @builtin(workgroup_id) group: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(local_invocation_index) local: u32,
) {
    let row = row_of(group, groups, local);
    if !row_in_chunk(row) {
        return;
    }
    let p = load_point(row);
    set_hit_distance(output_row(row), winding_number(p, is_finite_vec3(p), parts_accuracy()));
}
