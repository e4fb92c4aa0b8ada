//! Signed-distance grids: the grid's geometry, and the files derived from a finished grid
//! (VTK ImageData for ParaView, a PNG of a mid slice), written from the `.npz` being produced
//! slab by slab, never holding the whole grid.

use std::io::Write;

use crate::error::{Error, Result};
use crate::io::OutputFile;
use crate::math::DVec3;

/// Where an SDF grid lies: padded around the mesh, or given outright.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum GridRegion {
    /// The mesh's bounding box grown on each side by this fraction of its largest extent.
    Pad(f64),
    /// `[x0, y0, z0, x1, y1, z1]`.
    Bounds([f64; 6]),
}

/// Samples an axis of a grid at most: the device makes sample (i, j, k) from its indices in
/// f32, exact below 2^24.
pub const MAX_GRID_SIDE: usize = 1 << 24;

/// Samples of an x-plane (NY × NZ) at most: grids stream in slabs of whole planes, and a narrow
/// band's slab (8 planes, or about 2^20 samples of smaller ones) numbers its samples in 32
/// bits (`engine::band`). The grid itself may hold any number of planes: a `.zarr`, a sparse
/// band or an `.npz` streams.
pub const MAX_GRID_PLANE: usize = 1 << 29;

/// A regular grid, corners inclusive: sample (i, j, k) lies at `origin + (i, j, k) * spacing`,
/// row `(i * ny + j) * nz + k` (C order of an (nx, ny, nz) array).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Grid {
    pub origin: DVec3,
    pub spacing: DVec3,
    pub res: [usize; 3],
}

impl Grid {
    /// `origin` and `spacing` (3,) f64: the arrays beside a grid in its files and responses
    /// (a Zarr store's attributes).
    pub fn constants(&self) -> [crate::io::Constant; 2] {
        let v = |d: DVec3| [d.x, d.y, d.z];
        [
            crate::io::Constant::f64s("origin", &v(self.origin)),
            crate::io::Constant::f64s("spacing", &v(self.spacing)),
        ]
    }

    /// The grid over `region` of `mesh` with `res` samples an axis (each at least 2).
    pub fn new(mesh: &crate::mesh::Mesh, res: [usize; 3], region: GridRegion) -> Result<Grid> {
        if res.iter().any(|&n| n < 2) {
            return Err(Error::Usage(format!(
                "--res needs at least 2 samples an axis (corners inclusive), got {res:?}"
            )));
        }
        if res.iter().any(|&n| n > MAX_GRID_SIDE) {
            return Err(Error::Usage(format!(
                "--res {res:?}: at most {MAX_GRID_SIDE} samples an axis (2^24: the device \
                 numbers them exactly in f32)"
            )));
        }
        if res[1] * res[2] > MAX_GRID_PLANE {
            return Err(Error::Usage(format!(
                "--res {res:?}: an x-plane of NY × NZ = {} samples is more than the {} \
                 (2^29) a plane may hold (grids stream in x-planes)",
                res[1] * res[2],
                MAX_GRID_PLANE
            )));
        }
        let (lo, hi) = match region {
            GridRegion::Pad(fraction) => {
                let pad = mesh.pad(fraction, ["give --pad > 0 or --bounds", "give --bounds"])?;
                let (lo, hi) = mesh.bounds();
                let pad = DVec3::new(pad, pad, pad);
                (lo - pad, hi + pad)
            }
            GridRegion::Bounds(b) => {
                let (lo, hi) = (DVec3::new(b[0], b[1], b[2]), DVec3::new(b[3], b[4], b[5]));
                if !(lo.is_finite() && hi.is_finite() && lo.x < hi.x && lo.y < hi.y && lo.z < hi.z)
                {
                    return Err(Error::Usage(format!(
                        "--bounds must be finite x0,y0,z0,x1,y1,z1 with x0 < x1, y0 < y1, \
                         z0 < z1; got {b:?}"
                    )));
                }
                let reach = lo.max_abs().max(hi.max_abs());
                if crate::semantics::beyond_made_point_limit(reach) {
                    return Err(Error::Usage(format!(
                        "--bounds {b:?} reach {reach:e} from the origin, beyond the {:e} that \
                         grid samples made in f32 may reach",
                        crate::semantics::MADE_POINT_LIMIT
                    )));
                }
                (lo, hi)
            }
        };
        let steps = |k: usize| (res[k] - 1) as f64;
        Ok(Grid {
            origin: lo,
            spacing: DVec3::new(
                (hi.x - lo.x) / steps(0),
                (hi.y - lo.y) / steps(1),
                (hi.z - lo.z) / steps(2),
            ),
            res,
        })
    }

    pub fn len(&self) -> usize {
        self.res.iter().product()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The position of sample `row` (C order).
    pub fn point(&self, row: usize) -> [f64; 3] {
        let [_, ny, nz] = self.res;
        let (i, j, k) = (row / (ny * nz), (row / nz) % ny, row % nz);
        [
            self.origin.x + i as f64 * self.spacing.x,
            self.origin.y + j as f64 * self.spacing.y,
            self.origin.z + k as f64 * self.spacing.z,
        ]
    }
}

/// Samples per slab read back from the `.npz` (about 64 MB of f32).
const SLAB_VALUES: usize = 1 << 24;

/// Grid values for z-samples `k0 .. k1`, in VTK order (x fastest, then y, then z), read back
/// from column `column` of an `.npz` being written (C order, z fastest).
fn read_slab(
    output: &mut OutputFile,
    column: usize,
    grid: &Grid,
    k0: usize,
    k1: usize,
    slab: &mut Vec<f32>,
) -> Result<()> {
    let [nx, ny, nz] = grid.res;
    let depth = k1 - k0;
    slab.resize(nx * ny * depth, 0.0);
    let mut run = vec![0f32; depth];
    for i in 0..nx {
        for j in 0..ny {
            output.read_f32s(column, ((i * ny + j) * nz + k0) as u64, &mut run)?;
            for (dk, &v) in run.iter().enumerate() {
                slab[(dk * ny + j) * nx + i] = v;
            }
        }
    }
    Ok(())
}

/// A grid's samples an axis as `--res` and the service's `res=` take them: `N` or `NX,NY,NZ`,
/// whole numbers up to 2^32 − 1 (`Grid::new` checks the rest). The problem otherwise, quoting
/// the text, for the caller to prefix with the option's name.
pub fn parse_res(text: &str) -> std::result::Result<[usize; 3], String> {
    let numbers: Vec<f64> = text
        .split(',')
        .map(|t| t.trim().parse::<f64>())
        .collect::<std::result::Result<_, _>>()
        .map_err(|_| format!("`{text}`: expected comma-separated numbers"))?;
    let res = match numbers[..] {
        [n] => [n; 3],
        [x, y, z] => [x, y, z],
        _ => {
            return Err(format!(
                "`{text}`: expected one number of samples an axis, or three (NX,NY,NZ)"
            ));
        }
    };
    if res
        .iter()
        .any(|&n| !(n >= 0.0 && n.fract() == 0.0 && n <= u32::MAX as f64))
    {
        return Err(format!(
            "`{text}`: expected whole numbers of samples an axis"
        ));
    }
    Ok(res.map(|n| n as usize))
}

/// Write the grid of column `column` as VTK ImageData (XML `.vti`, one appended raw Float32
/// point array named `sdf`), which ParaView opens as a volume.
pub fn write_vti(
    output: &mut OutputFile,
    column: usize,
    grid: &Grid,
    out: &mut dyn Write,
) -> Result<()> {
    let [nx, ny, nz] = grid.res;
    let (o, s) = (grid.origin, grid.spacing);
    let extent = format!("0 {} 0 {} 0 {}", nx - 1, ny - 1, nz - 1);
    let header = format!(
        "<?xml version=\"1.0\"?>\n\
         <VTKFile type=\"ImageData\" version=\"1.0\" byte_order=\"LittleEndian\" header_type=\"UInt64\">\n\
         \x20 <ImageData WholeExtent=\"{extent}\" Origin=\"{} {} {}\" Spacing=\"{} {} {}\">\n\
         \x20   <Piece Extent=\"{extent}\">\n\
         \x20     <PointData Scalars=\"sdf\">\n\
         \x20       <DataArray type=\"Float32\" Name=\"sdf\" format=\"appended\" offset=\"0\"/>\n\
         \x20     </PointData>\n\
         \x20     <CellData/>\n\
         \x20   </Piece>\n\
         \x20 </ImageData>\n\
         \x20 <AppendedData encoding=\"raw\">\n_",
        o.x, o.y, o.z, s.x, s.y, s.z
    );
    let io = |e| Error::Write {
        path: "<vti>".into(),
        source: e,
    };
    out.write_all(header.as_bytes()).map_err(io)?;
    out.write_all(&((grid.len() * 4) as u64).to_le_bytes())
        .map_err(io)?;
    let depth = (SLAB_VALUES / (nx * ny)).clamp(1, nz);
    let mut slab = Vec::new();
    for k0 in (0..nz).step_by(depth) {
        let k1 = (k0 + depth).min(nz);
        read_slab(output, column, grid, k0, k1, &mut slab)?;
        out.write_all(bytemuck::cast_slice(&slab)).map_err(io)?;
    }
    out.write_all(b"\n  </AppendedData>\n</VTKFile>\n")
        .map_err(io)
}

/// A picture of the middle z-slice: x to the right, y up, blue inside (d < 0), white at 0,
/// red outside, each side scaled to its own largest |d| in the slice (so a thin inside still
/// shows), with the zero contour in black; each sample a square of pixels so the picture is at
/// least 512 pixels wide or tall.
pub fn write_preview(
    output: &mut OutputFile,
    column: usize,
    grid: &Grid,
    out: &mut dyn Write,
) -> Result<()> {
    let [nx, ny, nz] = grid.res;
    let mut slice = Vec::new();
    read_slab(output, column, grid, nz / 2, nz / 2 + 1, &mut slice)?;
    let rgb = preview_pixels(&slice, nx, ny);
    let scale = (512 / nx.max(ny)).max(1);
    let (width, height) = (nx * scale, ny * scale);
    let mut pixels = Vec::with_capacity(width * height * 3);
    for row in 0..height {
        // Image rows run down; y runs up.
        let j = ny - 1 - row / scale;
        for col in 0..width {
            pixels.extend_from_slice(&rgb[j * nx + col / scale]);
        }
    }
    write_rgb_png(out, width, height, &pixels)
}

/// An 8-bit RGB PNG of `width` × `height` pixels, rows top down.
pub(crate) fn write_rgb_png(
    out: &mut dyn Write,
    width: usize,
    height: usize,
    pixels: &[u8],
) -> Result<()> {
    let io = |e: png::EncodingError| Error::Write {
        path: "<png>".into(),
        source: std::io::Error::other(e),
    };
    let mut encoder = png::Encoder::new(out, width as u32, height as u32);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    let mut writer = encoder.write_header().map_err(io)?;
    writer.write_image_data(pixels).map_err(io)?;
    writer.finish().map_err(io)
}

/// Colours of an (nx × ny) slice, x fastest: a diverging map and the zero contour.
fn preview_pixels(slice: &[f32], nx: usize, ny: usize) -> Vec<[u8; 3]> {
    let largest = |keep: fn(f32) -> bool| {
        let m = slice
            .iter()
            .filter(|v| v.is_finite() && keep(**v))
            .fold(0f32, |m, v| m.max(v.abs()));
        if m > 0.0 { m } else { 1.0 }
    };
    let (deepest, farthest) = (largest(|v| v < 0.0), largest(|v| v >= 0.0));
    let (inside, outside) = ([59.0, 76.0, 192.0], [180.0, 4.0, 38.0]);
    let colour = |v: f32| -> [u8; 3] {
        if !v.is_finite() {
            return [128, 128, 128];
        }
        let (end, w): ([f32; 3], f32) = if v < 0.0 {
            (inside, -v / deepest)
        } else {
            (outside, v / farthest)
        };
        end.map(|c| (255.0 + (c - 255.0) * w.min(1.0)).round() as u8)
    };
    let sign = |i: usize, j: usize| slice[j * nx + i] < 0.0;
    (0..ny)
        .flat_map(|j| (0..nx).map(move |i| (i, j)))
        .map(|(i, j)| {
            let s = sign(i, j);
            // On the zero contour: a neighbour on the other side of the surface.
            let crosses =
                (i + 1 < nx && sign(i + 1, j) != s) || (j + 1 < ny && sign(i, j + 1) != s);
            if crosses {
                [0, 0, 0]
            } else {
                colour(slice[j * nx + i])
            }
        })
        .collect()
}
