// Closest points between segment pairs: row i pairs segment A = a0 -> a1 with B = b0 -> b1.
// Twin: src/reference/segment_pair.rs (exact in f64); the kernel is formulated to stay inside
// SPEC §3's bound in f32 for near-parallel pairs too (docs/PERF.md and tests/segments.rs).
#import shared/types
#import shared/math
#import shared/rows
#import shared/texels
#import shared/point_texels
#import shared/segment_pair


@group(0) @binding(0) var<uniform> params: Params;
// One record per pair: anchor = a0, p0 = a1 - a0, p1 = b0 - a0, p2 = b1 - a0 (see
// GpuShape::from_segment_pair); the differences are taken in f64 on the host.
@group(0) @binding(1) var<storage, read> pairs: array<Shape>;
// Rows hold only the fields of `FIELDS` (src/fields.rs), packed in the order point_a,
// s, point_b, t, distance; with every field a row is exactly a GpuSegmentHit.
@group(0) @binding(3) var<storage, read_write> hits: array<u32>;

// The output fields, a pipeline override (as in shared/hits.wgsl).
override FIELDS: u32 = 0x1fu;

// Words of the selected fields among `bits`.
fn segment_field_words(bits: u32) -> u32 {
    let f = FIELDS & bits;
    return select(0u, 3u, (f & FIELD_POINT_A) != 0u) + select(0u, 1u, (f & FIELD_S) != 0u)
        + select(0u, 3u, (f & FIELD_POINT_B) != 0u) + select(0u, 1u, (f & FIELD_T) != 0u)
        + select(0u, 1u, (f & FIELD_SEGMENT_DISTANCE) != 0u);
}

fn write_segment_hit(row: u32, point_a: vec3<f32>, s: f32, point_b: vec3<f32>, t: f32, distance: f32) {
    var at = row * segment_field_words(0x1fu);
    if (FIELDS & FIELD_POINT_A) != 0u {
        hits[at] = bitcast<u32>(point_a.x);
        hits[at + 1u] = bitcast<u32>(point_a.y);
        hits[at + 2u] = bitcast<u32>(point_a.z);
        at += 3u;
    }
    if (FIELDS & FIELD_S) != 0u {
        hits[at] = bitcast<u32>(s);
        at += 1u;
    }
    if (FIELDS & FIELD_POINT_B) != 0u {
        hits[at] = bitcast<u32>(point_b.x);
        hits[at + 1u] = bitcast<u32>(point_b.y);
        hits[at + 2u] = bitcast<u32>(point_b.z);
        at += 3u;
    }
    if (FIELDS & FIELD_T) != 0u {
        hits[at] = bitcast<u32>(t);
        at += 1u;
    }
    if (FIELDS & FIELD_SEGMENT_DISTANCE) != 0u {
        hits[at] = bitcast<u32>(distance);
    }
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn segment_pairs(
    @builtin(workgroup_id) group: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(local_invocation_index) local: u32,
) {
    let row = row_of(group, groups, local);
    if row >= params.row_count {
        return;
    }
    // Where rows are texels, so is each pair's record (`texels`, six texels a row).
    var pair: Shape;
    if POINT_TEXELS != 0u {
        let at = 6u * row;
        pair = Shape(0u, 0u, 0u, 0u, bitcast<vec4<f32>>(texel(at + 1u)), bitcast<vec4<f32>>(texel(at + 2u)),
            bitcast<vec4<f32>>(texel(at + 3u)), bitcast<vec4<f32>>(texel(at + 4u)), vec4<f32>(0.0));
    } else {
        pair = pairs[row];
    }
    let a0 = pair.anchor.xyz;
    let da = pair.p0.xyz;
    let b0 = pair.p1.xyz;
    let db = pair.p2.xyz - b0;
    if !(is_finite_vec3(a0) && is_finite_vec3(da) && is_finite_vec3(pair.p1.xyz) && is_finite_vec3(pair.p2.xyz)) {
        let nan = bitcast<f32>(params.nan_bits);
        write_segment_hit(row, vec3<f32>(nan), nan, vec3<f32>(nan), nan, nan);
        return;
    }
    // The parameters do not change with the scale: found where squares stay finite.
    let m = max(max(max_abs(da), max_abs(b0)), max_abs(db));
    let f = down_scale(m);
    let st = closest_parameters(da * f, b0 * f, db * f);
    let on_a = da * st.x;
    let on_b = b0 + db * st.y;
    write_segment_hit(row, a0 + on_a, st.x, a0 + on_b, st.y, safe_length(on_a - on_b));
}
