// Point queries, one lane at a time: `paired` (point i against shape i) and `nearest` (nearest
// shape of a scene), on every adapter (query_walk.wgsl).
#import query_walk
#import shared/one_lane

// `paired`'s shapes, one a row.
@group(0) @binding(1) var<storage, read> shapes: array<Shape>;

// One lane at a time: every shape is the lane's own.
fn load_shape(i: u32) -> Shape {
    return load_own_shape(i);
}

// A convex hull face's plane, and the whole face (plane, a, b, c): texels of a resident scene,
// else `shape_data`.
fn load_hull_plane(at: u32) -> vec4<f32> {
    let first = hull_faces_texel();
    if first != 0u {
        return bitcast<vec4<f32>>(texel(first + at));
    }
    return shape_data[at];
}

fn load_hull_face(at: u32) -> array<vec4<f32>, 4> {
    let first = hull_faces_texel();
    if first != 0u {
        let t = first + at;
        return array<vec4<f32>, 4>(bitcast<vec4<f32>>(texel(t)), bitcast<vec4<f32>>(texel(t + 1u)),
            bitcast<vec4<f32>>(texel(t + 2u)), bitcast<vec4<f32>>(texel(t + 3u)));
    }
    return array<vec4<f32>, 4>(shape_data[at], shape_data[at + 1u], shape_data[at + 2u], shape_data[at + 3u]);
}

fn load_children(node: u32) -> array<BvhChild, 2> {
    let at = node_texel(node);
    return array<BvhChild, 2>(child_of(texel(at), texel(at + 1u)), child_of(texel(at + 2u), texel(at + 3u)));
}

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
