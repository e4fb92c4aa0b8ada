// `body_nearest` for adapters whose subgroups are 8 lanes wide (lavapipe): the 8 bodies of a
// subgroup (neighbours in Morton order) walk the scene's BVH together, as the point queries of
// query_subgroup.wgsl do, loading each node and shape once between them; every candidate the
// walk reaches is answered by the lanes that asked for it, so they run one shape kind's narrow
// phase at a time. GJK and EPA run a body each, and read hull faces alone.
#import body_walk
#import shared/subgroup
#import shared/subgroup_loads
#import shared/own_hull_faces

@compute @workgroup_size(WORKGROUP_SIZE)
fn body_nearest_subgroup(
    @builtin(workgroup_id) group: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(local_invocation_index) local: u32,
    @builtin(subgroup_invocation_id) subgroup_lane: u32,
) {
    lane = subgroup_lane;
    let row = row_of(group, groups, local);
    let in_range = row < params.row_count;
    // Every lane takes part in the walk, so that every broadcast reads a live lane: one past
    // the rows walks as the last row, asking for nothing (nor does a non-finite body).
    let record = bodies[min(row, params.row_count - 1u)];
    let origin = record.anchor.xyz;
    let wanted = in_range && is_finite_record(record) && params.shape_count != 0u;
    let hit = nearest_body(record, origin, wanted);
    if !in_range {
        return;
    }
    if wanted {
        write_body_hit(row, hit, origin);
    } else {
        write_body_hit(row, no_body_hit(), origin);
    }
}
