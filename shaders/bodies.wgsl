// Bodies against shapes (SPEC §9), one lane a body (body_walk.wgsl): `body_nearest` finds the
// nearest shape of a resident scene, `body_paired` answers body i against target i.
#import body_walk
#import shared/one_lane
#import shared/lane_loads

@compute @workgroup_size(WORKGROUP_SIZE)
fn body_nearest(
    @builtin(workgroup_id) group: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(local_invocation_index) local: u32,
) {
    let row = row_of(group, groups, local);
    if row >= params.row_count {
        return;
    }
    let record = bodies[row];
    let origin = record.anchor.xyz;
    if !is_finite_record(record) || params.shape_count == 0u {
        write_body_hit(row, no_body_hit(), origin);
        return;
    }
    write_body_hit(row, nearest_body(record, origin, true), origin);
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn body_paired(
    @builtin(workgroup_id) group: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(local_invocation_index) local: u32,
) {
    let row = row_of(group, groups, local);
    if row >= params.row_count {
        return;
    }
    let record = bodies[2u * row];
    let other = bodies[2u * row + 1u];
    let origin = record.anchor.xyz;
    if !is_finite_record(record) || !is_finite_record(other) {
        write_body_hit(row, no_body_hit(), origin);
        return;
    }
    let body = convex_of(record, origin, true);
    let extent = body_box(body);
    let body_size = max(length(extent[0]), length(extent[1]));
    let contact = target_contact(body, body_size, other, origin, true, true, F32_BIG);
    write_body_hit(row, BodyHit(contact, i32(params.first_row + row)), origin);
}
