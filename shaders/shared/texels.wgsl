// A resident scene's records, then its hierarchy, as Rgba32Uint texels (gpu::scene's
// `upload_texels`), read by textureLoad: on llvmpipe a texel fetch is one vector gather, where
// a storage load is a loop over the lanes, one 32-bit word at a time (docs/PERF.md, "Texels").

// Layers of `1 << TEXEL_LAYER_ROW_BITS` rows of `1 << TEXEL_ROW_BITS` texels (fewer in a
// texture of one layer or one row).
@group(0) @binding(5) var texels: texture_2d_array<u32>;

// Texel `i`'s (x, y, layer) in a texture of this layout (also shared/point_texels.wgsl's).
fn texel_coords(i: u32) -> vec3<u32> {
    let x = i & ((1u << TEXEL_ROW_BITS) - 1u);
    let y = (i >> TEXEL_ROW_BITS) & ((1u << TEXEL_LAYER_ROW_BITS) - 1u);
    return vec3<u32>(x, y, i >> (TEXEL_ROW_BITS + TEXEL_LAYER_ROW_BITS));
}

fn texel(i: u32) -> vec4<u32> {
    let c = texel_coords(i);
    return textureLoad(texels, c.xy, c.z, 0);
}
