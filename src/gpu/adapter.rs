//! Adapter discovery and choice (SPEC §5): `--adapter NAME` or `CLOSEST_ADAPTER` picks by
//! backend name or by a substring of the adapter name; otherwise a hardware GPU is preferred
//! and a software one (lavapipe) is the fallback.

use crate::error::{Error, Result};

/// What `closest info` prints for one adapter.
#[derive(Clone, Debug)]
pub struct AdapterSummary {
    pub info: wgpu::AdapterInfo,
    pub limits: wgpu::Limits,
}

/// Adapters of `backends`.
fn adapters_of(backends: wgpu::Backends) -> Vec<wgpu::Adapter> {
    let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
    desc.backends = backends;
    pollster::block_on(wgpu::Instance::new(desc).enumerate_adapters(backends))
}

/// Native-API adapters, plus GL ones when asked for or when there is no native one. GL is
/// probed only then because EGL prints noise on headless machines and is the slower path.
fn adapters(want_gl: bool) -> Vec<wgpu::Adapter> {
    let mut all = adapters_of(wgpu::Backends::PRIMARY);
    if want_gl || all.is_empty() {
        all.extend(adapters_of(wgpu::Backends::GL));
    }
    all
}

/// Every adapter wgpu can see, best first.
pub fn list_adapters() -> Vec<AdapterSummary> {
    let mut all: Vec<_> = adapters(true)
        .into_iter()
        .map(|a| AdapterSummary {
            info: a.get_info(),
            limits: a.limits(),
        })
        .collect();
    all.sort_by_key(|s| rank(&s.info));
    all
}

/// Lower is better: hardware before software, native APIs before GL.
fn rank(info: &wgpu::AdapterInfo) -> (u8, u8) {
    let device = match info.device_type {
        wgpu::DeviceType::DiscreteGpu => 0,
        wgpu::DeviceType::IntegratedGpu => 1,
        wgpu::DeviceType::VirtualGpu => 2,
        wgpu::DeviceType::Other => 3,
        wgpu::DeviceType::Cpu => 4,
    };
    let backend = match info.backend {
        wgpu::Backend::Vulkan | wgpu::Backend::Metal | wgpu::Backend::Dx12 => 0,
        _ => 1,
    };
    (device, backend)
}

/// Whether `request` names this adapter: a backend name, or a substring of its name
/// (both case-insensitive).
pub fn matches(info: &wgpu::AdapterInfo, request: &str) -> bool {
    let request = request.trim().to_lowercase();
    let backend = match info.backend {
        wgpu::Backend::Vulkan => "vulkan",
        wgpu::Backend::Gl => "gl",
        wgpu::Backend::Metal => "metal",
        wgpu::Backend::Dx12 => "dx12",
        _ => "other",
    };
    request == backend || info.name.to_lowercase().contains(&request)
}

/// The adapter to use: `request`, else `CLOSEST_ADAPTER`, else the best one.
pub(crate) fn choose(request: Option<&str>) -> Result<(wgpu::Adapter, wgpu::AdapterInfo)> {
    let env = std::env::var("CLOSEST_ADAPTER")
        .ok()
        .filter(|s| !s.trim().is_empty());
    let request = request.map(str::to_string).or(env);
    let want_gl = request
        .as_deref()
        .is_some_and(|r| r.trim().eq_ignore_ascii_case("gl"));
    let mut all = adapters(want_gl);
    all.sort_by_key(|a| rank(&a.get_info()));
    let names = || {
        all.iter()
            .map(|a| {
                let i = a.get_info();
                format!("{} ({:?})", i.name, i.backend)
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let chosen = match &request {
        Some(r) => all
            .iter()
            .find(|a| matches(&a.get_info(), r))
            .cloned()
            .ok_or_else(|| {
                if all.is_empty() {
                    Error::NoAdapter(format!("no adapter at all, so none matches `{r}`"))
                } else {
                    Error::NoAdapter(format!("no adapter matches `{r}`; available: {}", names()))
                }
            })?,
        None => all.first().cloned().ok_or_else(|| {
            Error::NoAdapter("wgpu found no Vulkan, Metal, DX12 or GL adapter".into())
        })?,
    };
    let info = chosen.get_info();
    Ok((chosen, info))
}
