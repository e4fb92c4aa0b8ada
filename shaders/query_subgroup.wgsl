// `nearest` for adapters whose subgroups are 8 lanes wide (lavapipe): the lanes of a subgroup
// walk the scene's BVH together and load each node and shape once between them, a texel a
// lane, then broadcast (shared/subgroup.wgsl), where the lane-by-lane loads of software
// adapters would load it once per lane.
#import query_walk
#import shared/subgroup
#import shared/subgroup_loads

fn shape_data_word(i: u32) -> u32 {
    return bitcast<u32>(shape_data[i >> 2u][i & 3u]);
}

// A convex hull face's plane and the whole face: a texel, and four (lanes 0–3 fetching one
// each), of a resident scene; else from `shape_data`, 4 words (lanes 0–3 loading) and 16 (2 a
// lane).
fn load_hull_plane(at: u32) -> vec4<f32> {
    let first = hull_faces_texel();
    if first != 0u {
        return bitcast<vec4<f32>>(texel(first + at));
    }
    return bitcast<vec4<f32>>(lanes_0_3(shape_data_word(4u * at + (lane & 3u))));
}

fn load_hull_face(at: u32) -> array<vec4<f32>, 4> {
    let first = hull_faces_texel();
    if first != 0u {
        let t = texel(first + at + (lane & 3u));
        return array<vec4<f32>, 4>(
            bitcast<vec4<f32>>(subgroupBroadcast(t, 0u)),
            bitcast<vec4<f32>>(subgroupBroadcast(t, 1u)),
            bitcast<vec4<f32>>(subgroupBroadcast(t, 2u)),
            bitcast<vec4<f32>>(subgroupBroadcast(t, 3u)),
        );
    }
    let r = lanes_16(shape_data_word(4u * at + lane), shape_data_word(4u * at + 8u + lane));
    return array<vec4<f32>, 4>(
        bitcast<vec4<f32>>(r[0]),
        bitcast<vec4<f32>>(r[1]),
        bitcast<vec4<f32>>(r[2]),
        bitcast<vec4<f32>>(r[3]),
    );
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn nearest_subgroup(
    @builtin(workgroup_id) group: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(local_invocation_index) local: u32,
    @builtin(subgroup_invocation_id) subgroup_lane: u32,
) {
    lane = subgroup_lane;
    let row = row_of(group, groups, local);
    let in_range = row < params.row_count;
    var p = vec3<f32>(0.0);
    if in_range {
        p = load_point(row);
    }
    let wanted = in_range && is_finite_vec3(p) && params.shape_count != 0u;
    let hit = nearest_hit(p, wanted);
    if !in_range {
        return;
    }
    if wanted {
        write_hit(row, hit);
    } else {
        write_hit(row, non_finite_hit());
    }
}
