// Point queries, one lane at a time: `paired` (point i against shape i) and `nearest` (nearest
// shape of a scene), on every adapter (query_walk.wgsl).
#import query_walk
#import shared/one_lane
#import shared/lane_loads

// `paired`'s shapes, one a row.
@group(0) @binding(1) var<storage, read> shapes: array<Shape>;

@compute @workgroup_size(WORKGROUP_SIZE)
fn paired(
    @builtin(workgroup_id) group: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(local_invocation_index) local: u32,
) {
    let row = row_of(group, groups, local);
    if row >= params.row_count {
        return;
    }
    let p = load_point(row);
    if !is_finite_vec3(p) {
        write_hit(row, non_finite_hit());
        return;
    }
    // Where points are texels, so is each row's shape (`texels`, six a row, as a scene's).
    var s: Shape;
    if POINT_TEXELS != 0u {
        s = load_shape(row);
    } else {
        s = shapes[row];
    }
    let kind = select(ONLY_KIND, s.kind, ONLY_KIND == ANY_KIND);
    write_hit(row, query_shape(kind, s, params.first_row + row, p));
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn nearest(
    @builtin(workgroup_id) group: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(local_invocation_index) local: u32,
) {
    let row = row_of(group, groups, local);
    if row >= params.row_count {
        return;
    }
    let p = load_point(row);
    if !is_finite_vec3(p) || params.shape_count == 0u {
        write_hit(row, non_finite_hit());
        return;
    }
    write_hit(row, nearest_hit(p, true));
}
