// SDF grid samples computed on the device (src/gpu/grid.rs). With GRID_SAMPLES = 1 (a dense
// chunk) no points are uploaded, `params.grid` holds the chunk's header, a row is an
// invocation of the chunk's bricks, and its answer goes to its sample's C-order row. Header
// words: origin (moved like the mesh) 0–2, ny 3, spacing 4–6, nz 7, the chunk's box (first
// plane, first row, planes, rows) 8–11, log2 of a brick's depth in planes 12, bricks along y 13
// and along z 14.
//
// With GRID_SAMPLES = 2 (listed boxes, a narrow band's) the points buffer holds boxes of the
// grid, six floats each (first sample i, j, k; its extents, a byte each, as an integer; the
// node its rows' walks start at, counted from the root: whole numbers below 2^24, exact in
// f32, where bit patterns could be denormal; the square of the distance its walks are bounded
// by, 0 for none), and rows are eight
// a box, in Morton order: the centres of the box's 2 × 2 × 2 tiles of side `tile` (header word
// 8; a tile cut by the box's far faces has its samples' midpoint), answered in row order.
// Rows of tiles outside the box answer nothing. A row with no triangle within its box's bound
// (`walk_bound2`) answers +∞, with no shape.

override GRID_SAMPLES: u32 = 0u;
const DENSE_CHUNK: u32 = 1u;
const LISTED_BOXES: u32 = 2u;

const BRICK_BITS: u32 = 6u;

fn grid_word(i: u32) -> u32 {
    return params.grid[i >> 2u][i & 3u];
}

fn grid_float(i: u32) -> f32 {
    return bitcast<f32>(grid_word(i));
}

// Sample (i, j, k) of invocation `row`; `valid` is false for the parts of bricks outside the
// box.
struct GridSample {
    ijk: vec3<u32>,
    valid: bool,
}

fn grid_sample(row: u32) -> GridSample {
    let i_bits = grid_word(12u);
    let jk_bits = (BRICK_BITS - i_bits) / 2u;
    let brick = row >> BRICK_BITS;
    let inside = row & ((1u << BRICK_BITS) - 1u);
    let bricks_j = grid_word(13u);
    let bricks_k = grid_word(14u);
    let brick_ijk = vec3<u32>(brick / (bricks_j * bricks_k), (brick / bricks_k) % bricks_j, brick % bricks_k);
    // Morton order inside a brick: 8 neighbouring invocations (a subgroup on lavapipe, a seed
    // round's stride) are a 2 × 2 × 2 or 1 × 2 × 4 block (docs/PERF.md: 5 % on igea's grid
    // over C order inside bricks).
    var offset = vec3<u32>(0u);
    if i_bits == 2u {
        offset = vec3<u32>(
            ((inside >> 2u) & 1u) | ((inside >> 4u) & 2u),
            ((inside >> 1u) & 1u) | ((inside >> 3u) & 2u),
            (inside & 1u) | ((inside >> 2u) & 2u),
        );
    } else {
        offset = vec3<u32>(
            0u,
            ((inside >> 1u) & 1u) | ((inside >> 2u) & 2u) | ((inside >> 3u) & 4u),
            (inside & 1u) | ((inside >> 1u) & 2u) | ((inside >> 2u) & 4u),
        );
    }
    let local = vec3<u32>(brick_ijk.x << i_bits, brick_ijk.y << jk_bits, brick_ijk.z << jk_bits) + offset;
    let valid = local.x < grid_word(10u) && local.y < grid_word(11u) && local.z < grid_word(7u);
    return GridSample(local + vec3<u32>(grid_word(8u), grid_word(9u), 0u), valid);
}

// Tile (row & 7) of listed box row / 8: its position in samples (a half where a cut tile's
// midpoint falls between two), and whether the tile is inside the box.
struct BoxTile {
    index: vec3<f32>,
    valid: bool,
}

// Floats of a listed box's record.
const BOX_RECORD_FLOATS: u32 = 6u;

fn box_tile(row: u32) -> BoxTile {
    let at = BOX_RECORD_FLOATS * (row >> 3u);
    let first = vec3<u32>(u32(points[at]), u32(points[at + 1u]), u32(points[at + 2u]));
    let extent_bits = u32(points[at + 3u]);
    let extent = vec3<u32>(extent_bits & 0xffu, (extent_bits >> 8u) & 0xffu, extent_bits >> 16u);
    let tile = grid_word(8u);
    let offset = vec3<u32>((row >> 2u) & 1u, (row >> 1u) & 1u, row & 1u) * tile;
    let valid = all(offset < extent);
    let samples = min(vec3<u32>(tile), extent - min(offset, extent));
    let index = vec3<f32>(first + offset) + 0.5 * vec3<f32>(max(samples, vec3<u32>(1u)) - vec3<u32>(1u));
    return BoxTile(index, valid);
}

// The node, counted from the root, where the walk of listed box row `row` starts: the host
// found every triangle within the box's reach below it (`bvh::TopNodes::start_node`), so the
// walk finds from there what it would from the root. 0 (the root) for other rows.
fn box_start_node(row: u32) -> u32 {
    if GRID_SAMPLES == LISTED_BOXES {
        return u32(points[BOX_RECORD_FLOATS * (row >> 3u) + 4u]);
    }
    return 0u;
}

// The square of the distance beyond which a listed box's rows need no answer (0: every
// answer), so their walks open nothing farther (mesh_walk.wgsl).
fn walk_bound2(row: u32) -> f32 {
    if GRID_SAMPLES == LISTED_BOXES {
        return points[BOX_RECORD_FLOATS * (row >> 3u) + 5u];
    }
    return 0.0;
}

fn grid_point(row: u32) -> vec3<f32> {
    let origin = vec3<f32>(grid_float(0u), grid_float(1u), grid_float(2u));
    let spacing = vec3<f32>(grid_float(4u), grid_float(5u), grid_float(6u));
    if GRID_SAMPLES == LISTED_BOXES {
        return origin + box_tile(row).index * spacing;
    }
    let s = grid_sample(row).ijk;
    return origin + vec3<f32>(s) * spacing;
}

// Whether invocation `row` answers a row of this chunk.
fn row_in_chunk(row: u32) -> bool {
    if GRID_SAMPLES == 0u {
        return row < params.row_count;
    }
    if GRID_SAMPLES == LISTED_BOXES {
        return row < params.row_count && box_tile(row).valid;
    }
    return row < params.row_count && grid_sample(row).valid;
}

// Where invocation `row` writes its answer: its own row, or its sample's row of the chunk,
// counted from the chunk's first sample (i0, j0, 0) so that no grid row (a grid may hold more
// than 2^32) is formed.
fn output_row(row: u32) -> u32 {
    if GRID_SAMPLES != DENSE_CHUNK {
        return row;
    }
    let s = grid_sample(row).ijk;
    return ((s.x - grid_word(8u)) * grid_word(3u) + s.y - grid_word(9u)) * grid_word(7u) + s.z;
}
