// A chunk's query points read as texels (gpu::stream copies the points buffer into
// `point_texels` before the dispatch): on llvmpipe a storage load is a loop over the lanes,
// one 32-bit word at a time, where a texel fetch is one gather, and a one-shape query spent
// half its time loading its point (docs/PERF.md, "Points as texels"). Adapters whose textures
// are narrower than a texel row read the `points` storage buffer instead (POINT_TEXELS = 0).
// Under the same override `paired` (query.wgsl) and `segment_pairs` (segments.wgsl) read each
// row's record from `texels`.

#import shared/texels

// Rows' three words one after the other, in the layers of shared/texels.wgsl.
@group(0) @binding(8) var point_texels: texture_2d_array<u32>;

override POINT_TEXELS: u32 = 0u;

fn point_texel(i: u32) -> vec4<u32> {
    let c = texel_coords(i);
    return textureLoad(point_texels, c.xy, c.z, 0);
}

// Row `row`'s point: words 3 row .. 3 row + 3, in one texel or across two.
fn texel_point(row: u32) -> vec3<f32> {
    let w = 3u * row;
    let o = w & 3u;
    let a = point_texel(w >> 2u);
    let b = point_texel((w + 2u) >> 2u);
    let x = select(select(a.x, a.y, o == 1u), select(a.z, a.w, o == 3u), o >= 2u);
    let y = select(select(a.y, a.z, o == 1u), select(a.w, b.x, o == 3u), o >= 2u);
    let z = select(select(a.z, a.w, o == 1u), select(b.x, b.y, o == 3u), o >= 2u);
    return bitcast<vec3<f32>>(vec3<u32>(x, y, z));
}
