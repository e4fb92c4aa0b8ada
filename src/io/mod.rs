//! File formats of SPEC §1 and §5: scene JSON, points (.npy / .csv), results (.npz / .csv).

pub mod columns;
#[doc(hidden)]
pub mod fuzz;
pub mod mesh_file;
pub mod npy;
mod npz;
pub mod output;
pub mod row_files;
pub mod scene;
pub mod temporary;
pub mod zarr;

pub use columns::{ColumnSpec, ColumnType, Values, field_column, field_columns, field_values};
pub use mesh_file::{MeshFormat, load_mesh, read_mesh};
pub use npz::{Constant, NpzInMemory, npz_in_memory};
pub use output::OutputFile;
pub use row_files::{PointFile, RowFile, RowLayout};
pub use scene::{load_scene, parse_scene, shapes_from_values};
