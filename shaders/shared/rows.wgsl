// Threads per workgroup of every kernel; the host reads it back from naga, so it is stated
// only here.
const WORKGROUP_SIZE: u32 = 256u;

// Rows are laid out over a 2-D grid of workgroups so a chunk may exceed 65 535 workgroups.
fn row_of(group: vec3<u32>, groups: vec3<u32>, local: u32) -> u32 {
    return (group.y * groups.x + group.x) * WORKGROUP_SIZE + local;
}
