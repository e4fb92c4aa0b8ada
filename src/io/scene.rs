//! Scene files: `{"shapes": [ {"type": "sphere", "center": [0,0,0], "radius": 1}, ... ]}`.
//! Every error names the file, the shape index and the field; nothing is repaired except the
//! normalisation of rotations and plane normals (SPEC §1).

use std::path::Path;

use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::math::DVec3;
use crate::shape::{Shape, ShapeKind};

pub fn load_scene(path: &Path) -> Result<Vec<Shape>> {
    let text = std::fs::read_to_string(path).map_err(|source| Error::Read {
        path: path.to_path_buf(),
        source,
    })?;
    parse_scene(&text, &path.display().to_string())
}

pub fn parse_scene(text: &str, file: &str) -> Result<Vec<Shape>> {
    let bad_file = |problem: String| Error::BadFile {
        file: file.to_string(),
        problem,
    };
    let root: Value =
        serde_json::from_str(text).map_err(|e| bad_file(format!("malformed JSON: {e}")))?;
    let shapes = root
        .get("shapes")
        .ok_or_else(|| bad_file("missing top-level field `shapes`".into()))?
        .as_array()
        .ok_or_else(|| bad_file("top-level field `shapes` must be an array".into()))?;
    shapes
        .iter()
        .enumerate()
        .map(|(index, value)| {
            let fields = value.as_object().ok_or_else(|| Error::BadShape {
                file: file.to_string(),
                index,
                field: "type".into(),
                problem: "a shape must be a JSON object".into(),
            })?;
            ShapeReader {
                file,
                index,
                fields,
            }
            .read()
        })
        .collect()
}

struct ShapeReader<'a> {
    file: &'a str,
    index: usize,
    fields: &'a Map<String, Value>,
}

impl ShapeReader<'_> {
    fn error(&self, field: &str, problem: impl Into<String>) -> Error {
        Error::BadShape {
            file: self.file.to_string(),
            index: self.index,
            field: field.to_string(),
            problem: problem.into(),
        }
    }

    fn numbers<const N: usize>(&self, field: &str) -> Result<[f64; N]> {
        let value = self
            .fields
            .get(field)
            .ok_or_else(|| self.error(field, "missing"))?;
        let what = if N == 1 {
            "a number".to_string()
        } else {
            format!("an array of {N} numbers")
        };
        let items: Vec<&Value> = match value {
            Value::Array(items) if N > 1 => items.iter().collect(),
            v if N == 1 => vec![v],
            _ => return Err(self.error(field, format!("must be {what}"))),
        };
        if items.len() != N {
            return Err(self.error(field, format!("must be {what}, found {}", items.len())));
        }
        let mut out = [0.0; N];
        for (slot, item) in out.iter_mut().zip(items) {
            // JSON has no NaN or infinity literals, but numbers such as 1e999 overflow f64.
            let x = match item {
                Value::Number(n) => n.to_string().parse::<f64>().unwrap_or(f64::INFINITY),
                _ => return Err(self.error(field, format!("must be {what} (found {item})"))),
            };
            if !x.is_finite() {
                return Err(self.error(field, "must be finite"));
            }
            if x.abs() > f32::MAX as f64 {
                return Err(self.error(
                    field,
                    format!("{x} is beyond the f32 range the GPU computes in (±3.4e38)"),
                ));
            }
            *slot = x;
        }
        Ok(out)
    }

    fn scalar(&self, field: &str) -> Result<f64> {
        Ok(self.numbers::<1>(field)?[0])
    }
    fn vec3(&self, field: &str) -> Result<DVec3> {
        Ok(DVec3::from_array(self.numbers::<3>(field)?))
    }
    fn non_negative(&self, field: &str) -> Result<f64> {
        let x = self.scalar(field)?;
        if x < 0.0 {
            return Err(self.error(field, format!("must be ≥ 0 (found {x})")));
        }
        Ok(x)
    }
    fn extents(&self, field: &str) -> Result<DVec3> {
        let v = self.vec3(field)?;
        if v.x < 0.0 || v.y < 0.0 || v.z < 0.0 {
            return Err(self.error(field, "every component must be ≥ 0"));
        }
        Ok(v)
    }
    fn unit_quaternion(&self, field: &str) -> Result<[f64; 4]> {
        let q = self.numbers::<4>(field)?;
        let len = q.iter().map(|x| x * x).sum::<f64>().sqrt();
        if len == 0.0 || !len.is_finite() {
            return Err(self.error(field, "the quaternion [x, y, z, w] must be non-zero"));
        }
        Ok(q.map(|x| x / len))
    }
    fn unit_vector(&self, field: &str) -> Result<DVec3> {
        let v = self.vec3(field)?;
        let len = v.length();
        if len == 0.0 || !len.is_finite() {
            return Err(self.error(field, "must be a non-zero vector"));
        }
        Ok(v / len)
    }

    fn read(&self) -> Result<Shape> {
        let kind = self
            .fields
            .get("type")
            .ok_or_else(|| self.error("type", "missing"))?
            .as_str()
            .ok_or_else(|| self.error("type", "must be a string"))?;
        Ok(match kind {
            "sphere" => Shape::Sphere {
                center: self.vec3("center")?,
                radius: self.non_negative("radius")?,
            },
            "aabb" => {
                let (min, max) = (self.vec3("min")?, self.vec3("max")?);
                for (axis, name) in ["x", "y", "z"].iter().enumerate() {
                    if min.get(axis) > max.get(axis) {
                        return Err(self.error(
                            "min",
                            format!(
                                "min.{name} = {} is greater than max.{name} = {}",
                                min.get(axis),
                                max.get(axis)
                            ),
                        ));
                    }
                }
                Shape::Aabb { min, max }
            }
            "box" => Shape::Box {
                center: self.vec3("center")?,
                half_extents: self.extents("half_extents")?,
                rotation: self.unit_quaternion("rotation")?,
            },
            "plane" => Shape::Plane {
                normal: self.unit_vector("normal")?,
                offset: self.scalar("offset")?,
            },
            "segment" => Shape::Segment {
                a: self.vec3("a")?,
                b: self.vec3("b")?,
            },
            "line" => Shape::Line {
                a: self.vec3("a")?,
                b: self.vec3("b")?,
            },
            "ray" => Shape::Ray {
                origin: self.vec3("origin")?,
                direction: self.vec3("direction")?,
            },
            "triangle" => Shape::Triangle {
                a: self.vec3("a")?,
                b: self.vec3("b")?,
                c: self.vec3("c")?,
            },
            "capsule" => Shape::Capsule {
                a: self.vec3("a")?,
                b: self.vec3("b")?,
                radius: self.non_negative("radius")?,
            },
            other => {
                let known: Vec<&str> = ShapeKind::ALL.iter().map(|k| k.name()).collect();
                return Err(self.error(
                    "type",
                    format!(
                        "unknown shape type `{other}` (supported: {})",
                        known.join(", ")
                    ),
                ));
            }
        })
    }
}
