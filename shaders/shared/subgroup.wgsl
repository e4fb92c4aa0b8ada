// Walk decisions of a whole subgroup of exactly 8 lanes (see shared/walk.wgsl), and the
// broadcasts its kernels share loads with: on llvmpipe a broadcast from a constant lane is an
// extract and a splat, where a storage load inside control flow is a loop over the lanes, one
// per 32-bit word. Every decision is the same in all lanes, so all of them stay active and
// every broadcast reads a live lane.
#import shared/walk

// This lane's index in its subgroup, set by the entry point.
var<private> lane: u32;

// Words 0–3 or 4–7 of what lanes 0–7 loaded, as one vector in every lane.
fn lanes_0_3(w: u32) -> vec4<u32> {
    return vec4<u32>(
        subgroupBroadcast(w, 0u),
        subgroupBroadcast(w, 1u),
        subgroupBroadcast(w, 2u),
        subgroupBroadcast(w, 3u),
    );
}

fn lanes_4_7(w: u32) -> vec4<u32> {
    return vec4<u32>(
        subgroupBroadcast(w, 4u),
        subgroupBroadcast(w, 5u),
        subgroupBroadcast(w, 6u),
        subgroupBroadcast(w, 7u),
    );
}

// A 16-word record the lanes loaded two words each (words `lane` and `8 + lane`), as four
// vectors in every lane.
fn lanes_16(w0: u32, w1: u32) -> array<vec4<u32>, 4> {
    return array<vec4<u32>, 4>(lanes_0_3(w0), lanes_4_7(w0), lanes_0_3(w1), lanes_4_7(w1));
}

// The sum of `v` over the 8 lanes, in every lane.
fn lanes_sum(v: u32) -> u32 {
    return subgroupBroadcast(v, 0u) + subgroupBroadcast(v, 1u) + subgroupBroadcast(v, 2u)
        + subgroupBroadcast(v, 3u) + subgroupBroadcast(v, 4u) + subgroupBroadcast(v, 5u)
        + subgroupBroadcast(v, 6u) + subgroupBroadcast(v, 7u);
}

// The least of `v` over the 8 lanes, in every lane.
fn lanes_min(v: u32) -> u32 {
    return min(min(min(subgroupBroadcast(v, 0u), subgroupBroadcast(v, 1u)), min(subgroupBroadcast(v, 2u),
        subgroupBroadcast(v, 3u))), min(min(subgroupBroadcast(v, 4u), subgroupBroadcast(v, 5u)),
        min(subgroupBroadcast(v, 6u), subgroupBroadcast(v, 7u))));
}

// The node the lanes' walk starts at: the one every lane that walks (`wanted`) would start at
// alone, or the root (0) where they differ, whose subtree holds all of theirs.
fn shared_start(node: u32, wanted: bool) -> u32 {
    let first = lanes_min(select(0xffffffffu, node, wanted));
    if first == 0xffffffffu || lanes_sum(u32(wanted && node != first)) != 0u {
        return 0u;
    }
    return first;
}

// Open what any lane wants.
fn any_lane(wanted: bool) -> bool {
    return lanes_sum(u32(wanted)) != 0u;
}

// Every node step runs: Mesa 22.3's llvmpipe runs a skipped step's body all the same, masked,
// so a vote here would only add to it, and Mesa 25's skips a body no lane runs by itself
// (docs/PERF.md: "One vote a mesh step", "Mesa 25's lavapipe").
fn step_node(wanted: bool) -> bool {
    return true;
}

// Open a child when any lane wants it; the one more lanes find nearer goes first.
fn choose_children(open_left: bool, open_right: bool, left_nearer: bool) -> u32 {
    return vote_step(false, open_left, open_right, left_nearer);
}

// choose_children's answer and WANTED (any lane wants the entry) from one 8-lane sum.
fn vote_step(wanted: bool, open_left: bool, open_right: bool, left_nearer: bool) -> u32 {
    // Five tallies of at most 8 in one sum: lanes wanting the left child, the right child,
    // those of them nearer the left or the right, and lanes wanting the entry.
    let tally = lanes_sum(u32(open_left) | (u32(open_right) << 4u)
        | (u32(open_left && (!open_right || left_nearer)) << 8u)
        | (u32(open_right && (!open_left || !left_nearer)) << 12u)
        | (u32(wanted) << 16u));
    return select(0u, OPEN_LEFT, (tally & 0xfu) != 0u)
        | select(0u, OPEN_RIGHT, (tally & 0xf0u) != 0u)
        | select(0u, LEFT_FIRST, ((tally >> 12u) & 0xfu) <= ((tally >> 8u) & 0xfu))
        | select(0u, WANTED, (tally & 0xf0000u) != 0u);
}
