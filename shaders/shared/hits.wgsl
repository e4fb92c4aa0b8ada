// Output rows hold only the fields a job asks for (`FIELDS`, a bit each, from src/fields.rs),
// packed in the order of the Hit struct: point (3 words), distance, normal (3), shape. With
// every field a row is exactly a Hit; a distance-only row is one word.

@group(0) @binding(3) var<storage, read_write> hits: array<u32>;

// The output fields, a pipeline override: each pipeline is compiled for its fields, so the
// branches below fold away (software adapters would otherwise run them per row).
override FIELDS: u32 = 0xfu;

fn has_field(bit: u32) -> bool {
    return (FIELDS & bit) != 0u;
}

// Words of the selected fields among `bits`.
fn field_words(bits: u32) -> u32 {
    let f = FIELDS & bits;
    return select(0u, 3u, (f & FIELD_POINT) != 0u) + select(0u, 1u, (f & FIELD_DISTANCE) != 0u)
        + select(0u, 3u, (f & FIELD_NORMAL) != 0u) + select(0u, 1u, (f & FIELD_SHAPE) != 0u);
}

// Index of the first word of `row`'s field `bit` (which must be selected).
fn field_at(row: u32, bit: u32) -> u32 {
    return row * field_words(0xfu) + field_words(bit - 1u);
}

// Whether Mesa 22's software adapters cut this invocation's loops short: their loop limiter
// counts every pass of every loop the 8 lanes run together and, past 65,535, ends each loop
// after one pass, silently. So a loop asked for two passes (a bound the compiler cannot see)
// runs one. Elsewhere it runs two, at the cost of two passes a row.
fn loops_were_cut() -> bool {
    let asked = 2u + (params.nan_bits >> 31u);
    var passes = 0u;
    loop {
        passes += 1u;
        if passes >= asked {
            break;
        }
    }
    return passes < 2u;
}

fn write_hit(row: u32, hit: Hit) {
    var point = bitcast<vec3<u32>>(hit.point);
    var distance = bitcast<u32>(hit.distance);
    var normal = bitcast<vec3<u32>>(hit.normal);
    // A row whose traversal overflowed, or whose loops were cut, says so in every word the
    // host reads back.
    var shape = hit.shape;
    if shape == TRAVERSAL_OVERFLOW || loops_were_cut() {
        shape = TRAVERSAL_OVERFLOW;
        point = vec3<u32>(OVERFLOW_BITS);
        distance = OVERFLOW_BITS;
        normal = vec3<u32>(OVERFLOW_BITS);
    }
    var at = row * field_words(0xfu);
    if has_field(FIELD_POINT) {
        hits[at] = point.x;
        hits[at + 1u] = point.y;
        hits[at + 2u] = point.z;
        at += 3u;
    }
    if has_field(FIELD_DISTANCE) {
        hits[at] = distance;
        at += 1u;
    }
    if has_field(FIELD_NORMAL) {
        hits[at] = normal.x;
        hits[at + 1u] = normal.y;
        hits[at + 2u] = normal.z;
        at += 3u;
    }
    if has_field(FIELD_SHAPE) || params.kept_shapes != 0u {
        hits[hit_shape_word(row)] = bitcast<u32>(shape);
    }
}

// Where `row`'s shape lies: in its row when the job reads shapes back, else in the words
// after the chunk's rows that the host never reads (`Params.kept_shapes`; later rounds and
// passes read it there).
fn hit_shape_word(row: u32) -> u32 {
    if has_field(FIELD_SHAPE) {
        return field_at(row, FIELD_SHAPE);
    }
    return params.kept_shapes + row;
}

fn hit_shape(row: u32) -> i32 {
    return bitcast<i32>(hits[hit_shape_word(row)]);
}

fn hit_normal(row: u32) -> vec3<f32> {
    let at = field_at(row, FIELD_NORMAL);
    return bitcast<vec3<f32>>(vec3<u32>(hits[at], hits[at + 1u], hits[at + 2u]));
}

fn set_hit_normal(row: u32, normal: vec3<f32>) {
    let at = field_at(row, FIELD_NORMAL);
    let words = bitcast<vec3<u32>>(normal);
    hits[at] = words.x;
    hits[at + 1u] = words.y;
    hits[at + 2u] = words.z;
}

fn hit_distance(row: u32) -> f32 {
    return bitcast<f32>(hits[field_at(row, FIELD_DISTANCE)]);
}

fn set_hit_distance(row: u32, distance: f32) {
    hits[field_at(row, FIELD_DISTANCE)] = bitcast<u32>(distance);
}
