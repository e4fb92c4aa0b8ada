// Walk decisions of a lane alone (see shared/walk.wgsl).
#import shared/walk

fn any_lane(wanted: bool) -> bool {
    return wanted;
}

fn step_node(wanted: bool) -> bool {
    return wanted;
}

// A lane starts its walk where it would alone.
fn shared_start(node: u32, wanted: bool) -> u32 {
    return node;
}

fn choose_children(open_left: bool, open_right: bool, left_nearer: bool) -> u32 {
    return select(0u, OPEN_LEFT, open_left) | select(0u, OPEN_RIGHT, open_right)
        | select(0u, LEFT_FIRST, left_nearer);
}

fn vote_step(wanted: bool, open_left: bool, open_right: bool, left_nearer: bool) -> u32 {
    return choose_children(open_left, open_right, left_nearer) | select(0u, WANTED, wanted);
}
