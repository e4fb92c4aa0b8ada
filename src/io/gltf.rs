//! glTF 2.0 meshes (`.glb`, the binary container Objaverse and Sketchfab ship, and `.gltf` whose
//! buffers are base64 `data:` URIs or files beside it), read by our own reader so that each malformed
//! field is named (`accessors[3].count`). The triangles are those of the default scene's nodes,
//! each placed by its world transform (a mesh two nodes use is there twice), in f64. Triangle
//! strips and fans are split into triangles; points and lines have none. Positions may be
//! floats or, as `KHR_mesh_quantization` allows, (normalized) integers. Skins and morph targets
//! are not applied (the bind pose is read), and geometry compressed by Draco or meshopt is
//! refused by name.

use serde_json::Value;

use crate::math::DVec3;

const GLB_MAGIC: &[u8; 4] = b"glTF";
const CHUNK_JSON: u32 = 0x4E4F_534A;
const CHUNK_BIN: u32 = 0x004E_4942;

type Problem = String;

/// A glTF file's vertices (every primitive of every node placed, in that order) and triangles.
/// `beside`: the folder a `.gltf`'s buffer files (`scene.bin`) are read from; `None` where the
/// file came without one (a service's upload), so that only embedded buffers are read.
pub(super) fn read_gltf(
    bytes: &[u8],
    beside: Option<&std::path::Path>,
) -> Result<(Vec<DVec3>, Vec<[u32; 3]>), Problem> {
    let (json, binary) = if bytes.starts_with(GLB_MAGIC) {
        glb_chunks(bytes)?
    } else {
        (bytes, None)
    };
    // Some exporters start their JSON with a byte-order mark, which JSON parsers refuse.
    let json = json.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(json);
    // An upload keeps at most `UPLOAD_VALUES`; a file as many as the memory holds.
    let most_values = match beside {
        None => UPLOAD_VALUES,
        Some(_) => crate::host_memory::host_available_bytes().map_or(usize::MAX, |b| {
            usize::try_from(b / 128).unwrap_or(usize::MAX)
        }),
    };
    let document = pruned_document(json, most_values)?;
    if !document.is_object() {
        return Err("not a valid glTF file: its JSON is not an object".into());
    }
    // A file that came alone (an upload) places at most 16 times its own bytes: its nodes could
    // otherwise place one mesh so often that a small body takes all the server's memory.
    let most = beside.map_or(16 * bytes.len() as u64 + (1 << 20), |_| u64::MAX);
    Gltf::new(&document, binary, beside)?.soup(most)
}

/// The most JSON values an upload's glTF keeps (about 100 bytes each held): millions of nodes
/// or accessors, far more than a model's structure, however its text is padded.
const UPLOAD_VALUES: usize = 1 << 22;

/// The names of every object field this reader looks at, at any depth. All others (names,
/// materials, animations, `extras`, attributes other than positions) are skipped as they are
/// read, so that what a file holds there costs no memory.
const READ_FIELDS: &[&str] = &[
    "scene",
    "scenes",
    "nodes",
    "meshes",
    "accessors",
    "bufferViews",
    "buffers",
    "extensionsRequired",
    "byteLength",
    "uri",
    "sparse",
    "componentType",
    "type",
    "count",
    "normalized",
    "bufferView",
    "byteOffset",
    "buffer",
    "byteStride",
    "children",
    "mesh",
    "matrix",
    "translation",
    "rotation",
    "scale",
    "extensions",
    "EXT_mesh_gpu_instancing",
    "attributes",
    "TRANSLATION",
    "ROTATION",
    "SCALE",
    "primitives",
    "mode",
    "POSITION",
    "indices",
    "KHR_draco_mesh_compression",
];

/// A glTF's JSON as a tree of the fields in `READ_FIELDS` only, refused past `most_values`
/// values kept: a tree costs tens of bytes a value, many times the text's two bytes for `0,`.
fn pruned_document(json: &[u8], most_values: usize) -> Result<Value, Problem> {
    use serde::de::DeserializeSeed;
    let left = std::cell::Cell::new(most_values);
    let mut reader = serde_json::Deserializer::from_slice(json);
    let bad = |e: serde_json::Error| {
        if left.get() == 0 {
            format!(
                "its JSON holds more than {most_values} values in the fields a mesh is read \
                 from (nodes, meshes, accessors, buffer views, buffers); load it from a file, \
                 or flatten it"
            )
        } else {
            format!("not a valid glTF file: its JSON: {e} (a .glb starts with `glTF`)")
        }
    };
    let document = PrunedValue { left: &left }
        .deserialize(&mut reader)
        .map_err(bad)?;
    reader.end().map_err(bad)?;
    Ok(document)
}

/// Builds a `Value` of the fields in `READ_FIELDS`, counting each value kept down from `left`.
#[derive(Clone, Copy)]
struct PrunedValue<'a> {
    left: &'a std::cell::Cell<usize>,
}

/// What an object's key says of its value.
enum PrunedKey {
    /// serde_json's form of a number under `arbitrary_precision`: a map of one private key.
    Number,
    Kept(String),
    Skipped,
}

/// serde_json's private key for a number written as its text (`arbitrary_precision`); the
/// test `pruned_documents_keep_numbers_and_read_fields_only` fails if it changes.
const NUMBER_KEY: &str = "$serde_json::private::Number";

struct PrunedKeySeed;

impl<'de> serde::de::DeserializeSeed<'de> for PrunedKeySeed {
    type Value = PrunedKey;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<PrunedKey, D::Error> {
        d.deserialize_str(self)
    }
}

impl serde::de::Visitor<'_> for PrunedKeySeed {
    type Value = PrunedKey;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a field name")
    }
    fn visit_str<E: serde::de::Error>(self, key: &str) -> Result<PrunedKey, E> {
        Ok(match key {
            NUMBER_KEY => PrunedKey::Number,
            _ if READ_FIELDS.contains(&key) => PrunedKey::Kept(key.to_owned()),
            _ => PrunedKey::Skipped,
        })
    }
}

impl<'de> serde::de::DeserializeSeed<'de> for PrunedValue<'_> {
    type Value = Value;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        let Some(left) = self.left.get().checked_sub(1) else {
            return Err(serde::de::Error::custom("too many values"));
        };
        self.left.set(left);
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for PrunedValue<'_> {
    type Value = Value;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, b: bool) -> Result<Value, E> {
        Ok(Value::Bool(b))
    }
    fn visit_i64<E>(self, n: i64) -> Result<Value, E> {
        Ok(Value::from(n))
    }
    fn visit_u64<E>(self, n: u64) -> Result<Value, E> {
        Ok(Value::from(n))
    }
    fn visit_f64<E>(self, n: f64) -> Result<Value, E> {
        Ok(Value::from(n))
    }
    fn visit_str<E>(self, s: &str) -> Result<Value, E> {
        Ok(Value::String(s.to_owned()))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(self)? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut fields = serde_json::Map::new();
        while let Some(key) = map.next_key_seed(PrunedKeySeed)? {
            match key {
                PrunedKey::Number => {
                    let text: String = map.next_value()?;
                    return text
                        .parse()
                        .map(Value::Number)
                        .map_err(serde::de::Error::custom);
                }
                PrunedKey::Kept(name) => {
                    let value = map.next_value_seed(self)?;
                    fields.insert(name, value);
                }
                PrunedKey::Skipped => {
                    map.next_value::<serde::de::IgnoredAny>()?;
                }
            }
        }
        Ok(Value::Object(fields))
    }
}

/// The JSON chunk and the binary chunk (if any) of a `.glb`.
fn glb_chunks(bytes: &[u8]) -> Result<(&[u8], Option<&[u8]>), Problem> {
    let word = |at: usize| {
        bytes
            .get(at..at + 4)
            .map(|w| u32::from_le_bytes(w.try_into().expect("4 bytes")))
    };
    let bad = |problem: &str| format!("not a valid GLB file: {problem}");
    let version = word(4).ok_or_else(|| bad("shorter than its 12-byte header"))?;
    if version != 2 {
        return Err(format!("glTF version {version}: only version 2 is read"));
    }
    let declared = word(8).ok_or_else(|| bad("shorter than its 12-byte header"))? as usize;
    if declared > bytes.len() {
        return Err(bad(&format!(
            "cut short: its header says {declared} bytes, the file has {}",
            bytes.len()
        )));
    }
    let bytes = &bytes[..declared];
    let mut chunks = Vec::new();
    let mut at = 12usize;
    while at < bytes.len() {
        let (Some(length), Some(kind)) = (word(at), word(at + 4)) else {
            return Err(bad(&format!("a chunk header at byte {at} is cut short")));
        };
        let start = at + 8;
        let end = start
            .checked_add(length as usize)
            .filter(|&end| end <= bytes.len())
            .ok_or_else(|| {
                bad(&format!(
                    "the chunk at byte {at} says {length} bytes, past the file's end"
                ))
            })?;
        chunks.push((kind, &bytes[start..end]));
        // Chunks are padded to 4 bytes.
        at = end.next_multiple_of(4);
    }
    match chunks.as_slice() {
        [(CHUNK_JSON, json), rest @ ..] => {
            let binary = rest
                .iter()
                .find(|(kind, _)| *kind == CHUNK_BIN)
                .map(|c| c.1);
            Ok((json, binary))
        }
        _ => Err(bad("its first chunk is not JSON")),
    }
}

/// A parsed document and its buffers' bytes.
struct Gltf<'a> {
    document: &'a Value,
    buffers: Vec<Vec<u8>>,
}

/// `document[key]` as an array (absent: empty).
fn list<'a>(value: &'a Value, key: &str) -> &'a [Value] {
    value
        .get(key)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// A whole number ≥ 0 at `value[key]`, `default` where absent; `at` names it in errors.
fn index(value: &Value, key: &str, at: &str, default: Option<u64>) -> Result<u64, Problem> {
    match value.get(key) {
        None => default.ok_or_else(|| format!("{at}.{key}: missing")),
        Some(v) => v
            .as_u64()
            .ok_or_else(|| format!("{at}.{key}: expected a whole number ≥ 0, found {v}")),
    }
}

/// Up to `N` finite numbers at `value[key]`.
fn numbers<const N: usize>(
    value: &Value,
    key: &str,
    at: &str,
) -> Result<Option<[f64; N]>, Problem> {
    let Some(v) = value.get(key) else {
        return Ok(None);
    };
    let bad = || {
        // A value's Display takes no precision: cut by hand (a hostile array may be long).
        let shown: String = v.to_string().chars().take(80).collect();
        format!("{at}.{key}: expected {N} finite numbers, found {shown}")
    };
    let items = v.as_array().filter(|a| a.len() == N).ok_or_else(bad)?;
    let mut out = [0.0; N];
    for (slot, item) in out.iter_mut().zip(items) {
        *slot = item.as_f64().filter(|x| x.is_finite()).ok_or_else(bad)?;
    }
    Ok(Some(out))
}

/// An affine map: rows of the 3×3 part, then the translation.
#[derive(Clone, Copy)]
struct Affine {
    rows: [[f64; 3]; 3],
    shift: [f64; 3],
}

impl Affine {
    const IDENTITY: Affine = Affine {
        rows: [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]],
        shift: [0.0; 3],
    };

    fn apply(&self, p: [f64; 3]) -> DVec3 {
        let [x, y, z] = std::array::from_fn(|r| {
            self.rows[r][0] * p[0] + self.rows[r][1] * p[1] + self.rows[r][2] * p[2] + self.shift[r]
        });
        DVec3::new(x, y, z)
    }

    fn determinant(&self) -> f64 {
        let [a, b, c] = self.rows;
        a[0] * (b[1] * c[2] - b[2] * c[1]) - a[1] * (b[0] * c[2] - b[2] * c[0])
            + a[2] * (b[0] * c[1] - b[1] * c[0])
    }

    /// `self` after `inner` (a parent's transform after its child's).
    fn then(&self, inner: &Affine) -> Affine {
        let rows = std::array::from_fn(|r| {
            std::array::from_fn(|c| (0..3).map(|k| self.rows[r][k] * inner.rows[k][c]).sum())
        });
        let moved = self.apply(inner.shift);
        Affine {
            rows,
            shift: [moved.x, moved.y, moved.z],
        }
    }

    /// A node's local transform: `matrix` (column-major), else translation · rotation · scale.
    fn of_node(node: &Value, at: &str) -> Result<Affine, Problem> {
        if let Some(m) = numbers::<16>(node, "matrix", at)? {
            return Ok(Affine {
                rows: std::array::from_fn(|r| std::array::from_fn(|c| m[c * 4 + r])),
                shift: [m[12], m[13], m[14]],
            });
        }
        let shift = numbers::<3>(node, "translation", at)?.unwrap_or([0.0; 3]);
        let scale = numbers::<3>(node, "scale", at)?.unwrap_or([1.0; 3]);
        let quaternion = numbers::<4>(node, "rotation", at)?.unwrap_or([0.0, 0.0, 0.0, 1.0]);
        Affine::from_trs(shift, quaternion, scale)
            .ok_or_else(|| format!("{at}.rotation: a zero quaternion"))
    }

    /// translation · rotation · scale; `None` for a zero or non-finite quaternion.
    fn from_trs(shift: [f64; 3], quaternion: [f64; 4], scale: [f64; 3]) -> Option<Affine> {
        // Scaled by its largest part first, so that no square overflows.
        let largest = quaternion.iter().fold(0.0f64, |m, q| m.max(q.abs()));
        if largest == 0.0 || !largest.is_finite() {
            return None;
        }
        let [x, y, z, w] = quaternion.map(|q| q / largest);
        let norm = (x * x + y * y + z * z + w * w).sqrt();
        let (x, y, z, w) = (x / norm, y / norm, z / norm, w / norm);
        let turn = [
            [
                1.0 - 2.0 * (y * y + z * z),
                2.0 * (x * y - z * w),
                2.0 * (x * z + y * w),
            ],
            [
                2.0 * (x * y + z * w),
                1.0 - 2.0 * (x * x + z * z),
                2.0 * (y * z - x * w),
            ],
            [
                2.0 * (x * z - y * w),
                2.0 * (y * z + x * w),
                1.0 - 2.0 * (x * x + y * y),
            ],
        ];
        Some(Affine {
            rows: std::array::from_fn(|r| std::array::from_fn(|c| turn[r][c] * scale[c])),
            shift,
        })
    }
}

/// An accessor's elements, bounds-checked against its buffer view once.
struct Accessor<'a> {
    /// The bytes from the first element on; empty where the accessor has no buffer view (all
    /// its values are zero).
    bytes: &'a [u8],
    stride: usize,
    count: usize,
    components: usize,
    component_type: u64,
    normalized: bool,
}

impl Accessor<'_> {
    /// Component `c` of element `k`, as glTF reads it (normalized integers to [−1, 1] or [0, 1]).
    fn value(&self, k: usize, c: usize) -> f64 {
        if self.bytes.is_empty() {
            return 0.0;
        }
        let size = component_size(self.component_type);
        let at = k * self.stride + c * size;
        let b = &self.bytes[at..at + size];
        let (raw, scale) = match self.component_type {
            5120 => (f64::from(b[0] as i8), 127.0),
            5121 => (f64::from(b[0]), 255.0),
            5122 => (f64::from(i16::from_le_bytes([b[0], b[1]])), 32767.0),
            5123 => (f64::from(u16::from_le_bytes([b[0], b[1]])), 65535.0),
            5125 => (
                f64::from(u32::from_le_bytes(b.try_into().expect("4 bytes"))),
                1.0,
            ),
            _ => (
                f64::from(f32::from_le_bytes(b.try_into().expect("4 bytes"))),
                1.0,
            ),
        };
        if self.normalized {
            (raw / scale).max(-1.0)
        } else {
            raw
        }
    }
}

fn component_size(component_type: u64) -> usize {
    match component_type {
        5120 | 5121 => 1,
        5122 | 5123 => 2,
        _ => 4,
    }
}

impl<'a> Gltf<'a> {
    fn new(
        document: &'a Value,
        binary: Option<&[u8]>,
        beside: Option<&std::path::Path>,
    ) -> Result<Gltf<'a>, Problem> {
        for required in list(document, "extensionsRequired") {
            let name = required.as_str().unwrap_or_default();
            if matches!(
                name,
                "KHR_draco_mesh_compression"
                    | "EXT_meshopt_compression"
                    | "KHR_meshopt_compression"
            ) {
                return Err(format!(
                    "extensionsRequired: {name}: compressed geometry is not read; write the \
                     model without it first (glTF Transform or Blender can)"
                ));
            }
        }
        let mut buffers = Vec::new();
        for (i, buffer) in list(document, "buffers").iter().enumerate() {
            let at = format!("buffers[{i}]");
            let length = index(buffer, "byteLength", &at, None)?;
            let bytes = match buffer.get("uri").map(|u| u.as_str()) {
                None if i == 0 && binary.is_some() => binary.expect("checked").to_vec(),
                None => return Err(format!("{at}: no uri, and no GLB binary chunk to be it")),
                Some(Some(uri)) => match (embedded(uri), beside) {
                    (Some(bytes), _) => bytes?,
                    (None, Some(folder)) => buffer_file(folder, uri, &at)?,
                    (None, None) => {
                        return Err(format!(
                            "{at}.uri `{uri:.60}`: a file beside the model, which an upload \
                             does not bring; pack the model as .glb"
                        ));
                    }
                },
                Some(None) => return Err(format!("{at}.uri: expected a string")),
            };
            if (bytes.len() as u64) < length {
                return Err(format!(
                    "{at}: byteLength {length}, but it holds {} bytes",
                    bytes.len()
                ));
            }
            buffers.push(bytes);
        }
        Ok(Gltf { document, buffers })
    }

    fn accessor(&self, i: u64) -> Result<Accessor<'_>, Problem> {
        let accessors = list(self.document, "accessors");
        let at = format!("accessors[{i}]");
        let accessor = usize::try_from(i)
            .ok()
            .and_then(|i| accessors.get(i))
            .ok_or_else(|| format!("{at}: no such accessor (there are {})", accessors.len()))?;
        if accessor.get("sparse").is_some() {
            return Err(format!("{at}.sparse: sparse accessors are not read"));
        }
        let component_type = index(accessor, "componentType", &at, None)?;
        if ![5120, 5121, 5122, 5123, 5125, 5126].contains(&component_type) {
            return Err(format!(
                "{at}.componentType: {component_type} is no glTF component type"
            ));
        }
        let components = match accessor.get("type").and_then(Value::as_str) {
            Some("SCALAR") => 1,
            Some("VEC2") => 2,
            Some("VEC3") => 3,
            Some("VEC4" | "MAT2") => 4,
            Some("MAT3") => 9,
            Some("MAT4") => 16,
            _ => {
                return Err(format!(
                    "{at}.type: expected SCALAR, VEC2, VEC3, VEC4 or MATn"
                ));
            }
        };
        let count = index(accessor, "count", &at, None)?;
        let normalized = accessor
            .get("normalized")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let element = (components * component_size(component_type)) as u64;
        let mut found = Accessor {
            bytes: &[],
            stride: element as usize,
            count: usize::try_from(count)
                .map_err(|_| format!("{at}.count: {count} is more than this machine can index"))?,
            components,
            component_type,
            normalized,
        };
        let Some(view_index) = accessor.get("bufferView") else {
            return Ok(found);
        };
        let view_index = view_index
            .as_u64()
            .ok_or_else(|| format!("{at}.bufferView: expected a whole number ≥ 0"))?;
        let views = list(self.document, "bufferViews");
        let view_at = format!("bufferViews[{view_index}]");
        let view = usize::try_from(view_index)
            .ok()
            .and_then(|v| views.get(v))
            .ok_or_else(|| format!("{at}.bufferView: {view_index}: no such buffer view"))?;
        let buffer_index = index(view, "buffer", &view_at, None)?;
        let buffer = usize::try_from(buffer_index)
            .ok()
            .and_then(|b| self.buffers.get(b))
            .ok_or_else(|| format!("{view_at}.buffer: {buffer_index}: no such buffer"))?;
        let view_offset = index(view, "byteOffset", &view_at, Some(0))?;
        let view_length = index(view, "byteLength", &view_at, None)?;
        let stride = index(view, "byteStride", &view_at, Some(element))?;
        if stride < element {
            return Err(format!(
                "{view_at}.byteStride: {stride} is less than {at}'s {element}-byte elements"
            ));
        }
        let view_end = view_offset
            .checked_add(view_length)
            .filter(|&end| end <= buffer.len() as u64)
            .ok_or_else(|| {
                format!(
                    "{view_at}: bytes {view_offset} + {view_length} are past its buffer's {}",
                    buffer.len()
                )
            })?;
        let offset = index(accessor, "byteOffset", &at, Some(0))?;
        // The last element ends at offset + stride·(count − 1) + element, within the view.
        let needed = match count {
            0 => Some(offset),
            n => (n - 1)
                .checked_mul(stride)
                .and_then(|s| s.checked_add(offset))
                .and_then(|s| s.checked_add(element)),
        };
        if needed.is_none_or(|n| n > view_length) {
            return Err(format!(
                "{at}: {count} elements of {element} bytes every {stride} from byte {offset} do \
                 not fit {view_at}'s {view_length} bytes"
            ));
        }
        let start = (view_offset + offset) as usize;
        found.bytes = &buffer[start..view_end as usize];
        found.stride = stride as usize;
        Ok(found)
    }

    /// The root nodes of the scene to read: the default scene's, else the first scene's, else
    /// every node that is no other's child.
    fn roots(&self) -> Result<Vec<u64>, Problem> {
        let scenes = list(self.document, "scenes");
        let nodes = list(self.document, "nodes");
        if !scenes.is_empty() {
            let chosen = index(self.document, "scene", "the document", Some(0))?;
            let scene = usize::try_from(chosen)
                .ok()
                .and_then(|s| scenes.get(s))
                .ok_or_else(|| format!("scene: {chosen}: no such scene"))?;
            let at = format!("scenes[{chosen}]");
            return list(scene, "nodes")
                .iter()
                .map(|n| {
                    n.as_u64()
                        .ok_or_else(|| format!("{at}.nodes: expected node indices"))
                })
                .collect();
        }
        let mut is_child = vec![false; nodes.len()];
        for node in nodes {
            for child in list(node, "children") {
                if let Some(c) = child.as_u64().and_then(|c| usize::try_from(c).ok())
                    && c < nodes.len()
                {
                    is_child[c] = true;
                }
            }
        }
        Ok((0..nodes.len() as u64)
            .filter(|&n| !is_child[n as usize])
            .collect())
    }

    /// Each mesh the scene places, with its world transform, in the order the nodes are met.
    /// The vertices (primitives sharing positions counted once) and corners mesh `m` places.
    fn mesh_counts(&self, meshes: &[Value], m: u64) -> Result<(u64, u64), Problem> {
        let mesh = usize::try_from(m)
            .ok()
            .and_then(|i| meshes.get(i))
            .ok_or_else(|| format!("meshes[{m}]: no such mesh (there are {})", meshes.len()))?;
        let (mut vertices, mut corners) = (0u64, 0u64);
        let mut positions_met = Vec::new();
        for (p, primitive) in list(mesh, "primitives").iter().enumerate() {
            let at = format!("meshes[{m}].primitives[{p}]");
            let Some(shape) = self.primitive_shape(primitive, &at)? else {
                continue;
            };
            if !positions_met.contains(&shape.position) {
                positions_met.push(shape.position);
                vertices += shape.vertices as u64;
            }
            corners += shape.corners as u64;
        }
        Ok((vertices, corners))
    }

    /// Refused past `most_placements`: instancing accessors may be shared by many nodes, so
    /// that a small file could otherwise place a mesh billions of times before any check.
    fn placed_meshes(&self, most_placements: usize) -> Result<Vec<(u64, Affine)>, Problem> {
        let nodes = list(self.document, "nodes");
        if nodes.is_empty() && list(self.document, "scenes").is_empty() {
            // A file of bare meshes: each once, where it is.
            let meshes = list(self.document, "meshes").len() as u64;
            return Ok((0..meshes).map(|m| (m, Affine::IDENTITY)).collect());
        }
        let mut met = vec![false; nodes.len()];
        let mut placed = Vec::new();
        let mut stack: Vec<(u64, Affine)> = self
            .roots()?
            .into_iter()
            .rev()
            .map(|n| (n, Affine::IDENTITY))
            .collect();
        while let Some((n, parent)) = stack.pop() {
            let at = format!("nodes[{n}]");
            let node = usize::try_from(n)
                .ok()
                .and_then(|i| nodes.get(i))
                .ok_or_else(|| format!("{at}: no such node (there are {})", nodes.len()))?;
            // glTF's nodes form trees: a node met twice is a cycle or a shared child, which
            // could place a mesh exponentially often.
            if std::mem::replace(&mut met[n as usize], true) {
                return Err(format!("{at}: reached twice (a glTF node has one parent)"));
            }
            let world = parent.then(&Affine::of_node(node, &at)?);
            if let Some(mesh) = node.get("mesh") {
                let mesh = mesh
                    .as_u64()
                    .ok_or_else(|| format!("{at}.mesh: expected a whole number ≥ 0"))?;
                let room = most_placements.saturating_sub(placed.len());
                let too_many = |count: usize| {
                    format!(
                        "{at}: placing its mesh {count} more times makes more than the \
                         {most_placements} placements this file's size and the memory allow"
                    )
                };
                match self.instances(node, &at, room, too_many)? {
                    None if room == 0 => return Err(too_many(1)),
                    None => placed.push((mesh, world)),
                    Some(instances) => {
                        placed.extend(instances.iter().map(|local| (mesh, world.then(local))))
                    }
                }
            }
            for child in list(node, "children").iter().rev() {
                let child = child
                    .as_u64()
                    .ok_or_else(|| format!("{at}.children: expected node indices"))?;
                stack.push((child, world));
            }
        }
        Ok(placed)
    }

    /// The instances `EXT_mesh_gpu_instancing` places a node's mesh at (each translation ·
    /// rotation · scale, under the node's transform), if it has that extension.
    fn instances(
        &self,
        node: &Value,
        at: &str,
        room: usize,
        too_many: impl Fn(usize) -> Problem,
    ) -> Result<Option<Vec<Affine>>, Problem> {
        let Some(attributes) = node
            .get("extensions")
            .and_then(|e| e.get("EXT_mesh_gpu_instancing"))
            .map(|e| e.get("attributes").unwrap_or(&Value::Null))
        else {
            return Ok(None);
        };
        let at = format!("{at}.extensions.EXT_mesh_gpu_instancing.attributes");
        let mut columns = Vec::new();
        for (name, components) in [("TRANSLATION", 3), ("ROTATION", 4), ("SCALE", 3)] {
            let Some(i) = attributes.get(name) else {
                columns.push(None);
                continue;
            };
            let i = i
                .as_u64()
                .ok_or_else(|| format!("{at}.{name}: expected an accessor index"))?;
            let accessor = self.accessor(i)?;
            if accessor.components != components {
                return Err(format!(
                    "accessors[{i}] ({name} of {at}): expected {components} components, found {}",
                    accessor.components
                ));
            }
            columns.push(Some((name, accessor)));
        }
        let counts: Vec<usize> = columns.iter().flatten().map(|(_, a)| a.count).collect();
        let Some(&count) = counts.first() else {
            return Err(format!("{at}: no TRANSLATION, ROTATION or SCALE"));
        };
        if counts.iter().any(|&c| c != count) {
            return Err(format!("{at}: its accessors' counts differ ({counts:?})"));
        }
        if count > room {
            return Err(too_many(count));
        }
        let value = |column: usize, k: usize, c: usize, default: f64| {
            columns[column]
                .as_ref()
                .map_or(default, |(_, a)| a.value(k, c))
        };
        (0..count)
            .map(|k| {
                let shift = std::array::from_fn(|c| value(0, k, c, 0.0));
                let quaternion = std::array::from_fn(|c| value(1, k, c, [0.0, 0.0, 0.0, 1.0][c]));
                let scale = std::array::from_fn(|c| value(2, k, c, 1.0));
                Affine::from_trs(shift, quaternion, scale).ok_or_else(|| {
                    format!("{at}.ROTATION: instance {k} is a zero or non-finite quaternion")
                })
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }

    /// The placed triangles, refused where they would take more than `most` bytes.
    fn soup(&self, most: u64) -> Result<(Vec<DVec3>, Vec<[u32; 3]>), Problem> {
        let meshes = list(self.document, "meshes");
        let memory = crate::host_memory::host_available_bytes().unwrap_or(u64::MAX);
        let placement_bytes = std::mem::size_of::<(u64, Affine)>() as u64;
        let most_placements =
            usize::try_from(most.min(memory) / placement_bytes).unwrap_or(usize::MAX);
        let placed = self.placed_meshes(most_placements)?;
        // What the placed primitives hold, before anything is held: a file that places a large
        // mesh many times is refused here, not when memory runs out.
        // Each mesh's counts once, however often it is placed.
        let mut counts: std::collections::HashMap<u64, (u64, u64)> = Default::default();
        let (mut vertex_total, mut index_total) = (0u64, 0u64);
        for &(m, _) in &placed {
            let (vertices, corners) = match counts.entry(m) {
                std::collections::hash_map::Entry::Occupied(known) => *known.get(),
                std::collections::hash_map::Entry::Vacant(new) => {
                    *new.insert(self.mesh_counts(meshes, m)?)
                }
            };
            vertex_total = vertex_total.saturating_add(vertices);
            index_total = index_total.saturating_add(corners);
        }
        if vertex_total > u64::from(u32::MAX) {
            return Err(format!(
                "its scene places {vertex_total} vertices, more than 2^32 - 1"
            ));
        }
        let bytes = vertex_total
            .saturating_mul(24)
            .saturating_add(index_total.saturating_mul(4));
        if bytes > most {
            return Err(format!(
                "its scene places {vertex_total} vertices and {index_total} indices ({} MiB), \
                 more than 16 times its own size allows in an upload: flatten it, or load it \
                 from a file",
                bytes >> 20
            ));
        }
        if let Some(available) = crate::host_memory::host_available_bytes()
            && bytes > available
        {
            return Err(format!(
                "its scene places {vertex_total} vertices and {index_total} indices ({} MiB), \
                 more than the {} MiB of memory available",
                bytes >> 20,
                available >> 20
            ));
        }
        let mut vertices = Vec::with_capacity(vertex_total as usize);
        let mut triangles = Vec::with_capacity(index_total as usize / 3);
        for (m, world) in placed {
            let mesh = &meshes[m as usize];
            // Primitives of one placement that share their positions share their vertices.
            let mut placed_positions: Vec<(u64, u32)> = Vec::new();
            for (p, primitive) in list(mesh, "primitives").iter().enumerate() {
                let at = format!("meshes[{m}].primitives[{p}]");
                let Some(shape) = self.primitive_shape(primitive, &at)? else {
                    continue;
                };
                let base = match placed_positions.iter().find(|(a, _)| *a == shape.position) {
                    Some(&(_, base)) => base,
                    None => {
                        let base = vertices.len() as u32;
                        self.place_positions(shape.position, &at, &world, &mut vertices)?;
                        placed_positions.push((shape.position, base));
                        base
                    }
                };
                let mirrored = world.determinant() < 0.0;
                self.add_triangles(primitive, &at, base, &shape, mirrored, &mut triangles)?;
            }
        }
        Ok((vertices, triangles))
    }

    /// A triangle primitive's positions and counts; `None` for points and lines.
    fn primitive_shape(&self, primitive: &Value, at: &str) -> Result<Option<Shape>, Problem> {
        let mode = index(primitive, "mode", at, Some(4))?;
        match mode {
            0..=3 => return Ok(None),
            4..=6 => {}
            _ => return Err(format!("{at}.mode: {mode} is no glTF primitive mode")),
        }
        let position = primitive
            .get("attributes")
            .and_then(|a| a.get("POSITION"))
            .ok_or_else(|| format!("{at}.attributes.POSITION: missing"))?
            .as_u64()
            .ok_or_else(|| format!("{at}.attributes.POSITION: expected an accessor index"))?;
        let positions = self.accessor(position)?;
        if positions.components != 3 {
            return Err(format!(
                "accessors[{position}] (POSITION of {at}): expected VEC3"
            ));
        }
        // Values from no buffer view are zeros (or a sparse accessor's base): no geometry, and
        // a count a tiny file could make as large as it likes.
        if positions.bytes.is_empty() && positions.count > 0 {
            let draco = primitive
                .get("extensions")
                .is_some_and(|e| e.get("KHR_draco_mesh_compression").is_some());
            return Err(match draco {
                true => format!("{at}: its positions are Draco-compressed only, which is not read"),
                false => format!("accessors[{position}] (POSITION of {at}): no bufferView"),
            });
        }
        let indices = match primitive.get("indices") {
            None => positions.count,
            Some(i) => {
                let i = i
                    .as_u64()
                    .ok_or_else(|| format!("{at}.indices: expected an accessor index"))?;
                let indices = self.accessor(i)?;
                if indices.bytes.is_empty() && indices.count > 0 {
                    return Err(format!("accessors[{i}] (indices of {at}): no bufferView"));
                }
                indices.count
            }
        };
        let corners = match mode {
            4 => indices / 3 * 3,
            _ => indices.saturating_sub(2) * 3,
        };
        Ok(Some(Shape {
            position,
            vertices: positions.count,
            corners,
            mode,
        }))
    }

    /// The positions of accessor `position`, placed by `world`, appended to `vertices`.
    fn place_positions(
        &self,
        position: u64,
        at: &str,
        world: &Affine,
        vertices: &mut Vec<DVec3>,
    ) -> Result<(), Problem> {
        let positions = self.accessor(position)?;
        for k in 0..positions.count {
            let p = std::array::from_fn(|c| positions.value(k, c));
            if p.iter().any(|x| !x.is_finite()) {
                return Err(format!(
                    "accessors[{position}] (POSITION of {at}): element {k} is not finite"
                ));
            }
            vertices.push(world.apply(p));
        }
        Ok(())
    }

    /// A primitive's triangles (a list, strip or fan as `shape` says), its corners indices into
    /// `shape`'s positions, placed from `base` on. A `mirrored` placement (its transform's
    /// determinant negative) turns them the other way round, as glTF says, to keep them facing
    /// out.
    fn add_triangles(
        &self,
        primitive: &Value,
        at: &str,
        base: u32,
        shape: &Shape,
        mirrored: bool,
        triangles: &mut Vec<[u32; 3]>,
    ) -> Result<(), Problem> {
        let (count, mode) = (shape.vertices, shape.mode);
        let indices = match primitive.get("indices") {
            None => None,
            Some(i) => {
                let i = i.as_u64().expect("checked");
                let accessor = self.accessor(i)?;
                if accessor.components != 1
                    || accessor.normalized
                    || ![5121, 5123, 5125].contains(&accessor.component_type)
                {
                    return Err(format!(
                        "accessors[{i}] (indices of {at}): expected SCALAR unsigned integers"
                    ));
                }
                Some((i, accessor))
            }
        };
        let corners = indices.as_ref().map_or(count, |(_, a)| a.count);
        let vertex = |k: usize| -> Result<u32, Problem> {
            let Some((i, accessor)) = &indices else {
                return Ok(k as u32);
            };
            let v = accessor.value(k, 0) as u64;
            if v >= count as u64 {
                return Err(format!(
                    "accessors[{i}] (indices of {at}): element {k} is vertex {v}, past the {count} \
                     positions"
                ));
            }
            Ok(v as u32)
        };
        if mode == 4 && corners % 3 != 0 {
            return Err(format!(
                "{at}: {corners} corners do not make whole triangles"
            ));
        }
        let whole = match mode {
            4 => corners / 3,
            _ => corners.saturating_sub(2),
        };
        for t in 0..whole {
            let [a, b, c] = match mode {
                4 => [3 * t, 3 * t + 1, 3 * t + 2],
                // A strip's odd triangles turn the other way round.
                5 if t % 2 == 1 => [t, t + 2, t + 1],
                5 => [t, t + 1, t + 2],
                _ => [t + 1, t + 2, 0],
            };
            let [b, c] = if mirrored { [c, b] } else { [b, c] };
            triangles.push([base + vertex(a)?, base + vertex(b)?, base + vertex(c)?]);
        }
        Ok(())
    }
}

/// A triangle primitive: its POSITION accessor, how many positions and corners it has, and its
/// mode.
struct Shape {
    position: u64,
    vertices: usize,
    corners: usize,
    /// 4 a list, 5 a strip, 6 a fan (glTF's primitive modes).
    mode: u64,
}

/// The buffer file a relative `uri` (percent-encoded, as glTF's URIs are) names in `folder`.
fn buffer_file(folder: &std::path::Path, uri: &str, at: &str) -> Result<Vec<u8>, Problem> {
    if uri.contains("://") {
        return Err(format!(
            "{at}.uri `{uri:.60}`: only files beside the model are read"
        ));
    }
    let mut name = Vec::with_capacity(uri.len());
    let mut bytes = uri.bytes();
    while let Some(b) = bytes.next() {
        let hex = |c: Option<u8>| c.and_then(|c| (c as char).to_digit(16));
        match b {
            b'%' => match (hex(bytes.next()), hex(bytes.next())) {
                (Some(high), Some(low)) => name.push((high * 16 + low) as u8),
                _ => return Err(format!("{at}.uri `{uri:.60}`: a malformed %-escape")),
            },
            _ => name.push(b),
        }
    }
    let name =
        String::from_utf8(name).map_err(|_| format!("{at}.uri: not UTF-8 once unescaped"))?;
    let path = folder.join(&name);
    std::fs::read(&path).map_err(|e| format!("{at}.uri: cannot read {}: {e}", path.display()))
}

/// The bytes of a base64 `data:` URI; `None` for any other URI.
fn embedded(uri: &str) -> Option<Result<Vec<u8>, Problem>> {
    let rest = uri.strip_prefix("data:")?;
    let (_, text) = rest.split_once(";base64,")?;
    Some(
        base64(text.trim_end_matches('='))
            .ok_or_else(|| "a data: URI's base64 is malformed".into()),
    )
}

fn base64(text: &str) -> Option<Vec<u8>> {
    let digit = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            _ => return None,
        } as u32)
    };
    let mut out = Vec::with_capacity(text.len() / 4 * 3 + 2);
    let (mut bits, mut held) = (0u32, 0u32);
    for &c in text.as_bytes() {
        bits = (bits << 6) | digit(c)?;
        held += 6;
        if held >= 8 {
            held -= 8;
            out.push((bits >> held) as u8);
            bits &= (1 << held) - 1;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_reads_what_python_writes() {
        // base64.b64encode(bytes(range(7))) == b'AAECAwQFBg=='
        assert_eq!(base64("AAECAwQFBg").unwrap(), (0u8..7).collect::<Vec<_>>());
        assert!(base64("AA*C").is_none());
    }

    #[test]
    fn pruned_documents_keep_numbers_and_read_fields_only() {
        let text = br#"{"asset": {"version": "2.0"}, "extras": [0, [1, {"nodes": 2}]],
            "nodes": [{"name": "n", "mesh": 3, "translation": [1.5, -2, 1e400],
                       "extensions": {"EXT_mesh_gpu_instancing": {"attributes": {"SCALE": 7}},
                                      "OTHER": 1}}],
            "scene": 0}"#;
        let kept = pruned_document(text, 100).unwrap();
        // The same text as a whole tree, less the fields no glTF reading looks at.
        let mut whole: Value = serde_json::from_slice(text).unwrap();
        let object = whole.as_object_mut().unwrap();
        object.remove("asset");
        object.remove("extras");
        let node = &mut object["nodes"][0];
        node.as_object_mut().unwrap().remove("name");
        node["extensions"].as_object_mut().unwrap().remove("OTHER");
        assert_eq!(kept, whole);
        assert_eq!(kept["nodes"][0]["mesh"].as_u64(), Some(3));
        assert_eq!(kept["nodes"][0]["translation"][1].as_f64(), Some(-2.0));
        // Values kept: the document, nodes, the node, mesh, translation and its 3, extensions,
        // the instancing, its attributes, SCALE, scene: 13.
        assert!(pruned_document(text, 13).is_ok());
        let refused = pruned_document(text, 12).unwrap_err();
        assert!(refused.contains("more than 12 values"), "{refused}");
        let malformed = pruned_document(b"{\"nodes\": [}", 100).unwrap_err();
        assert!(
            malformed.starts_with("not a valid glTF file: its JSON"),
            "{malformed}"
        );
        let trailing = pruned_document(b"{} {}", 100).unwrap_err();
        assert!(trailing.contains("trailing characters"), "{trailing}");
    }

    #[test]
    fn node_transforms_compose_parent_after_child() {
        let child = Affine::of_node(
            &serde_json::json!({"translation": [1.0, 0.0, 0.0]}),
            "nodes[1]",
        )
        .unwrap();
        // A quarter turn about z: x to y.
        let half = std::f64::consts::FRAC_1_SQRT_2;
        let parent = Affine::of_node(
            &serde_json::json!({"rotation": [0.0, 0.0, half, half], "scale": [2.0, 2.0, 2.0]}),
            "nodes[0]",
        )
        .unwrap();
        let p = parent.then(&child).apply([1.0, 0.0, 0.0]);
        assert!((p - DVec3::new(0.0, 4.0, 0.0)).length() < 1e-12, "{p:?}");
        let matrix = Affine::of_node(
            &serde_json::json!({"matrix": [1,0,0,0, 0,1,0,0, 0,0,1,0, 5,6,7,1]}),
            "nodes[2]",
        )
        .unwrap();
        assert_eq!(matrix.apply([1.0, 1.0, 1.0]), DVec3::new(6.0, 7.0, 8.0));
    }
}
