//! The Rust side of the kernels' interface, stated once: the bind group's slots, the entry
//! points and the shaders holding them, and the pipeline overrides. The bind-group layout and
//! every bind group are built from [`Slot`]; [`reflect`] reads the same interface from a
//! composed naga module, and a GPU-free test (tests/shaders.rs) fails when any kernel and
//! this file disagree.

use super::shaders::ComposedShader;

/// How a kernel may use a buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    Uniform,
    ReadOnly,
    ReadWrite,
}

/// The slots of the one bind group (group 0) every kernel shares; each kernel binds the ones
/// it reads, and a dispatch fills them all ([`Bindings`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slot {
    /// `Params`: the chunk's rows, shape count, mode, round.
    Params = 0,
    /// A scene's shape records or packed triangles, or each row's own shape (paired jobs,
    /// segment pairs).
    Shapes = 1,
    /// The chunk's query points, three f32 a row.
    Points = 2,
    /// The chunk's answers, packed by the `FIELDS` override.
    Hits = 3,
    /// Per shape kind `[start, end, root node, node count]`.
    KindRanges = 4,
    /// A resident scene's records and hierarchy as texels (`Context::texture_texels`), a texture:
    /// the walks' hot loads are texel fetches (on llvmpipe a storage load is a loop over lanes).
    Texels = 5,
    /// A mesh's sign data: the winding-number clusters over its hierarchy (`GpuScene::clusters`) or
    /// its pseudonormal table (`mesh::Pseudonormals::gpu_words`).
    SignData = 6,
    /// The variable-size parts of shape records: convex hull faces (`layout::ShapeData`).
    ShapeData = 7,
    /// The chunk's query points again, as texels (`shared/point_texels.wgsl`), a texture the
    /// points buffer is copied into: the walks read their point there.
    PointTexels = 8,
}

impl Slot {
    pub const ALL: [Slot; 9] = [
        Slot::Params,
        Slot::Shapes,
        Slot::Points,
        Slot::Hits,
        Slot::KindRanges,
        Slot::Texels,
        Slot::SignData,
        Slot::ShapeData,
        Slot::PointTexels,
    ];

    pub fn binding(self) -> u32 {
        self as u32
    }

    pub fn from_binding(binding: u32) -> Option<Slot> {
        Slot::ALL.into_iter().find(|s| s.binding() == binding)
    }

    pub fn access(self) -> Access {
        match self {
            Slot::Params | Slot::KindRanges => Access::Uniform,
            Slot::Hits => Access::ReadWrite,
            Slot::Shapes
            | Slot::Points
            | Slot::Texels
            | Slot::SignData
            | Slot::ShapeData
            | Slot::PointTexels => Access::ReadOnly,
        }
    }

    fn layout_entry(self) -> wgpu::BindGroupLayoutEntry {
        if matches!(self, Slot::Texels | Slot::PointTexels) {
            return wgpu::BindGroupLayoutEntry {
                binding: self.binding(),
                visibility: wgpu::ShaderStages::COMPUTE,
                ty: wgpu::BindingType::Texture {
                    sample_type: wgpu::TextureSampleType::Uint,
                    view_dimension: wgpu::TextureViewDimension::D2Array,
                    multisampled: false,
                },
                count: None,
            };
        }
        let ty = match self.access() {
            Access::Uniform => wgpu::BufferBindingType::Uniform,
            Access::ReadOnly => wgpu::BufferBindingType::Storage { read_only: true },
            Access::ReadWrite => wgpu::BufferBindingType::Storage { read_only: false },
        };
        wgpu::BindGroupLayoutEntry {
            binding: self.binding(),
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: wgpu::BindingType::Buffer {
                ty,
                has_dynamic_offset: false,
                min_binding_size: None,
            },
            count: None,
        }
    }
}

/// The layout of the shared bind group, from [`Slot`].
pub(crate) fn bind_group_layout(device: &wgpu::Device) -> wgpu::BindGroupLayout {
    let entries: Vec<_> = Slot::ALL.into_iter().map(Slot::layout_entry).collect();
    device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
        label: Some("kernel bindings"),
        entries: &entries,
    })
}

/// One dispatch's buffer for every slot (a kernel that does not read a slot still gets a
/// placeholder there).
pub(crate) struct Bindings<'a> {
    pub params: &'a wgpu::Buffer,
    pub shapes: &'a wgpu::Buffer,
    pub points: &'a wgpu::Buffer,
    pub hits: &'a wgpu::Buffer,
    pub kind_ranges: &'a wgpu::Buffer,
    pub sign_data: &'a wgpu::Buffer,
    pub shape_data: &'a wgpu::Buffer,
    pub texels: &'a wgpu::TextureView,
    pub point_texels: &'a wgpu::TextureView,
}

impl Bindings<'_> {
    fn resource(&self, slot: Slot) -> wgpu::BindingResource<'_> {
        let buffer = match slot {
            Slot::Params => self.params,
            Slot::Shapes => self.shapes,
            Slot::Points => self.points,
            Slot::Hits => self.hits,
            Slot::KindRanges => self.kind_ranges,
            Slot::SignData => self.sign_data,
            Slot::ShapeData => self.shape_data,
            Slot::Texels => return wgpu::BindingResource::TextureView(self.texels),
            Slot::PointTexels => return wgpu::BindingResource::TextureView(self.point_texels),
        };
        buffer.as_entire_binding()
    }

    pub(crate) fn bind_group(
        &self,
        device: &wgpu::Device,
        layout: &wgpu::BindGroupLayout,
    ) -> wgpu::BindGroup {
        let entries: Vec<wgpu::BindGroupEntry> = Slot::ALL
            .into_iter()
            .map(|slot| wgpu::BindGroupEntry {
                binding: slot.binding(),
                resource: self.resource(slot),
            })
            .collect();
        device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("kernel bindings"),
            layout,
            entries: &entries,
        })
    }
}

/// The entry points the engine runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Entry {
    Paired,
    Nearest,
    /// `Nearest` walked by whole subgroups of 8 lanes (`query_subgroup.wgsl`).
    NearestSubgroup,
    /// `nearest` for triangle-only scenes with an oriented BVH (`mesh.wgsl`).
    NearestTriangle,
    /// `NearestTriangle` walked by whole subgroups of 8 lanes (`mesh_subgroup.wgsl`).
    NearestTriangleSubgroup,
    /// Winding-number signs of a mesh chunk's answers (`mesh.wgsl`).
    WindingSigns,
    /// `WindingSigns` by whole subgroups (`mesh_subgroup.wgsl`).
    WindingSignsSubgroup,
    /// Winding numbers of one part of a mesh in parts at a chunk's points (`mesh.wgsl`).
    WindingNumbers,
    /// `WindingNumbers` by whole subgroups (`mesh_subgroup.wgsl`).
    WindingNumbersSubgroup,
    SegmentPairs,
    /// The nearest shape of a resident scene to each row's body (`bodies.wgsl`).
    BodyNearest,
    /// `BodyNearest` walked by whole subgroups of 8 lanes (`bodies_subgroup.wgsl`).
    BodyNearestSubgroup,
    /// Body i against target i (`bodies.wgsl`).
    BodyPaired,
}

impl Entry {
    pub const ALL: [Entry; 13] = [
        Entry::Paired,
        Entry::Nearest,
        Entry::NearestSubgroup,
        Entry::NearestTriangle,
        Entry::NearestTriangleSubgroup,
        Entry::WindingSigns,
        Entry::WindingSignsSubgroup,
        Entry::WindingNumbers,
        Entry::WindingNumbersSubgroup,
        Entry::SegmentPairs,
        Entry::BodyNearest,
        Entry::BodyNearestSubgroup,
        Entry::BodyPaired,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Entry::Paired => "paired",
            Entry::Nearest => "nearest",
            Entry::NearestSubgroup => "nearest_subgroup",
            Entry::NearestTriangle => "nearest_triangle",
            Entry::NearestTriangleSubgroup => "nearest_triangle_subgroup",
            Entry::WindingSigns => "winding_signs",
            Entry::WindingSignsSubgroup => "winding_signs_subgroup",
            Entry::WindingNumbers => "winding_numbers",
            Entry::WindingNumbersSubgroup => "winding_numbers_subgroup",
            Entry::SegmentPairs => "segment_pairs",
            Entry::BodyNearest => "body_nearest",
            Entry::BodyNearestSubgroup => "body_nearest_subgroup",
            Entry::BodyPaired => "body_paired",
        }
    }

    /// The entry that answers as this one on an engine with (or without) the subgroup kernels.
    pub(crate) fn for_engine(self, subgroup_kernels: bool) -> Entry {
        match (self, subgroup_kernels) {
            (Entry::Nearest, true) => Entry::NearestSubgroup,
            (Entry::NearestTriangle, true) => Entry::NearestTriangleSubgroup,
            (Entry::WindingSigns, true) => Entry::WindingSignsSubgroup,
            (Entry::WindingNumbers, true) => Entry::WindingNumbersSubgroup,
            (Entry::BodyNearest, true) => Entry::BodyNearestSubgroup,
            (entry, _) => entry,
        }
    }

    /// The composed shader holding this entry point.
    pub fn shader(self) -> &'static str {
        match self {
            Entry::Paired | Entry::Nearest => "query",
            Entry::NearestSubgroup => "query_subgroup",
            Entry::SegmentPairs => "segments",
            Entry::BodyNearest | Entry::BodyPaired => "bodies",
            Entry::BodyNearestSubgroup => "bodies_subgroup",
            Entry::NearestTriangle | Entry::WindingSigns | Entry::WindingNumbers => "mesh",
            Entry::NearestTriangleSubgroup
            | Entry::WindingSignsSubgroup
            | Entry::WindingNumbersSubgroup => "mesh_subgroup",
        }
    }

    /// Whether its shader needs `wgpu::Features::SUBGROUP` (checked against naga).
    pub fn needs_subgroups(self) -> bool {
        matches!(
            self,
            Entry::NearestSubgroup
                | Entry::NearestTriangleSubgroup
                | Entry::WindingSignsSubgroup
                | Entry::WindingNumbersSubgroup
                | Entry::BodyNearestSubgroup
        )
    }
}

/// Every kernel shader, once, with its entry points, in [`Entry::ALL`]'s order.
pub fn kernel_shaders() -> Vec<(&'static str, Vec<Entry>)> {
    let mut shaders: Vec<(&'static str, Vec<Entry>)> = Vec::new();
    for entry in Entry::ALL {
        match shaders.iter_mut().find(|(s, _)| *s == entry.shader()) {
            Some((_, entries)) => entries.push(entry),
            None => shaders.push((entry.shader(), vec![entry])),
        }
    }
    shaders
}

/// The pipeline overrides the engine sets, where a kernel declares them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Override {
    /// The output fields (`fields::Fields::bits`).
    Fields,
    /// The one kind of every shape, or `shaders::ANY_KIND`.
    OnlyKind,
    /// The kinds in the scene's hierarchy, a bit each.
    BvhKinds,
    /// The kinds scanned linearly, a bit each.
    LinearKinds,
    /// How a triangle scene's triangles are stored: 0 packed, 1 indexed.
    TriangleRecords,
    /// A mesh's rows are signed by pseudonormal as they are answered: 0 no, 1 yes.
    PseudonormalSigns,
    /// Rows are an SDF grid's samples, computed on the device (`gpu::grid`): 0 no, 1 yes.
    GridSamples,
    /// The scene is one shape, of `OnlyKind`, without a hierarchy: 0 no, 1 yes.
    OneShape,
    /// The walks read their points from `Slot::PointTexels`, and `paired` each row's shape
    /// from `Slot::Texels`: 0 no (the `points` and `shapes` buffers), 1 yes.
    PointTexels,
    /// The entries a walk's stack may hold, at most `bvh::STACK_SIZE` (fewer in tests).
    StackLimit,
    /// The accuracy of `winding_numbers`: 0 coarse, 1 fine (`winding::COARSE_ACCURACY`,
    /// `winding::ACCURACY`).
    FineWinding,
    /// The loop iterations a body walk may run an invocation (0: no limit): software adapters
    /// get one below Mesa's loop limiter (`bodies.wgsl`).
    LoopBudget,
    /// The kinds among a body job's bodies, a bit each: the narrow phase is compiled for them.
    BodyKinds,
    /// The kinds among a body job's targets (a scene's, or the paired ones), a bit each.
    TargetKinds,
}

impl Override {
    pub const ALL: [Override; 14] = [
        Override::Fields,
        Override::OnlyKind,
        Override::BvhKinds,
        Override::LinearKinds,
        Override::TriangleRecords,
        Override::PseudonormalSigns,
        Override::GridSamples,
        Override::OneShape,
        Override::PointTexels,
        Override::StackLimit,
        Override::FineWinding,
        Override::LoopBudget,
        Override::BodyKinds,
        Override::TargetKinds,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Override::Fields => "FIELDS",
            Override::OnlyKind => "ONLY_KIND",
            Override::BvhKinds => "BVH_KINDS",
            Override::LinearKinds => "LINEAR_KINDS",
            Override::TriangleRecords => "TRIANGLE_RECORDS",
            Override::PseudonormalSigns => "PSEUDONORMAL_SIGNS",
            Override::GridSamples => "GRID_SAMPLES",
            Override::OneShape => "ONE_SHAPE",
            Override::PointTexels => "POINT_TEXELS",
            Override::StackLimit => "STACK_LIMIT",
            Override::FineWinding => "FINE_WINDING",
            Override::LoopBudget => "LOOP_BUDGET",
            Override::BodyKinds => "BODY_KINDS",
            Override::TargetKinds => "TARGET_KINDS",
        }
    }
}

/// Overrides the WGSL computes from others; the engine never sets them.
pub const DERIVED_OVERRIDES: &[&str] = &["ONLY_KIND_INDEX", "SUPPORT_KINDS"];

/// A kernel's interface as naga reads it from the composed module.
#[derive(Clone, Debug)]
pub struct Reflected {
    /// (group, binding, access, WGSL name) of every resource an entry point uses.
    pub bindings: Vec<(u32, u32, Access, String)>,
    /// (name, workgroup size).
    pub entry_points: Vec<(String, [u32; 3])>,
    pub overrides: Vec<String>,
}

/// Read `shader`'s interface: the resources its entry points use, its entry points and
/// overrides.
pub fn reflect(shader: &ComposedShader) -> Reflected {
    let module = &shader.module;
    let mut bindings = Vec::new();
    for index in 0..module.entry_points.len() {
        let used = shader.info.get_entry_point(index);
        for (handle, variable) in module.global_variables.iter() {
            let Some(binding) = &variable.binding else {
                continue;
            };
            if used[handle].is_empty() {
                continue;
            }
            let access = match variable.space {
                naga::AddressSpace::Uniform => Access::Uniform,
                naga::AddressSpace::Storage { access }
                    if access.contains(naga::StorageAccess::STORE) =>
                {
                    Access::ReadWrite
                }
                _ => Access::ReadOnly,
            };
            let name = variable.name.clone().unwrap_or_default();
            let item = (binding.group, binding.binding, access, name);
            if !bindings.contains(&item) {
                bindings.push(item);
            }
        }
    }
    Reflected {
        bindings,
        entry_points: module
            .entry_points
            .iter()
            .map(|e| (e.name.clone(), e.workgroup_size))
            .collect(),
        overrides: module
            .overrides
            .iter()
            .filter_map(|(_, o)| o.name.clone())
            .collect(),
    }
}

/// Whether `shader` uses subgroup operations: naga refuses it without the capability.
pub fn uses_subgroups(shader: &ComposedShader) -> bool {
    naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::default(),
    )
    .validate(&shader.module)
    .is_err()
}
