// `nearest_triangle` for adapters whose subgroups are 8 lanes wide (lavapipe): the lanes of a
// subgroup walk the BVH together, a node opened when any lane needs it, and load each node
// and leaf once between them (a word a lane, then broadcast), where the lane-by-lane loads of
// software adapters would load it once per lane. Every branch below depends only on values
// the lanes share, so all 8 lanes stay active and every broadcast reads a live lane.
#import mesh

// Word `i` of the nodes (4 vec4 a node).
fn node_word(i: u32) -> u32 {
    return nodes[i >> 2u][i & 3u];
}

fn triangle_word(i: u32) -> f32 {
    return triangles[i >> 2u][i & 3u];
}

// Lane k's vector of words k, k + 1, k + 2, k + 3 of what the lanes loaded, k = 0 or 4.
fn lanes_0_3(w: u32) -> vec4<u32> {
    return vec4<u32>(subgroupBroadcast(w, 0u), subgroupBroadcast(w, 1u), subgroupBroadcast(w, 2u), subgroupBroadcast(w, 3u));
}
fn lanes_4_7(w: u32) -> vec4<u32> {
    return vec4<u32>(subgroupBroadcast(w, 4u), subgroupBroadcast(w, 5u), subgroupBroadcast(w, 6u), subgroupBroadcast(w, 7u));
}
fn lanes_0_3_f(w: f32) -> vec4<f32> {
    return vec4<f32>(subgroupBroadcast(w, 0u), subgroupBroadcast(w, 1u), subgroupBroadcast(w, 2u), subgroupBroadcast(w, 3u));
}
fn lanes_4_7_f(w: f32) -> vec4<f32> {
    return vec4<f32>(subgroupBroadcast(w, 4u), subgroupBroadcast(w, 5u), subgroupBroadcast(w, 6u), subgroupBroadcast(w, 7u));
}

// The sum of `v` over the 8 lanes, in every lane.
fn lanes_sum(v: u32) -> u32 {
    return subgroupBroadcast(v, 0u) + subgroupBroadcast(v, 1u) + subgroupBroadcast(v, 2u)
        + subgroupBroadcast(v, 3u) + subgroupBroadcast(v, 4u) + subgroupBroadcast(v, 5u)
        + subgroupBroadcast(v, 6u) + subgroupBroadcast(v, 7u);
}

// Squared distance from p to the triangle of records r0, r1, r2.
fn triangle_distance2(r0: vec4<f32>, r1: vec4<f32>, r2: vec4<f32>, p: vec3<f32>) -> f32 {
    let proj = project_triangle(p - r0.xyz, r1.xyz, r2.xyz, vec3<f32>(r0.w, r1.w, r2.w));
    let delta = p - (proj.point + r0.xyz);
    return dot(delta, delta);
}

// nearest_slot for the subgroup: lanes with `wanted` false (no row, or a non-finite point)
// walk along and never ask for anything.
fn nearest_slot_subgroup(p: vec3<f32>, seed: u32, wanted: bool, lane: u32) -> u32 {
    var found = false;
    var best_slot = 0u;
    var best_distance2 = 0.0;
    if !wanted {
        found = true;
        best_distance2 = -1.0;
    } else if seed != NO_SLOT {
        let delta = p - triangle_point(seed, p).point;
        found = true;
        best_slot = seed;
        best_distance2 = dot(delta, delta);
    }
    var stack: array<MeshStackEntry, STACK_SIZE>;
    var top = 0u;
    var current = MeshStackEntry(kind_ranges[KIND_COUNT].x << LEAF_COUNT_BITS, 0.0);
    let half_scale = bitcast<f32>(kind_ranges[KIND_COUNT].w);
    loop {
        while current.child != TRAVERSAL_END && (current.child & ((1u << LEAF_COUNT_BITS) - 1u)) == 0u {
            var pop = true;
            if lanes_sum(u32(!found || current.distance2 <= best_distance2)) != 0u {
                let at = 16u * (current.child >> LEAF_COUNT_BITS) + lane;
                let heads = node_word(at);
                let shapes = node_word(at + 8u);
                let left = child_entry(lanes_0_3(heads), lanes_0_3(shapes), half_scale, p);
                let right = child_entry(lanes_4_7(heads), lanes_4_7(shapes), half_scale, p);
                let want_left = !found || left.distance2 <= best_distance2;
                let want_right = !found || right.distance2 <= best_distance2;
                let left_nearer = left.distance2 <= right.distance2;
                // Four tallies of at most 8 in one sum: lanes wanting the left child, the
                // right child, and those of them nearer the left or the right.
                let tally = lanes_sum(u32(want_left) | (u32(want_right) << 4u)
                    | (u32(want_left && (!want_right || left_nearer)) << 8u)
                    | (u32(want_right && (!want_left || !left_nearer)) << 12u));
                let any_left = (tally & 0xfu) != 0u;
                let any_right = (tally & 0xf0u) != 0u;
                if any_left || any_right {
                    var near = left;
                    var far = right;
                    var far_wanted = any_right;
                    if !any_left || (any_right && ((tally >> 12u) & 0xfu) > ((tally >> 8u) & 0xfu)) {
                        near = right;
                        far = left;
                        far_wanted = any_left;
                    }
                    if far_wanted {
                        if top == STACK_SIZE {
                            return OVERFLOW_SLOT;
                        }
                        stack[top] = far;
                        top += 1u;
                    }
                    current = near;
                    pop = false;
                }
            }
            if pop {
                if top == 0u {
                    current.child = TRAVERSAL_END;
                } else {
                    top -= 1u;
                    current = stack[top];
                }
            }
        }
        if current.child == TRAVERSAL_END {
            break;
        }
        // `current` is a leaf; its triangles are read two at a time (24 words, 3 a lane).
        if lanes_sum(u32(!found || current.distance2 <= best_distance2)) != 0u {
            let first = current.child >> LEAF_COUNT_BITS;
            let count = current.child & ((1u << LEAF_COUNT_BITS) - 1u);
            var leaf_slot = first;
            var leaf_distance2 = 0.0;
            for (var k = 0u; k < count; k += 2u) {
                let at = 12u * (first + k) + lane;
                let w0 = triangle_word(at);
                let w1 = triangle_word(at + 8u);
                let w2 = triangle_word(at + 16u);
                let a = triangle_distance2(lanes_0_3_f(w0), lanes_4_7_f(w0), lanes_0_3_f(w1), p);
                if k == 0u || a < leaf_distance2 {
                    leaf_slot = first + k;
                    leaf_distance2 = a;
                }
                if k + 1u < count {
                    let b = triangle_distance2(lanes_4_7_f(w1), lanes_0_3_f(w2), lanes_4_7_f(w2), p);
                    if b < leaf_distance2 {
                        leaf_slot = first + k + 1u;
                        leaf_distance2 = b;
                    }
                }
            }
            if !found || leaf_distance2 < best_distance2
                || (leaf_distance2 == best_distance2
                    && scene_index(leaf_slot) < scene_index(best_slot)) {
                found = true;
                best_slot = leaf_slot;
                best_distance2 = leaf_distance2;
            }
        }
        if top == 0u {
            break;
        }
        top -= 1u;
        current = stack[top];
    }
    return best_slot;
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn nearest_triangle_subgroup(
    @builtin(workgroup_id) group: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(local_invocation_index) local: u32,
    @builtin(subgroup_invocation_id) lane: u32,
) {
    let row = round_row(row_of(group, groups, local));
    let in_range = row < params.row_count;
    var p = vec3<f32>(0.0);
    var seed = NO_SLOT;
    if in_range {
        p = load_point(row);
        seed = round_seed(row);
    }
    let wanted = in_range && is_finite_vec3(p);
    let slot = nearest_slot_subgroup(p, seed, wanted, lane);
    if !in_range {
        return;
    }
    if !wanted {
        write_nan_row(row);
        return;
    }
    write_row(row, p, slot);
}
