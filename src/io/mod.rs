//! File formats of SPEC §1 and §5: scene JSON, points (.npy / .csv), results (.npz / .csv).

pub mod columns;
#[doc(hidden)]
pub mod fuzz;
mod gltf;
mod lzf;
pub mod mesh_file;
pub mod npy;
mod npy_source;
mod npz;
pub mod output;
mod pcd;
mod records;
pub mod row_files;
pub mod scene;
pub mod scene_text;
pub mod temporary;
pub mod zarr;

pub use columns::{ColumnSpec, ColumnType, Values, field_column, field_columns, field_values};
pub use mesh_file::{MeshFormat, load_mesh, load_uploaded_mesh, read_mesh};
pub use npz::{Constant, NpzInMemory, npz_in_memory};
pub use output::OutputFile;
pub use row_files::{PointFile, RowFile, RowLayout};
pub use scene::{load_scene, parse_scene, shapes_from_values};

/// Open an input file to read; a folder is refused by name (Linux opens one, and its first
/// read's error read as a file "too short" or cut off).
pub(crate) fn open_input(path: &std::path::Path) -> crate::error::Result<std::fs::File> {
    let read_error = |source| crate::error::Error::Read {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(read_error)?;
    if file.metadata().is_ok_and(|m| m.is_dir()) {
        return Err(read_error(std::io::Error::new(
            std::io::ErrorKind::IsADirectory,
            "it is a folder, not a file",
        )));
    }
    Ok(file)
}

/// The length of the input file `path`, in bytes.
pub(crate) fn input_len(path: &std::path::Path) -> crate::error::Result<u64> {
    std::fs::metadata(path)
        .map(|m| m.len())
        .map_err(|source| crate::error::Error::Read {
            path: path.to_path_buf(),
            source,
        })
}
