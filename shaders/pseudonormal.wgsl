// Pseudonormal signs on the device (`--sign pseudonormal`): the feature of the nearest
// triangle closest to the point (its face, an edge or a vertex), found in f32 as
// mesh::closest_feature finds it in f64, and that feature's unit angle-weighted pseudonormal
// from the mesh's table in `sign_data` (mesh::Pseudonormals::gpu_words, the f64 twin of this
// file): a header (first vertex word, first crowded-edge word, words per triangle, the far
// radius of `walk_for`), then per
// triangle in scene order its three vertex indices (left out with indexed records, which hold
// them) and, per edge k (corner k to k + 1), the triangle across it, EDGE_BOUNDARY, or
// EDGE_CROWDED | the index of a stored sum; then the unit vertex pseudonormals and the unit
// sums of edges of more than two faces, three f32 each.
#import mesh_walk

// A pipeline override: 1 where rows are signed as they are answered (write_row).
override PSEUDONORMAL_SIGNS: u32 = 0u;

// Where a row's walk goes from (`walk_for`): its own point, or for a far row its proxy.
struct Walk {
    point: vec3<f32>,
    seed: u32,
    start: u32,
    bound2: f32,
    far: bool,
}

// A point far from the mesh sees every triangle at nearly one distance: its nearest in f32 is
// a tie among triangles on every side, and the pseudonormal of one facing away signs it
// wrongly. A row signed by pseudonormal beyond the table's far radius (header word 3, in the
// mesh's frame, centred on its box: Pseudonormals::far_radius) walks instead from its proxy,
// the point at that radius on the same ray from the centre, where f32 tells the triangles
// apart, from the root and unbounded; it takes the proxy's sign, and its distance from the
// proxy's nearest triangle, within SPEC §3 of its own (docs/guide/meshes.md).
fn walk_for(p: vec3<f32>, seed: u32, start: u32, bound2: f32) -> Walk {
    if PSEUDONORMAL_SIGNS != 0u {
        let far = bitcast<f32>(sign_word(3u));
        // Measured in units of its largest coordinate: |p|² may overflow.
        let largest = max_abs(p);
        let unit = p / max(largest, 1e-30);
        if far > 0.0 && length(unit) * largest > far {
            return Walk(unit * (far / length(unit)), seed, 0u, 0.0, true);
        }
    }
    return Walk(p, seed, start, bound2, false);
}

// The closest feature, as mesh::Feature: the face, vertex k (corner k), or edge k (from
// corner k to k + 1, cyclically).
const FEATURE_FACE: u32 = 0u;
const FEATURE_VERTEX: u32 = 1u;
const FEATURE_EDGE: u32 = 4u;

struct Feature {
    // Relative to the triangle's first corner.
    point: vec3<f32>,
    feature: u32,
}

// mesh::closest_feature for the triangle (0, ab, ac) of unit normal n (zero when degenerate).
// Its tests multiply four lengths: a large triangle is measured in units of `size_exponent`.
fn closest_feature(p: vec3<f32>, ab: vec3<f32>, ac: vec3<f32>, n: vec3<f32>) -> Feature {
    let e = size_exponent(max(max_abs(ab), max_abs(ac)));
    let unit = closest_feature_scaled(p * pow2(-e), ab * pow2(-e), ac * pow2(-e), n);
    return Feature(unit.point * pow2(e), unit.feature);
}

fn closest_feature_scaled(p: vec3<f32>, ab: vec3<f32>, ac: vec3<f32>, n: vec3<f32>) -> Feature {
    if all(n == vec3<f32>(0.0)) {
        return closest_on_edges(p, ab, ac);
    }
    let d1 = dot(ab, p);
    let d2 = dot(ac, p);
    if d1 <= 0.0 && d2 <= 0.0 {
        return Feature(vec3<f32>(0.0), FEATURE_VERTEX);
    }
    let bp = p - ab;
    let d3 = dot(ab, bp);
    let d4 = dot(ac, bp);
    if d3 >= 0.0 && d4 <= d3 {
        return Feature(ab, FEATURE_VERTEX + 1u);
    }
    let vc = d1 * d4 - d3 * d2;
    if vc <= 0.0 && d1 >= 0.0 && d3 <= 0.0 {
        return Feature(ab * (d1 / (d1 - d3)), FEATURE_EDGE);
    }
    let cp = p - ac;
    let d5 = dot(ab, cp);
    let d6 = dot(ac, cp);
    if d6 >= 0.0 && d5 <= d6 {
        return Feature(ac, FEATURE_VERTEX + 2u);
    }
    let vb = d5 * d2 - d1 * d6;
    if vb <= 0.0 && d2 >= 0.0 && d6 <= 0.0 {
        return Feature(ac * (d2 / (d2 - d6)), FEATURE_EDGE + 2u);
    }
    let va = d3 * d6 - d5 * d4;
    if va <= 0.0 && d4 - d3 >= 0.0 && d5 - d6 >= 0.0 {
        let w = (d4 - d3) / ((d4 - d3) + (d5 - d6));
        return Feature(ab + (ac - ab) * w, FEATURE_EDGE + 1u);
    }
    let denom = va + vb + vc;
    if denom <= 0.0 {
        return closest_on_edges(p, ab, ac);
    }
    return Feature(ab * (vb / denom) + ac * (vc / denom), FEATURE_FACE);
}

// mesh::closest_on_edges: the nearest of edges (0, 1), (1, 2), (0, 2), the first on ties.
fn closest_on_edges(p: vec3<f32>, ab: vec3<f32>, ac: vec3<f32>) -> Feature {
    var corners = array<vec3<f32>, 3>(vec3<f32>(0.0), ab, ac);
    var best = Feature(vec3<f32>(0.0), FEATURE_VERTEX);
    var best_distance2 = 0.0;
    for (var e = 0u; e < 3u; e++) {
        // Edge e is half-edge e: (0, 1), (1, 2), then (2, 0) tried as (0, 2).
        let i = select(e, 0u, e == 2u);
        let j = select(e + 1u, 2u, e == 2u);
        let a = corners[i];
        let along = corners[j] - a;
        let length2 = dot(along, along);
        var t = 0.0;
        if length2 > 0.0 {
            t = clamp(dot(p - a, along) / length2, 0.0, 1.0);
        }
        var candidate = Feature(a + along * t, FEATURE_EDGE + e);
        if t == 0.0 {
            candidate = Feature(a, FEATURE_VERTEX + i);
        } else if t == 1.0 {
            candidate = Feature(corners[j], FEATURE_VERTEX + j);
        }
        let delta = p - candidate.point;
        let distance2 = dot(delta, delta);
        if e == 0u || distance2 < best_distance2 {
            best = candidate;
            best_distance2 = distance2;
        }
    }
    return best;
}

// The unit normal of the triangle in `slot` (zero when degenerate).
fn slot_normal(slot: u32) -> vec3<f32> {
    if TRIANGLE_RECORDS == INDEXED_RECORDS {
        let r = indexed_record(slot);
        return bitcast<vec3<f32>>(vec3<u32>(r[3], r[4], r[5]));
    }
    return bitcast<vec3<f32>>(vec3<u32>(texel(3u * slot).w, texel(3u * slot + 1u).w, texel(3u * slot + 2u).w));
}

// Vertex index of corner k of triangle `index` (scene order), in `slot` of the records.
fn corner_vertex(index: u32, slot: u32, k: u32) -> u32 {
    if TRIANGLE_RECORDS == INDEXED_RECORDS {
        var r = indexed_record(slot);
        return r[k];
    }
    return sign_word(4u + 6u * index + k);
}

// The unit pseudonormal of `feature` of triangle `index` (scene order, in `slot` of the
// records), whose unit normal is `n`; zero where it vanishes (a degenerate face, a knife edge).
fn feature_pseudonormal(index: u32, slot: u32, feature: u32, n: vec3<f32>) -> vec3<f32> {
    if feature == FEATURE_FACE {
        return n;
    }
    if feature < FEATURE_EDGE {
        return sign_vec3(sign_word(0u) + 3u * corner_vertex(index, slot, feature - FEATURE_VERTEX));
    }
    let stride = sign_word(2u);
    let across = sign_word(4u + stride * index + stride - 3u + feature - FEATURE_EDGE);
    if across == EDGE_BOUNDARY {
        return n;
    }
    if (across & EDGE_CROWDED) != 0u {
        return sign_vec3(sign_word(1u) + 3u * (across & ~EDGE_CROWDED));
    }
    return unit_or_zero(n + slot_normal(slot_of(i32(across))));
}

// The sign of p (relative to the triangle's first corner) against triangle `index` (in
// `slot`) of records r, and the pseudonormal it was read from.
struct PseudonormalSign {
    sign: f32,
    normal: vec3<f32>,
}

fn pseudonormal_sign(index: u32, slot: u32, r: array<vec4<f32>, 3>, p: vec3<f32>) -> PseudonormalSign {
    let n = vec3<f32>(r[0].w, r[1].w, r[2].w);
    let f = closest_feature(p, r[1].xyz, r[2].xyz, n);
    let normal = feature_pseudonormal(index, slot, f.feature, n);
    return PseudonormalSign(select(1.0, -1.0, dot(p - f.point, normal) < 0.0), normal);
}
