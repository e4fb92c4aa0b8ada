// Threads per workgroup of every kernel, `WORKGROUP_SIZE`, comes from the prelude
// (src/gpu/shaders.rs): the host dispatches by it before any shader is composed.

// Rows are laid out over a 2-D grid of workgroups so a chunk may exceed 65 535 workgroups.
fn row_of(group: vec3<u32>, groups: vec3<u32>, local: u32) -> u32 {
    return (group.y * groups.x + group.x) * WORKGROUP_SIZE + local;
}
