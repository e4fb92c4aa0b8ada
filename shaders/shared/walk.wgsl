// BVH walks (mesh_walk.wgsl, query_walk.wgsl) take their decisions through two functions that
// each kernel gets from one of two files: shared/one_lane.wgsl (every lane for itself) or
// shared/subgroup.wgsl (the 8 lanes of a subgroup together, so they take every branch
// together and can share their loads).
//   any_lane(wanted): whether to open the entry at hand.
//   step_node(wanted): whether to run a node step for an entry the lanes may not want: the
//   vote where skipping the step saves its loads (one lane); always where every statement
//   runs anyway (the subgroup kernels of software adapters), the vote folded into the
//   children's (`wanted && ...`).
//   choose_children(open_left, open_right, left_nearer): which children to open
//   (OPEN_LEFT, OPEN_RIGHT) and whether the left one goes first (LEFT_FIRST).
//   vote_step(wanted, open_left, open_right, left_nearer): choose_children's answer, and
//   WANTED when any lane wants the entry at hand, in one vote.

// The entries a walk's stack may hold: STACK_SIZE, fewer where tests set it
// (`EngineOptions::walk_stack_entries`) to see an overflow reported.
override STACK_LIMIT: u32 = STACK_SIZE;

const OPEN_LEFT: u32 = 1u;
const OPEN_RIGHT: u32 = 2u;
const LEFT_FIRST: u32 = 4u;
const WANTED: u32 = 8u;
