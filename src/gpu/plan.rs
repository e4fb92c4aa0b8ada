//! Dispatch plans: each kind of job says here what a chunk of it runs (its passes, each a
//! pipeline and its rounds) and what fills the bind group's slots. The streaming loop
//! (`stream.rs`) carries out a plan knowing nothing of the job's kind.

use super::context::Context;
use super::grid::GridRows;
use super::interface::Entry;
use super::kernels::PipelineKey;
use super::layout::{SEED_ROUNDS, SEED_STRIDE};
use super::scene::GpuScene;
use crate::Mode;
use crate::error::Result;
use crate::fields::Fields;
use crate::shape::ShapeKind;

/// The kinds of job the engine streams.
pub(crate) enum Job<'a> {
    /// Point i against shape i; the kind is set when all shapes share it, `data` holds the
    /// shapes' variable-size parts when any has one (`layout::ShapeData::for_paired`).
    Paired {
        kind: Option<ShapeKind>,
        data: Option<&'a wgpu::Buffer>,
    },
    /// Nearest shape of a scene; a mesh's answers may be signed on the device, and its rows
    /// may be an SDF grid's samples computed there (a triangle scene's).
    Nearest {
        scene: &'a GpuScene,
        sign: DeviceSign<'a>,
        grid: Option<GridRows>,
    },
    /// Segment pair i (streamed as shape records, see `GpuShape::from_segment_pair`).
    SegmentPairs,
    /// The nearest shape of a scene to each row's body (streamed as shape records, their
    /// hulls' faces in `data`); the scene's BVH is axis-aligned (`GpuScene::oriented` false).
    /// `body_kinds`: the kinds among the bodies, a bit each; `together`: the bodies of a
    /// subgroup walk together where the engine has the subgroup kernels (dense jobs:
    /// `bodies::walk_together`); `linear_ranges`: whether the scene's linear ranges are
    /// scanned after its BVH (left out for far bodies moved to the BVH's shapes).
    BodyNearest {
        scene: &'a GpuScene,
        data: Option<&'a wgpu::Buffer>,
        body_kinds: u32,
        together: bool,
        linear_ranges: bool,
    },
    /// Body i against target i, two records a row (body, target), hull faces in `data`; the
    /// kinds among each, a bit each.
    BodyPaired {
        data: Option<&'a wgpu::Buffer>,
        body_kinds: u32,
        target_kinds: u32,
    },
    /// The winding number of one part of a mesh in parts (its scene, with its clusters) at
    /// each point, as the row's distance: coarse, or `fine`.
    WindingNumbers { scene: &'a GpuScene, fine: bool },
}

/// How the device signs a mesh's answers, with the sign data it reads.
#[derive(Clone, Copy)]
pub(crate) enum DeviceSign<'a> {
    /// Not at all (unsigned, or signed on the host).
    None,
    /// By winding number, in a pass after the nearest triangles, from the clusters over the
    /// scene's own hierarchy (`GpuScene::clusters`).
    Winding(&'a wgpu::Buffer),
    /// By the pseudonormal of the nearest feature, as each row is answered
    /// (`Pseudonormals::gpu_words`).
    Pseudonormal(&'a wgpu::Buffer),
}

impl<'a> DeviceSign<'a> {
    fn data(self) -> Option<&'a wgpu::Buffer> {
        match self {
            DeviceSign::None => None,
            DeviceSign::Winding(data) | DeviceSign::Pseudonormal(data) => Some(data),
        }
    }
}

/// How a pass splits a chunk's rows over its dispatches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Rounds {
    /// One dispatch over every row.
    Once,
    /// `mesh.wgsl`'s seeded rounds: every SEED_STRIDE²-th row first, then every
    /// SEED_STRIDE-th from their answers, then the rest; round r reads `Params.round == r`.
    Seeded,
}

impl Rounds {
    /// Rows each dispatch answers, for a chunk of `n` rows.
    pub(crate) fn rows(self, n: usize) -> Vec<usize> {
        match self {
            Rounds::Once => vec![n],
            Rounds::Seeded => {
                // Rows answered by the end of round r.
                let answered = |r: u32| n.div_ceil(SEED_STRIDE.pow(SEED_ROUNDS - 1 - r));
                (0..SEED_ROUNDS)
                    .map(|r| answered(r) - if r == 0 { 0 } else { answered(r - 1) })
                    .collect()
            }
        }
    }

    fn count(self) -> usize {
        match self {
            Rounds::Once => 1,
            Rounds::Seeded => SEED_ROUNDS as usize,
        }
    }
}

/// One pipeline run over a chunk, in order after the passes before it.
pub(crate) struct Pass {
    pub pipeline: wgpu::ComputePipeline,
    pub rounds: Rounds,
}

/// What fills the shape slots.
pub(crate) enum ShapeBuffers<'a> {
    /// A resident scene: its records, kind ranges, texels (records and hierarchy) and shape
    /// data, and its shape count.
    Resident {
        records: &'a wgpu::Buffer,
        kind_ranges: &'a wgpu::Buffer,
        texels: &'a wgpu::TextureView,
        data: &'a wgpu::Buffer,
        count: u32,
    },
    /// Every row brings `records` shape records, streamed beside the points, their
    /// variable-size parts resident in `data`; the scene slots get placeholders.
    PerRow {
        data: Option<&'a wgpu::Buffer>,
        records: usize,
    },
    /// Every row brings its body's record, against a resident scene (its kind ranges, texels
    /// and shape count); the bodies' variable-size parts are in `data`.
    BodiesAgainst {
        kind_ranges: &'a wgpu::Buffer,
        texels: &'a wgpu::TextureView,
        count: u32,
        data: Option<&'a wgpu::Buffer>,
    },
}

/// What a chunk of a job runs.
pub(crate) struct Plan<'a> {
    pub passes: Vec<Pass>,
    pub shapes: ShapeBuffers<'a>,
    /// A mesh's sign data, for the passes that sign by it.
    pub sign_data: Option<&'a wgpu::Buffer>,
    /// Points (or a body job's bodies) go to the device in Morton order (it pays when they
    /// traverse a hierarchy).
    pub reorders_points: bool,
    /// Rows are this grid's samples, made on the device: dense chunks are its boxes, each
    /// passing only a header (`Params::grid`); listed boxes pass their records as points.
    pub grid: Option<GridRows>,
    /// Later rounds or passes read each row's shape: rows that do not move it back keep it
    /// on the device (`Params::kept_shapes`).
    pub keeps_shapes: bool,
    /// Each row's shape is copied into texels too (`Slot::Texels`), where `paired` and
    /// `segment_pairs` read it.
    pub shape_texels: bool,
    /// The fields computed and moved back (`Params` and the packed rows' width).
    pub fields: Fields,
    /// The query mode every row is answered in.
    pub mode: Mode,
}

impl GpuScene {
    /// The shape slots' contents for this resident scene.
    fn resident_buffers(&self) -> ShapeBuffers<'_> {
        ShapeBuffers::Resident {
            records: &self.shapes,
            kind_ranges: &self.ranges,
            texels: &self.texels,
            data: &self.data,
            count: self.count,
        }
    }
}

impl Plan<'_> {
    pub(crate) fn streams_shapes(&self) -> bool {
        self.records_per_row() > 0
    }

    /// Shape records each row streams.
    pub(crate) fn records_per_row(&self) -> usize {
        match self.shapes {
            ShapeBuffers::PerRow { records, .. } => records,
            ShapeBuffers::BodiesAgainst { .. } => 1,
            ShapeBuffers::Resident { .. } => 0,
        }
    }

    /// Dispatches of the longest pass: each gets its own `Params` (round r of that many);
    /// passes of fewer rounds use the first.
    pub(crate) fn round_count(&self) -> usize {
        self.passes
            .iter()
            .map(|p| p.rounds.count())
            .max()
            .unwrap_or(1)
    }
}

impl Job<'_> {
    /// The plan of this job on `gpu`, computing `fields` in `mode`.
    pub(crate) fn plan(&self, gpu: &Context, fields: Fields, mode: Mode) -> Result<Plan<'_>> {
        let key = |entry: Entry, kind| PipelineKey {
            entry: entry.for_engine(gpu.subgroup_kernels),
            kind,
            bvh_kinds: 0,
            linear_kinds: u32::MAX,
            fields: fields.bits(),
            indexed_triangles: false,
            pseudonormal_signs: false,
            grid_samples: 0,
            one_shape: false,
            fine_winding: false,
            body_kinds: u32::MAX,
            target_kinds: u32::MAX,
        };
        // Pipelines are built in the device's turn (`gpu::turn`).
        let _turn = gpu.turn.take();
        let pass = |key, rounds| -> Result<Pass> {
            Ok(Pass {
                pipeline: gpu.kernels.pipeline(&gpu.device, key)?,
                rounds,
            })
        };
        Ok(match self {
            Job::Paired { kind, data } => Plan {
                passes: vec![pass(key(Entry::Paired, *kind), Rounds::Once)?],
                shapes: ShapeBuffers::PerRow {
                    data: *data,
                    records: 1,
                },
                sign_data: None,
                reorders_points: false,
                grid: None,
                keeps_shapes: false,
                shape_texels: gpu.point_texels,
                fields,
                mode,
            },
            Job::SegmentPairs => Plan {
                passes: vec![pass(key(Entry::SegmentPairs, None), Rounds::Once)?],
                shapes: ShapeBuffers::PerRow {
                    data: None,
                    records: 1,
                },
                sign_data: None,
                reorders_points: false,
                grid: None,
                keeps_shapes: false,
                shape_texels: gpu.point_texels,
                fields,
                mode,
            },
            Job::BodyNearest {
                scene,
                data,
                body_kinds,
                together,
                linear_ranges,
            } => Plan {
                passes: vec![pass(
                    PipelineKey {
                        entry: Entry::BodyNearest.for_engine(gpu.subgroup_kernels && *together),
                        body_kinds: *body_kinds,
                        target_kinds: scene.bvh_kinds | scene.linear_kinds,
                        linear_kinds: if *linear_ranges {
                            scene.linear_kinds
                        } else {
                            0
                        },
                        ..key(Entry::BodyNearest, None)
                    },
                    Rounds::Once,
                )?],
                shapes: ShapeBuffers::BodiesAgainst {
                    kind_ranges: &scene.ranges,
                    texels: &scene.texels,
                    count: scene.count,
                    data: *data,
                },
                sign_data: None,
                // Bodies in Morton order of their anchors: lanes side by side walk alike
                // (docs/PERF.md, "Bodies, against parry3d").
                reorders_points: gpu
                    .reorder_queries
                    .load(std::sync::atomic::Ordering::Relaxed),
                grid: None,
                keeps_shapes: false,
                shape_texels: false,
                fields,
                mode,
            },
            Job::BodyPaired {
                data,
                body_kinds,
                target_kinds,
            } => Plan {
                passes: vec![pass(
                    PipelineKey {
                        body_kinds: *body_kinds,
                        target_kinds: *target_kinds,
                        ..key(Entry::BodyPaired, None)
                    },
                    Rounds::Once,
                )?],
                shapes: ShapeBuffers::PerRow {
                    data: *data,
                    records: 2,
                },
                sign_data: None,
                reorders_points: false,
                grid: None,
                keeps_shapes: false,
                shape_texels: false,
                fields,
                mode,
            },
            Job::WindingNumbers { scene, fine } => Plan {
                passes: vec![pass(
                    PipelineKey {
                        indexed_triangles: scene.indexed,
                        fine_winding: *fine,
                        ..key(Entry::WindingNumbers, None)
                    },
                    Rounds::Once,
                )?],
                shapes: scene.resident_buffers(),
                sign_data: scene.clusters.as_ref(),
                grid: None,
                keeps_shapes: false,
                shape_texels: false,
                fields,
                mode,
                reorders_points: gpu
                    .reorder_queries
                    .load(std::sync::atomic::Ordering::Relaxed),
            },
            Job::Nearest { scene, sign, grid } => {
                let triangles = |entry| PipelineKey {
                    indexed_triangles: scene.indexed,
                    pseudonormal_signs: matches!(sign, DeviceSign::Pseudonormal(_)),
                    grid_samples: grid.map_or(0, |g| g.mode()),
                    ..key(entry, None)
                };
                let nearest = if scene.oriented {
                    // Listed boxes' walks are bounded and start deep already: one dispatch,
                    // each subgroup of 8 lanes a box, beat seeded rounds (docs/PERF.md).
                    let listed_boxes = matches!(grid, Some(GridRows::Boxes { .. }));
                    let rounds = if gpu.seeded_mesh_rounds && !listed_boxes {
                        Rounds::Seeded
                    } else {
                        Rounds::Once
                    };
                    pass(triangles(Entry::NearestTriangle), rounds)?
                } else {
                    let specialised = PipelineKey {
                        bvh_kinds: scene.bvh_kinds,
                        linear_kinds: scene.linear_kinds,
                        one_shape: scene.count == 1 && scene.bvh_kinds == 0,
                        ..key(Entry::Nearest, scene.kind)
                    };
                    pass(specialised, Rounds::Once)?
                };
                let mut passes = vec![nearest];
                let winding = matches!(sign, DeviceSign::Winding(_));
                if winding {
                    // Every row of the chunk, once the nearest pass has answered them.
                    // It reads the scene's triangles, however they are stored.
                    let signs = triangles(Entry::WindingSigns);
                    passes.push(pass(signs, Rounds::Once)?);
                }
                Plan {
                    passes,
                    shapes: scene.resident_buffers(),
                    sign_data: sign.data(),
                    grid: *grid,
                    keeps_shapes: scene.oriented || winding,
                    shape_texels: false,
                    fields,
                    mode,
                    reorders_points: grid.is_none()
                        && scene.bvh_kinds != 0
                        && gpu
                            .reorder_queries
                            .load(std::sync::atomic::Ordering::Relaxed),
                }
            }
        })
    }
}
