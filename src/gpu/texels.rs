//! Textures of texels (the walks' `texels` and `point_texels` bindings): their sizes within
//! the adapter's limits, and a chunk's rows copied into one on the device.

/// The layers a texels texture of `layers` takes on `backend`. wgpu's GL backend guesses a
/// texture's kind from its layer count (one: a 2-D texture, six or a multiple: cubes), and a
/// `texture_2d_array` binding of such a texture read zeros there: every answer was wrong on
/// GL. There a texture takes a layer more than those counts.
pub(super) fn layers_on(backend: wgpu::Backend, layers: usize) -> usize {
    if backend != wgpu::Backend::Gl {
        return layers;
    }
    let layers = layers.max(2);
    layers + usize::from(layers.is_multiple_of(6))
}

/// A texels texture (the `texels` binding) of `(width, height, layers)` on `backend`.
pub(super) fn texels_descriptor(
    label: &str,
    (width, height, layers): (usize, usize, usize),
    backend: wgpu::Backend,
) -> wgpu::TextureDescriptor<'_> {
    let layers = layers_on(backend, layers);
    wgpu::TextureDescriptor {
        label: Some(label),
        size: wgpu::Extent3d {
            width: width as u32,
            height: height as u32,
            depth_or_array_layers: layers as u32,
        },
        mip_level_count: 1,
        sample_count: 1,
        dimension: wgpu::TextureDimension::D2,
        format: wgpu::TextureFormat::Rgba32Uint,
        usage: wgpu::TextureUsages::TEXTURE_BINDING | wgpu::TextureUsages::COPY_DST,
        view_formats: &[],
    }
}

/// The view the kernels bind: every layer, as `texture_2d_array<u32>`.
pub(super) fn texels_view(texture: &wgpu::Texture) -> wgpu::TextureView {
    texture.create_view(&wgpu::TextureViewDescriptor {
        dimension: Some(wgpu::TextureViewDimension::D2Array),
        ..Default::default()
    })
}

/// The most texels `Context::texture_texels` can hold under `limits`: layers of 64 rows of
/// 4,096 texels, as many as the adapter's array layers (one fewer on GL, `layers_on`); an
/// adapter whose textures are narrower than a row holds one row (`texel_extent` makes short
/// textures one row wide).
pub(super) fn max_texels(limits: &wgpu::Limits, backend: wgpu::Backend) -> u64 {
    use super::layout::{TEXEL_LAYER_ROW_BITS, TEXEL_ROW_BITS};
    let side = u64::from(limits.max_texture_dimension_2d);
    let row = 1u64 << TEXEL_ROW_BITS;
    if side < row {
        return side;
    }
    let layers = u64::from(limits.max_texture_array_layers);
    let layers = if backend == wgpu::Backend::Gl {
        layers.saturating_sub(1).max(1)
    } else {
        layers
    };
    row * (1u64 << TEXEL_LAYER_ROW_BITS) * layers
}

/// The (width, height, layers) of the texture `Context::texture_texels` makes for `words`.
pub(super) fn texel_extent(words: usize) -> (usize, usize, usize) {
    use super::layout::{TEXEL_LAYER_ROW_BITS, TEXEL_ROW_BITS};
    let texels = words.div_ceil(4).max(1);
    let width = texels.min(1 << TEXEL_ROW_BITS);
    let rows = texels.div_ceil(width);
    let height = rows.min(1 << TEXEL_LAYER_ROW_BITS);
    (width, height, rows.div_ceil(height))
}

/// A texture for a chunk's `texels` of row data (its points, `shared/point_texels.wgsl`, or
/// its paired shapes), whole rows of texels in the layers of `texture_texels`, and its view.
pub(crate) fn row_texture(
    gpu: &super::Context,
    label: &str,
    texels: usize,
) -> (wgpu::Texture, wgpu::TextureView) {
    use super::layout::{TEXEL_LAYER_ROW_BITS, TEXEL_ROW_BITS};
    let texel_rows = texels.max(1).div_ceil(1 << TEXEL_ROW_BITS);
    let height = texel_rows.min(1 << TEXEL_LAYER_ROW_BITS);
    let texture = gpu.device.create_texture(&texels_descriptor(
        label,
        (1 << TEXEL_ROW_BITS, height, texel_rows.div_ceil(height)),
        gpu.info.backend,
    ));
    let view = texels_view(&texture);
    (texture, view)
}

/// Record copies of the first `texels` texels (16 bytes each) of `buffer` into `texture` (made
/// by [`row_texture`]): whole layers, then whole texel rows, then the last row's texels.
pub(crate) fn copy_to_row_texture(
    encoder: &mut wgpu::CommandEncoder,
    buffer: &wgpu::Buffer,
    texture: &wgpu::Texture,
    texels: usize,
) {
    use super::layout::{TEXEL_LAYER_ROW_BITS, TEXEL_ROW_BITS};
    let (width, layer_rows) = (1usize << TEXEL_ROW_BITS, 1usize << TEXEL_LAYER_ROW_BITS);
    let layer_texels = width * layer_rows;
    let mut done = 0;
    while done < texels {
        let (layer, row) = (done / layer_texels, done % layer_texels / width);
        let left = texels - done;
        let (w, h, d) = if row == 0 && left >= layer_texels {
            (width, layer_rows, left / layer_texels)
        } else if left >= width {
            (width, (left / width).min(layer_rows - row), 1)
        } else {
            (left, 1, 1)
        };
        encoder.copy_buffer_to_texture(
            wgpu::TexelCopyBufferInfo {
                buffer,
                layout: wgpu::TexelCopyBufferLayout {
                    offset: 16 * done as u64,
                    bytes_per_row: Some(16 * width as u32),
                    rows_per_image: Some(layer_rows as u32),
                },
            },
            wgpu::TexelCopyTextureInfo {
                texture,
                mip_level: 0,
                origin: wgpu::Origin3d {
                    x: 0,
                    y: row as u32,
                    z: layer as u32,
                },
                aspect: wgpu::TextureAspect::All,
            },
            wgpu::Extent3d {
                width: w as u32,
                height: h as u32,
                depth_or_array_layers: d as u32,
            },
        );
        done += w * h * d;
    }
}

/// Texels `rows` points take (three words a row).
pub(crate) fn point_texel_count(rows: usize) -> usize {
    (3 * rows).div_ceil(4)
}

/// The bytes of the texture `Context::texture_texels` makes for `words` on `backend` (whole
/// layers).
pub(crate) fn texel_texture_bytes(words: usize, backend: wgpu::Backend) -> u64 {
    let (width, height, layers) = texel_extent(words);
    16 * (width * height * layers_on(backend, layers)) as u64
}

/// Words `start .. start + count` of the two parts one after the other, zeros past their end:
/// borrowed where one part holds them all, else gathered.
pub(super) fn layer_words_of(
    parts: &[Vec<u32>; 2],
    start: usize,
    count: usize,
) -> std::borrow::Cow<'_, [u32]> {
    let first_len = parts[0].len();
    let end = start + count;
    if end <= first_len {
        return std::borrow::Cow::Borrowed(&parts[0][start..end]);
    }
    if start >= first_len && end - first_len <= parts[1].len() {
        return std::borrow::Cow::Borrowed(&parts[1][start - first_len..end - first_len]);
    }
    let mut words: Vec<u32> = parts[0].get(start..).unwrap_or(&[]).to_vec();
    words.extend_from_slice(
        parts[1]
            .get(start.saturating_sub(first_len)..)
            .unwrap_or(&[]),
    );
    words.truncate(count);
    words.resize(count, 0);
    std::borrow::Cow::Owned(words)
}

/// `words` cut back to `len`, its memory given back (a large allocation shrinks in place: the
/// allocator unmaps its tail).
pub(super) fn cut_back(words: &mut Vec<u32>, len: usize) {
    if words.len() > len {
        words.truncate(len);
        words.shrink_to_fit();
    }
}

#[cfg(test)]
mod tests {
    use super::{layers_on, max_texels};

    #[test]
    fn gl_textures_never_have_a_layer_count_gl_takes_for_another_kind() {
        for layers in 1..40 {
            assert_eq!(layers_on(wgpu::Backend::Vulkan, layers), layers);
            let on_gl = layers_on(wgpu::Backend::Gl, layers);
            assert!(
                on_gl >= layers && on_gl <= layers + 1,
                "{layers} -> {on_gl}"
            );
            assert!(on_gl > 1 && !on_gl.is_multiple_of(6), "{layers} -> {on_gl}");
        }
    }

    #[test]
    fn texel_capacity_is_whole_layers_or_one_row_on_narrow_adapters() {
        let limits = |side, layers| wgpu::Limits {
            max_texture_dimension_2d: side,
            max_texture_array_layers: layers,
            ..wgpu::Limits::default()
        };
        let vulkan = wgpu::Backend::Vulkan;
        assert_eq!(max_texels(&limits(16384, 2048), vulkan), 4096 * 64 * 2048);
        assert_eq!(max_texels(&limits(8192, 256), vulkan), 4096 * 64 * 256);
        assert_eq!(max_texels(&limits(2048, 256), vulkan), 2048);
        assert_eq!(
            max_texels(&limits(8192, 256), wgpu::Backend::Gl),
            4096 * 64 * 255
        );
    }
}
