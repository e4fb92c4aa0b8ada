// The closest points of two segments (segments.wgsl's kernel, and the capsule closed forms of
// body_closed_forms.wgsl). Twin: src/reference/segment_pair.rs.

// Parameter in [0, 1] of the point of segment origin -> d nearest p (0 for a zero-length d).
fn segment_parameter(p: vec3<f32>, d: vec3<f32>) -> f32 {
    let dd = dot(d, d);
    return select(0.0, clamp(dot(p, d) / dd, 0.0, 1.0), dd > 0.0);
}

// Squared distance between A(s) = da·s and B(t) = b0 + db·t.
fn pair_gap2(da: vec3<f32>, b0: vec3<f32>, db: vec3<f32>, s: f32, t: f32) -> f32 {
    let gap = da * s - (b0 + db * t);
    return dot(gap, gap);
}

// (s, t) of the closest points between A = [0, da] and B = [b0, b0 + db].
fn closest_parameters(da: vec3<f32>, b0: vec3<f32>, db: vec3<f32>) -> vec2<f32> {
    // Three steps (shared/seeds/002), steady in f32 where the closed form is not:
    // 1. t1: the point of B nearest the infinite line through A, found in the plane
    //    perpendicular to A where that line is a point;
    let len_a = length(da);
    let ua = select(vec3<f32>(0.0), da / len_a, len_a > 0.0);
    let b0_flat = b0 - ua * dot(b0, ua);
    let db_flat = db - ua * dot(db, ua);
    let t1 = segment_parameter(-b0_flat, db_flat);
    // 2. s: the point of A nearest B(t1); 3. t: the point of B nearest A(s).
    let s = segment_parameter(b0 + db * t1, da);
    let t = segment_parameter(da * s - b0, db);
    var best = vec2<f32>(s, t);
    var best_gap2 = pair_gap2(da, b0, db, s, t);
    // Each endpoint against the other segment: exact whenever the answer has a clamped
    // parameter, and a guard for the steps above. Strictly nearer only: ties keep the first.
    // Written out, not as a loop over an array, which SIMD compilers keep in memory.
    let c0 = vec2<f32>(0.0, segment_parameter(-b0, db));
    let c1 = vec2<f32>(1.0, segment_parameter(da - b0, db));
    let c2 = vec2<f32>(segment_parameter(b0, da), 0.0);
    let c3 = vec2<f32>(segment_parameter(b0 + db, da), 1.0);
    let g0 = pair_gap2(da, b0, db, c0.x, c0.y);
    let g1 = pair_gap2(da, b0, db, c1.x, c1.y);
    let g2 = pair_gap2(da, b0, db, c2.x, c2.y);
    let g3 = pair_gap2(da, b0, db, c3.x, c3.y);
    best = select(best, c0, g0 < best_gap2);
    best_gap2 = min(best_gap2, g0);
    best = select(best, c1, g1 < best_gap2);
    best_gap2 = min(best_gap2, g1);
    best = select(best, c2, g2 < best_gap2);
    best_gap2 = min(best_gap2, g2);
    best = select(best, c3, g3 < best_gap2);
    return best;
}
