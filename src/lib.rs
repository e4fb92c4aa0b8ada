#![doc = include_str!("../README.md")]

// The user guide's Rust examples run as doctests (`cargo test --doc`), so they cannot drift.
#[cfg(doctest)]
#[doc = include_str!("../docs/guide/library.md")]
pub struct GuideLibraryExamples;
#[cfg(doctest)]
#[doc = include_str!("../docs/guide/meshes.md")]
pub struct GuideMeshExamples;

pub mod auto_sign;
pub mod bench;
pub mod bvh;
pub mod contacts;
pub mod deviation_map;
pub mod engine;
pub mod error;
pub mod fields;
pub mod gpu;
pub mod host_memory;
pub mod hull;
pub mod interrupt;
pub mod io;
pub mod job;
pub mod math;
pub mod mesh;
pub mod points;
pub mod reference;
pub mod sample;
pub mod sdf;
pub mod semantics;
#[cfg(feature = "serve")]
pub mod serve;
pub mod shape;
pub mod sync;
pub mod winding;

pub use contacts::Contact;
pub use engine::{Engine, EngineOpening, GpuMesh};
pub use error::{Error, Result};
pub use fields::{Columns, Family, Fields, GpuBodyHit, PackedRows};
pub use gpu::{EngineOptions, GpuHit, GpuScene, GpuSegmentHit, MeshRecords};
pub use math::DVec3;
pub use points::{PointChunk, PointReader, Points};
pub use semantics::{Mode, is_queryable, tolerance};
pub use shape::{Shape, ShapeKind};
