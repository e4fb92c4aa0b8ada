//! Triangle meshes (SPEC §4): loading OBJ (polygons triangulated as fans), STL (ASCII and
//! binary) and PLY (ASCII and binary; faces, or triangle strips as in `igea.ply`) through their
//! crates, and checking what they give. A malformed or truncated file, an index out of range or
//! a mesh without triangles is an error naming the file and the problem; degenerate triangles
//! are kept (they are answered like any other).

use std::path::Path;

use crate::error::{Error, Result};
use crate::math::DVec3;
use crate::shape::Shape;

/// A triangle soup with shared vertices, in f64 as read.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Mesh {
    pub vertices: Vec<DVec3>,
    pub triangles: Vec<[u32; 3]>,
}

impl Mesh {
    /// Check indices and coordinates, and that there is at least one triangle.
    pub fn new(vertices: Vec<DVec3>, triangles: Vec<[u32; 3]>, file: &str) -> Result<Mesh> {
        let bad = |problem: String| Error::BadFile {
            file: file.to_string(),
            problem,
        };
        if triangles.is_empty() {
            return Err(bad("the mesh has no triangles".into()));
        }
        if let Some((i, v)) = vertices
            .iter()
            .enumerate()
            .find(|(_, v)| !(v.is_finite() && v.max_abs() <= f32::MAX as f64))
        {
            return Err(bad(format!(
                "vertex {i} is ({}, {}, {}): coordinates must be finite f32 values",
                v.x, v.y, v.z
            )));
        }
        for (t, tri) in triangles.iter().enumerate() {
            if let Some(&k) = tri.iter().find(|&&k| k as usize >= vertices.len()) {
                return Err(bad(format!(
                    "triangle {t} uses vertex {k}, but there are only {} vertices",
                    vertices.len()
                )));
            }
        }
        Ok(Mesh {
            vertices,
            triangles,
        })
    }

    /// Triangle `t`'s corners.
    pub fn corners(&self, t: usize) -> [DVec3; 3] {
        self.triangles[t].map(|k| self.vertices[k as usize])
    }

    /// The centre of the bounding box (meshes are shifted there before the f32 upload).
    pub fn centre(&self) -> DVec3 {
        let (lo, hi) = self.bounds();
        (lo + hi) * 0.5
    }

    /// The bounding box of the vertices the triangles use.
    pub fn bounds(&self) -> (DVec3, DVec3) {
        let mut lo = DVec3::new(f64::INFINITY, f64::INFINITY, f64::INFINITY);
        let mut hi = -lo;
        for &k in self.triangles.iter().flatten() {
            let v = self.vertices[k as usize];
            lo = DVec3::new(lo.x.min(v.x), lo.y.min(v.y), lo.z.min(v.z));
            hi = DVec3::new(hi.x.max(v.x), hi.y.max(v.y), hi.z.max(v.z));
        }
        (lo, hi)
    }

    /// The triangles as scene shapes, moved by `-offset` (shape i is triangle i).
    pub fn shapes(&self, offset: DVec3) -> Vec<Shape> {
        (0..self.triangles.len())
            .map(|t| {
                let [a, b, c] = self.corners(t).map(|v| v - offset);
                Shape::Triangle { a, b, c }
            })
            .collect()
    }
}

/// Load a mesh by its extension: `.obj`, `.stl` or `.ply`.
pub fn load_mesh(path: &Path) -> Result<Mesh> {
    let file = path.display().to_string();
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_lowercase)
        .unwrap_or_default();
    let bad = |problem: String| Error::BadFile {
        file: file.clone(),
        problem,
    };
    let open = || {
        std::fs::File::open(path).map_err(|source| Error::Read {
            path: path.to_path_buf(),
            source,
        })
    };
    let (vertices, triangles) = match ext.as_str() {
        "obj" => read_obj(path).map_err(bad)?,
        "stl" => read_stl(&mut std::io::BufReader::new(open()?)).map_err(bad)?,
        "ply" => read_ply(&mut std::io::BufReader::new(open()?)).map_err(bad)?,
        _ => {
            return Err(bad(
                "a mesh must be .obj, .stl or .ply (by its extension)".into()
            ));
        }
    };
    Mesh::new(vertices, triangles, &file)
}

type Soup = (Vec<DVec3>, Vec<[u32; 3]>);

fn read_obj(path: &Path) -> std::result::Result<Soup, String> {
    let options = tobj::LoadOptions {
        triangulate: true,
        ignore_points: true,
        ignore_lines: true,
        ..Default::default()
    };
    // Materials are irrelevant here: a missing .mtl must not fail the load.
    let file = std::fs::File::open(path).map_err(|e| format!("cannot open: {e}"))?;
    let (models, _) = tobj::load_obj_buf(&mut std::io::BufReader::new(file), &options, |_| {
        Ok(Default::default())
    })
    .map_err(|e| format!("not a valid OBJ file: {e}"))?;
    let mut vertices = Vec::new();
    let mut triangles = Vec::new();
    for model in models {
        let mesh = model.mesh;
        let base = vertices.len() as u64;
        vertices.extend(
            mesh.positions
                .chunks_exact(3)
                .map(|p| DVec3::new(p[0], p[1], p[2])),
        );
        for tri in mesh.indices.chunks_exact(3) {
            let at = |k: u32| u32::try_from(base + k as u64).map_err(|_| "too many vertices");
            triangles.push([at(tri[0])?, at(tri[1])?, at(tri[2])?]);
        }
    }
    Ok((vertices, triangles))
}

fn read_stl<R: std::io::Read + std::io::Seek>(reader: &mut R) -> std::result::Result<Soup, String> {
    let mesh = stl_io::read_stl(reader).map_err(|e| format!("not a valid STL file: {e}"))?;
    let vertices = mesh
        .vertices
        .iter()
        .map(|v| DVec3::new(v[0] as f64, v[1] as f64, v[2] as f64))
        .collect();
    let triangles = mesh
        .faces
        .iter()
        .map(|f| f.vertices.map(|k| k as u32))
        .collect();
    Ok((vertices, triangles))
}

fn read_ply<R: std::io::Read>(reader: &mut R) -> std::result::Result<Soup, String> {
    use ply_rs_bw::parser::Parser;
    use ply_rs_bw::ply::{DefaultElement, Property};
    let ply = Parser::<DefaultElement>::new()
        .read_ply(reader)
        .map_err(|e| format!("not a valid PLY file: {e}"))?;
    let scalar = |p: &Property| -> Option<f64> {
        Some(match *p {
            Property::Char(v) => v as f64,
            Property::UChar(v) => v as f64,
            Property::Short(v) => v as f64,
            Property::UShort(v) => v as f64,
            Property::Int(v) => v as f64,
            Property::UInt(v) => v as f64,
            Property::Float(v) => v as f64,
            Property::Double(v) => v,
            _ => return None,
        })
    };
    let list = |p: &Property| -> Option<Vec<i64>> {
        Some(match p {
            Property::ListChar(v) => v.iter().map(|&x| x as i64).collect(),
            Property::ListUChar(v) => v.iter().map(|&x| x as i64).collect(),
            Property::ListShort(v) => v.iter().map(|&x| x as i64).collect(),
            Property::ListUShort(v) => v.iter().map(|&x| x as i64).collect(),
            Property::ListInt(v) => v.iter().map(|&x| x as i64).collect(),
            Property::ListUInt(v) => v.iter().map(|&x| x as i64).collect(),
            _ => return None,
        })
    };
    let empty = Vec::new();
    let vertex_elements = ply.payload.get("vertex").unwrap_or(&empty);
    let mut vertices = Vec::with_capacity(vertex_elements.len());
    for (i, v) in vertex_elements.iter().enumerate() {
        let coordinate = |axis: &str| {
            v.get(axis)
                .and_then(scalar)
                .ok_or_else(|| format!("vertex {i} has no numeric `{axis}`"))
        };
        vertices.push(DVec3::new(
            coordinate("x")?,
            coordinate("y")?,
            coordinate("z")?,
        ));
    }
    let indices = |element: &DefaultElement, what: &str, i: usize| {
        ["vertex_indices", "vertex_index"]
            .iter()
            .find_map(|key| element.get(*key).and_then(list))
            .ok_or_else(|| format!("{what} {i} has no integer list `vertex_indices`"))
    };
    let index = |k: i64, what: &str, i: usize| {
        u32::try_from(k).map_err(|_| format!("{what} {i} uses vertex {k}"))
    };
    let mut triangles = Vec::new();
    for (i, face) in ply.payload.get("face").unwrap_or(&empty).iter().enumerate() {
        // Polygons as fans, like the OBJ reader.
        let ks = indices(face, "face", i)?;
        for k in 1..ks.len().saturating_sub(1) {
            triangles.push([
                index(ks[0], "face", i)?,
                index(ks[k], "face", i)?,
                index(ks[k + 1], "face", i)?,
            ]);
        }
    }
    for (i, strips) in ply
        .payload
        .get("tristrips")
        .unwrap_or(&empty)
        .iter()
        .enumerate()
    {
        // -1 restarts a strip; odd triangles swap their first two corners to keep the winding.
        let ks = indices(strips, "tristrips", i)?;
        for strip in ks.split(|&k| k < 0) {
            for k in 0..strip.len().saturating_sub(2) {
                let (a, b) = if k % 2 == 0 {
                    (strip[k], strip[k + 1])
                } else {
                    (strip[k + 1], strip[k])
                };
                triangles.push([
                    index(a, "tristrips", i)?,
                    index(b, "tristrips", i)?,
                    index(strip[k + 2], "tristrips", i)?,
                ]);
            }
        }
    }
    Ok((vertices, triangles))
}
