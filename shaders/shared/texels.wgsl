// A resident scene's records, then its hierarchy, as Rgba32Uint texels (gpu::scene's
// `upload_texels`), read by textureLoad: on llvmpipe a texel fetch is one vector gather, where
// a storage load is a loop over the lanes, one 32-bit word at a time (docs/PERF.md, "Texels").

@group(0) @binding(5) var texels: texture_2d<u32>;

fn texel(i: u32) -> vec4<u32> {
    return textureLoad(texels, vec2<u32>(i & ((1u << TEXEL_ROW_BITS) - 1u), i >> TEXEL_ROW_BITS), 0);
}
