//! The kernels: one shader module each, composed and validated on first use, and their
//! pipelines, specialised by overrides on first use and cached by `PipelineKey`.

use std::collections::HashMap;
use std::sync::Mutex;

use super::interface::{self, Entry, Override};
use super::shaders;
use crate::error::{Error, Result};
use crate::shape::ShapeKind;

pub(crate) struct Kernels {
    pub layout: wgpu::BindGroupLayout,
    pipeline_layout: wgpu::PipelineLayout,
    /// Shader modules by name (`query`, `segments`), made on first use: composing and
    /// validating every kernel was ~140 ms of CPU at each engine's open on lavapipe, most of it
    /// for kernels the job never runs. All share one bind-group layout.
    modules: HashMap<&'static str, ModuleCell>,
    /// Pipelines by their specialisation, built on first use, each in a cell of its own: the
    /// cache's lock is held only to find the cell, and a build (seconds on lavapipe with a cold
    /// shader cache) holds its key's cell alone. One lock held through a build stalled every
    /// other job meanwhile, cached pipelines and a service's other clients included.
    pipelines: Mutex<HashMap<PipelineKey, PipelineCell>>,
    pub workgroup_size: u32,
    /// `POINT_TEXELS`: the walks read points from texels (`Context::point_texels`).
    point_texels: bool,
    /// `STACK_LIMIT`: the entries a walk's stack may hold (`EngineOptions::walk_stack_entries`).
    pub stack_limit: u32,
    /// `LOOP_BUDGET`: the loop iterations a body walk may run an invocation (0: no limit).
    pub loop_budget: u32,
}

/// One key's pipeline, once built.
type PipelineCell = std::sync::Arc<Mutex<Option<wgpu::ComputePipeline>>>;

/// One shader's module, once made, with the overrides it declares.
type ModuleCell = Mutex<Option<(wgpu::ShaderModule, Vec<String>)>>;

/// What a pipeline is specialised for: software adapters run every branch the compiler cannot
/// drop, so code a job never takes is compiled out through pipeline overrides.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct PipelineKey {
    pub entry: Entry,
    /// `ONLY_KIND`: the one kind of every shape, if they share one.
    pub kind: Option<ShapeKind>,
    /// `BVH_KINDS`: the kinds in the scene's hierarchy, a bit each (0: no hierarchy).
    pub bvh_kinds: u32,
    /// `LINEAR_KINDS`: the kinds scanned linearly, a bit each.
    pub linear_kinds: u32,
    /// `FIELDS`: the output fields (`fields::Fields::bits`), which rows hold, packed.
    pub fields: u32,
    /// `TRIANGLE_RECORDS`: a triangle scene's records are indexed.
    pub indexed_triangles: bool,
    /// `PSEUDONORMAL_SIGNS`: a mesh's rows are signed by pseudonormal as they are answered.
    pub pseudonormal_signs: bool,
    /// `GRID_SAMPLES`: rows are the samples of an SDF grid, computed on the device (0 no,
    /// `GridRows::mode` yes).
    pub grid_samples: u32,
    /// `ONE_SHAPE`: the scene is one shape of `kind`, without a hierarchy.
    pub one_shape: bool,
    /// `FINE_WINDING`: `winding_numbers` at the fine accuracy.
    pub fine_winding: bool,
    /// `BODY_KINDS`: the kinds among a body job's bodies, a bit each.
    pub body_kinds: u32,
    /// `TARGET_KINDS`: the kinds among a body job's targets, a bit each.
    pub target_kinds: u32,
}

impl Kernels {
    /// The pipeline for `key`, built on first use.
    pub(crate) fn pipeline(
        &self,
        device: &wgpu::Device,
        key: PipelineKey,
    ) -> Result<wgpu::ComputePipeline> {
        let cell = crate::sync::lock(&self.pipelines)
            .entry(key)
            .or_default()
            .clone();
        let mut built = crate::sync::lock(&cell);
        if let Some(p) = built.as_ref() {
            return Ok(p.clone());
        }
        let PipelineKey {
            entry,
            kind,
            bvh_kinds,
            linear_kinds,
            fields,
            indexed_triangles,
            pseudonormal_signs,
            grid_samples,
            one_shape,
            fine_winding,
            body_kinds,
            target_kinds,
        } = key;
        let (module, declared) = self.module(device, entry)?;
        // Each override where the kernel declares it.
        let constants: Vec<(&str, f64)> = Override::ALL
            .into_iter()
            .filter(|o| declared.iter().any(|d| d == o.name()))
            .map(|o| {
                let value = match o {
                    Override::Fields => fields,
                    Override::OnlyKind => kind.map_or(shaders::ANY_KIND, |k| k as u32),
                    Override::BvhKinds => bvh_kinds,
                    Override::LinearKinds => linear_kinds,
                    Override::TriangleRecords => u32::from(indexed_triangles),
                    Override::PseudonormalSigns => u32::from(pseudonormal_signs),
                    Override::GridSamples => grid_samples,
                    Override::OneShape => u32::from(one_shape),
                    Override::PointTexels => u32::from(self.point_texels),
                    Override::StackLimit => self.stack_limit,
                    Override::FineWinding => u32::from(fine_winding),
                    Override::LoopBudget => self.loop_budget,
                    Override::BodyKinds => body_kinds,
                    Override::TargetKinds => target_kinds,
                };
                (o.name(), f64::from(value))
            })
            .collect();
        let pipeline = in_error_scope(device, || {
            device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(entry.name()),
                layout: Some(&self.pipeline_layout),
                module: &module,
                entry_point: Some(entry.name()),
                compilation_options: wgpu::PipelineCompilationOptions {
                    constants: &constants,
                    ..Default::default()
                },
                cache: None,
            })
        })?;
        // A failed build leaves the cell empty: the next job tries again.
        *built = Some(pipeline.clone());
        Ok(pipeline)
    }

    /// `entry`'s shader module and the overrides it declares, composed and made on first use.
    fn module(
        &self,
        device: &wgpu::Device,
        entry: Entry,
    ) -> Result<(wgpu::ShaderModule, Vec<String>)> {
        let name = entry.shader();
        let cell = self.modules.get(name).ok_or_else(|| {
            Error::Gpu(format!(
                "`{}` needs subgroups, which this adapter lacks",
                entry.name()
            ))
        })?;
        let mut made = crate::sync::lock(cell);
        if let Some(module) = made.as_ref() {
            return Ok(module.clone());
        }
        let shader = shaders::compose(name).map_err(Error::Gpu)?;
        for entry in Entry::ALL.into_iter().filter(|e| e.shader() == name) {
            let size = shader.workgroup_size(entry.name()).ok_or_else(|| {
                Error::Gpu(format!("{name}.wgsl has no `{}` entry point", entry.name()))
            })?;
            if size != [shaders::WORKGROUP_SIZE, 1, 1] {
                return Err(Error::Gpu(format!(
                    "{name}.wgsl: `{}` has workgroup size {size:?}, not WORKGROUP_SIZE",
                    entry.name()
                )));
            }
        }
        let overrides = interface::reflect(&shader).overrides;
        let module = in_error_scope(device, || {
            device.create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some(name),
                source: wgpu::ShaderSource::Wgsl(shader.source.as_str().into()),
            })
        })?;
        Ok(made.insert((module, overrides)).clone())
    }
}

pub(super) fn build_kernels(
    device: &wgpu::Device,
    subgroups: bool,
    point_texels: bool,
    stack_limit: u32,
    loop_budget: u32,
) -> Kernels {
    // A cell for each kernel the adapter can run; each is composed on first use.
    let modules = interface::kernel_shaders()
        .into_iter()
        .filter(|(_, entries)| subgroups || !entries.iter().any(|e| e.needs_subgroups()))
        .map(|(name, _)| (name, Mutex::new(None)))
        .collect();
    let layout = interface::bind_group_layout(device);
    let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
        label: Some("kernels"),
        bind_group_layouts: &[Some(&layout)],
        immediate_size: 0,
    });
    Kernels {
        layout,
        pipeline_layout,
        modules,
        pipelines: Mutex::new(HashMap::new()),
        workgroup_size: shaders::WORKGROUP_SIZE,
        point_texels,
        stack_limit,
        loop_budget,
    }
}

/// Run `f` inside validation and out-of-memory error scopes.
pub(super) fn in_error_scope<T>(device: &wgpu::Device, f: impl FnOnce() -> T) -> Result<T> {
    let oom = device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
    let validation = device.push_error_scope(wgpu::ErrorFilter::Validation);
    let value = f();
    let v = pollster::block_on(validation.pop());
    let o = pollster::block_on(oom.pop());
    match (v, o) {
        (None, None) => Ok(value),
        (Some(e), _) | (None, Some(e)) => Err(Error::Gpu(e.to_string())),
    }
}
