//! Adapter discovery and choice (SPEC §5): `--adapter NAME` or `CLOSEST_ADAPTER` picks by
//! backend name or by a substring of the adapter name; otherwise a hardware GPU is preferred
//! and a software one (lavapipe) is the fallback.

use crate::error::{Error, Result};

/// Mesa's loader prints `error: XDG_RUNTIME_DIR is invalid or not set` on every headless run
/// (from its window-system layer, which compute never uses), and a newcomer reads it as our
/// error. When the variable is unset, point it at a private directory of ours so nothing is
/// printed. Call it before any thread starts (the CLI's `main`; the Python package sets the
/// variable itself before loading the extension).
pub fn quiet_headless_loader() {
    #[cfg(unix)]
    if std::env::var_os("XDG_RUNTIME_DIR").is_none() {
        use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
        let Ok(uid) = std::fs::metadata("/proc/self").map(|m| m.uid()) else {
            return;
        };
        let dir = std::env::temp_dir().join(format!("closest-runtime-{uid}"));
        let _ = std::fs::DirBuilder::new().mode(0o700).create(&dir);
        // Only a directory of ours that nobody else may enter, as the variable requires.
        let private = std::fs::symlink_metadata(&dir)
            .is_ok_and(|m| m.is_dir() && m.uid() == uid && m.permissions().mode() & 0o077 == 0);
        if private {
            // SAFETY: called at start-up, before the process has other threads.
            unsafe { std::env::set_var("XDG_RUNTIME_DIR", &dir) };
        }
    }
}

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
                    Error::no_adapter(format!("no adapter at all, so none matches `{r}`"))
                } else {
                    // Installing lavapipe is no remedy for a name that matches none.
                    Error::NoAdapter(format!(
                        "no adapter matches `{r}`; available: {}; --adapter and \
                         CLOSEST_ADAPTER take a part of one of those names or a backend \
                         (vulkan, gl, metal, dx12)",
                        names()
                    ))
                }
            })?,
        None => all
            .first()
            .cloned()
            .ok_or_else(|| Error::no_adapter("wgpu found no Vulkan, Metal, DX12 or GL adapter"))?,
    };
    let info = chosen.get_info();
    Ok((chosen, info))
}
