//! How fast a kernel reads scattered words through each path a WGSL kernel has: a storage
//! buffer (what the walks read today) or a texture's `textureLoad`, one 32-bit word or a
//! whole vec4 per step, in a loop of dependent steps with a branch in it (as a BVH walk).
//! On llvmpipe a storage load is a loop over the lanes; this measures what that costs.
//!
//! `cargo run --release --example load_paths` (N invocations, default 1,048,576; STEPS per
//! invocation, default 64; median of 5 dispatches each).

use std::time::Instant;

const SHADER: &str = r#"
@group(0) @binding(0) var<storage, read> words: array<vec4<u32>>;
@group(0) @binding(1) var texels: texture_2d<u32>;
@group(0) @binding(2) var<storage, read_write> out: array<u32>;

override PATH: u32 = 0u;
override STEPS: u32 = 64u;
const MASK: u32 = 0xffffu;

fn fetch(i: u32) -> vec4<u32> {
    switch PATH {
        case 0u: { return vec4<u32>(words[i].x, 0u, 0u, 0u); }
        case 1u: { return words[i]; }
        case 2u: { return vec4<u32>(textureLoad(texels, vec2<u32>(i & 255u, i >> 8u), 0).x, 0u, 0u, 0u); }
        case 3u: { return textureLoad(texels, vec2<u32>(i & 255u, i >> 8u), 0); }
        default: { return vec4<u32>(i, i >> 3u, i >> 5u, 1u); }
    }
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    var acc = gid.x * 2654435761u;
    for (var s = 0u; s < STEPS; s++) {
        let v = fetch((acc >> 7u) & MASK);
        acc = acc + v.x + v.y + v.z + v.w;
        if (acc & 1u) == 1u {
            acc = acc * 3u;
        }
    }
    out[gid.x] = acc;
}
"#;

fn main() {
    let env = |name: &str, default: u32| {
        std::env::var(name)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(default)
    };
    let (n, steps) = (env("N", 1 << 20), env("STEPS", 64));
    let instance = wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle());
    let adapter = pollster::block_on(instance.request_adapter(&Default::default()))
        .expect("an adapter (apt-get install mesa-vulkan-drivers)");
    let (device, queue) =
        pollster::block_on(adapter.request_device(&Default::default())).expect("a device");
    let words: Vec<u32> = (0..4u32 << 16)
        .map(|i| i.wrapping_mul(0x9e37_79b9))
        .collect();
    use wgpu::util::DeviceExt;
    let storage = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
        label: None,
        contents: bytemuck::cast_slice(&words),
        usage: wgpu::BufferUsages::STORAGE,
    });
    let texture = device.create_texture_with_data(
        &queue,
        &wgpu::TextureDescriptor {
            label: None,
            size: wgpu::Extent3d {
                width: 256,
                height: 256,
                depth_or_array_layers: 1,
            },
            mip_level_count: 1,
            sample_count: 1,
            dimension: wgpu::TextureDimension::D2,
            format: wgpu::TextureFormat::Rgba32Uint,
            usage: wgpu::TextureUsages::TEXTURE_BINDING,
            view_formats: &[],
        },
        wgpu::util::TextureDataOrder::LayerMajor,
        bytemuck::cast_slice(&words),
    );
    let out = device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: 4 * n as u64,
        usage: wgpu::BufferUsages::STORAGE,
        mapped_at_creation: false,
    });
    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: None,
        source: wgpu::ShaderSource::Wgsl(SHADER.into()),
    });
    let view = texture.create_view(&Default::default());
    println!(
        "{}; {n} invocations x {steps} steps; ns per step per invocation",
        adapter.get_info().name
    );
    for (path, name) in [
        (0, "storage word"),
        (1, "storage vec4"),
        (2, "texture word"),
        (3, "texture vec4"),
        (4, "no load"),
    ] {
        let constants = [("PATH", path as f64), ("STEPS", steps as f64)];
        let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: None,
            layout: None,
            module: &module,
            entry_point: Some("main"),
            compilation_options: wgpu::PipelineCompilationOptions {
                constants: &constants,
                ..Default::default()
            },
            cache: None,
        });
        let bind = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: None,
            layout: &pipeline.get_bind_group_layout(0),
            entries: &[
                wgpu::BindGroupEntry {
                    binding: 0,
                    resource: storage.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 1,
                    resource: wgpu::BindingResource::TextureView(&view),
                },
                wgpu::BindGroupEntry {
                    binding: 2,
                    resource: out.as_entire_binding(),
                },
            ],
        });
        let mut times = Vec::new();
        for _ in 0..5 {
            let mut encoder = device.create_command_encoder(&Default::default());
            {
                let mut pass = encoder.begin_compute_pass(&Default::default());
                pass.set_pipeline(&pipeline);
                pass.set_bind_group(0, &bind, &[]);
                pass.dispatch_workgroups(n / 64, 1, 1);
            }
            let start = Instant::now();
            let index = queue.submit([encoder.finish()]);
            device
                .poll(wgpu::PollType::Wait {
                    submission_index: Some(index),
                    timeout: None,
                })
                .expect("the dispatch finishes");
            times.push(start.elapsed().as_secs_f64());
        }
        times.sort_by(f64::total_cmp);
        println!(
            "{name:>14}: {:.2} ns",
            times[2] * 1e9 / (n as f64 * steps as f64)
        );
    }
}
