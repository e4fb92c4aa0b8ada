//! The device side of the engine: adapter choice, the device and its kernels (`context`),
//! resident scenes, the kernels' interface and records, dispatch plans, and a streaming loop
//! that splits any number of rows into chunks sized from the device limits, overlapping the
//! upload of one chunk with the compute and readback of the others. No job kind is named
//! here except in `plan`; the jobs themselves are `crate::engine`.

pub mod adapter;
mod cells;
pub(crate) mod context;
pub(crate) mod grid;
pub mod interface;
pub(crate) mod kernels;
pub mod layout;
pub mod options;
mod order;
pub(crate) mod plan;
pub(crate) mod rows;
pub(crate) mod scene;
pub mod scene_layout;
pub mod shaders;
pub(crate) mod stream;
pub(crate) mod texels;
pub(crate) mod turn;

pub use crate::fields::{PackedSink, TRAVERSAL_OVERFLOW};
pub use adapter::{AdapterSummary, list_adapters};
pub(crate) use context::{Context, HostReservation, common_kind};
pub use layout::{GpuHit, GpuSegmentHit, GpuShape, Params};
pub use options::{EngineOptions, JobTiming, MeshRecords};
pub use order::morton_code;
pub use rows::{RowSource, query_point, write_query_points, write_query_points_iter};
pub use scene::GpuScene;
pub use stream::dispatch_grid;
