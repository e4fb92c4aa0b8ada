//! Scene files: `{"shapes": [ {"type": "sphere", "center": [0,0,0], "radius": 1}, ... ]}`.
//! Every error names the file, the shape index and the field; nothing is repaired except the
//! normalisation of rotations and plane normals (SPEC §1).

use std::borrow::Cow;
use std::path::Path;

use serde_json::{Map, Value};

use super::scene_text::{RELEASE_EVERY, SceneText};
use crate::error::{Error, Result};
use crate::hull::{ConvexHull, HullError};
use crate::math::{DVec3, matrix_to_quaternion};
use crate::shape::{Shape, ShapeKind};

pub fn load_scene(path: &Path) -> Result<Vec<Shape>> {
    let text = SceneText::read(path)?;
    collect_shapes(SceneShapes::of_file(&text, &path.display().to_string())?)
}

pub fn parse_scene(text: &str, file: &str) -> Result<Vec<Shape>> {
    collect_shapes(SceneShapes::new(text, file)?)
}

fn collect_shapes(mut shapes: SceneShapes<'_>) -> Result<Vec<Shape>> {
    let text = shapes.text;
    // Not all at once: a hostile `[{}, {}, ...]` would ask ~40 times its text before the first
    // shape is refused.
    let mut all = Vec::with_capacity(shapes.len().min(text.len() / 64));
    while let Some(shape) = shapes.next_shape()? {
        all.push(shape);
    }
    Ok(all)
}

/// A scene's shapes read one at a time from its text, so that a caller may hold some of them
/// and not all (`closest contacts` reads millions of bodies a chunk at a time). The whole text
/// is checked first: malformed JSON and keys given twice are told before any shape's own
/// fault, wherever they are.
pub struct SceneShapes<'a> {
    text: &'a str,
    file: &'a str,
    /// A file's text, whose pages are given back behind the shapes read, and the offset in it
    /// up to which they were.
    pages: Option<(&'a SceneText, usize)>,
    /// The byte where the next shape's text starts (or whitespace before it).
    at: usize,
    next: usize,
    count: usize,
}

impl<'a> SceneShapes<'a> {
    pub fn new(text: &'a str, file: &'a str) -> Result<Self> {
        let bad_file = |problem: String| Error::BadFile {
            file: file.to_string(),
            problem,
        };
        // Editors on Windows start UTF-8 files with a byte-order mark, which JSON does not
        // allow.
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let shapes = check_keys_once(text).map_err(|e| bad_file(format!("malformed JSON: {e}")))?;
        match shapes {
            ShapesField::Missing => Err(bad_file("missing top-level field `shapes`".into())),
            ShapesField::NotArray => {
                Err(bad_file("top-level field `shapes` must be an array".into()))
            }
            ShapesField::Array { first, count } => Ok(SceneShapes {
                text,
                file,
                pages: None,
                at: first,
                next: 0,
                count,
            }),
        }
    }

    /// [`SceneShapes::new`] for a file's text, given back as it is read.
    pub fn of_file(text: &'a SceneText, file: &'a str) -> Result<Self> {
        let shapes = SceneShapes::new(text, file);
        // The whole file was read to check it.
        text.release_before(text.len());
        Ok(SceneShapes {
            pages: Some((text, 0)),
            ..shapes?
        })
    }

    /// How many shapes the scene has.
    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The index the next shape read will have.
    pub fn position(&self) -> usize {
        self.next
    }

    /// The next shape, or None after the last. Each is read from the texts of its fields
    /// (`shape_from_text`): a value tree of the whole scene took ~15 times the text's bytes
    /// (1.2 GB for 76 MB).
    pub fn next_shape(&mut self) -> Result<Option<Shape>> {
        use serde::Deserialize;
        if self.next == self.count {
            return Ok(None);
        }
        let mut deserializer = serde_json::Deserializer::from_str(&self.text[self.at..]);
        // The text is known to be JSON, and `at` to start one of the array's values.
        let raw = <&serde_json::value::RawValue>::deserialize(&mut deserializer)
            .map_err(|e| Error::BadFile {
                file: self.file.to_string(),
                problem: format!("malformed JSON: {e}"),
            })?
            .get();
        let end = raw.as_ptr() as usize - self.text.as_ptr() as usize + raw.len();
        // Past the `,` after it (or the array's `]` after the last).
        let gap = self.text.as_bytes()[end..]
            .iter()
            .position(|b| !b.is_ascii_whitespace())
            .unwrap_or(0);
        self.at = end + gap + 1;
        if let Some((pages, released)) = &mut self.pages {
            let read = self.text.as_ptr() as usize + self.at - pages.as_ptr() as usize;
            if read - *released >= RELEASE_EVERY {
                pages.release_before(read);
                *released = read;
            }
        }
        let shape = shape_from_text(raw, self.next, self.file)?;
        self.next += 1;
        Ok(Some(shape))
    }

    /// The next `count` shapes (fewer at the end) in place of `shapes`' contents.
    pub fn next_chunk(&mut self, count: usize, shapes: &mut Vec<Shape>) -> Result<()> {
        shapes.clear();
        shapes.reserve_exact(count.min(self.count - self.next));
        while shapes.len() < count
            && let Some(shape) = self.next_shape()?
        {
            shapes.push(shape);
        }
        Ok(())
    }
}

/// What a scene's root object has for `shapes`.
#[derive(Debug, PartialEq)]
enum ShapesField {
    /// No such key, or a root that is no object.
    Missing,
    NotArray,
    /// An array of `count` values, the first at or after byte `first`.
    Array {
        first: usize,
        count: usize,
    },
}

/// Whether `text` is JSON whose objects give each key once, and where its root's `shapes`
/// array is: serde_json (and Python's json) would keep the last value of a key given twice
/// without a word, where the file is ambiguous. The syntax is checked by serde_json without
/// building anything, then the keys by a scan of the bytes: a walk through serde's visitors
/// took a string a number (serde_json's `arbitrary_precision`) and a string a key, most of a
/// large scene's load.
fn check_keys_once(text: &str) -> std::result::Result<ShapesField, String> {
    use serde::Deserialize;
    let mut deserializer = serde_json::Deserializer::from_str(text);
    serde::de::IgnoredAny::deserialize(&mut deserializer)
        .and_then(|_| deserializer.end())
        .map_err(|e| e.to_string())?;
    let bytes = text.as_bytes();
    let first_after = |at: usize| {
        bytes[at..]
            .iter()
            .position(|b| !b.is_ascii_whitespace())
            .map(|k| bytes[at + k])
    };
    // The keys of the objects open, outermost first; each open object or array's first key's
    // index there, and a large object's keys in a hash set (a hostile body's thousands of keys
    // compared pairwise would be quadratic).
    let mut keys: Vec<Cow<'_, str>> = Vec::new();
    let mut open: Vec<(usize, Option<std::collections::HashSet<Cow<'_, str>>>)> = Vec::new();
    let mut shapes = ShapesField::Missing;
    // Whether the root's last key was `shapes`, and whether its array is open (its values are
    // counted by the commas directly in it).
    let mut shapes_value_next = false;
    let mut in_shapes = false;
    let mut at = 0;
    while at < bytes.len() {
        match bytes[at] {
            b'{' | b'[' => {
                if open.len() == 1 && shapes_value_next {
                    shapes_value_next = false;
                    if bytes[at] == b'[' {
                        let count = usize::from(first_after(at + 1) != Some(b']'));
                        shapes = ShapesField::Array {
                            first: at + 1,
                            count,
                        };
                        in_shapes = true;
                    }
                }
                open.push((keys.len(), None))
            }
            b'}' | b']' => {
                let (first, _) = open.pop().expect("the text is JSON");
                keys.truncate(first);
                if open.len() == 1 {
                    in_shapes = false;
                }
            }
            b',' if in_shapes && open.len() == 2 => {
                if let ShapesField::Array { count, .. } = &mut shapes {
                    *count += 1;
                }
            }
            b'"' => {
                let start = at;
                let mut escaped = false;
                at += 1;
                while bytes[at] != b'"' {
                    if bytes[at] == b'\\' {
                        escaped = true;
                        at += 1;
                    }
                    at += 1;
                }
                if first_after(at + 1) == Some(b':') {
                    let key = match escaped {
                        false => Cow::Borrowed(&text[start + 1..at]),
                        true => Cow::Owned(
                            serde_json::from_str::<String>(&text[start..=at])
                                .map_err(|e| e.to_string())?,
                        ),
                    };
                    if open.len() == 1 {
                        shapes_value_next = key == "shapes";
                        if shapes_value_next {
                            shapes = ShapesField::NotArray;
                        }
                    }
                    let (first, many) = open.last_mut().expect("a key is in an object");
                    let object = &keys[*first..];
                    let repeated = match many {
                        None if object.len() < 16 => object.contains(&key),
                        None => {
                            let mut set: std::collections::HashSet<_> =
                                object.iter().cloned().collect();
                            let repeated = !set.insert(key.clone());
                            *many = Some(set);
                            repeated
                        }
                        Some(set) => !set.insert(key.clone()),
                    };
                    if repeated {
                        let line = 1 + bytes[..start].iter().filter(|&&b| b == b'\n').count();
                        let column = start - text[..start].rfind('\n').map_or(0, |n| n + 1) + 1;
                        return Err(format!(
                            "key `{key}` given twice in one object at line {line} column {column}"
                        ));
                    }
                    keys.push(key);
                }
            }
            _ => {}
        }
        at += 1;
    }
    Ok(shapes)
}

/// The shapes of a scene's `shapes` array, already parsed (the Python package builds it from
/// a list of dicts); `file` names the source in messages.
pub fn shapes_from_values(shapes: &[Value], file: &str) -> Result<Vec<Shape>> {
    shapes
        .iter()
        .enumerate()
        .map(|(index, value)| shape_from_value(value, index, file))
        .collect()
}

/// A shape's field as the Python package hands it over: numbers and strings read already, any
/// other value as JSON.
pub enum FieldValue {
    Number(PlainNumber),
    /// A list of numbers.
    Numbers(Vec<PlainNumber>),
    Text(String),
    Json(Value),
}

/// A number as Python holds it: an int is written as one in messages.
#[derive(Clone, Copy)]
pub enum PlainNumber {
    Float(f64),
    Int(i64),
}

impl PlainNumber {
    fn value(self) -> f64 {
        match self {
            PlainNumber::Float(x) => x,
            PlainNumber::Int(i) => i as f64,
        }
    }

    /// As a JSON number; a non-finite one as a number too large for f64, which is refused
    /// as non-finite when read.
    fn json(self) -> Value {
        match self {
            PlainNumber::Int(i) => Value::Number(i.into()),
            PlainNumber::Float(x) => match serde_json::Number::from_f64(x) {
                Some(number) => Value::Number(number),
                None => serde_json::from_str(if x < 0.0 { "-1e999" } else { "1e999" })
                    .expect("a JSON number"),
            },
        }
    }
}

/// The name of a field some kind of shape reads; `None` for a field none reads, which is
/// skipped.
pub fn shape_field(name: &str) -> Option<&'static str> {
    SHAPE_FIELDS.iter().find(|&&field| field == name).copied()
}

/// Shapes from their fields (`None`: an item that is no object), read as from their JSON
/// values; `file` names the source in messages.
pub fn shapes_from_fields(
    shapes: &[Option<Vec<(&'static str, FieldValue)>>],
    file: &str,
) -> Result<Vec<Shape>> {
    shapes
        .iter()
        .enumerate()
        .map(|(index, fields)| {
            let fields = fields.as_ref().ok_or_else(|| not_an_object(index, file))?;
            ShapeReader {
                file,
                index,
                fields: ShapeFields::Fields(fields),
                large: &LargeFields::default(),
            }
            .read()
        })
        .collect()
}

/// Shape `index` of a scene from its JSON value.
fn shape_from_value(value: &Value, index: usize, file: &str) -> Result<Shape> {
    let fields = value
        .as_object()
        .ok_or_else(|| not_an_object(index, file))?;
    ShapeReader {
        file,
        index,
        fields: ShapeFields::Values(fields),
        large: &LargeFields::default(),
    }
    .read()
}

fn not_an_object(index: usize, file: &str) -> Error {
    Error::BadShape {
        file: file.to_string(),
        index,
        field: "type".into(),
        problem: "a shape must be a JSON object".into(),
    }
}

/// Every field a shape of some kind reads (`ShapeReader::field` checks it in debug builds).
/// A scene's other fields are skipped unread.
const SHAPE_FIELDS: &[&str] = &[
    "type",
    "center",
    "radius",
    "min",
    "max",
    "a",
    "b",
    "c",
    "axis",
    "half_extents",
    "rotation",
    "radii",
    "major_radius",
    "minor_radius",
    "normal",
    "offset",
    "origin",
    "direction",
    "points",
    "shape",
    "size",
    "cframe",
];

/// Fields whose JSON text is longer than this are not parsed into a `Value` tree, which takes
/// 30–40 times the text's bytes (a number is a `Value` and a string): a hull's `points` are
/// read straight into coordinates, and any other field this long is no valid value. Without
/// it one 160 MB body of hull points held 6.5 GB in the service, past any
/// `--max-inflight-mb`.
const LARGEST_PARSED_FIELD: usize = 64 << 10;

/// Fields too long to parse into a tree: a hull's points read as coordinates, or why a field
/// could not be read (told only if the shape's kind reads that field).
#[derive(Default)]
struct LargeFields {
    /// Taken by `ShapeReader::point_list`, which reads them once.
    points: std::cell::RefCell<Option<Vec<DVec3>>>,
    problems: Vec<(&'static str, String)>,
}

/// Shape `index` of a scene from its JSON text: the texts of the fields some kind reads kept
/// (long ones read as `LargeFields`), every other field skipped, and each field parsed only as
/// it is read (numbers straight from their text), so that memory and time follow the shape's
/// data, not its text: a `Value` tree a shape (its numbers strings, with serde_json's
/// `arbitrary_precision`) took most of a 2-million-shape scene's load.
fn shape_from_text(text: &str, index: usize, file: &str) -> Result<Shape> {
    let bad_file = |problem: String| Error::BadFile {
        file: file.to_string(),
        problem,
    };
    if !text.starts_with('{') {
        return Err(not_an_object(index, file));
    }
    // The whole body was parsed once already: this cannot fail on the text's own account.
    let known: Vec<(&'static str, &serde_json::value::RawValue)> =
        serde_json::from_str::<KnownFields>(text)
            .map_err(|e| bad_file(format!("malformed JSON: {e}")))?
            .0;
    let mut texts = Vec::with_capacity(known.len());
    let mut large = LargeFields::default();
    for (name, value) in known {
        let value = value.get();
        if value.len() <= LARGEST_PARSED_FIELD {
            texts.push((name, value));
        } else if name == "points" {
            match read_points(value) {
                Ok(points) => *large.points.get_mut() = Some(points),
                Err(e) => large.problems.push((
                    name,
                    format!("must be an array of points [x, y, z] of finite numbers: {e}"),
                )),
            }
        } else {
            large.problems.push((
                name,
                format!(
                    "is {} bytes of JSON, more than any valid value takes",
                    value.len()
                ),
            ));
        }
    }
    ShapeReader {
        file,
        index,
        fields: ShapeFields::Texts(texts),
        large: &large,
    }
    .read()
}

/// A long array of points `[x, y, z]` from its text, each number parsed as it comes (a
/// `Number` holds its text) and kept as an f64 only.
fn read_points(text: &str) -> serde_json::Result<Vec<DVec3>> {
    use serde::de::{DeserializeSeed, Deserializer as _};

    struct Points;
    impl<'de> DeserializeSeed<'de> for Points {
        type Value = Vec<DVec3>;
        fn deserialize<D: serde::Deserializer<'de>>(
            self,
            d: D,
        ) -> std::result::Result<Vec<DVec3>, D::Error> {
            d.deserialize_seq(self)
        }
    }
    impl<'de> serde::de::Visitor<'de> for Points {
        type Value = Vec<DVec3>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("an array of points [x, y, z]")
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut seq: A,
        ) -> std::result::Result<Vec<DVec3>, A::Error> {
            let mut points = Vec::new();
            // Each number as its text, parsed by Rust's correctly rounded `f64::from_str` as
            // the value tree's are: serde_json's own f64 parse can be one ulp off.
            while let Some(point) = seq.next_element::<[serde_json::Number; 3]>()? {
                let parse =
                    |n: &serde_json::Number| n.as_str().parse::<f64>().unwrap_or(f64::INFINITY);
                points.push(DVec3::from_array(point.each_ref().map(parse)));
            }
            points.shrink_to_fit();
            Ok(points)
        }
    }
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let points = (&mut deserializer).deserialize_seq(Points)?;
    deserializer.end()?;
    Ok(points)
}

/// A shape object's fields named in `SHAPE_FIELDS`, as their text; others skipped.
struct KnownFields<'a>(Vec<(&'static str, &'a serde_json::value::RawValue)>);

impl<'de> serde::Deserialize<'de> for KnownFields<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        d.deserialize_map(KnownFieldsVisitor)
    }
}

struct KnownFieldsVisitor;

impl<'de> serde::de::Visitor<'de> for KnownFieldsVisitor {
    type Value = KnownFields<'de>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a shape object")
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(
        self,
        mut map: A,
    ) -> std::result::Result<Self::Value, A::Error> {
        let mut known = Vec::new();
        while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
            match SHAPE_FIELDS.iter().find(|&&name| name == key) {
                Some(&name) => known.push((name, map.next_value()?)),
                None => {
                    map.next_value::<serde::de::IgnoredAny>()?;
                }
            }
        }
        Ok(KnownFields(known))
    }
}

/// `text` (a valid JSON value) as N numbers, one or an array of N, where it is exactly that;
/// `None` for anything else, which is read through a `Value`, whose errors name it. Parsed from
/// the text as serde_json's `arbitrary_precision` numbers are (1e999 is infinite, refused by
/// the caller).
fn plain_numbers<const N: usize>(text: &str) -> Option<[f64; N]> {
    let text = text.trim();
    let inner = match N {
        1 => text,
        _ => text.strip_prefix('[')?.strip_suffix(']')?,
    };
    let mut parts = inner.split(',');
    let mut out = [0.0; N];
    for slot in &mut out {
        let part = parts.next()?.trim();
        // A JSON number starts so; a string, array, object or literal does not (Rust's
        // parser would also take `inf` or `NaN`, which only a string could hold here).
        if !part.starts_with(|c: char| c == '-' || c.is_ascii_digit()) {
            return None;
        }
        *slot = part.parse::<f64>().ok()?;
    }
    parts.next().is_none().then_some(out)
}

/// An object's key, borrowed from the text unless it holds escapes (serde's `Cow` is always
/// owned: an allocation a key).
struct Key<'de>(Cow<'de, str>);

impl<'de> serde::Deserialize<'de> for Key<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> serde::de::Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a key")
            }
            fn visit_borrowed_str<E>(self, key: &'de str) -> std::result::Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(key)))
            }
            fn visit_str<E>(self, key: &str) -> std::result::Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(key.to_owned())))
            }
        }
        d.deserialize_str(KeyVisitor)
    }
}

/// `text` (a valid JSON value) as a string where it is one without escapes.
fn plain_string(text: &str) -> Option<&str> {
    let inner = text.trim().strip_prefix('"')?.strip_suffix('"')?;
    (!inner.contains(['\\', '"'])).then_some(inner)
}

/// `v` as the file wrote it, `[x, y, z]`, for error messages.
fn json_triple(v: DVec3) -> String {
    format!("[{}, {}, {}]", number(v.x), number(v.y), number(v.z))
}

/// A number as a message shows it: Rust writes 1e300 with all 301 digits, so very large and
/// very small magnitudes are written with an exponent.
fn number(x: f64) -> String {
    if x == 0.0 || (1e-4..1e16).contains(&x.abs()) {
        format!("{x}")
    } else {
        format!("{x:e}")
    }
}

/// A shape's fields: JSON values, the texts of the fields some kind reads (a scene file's),
/// parsed as they are read, or those fields read already (Python's shape dicts).
enum ShapeFields<'a> {
    Values(&'a Map<String, Value>),
    Texts(Vec<(&'static str, &'a str)>),
    Fields(&'a [(&'static str, FieldValue)]),
}

struct ShapeReader<'a> {
    file: &'a str,
    index: usize,
    fields: ShapeFields<'a>,
    large: &'a LargeFields,
}

impl ShapeReader<'_> {
    /// Field `name`'s value, `None` where the shape has none; a field too long to parse is its
    /// problem.
    fn field(&self, name: &str) -> Result<Option<Cow<'_, Value>>> {
        debug_assert!(
            SHAPE_FIELDS.contains(&name),
            "`{name}` is read but missing from SHAPE_FIELDS"
        );
        if let Some((_, problem)) = self.large.problems.iter().find(|(n, _)| *n == name) {
            return Err(self.error(name, problem.clone()));
        }
        match &self.fields {
            ShapeFields::Values(values) => Ok(values.get(name).map(Cow::Borrowed)),
            ShapeFields::Texts(_) => self
                .text(name)
                .map(|text| {
                    serde_json::from_str(text)
                        .map(Cow::Owned)
                        .map_err(|e| self.error(name, format!("malformed JSON: {e}")))
                })
                .transpose(),
            ShapeFields::Fields(fields) => {
                Ok(fields
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, value)| match value {
                        FieldValue::Json(value) => Cow::Borrowed(value),
                        FieldValue::Number(x) => Cow::Owned(x.json()),
                        FieldValue::Numbers(xs) => {
                            Cow::Owned(Value::Array(xs.iter().map(|x| x.json()).collect()))
                        }
                        FieldValue::Text(text) => Cow::Owned(Value::String(text.clone())),
                    }))
            }
        }
    }

    /// Field `name` as N numbers where it is exactly that, read without a `Value`.
    fn plain_numbers<const N: usize>(&self, name: &str) -> Option<[f64; N]> {
        match &self.fields {
            ShapeFields::Texts(_) => self.text(name).and_then(plain_numbers::<N>),
            ShapeFields::Fields(fields) => match &fields.iter().find(|(n, _)| *n == name)?.1 {
                FieldValue::Number(x) if N == 1 => Some([x.value(); N]),
                FieldValue::Numbers(xs) if N > 1 && xs.len() == N => {
                    Some(std::array::from_fn(|k| xs[k].value()))
                }
                _ => None,
            },
            ShapeFields::Values(_) => None,
        }
    }

    /// Field `name` where it is a string read without a `Value`.
    fn plain_str(&self, name: &str) -> Option<&str> {
        match &self.fields {
            ShapeFields::Texts(_) => self.text(name).and_then(plain_string),
            ShapeFields::Fields(fields) => match &fields.iter().find(|(n, _)| *n == name)?.1 {
                FieldValue::Text(text) => Some(text),
                _ => None,
            },
            ShapeFields::Values(_) => None,
        }
    }

    /// Field `name`'s text, where the fields are texts and it has one.
    fn text(&self, name: &str) -> Option<&str> {
        match &self.fields {
            ShapeFields::Texts(texts) => texts.iter().find(|(n, _)| *n == name).map(|(_, t)| *t),
            ShapeFields::Values(_) | ShapeFields::Fields(_) => None,
        }
    }

    fn present(&self, name: &str) -> Result<Cow<'_, Value>> {
        self.field(name)?.ok_or_else(|| self.error(name, "missing"))
    }

    fn error(&self, field: &str, problem: impl Into<String>) -> Error {
        Error::BadShape {
            file: self.file.to_string(),
            index: self.index,
            field: field.to_string(),
            problem: problem.into(),
        }
    }

    fn numbers<const N: usize>(&self, field: &str) -> Result<[f64; N]> {
        if let Some(numbers) = self.plain_numbers::<N>(field) {
            let mut out = [0.0; N];
            for (slot, x) in out.iter_mut().zip(numbers) {
                *slot = self.coordinate(x, field)?;
            }
            return Ok(out);
        }
        self.numbers_in(&*self.present(field)?, field)
    }

    /// `value` as N numbers; `field` names it in errors.
    fn numbers_in<const N: usize>(&self, value: &Value, field: &str) -> Result<[f64; N]> {
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
                // Parsed from the number's text (`arbitrary_precision`); None where it is
                // not finite.
                Value::Number(n) => n.as_f64().unwrap_or(f64::INFINITY),
                _ => return Err(self.error(field, format!("must be {what} (found {item})"))),
            };
            *slot = self.coordinate(x, field)?;
        }
        Ok(out)
    }

    /// `x` where the GPU can compute with it: finite and within f32's range.
    fn coordinate(&self, x: f64, field: &str) -> Result<f64> {
        if !x.is_finite() {
            return Err(self.error(field, "must be finite"));
        }
        if x.abs() > f32::MAX as f64 {
            return Err(self.error(
                field,
                format!(
                    "{} is beyond the f32 range the GPU computes in (±3.4e38)",
                    number(x)
                ),
            ));
        }
        Ok(x)
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
            return Err(self.error(field, format!("must be ≥ 0 (found {})", number(x))));
        }
        Ok(x)
    }
    fn extents(&self, field: &str) -> Result<DVec3> {
        let v = self.vec3(field)?;
        if v.x < 0.0 || v.y < 0.0 || v.z < 0.0 {
            return Err(self.error(
                field,
                format!("every component must be ≥ 0 (found {})", json_triple(v)),
            ));
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
    fn positive_extents(&self, field: &str) -> Result<DVec3> {
        let v = self.vec3(field)?;
        if !(v.x > 0.0 && v.y > 0.0 && v.z > 0.0) {
            return Err(self.error(
                field,
                format!("every component must be > 0 (found {})", json_triple(v)),
            ));
        }
        Ok(v)
    }
    /// A non-empty array of points `[x, y, z]`, each named `field[k]` in errors.
    fn point_list(&self, field: &str) -> Result<Vec<DVec3>> {
        let value = self.field(field)?;
        if let (None, Some(points)) = (&value, self.large.points.take()) {
            for (k, point) in points.iter().enumerate() {
                for x in point.to_array() {
                    self.coordinate(x, &format!("{field}[{k}]"))?;
                }
            }
            return Ok(points);
        }
        let value = value.ok_or_else(|| self.error(field, "missing"))?;
        let items = value
            .as_array()
            .ok_or_else(|| self.error(field, "must be an array of points [x, y, z]"))?;
        if items.is_empty() {
            return Err(self.error(field, "must hold at least one point"));
        }
        items
            .iter()
            .enumerate()
            .map(|(k, item)| {
                Ok(DVec3::from_array(
                    self.numbers_in(item, &format!("{field}[{k}]"))?,
                ))
            })
            .collect()
    }
    fn unit_vector(&self, field: &str) -> Result<DVec3> {
        let v = self.vec3(field)?;
        let len = v.length();
        if len == 0.0 || !len.is_finite() {
            return Err(self.error(field, "must be a non-zero vector"));
        }
        Ok(v / len)
    }

    /// A Roblox BasePart (SPEC §1): `shape`, `size`, and `cframe` as `CFrame:GetComponents()`
    /// (position, then the rotation matrix row-major; its columns are the part's axes).
    fn part(&self) -> Result<Shape> {
        let shape = self.present("shape")?;
        let shape = shape
            .as_str()
            .ok_or_else(|| self.error("shape", "must be a string"))?;
        let size = self.extents("size")?;
        let cframe = self.numbers::<12>("cframe")?;
        let center = DVec3::new(cframe[0], cframe[1], cframe[2]);
        let r = |row: usize, col: usize| cframe[3 + 3 * row + col];
        let axes = [0, 1, 2].map(|col| DVec3::new(r(0, col), r(1, col), r(2, col)));
        // Roblox CFrames are float32: orthonormal to ~1e-6. Beyond this it is not a rotation.
        const TOLERANCE: f64 = 1e-4;
        for i in 0..3 {
            for j in 0..3 {
                let expected = if i == j { 1.0 } else { 0.0 };
                let got = axes[i].dot(axes[j]);
                if (got - expected).abs() > TOLERANCE {
                    return Err(self.error(
                        "cframe",
                        format!(
                            "the rotation is not orthonormal (axis {i} · axis {j} = {got:.6}, \
                             expected {expected}; tolerance {TOLERANCE})"
                        ),
                    ));
                }
            }
        }
        if axes[0].cross(axes[1]).dot(axes[2]) < 0.0 {
            return Err(self.error(
                "cframe",
                "the rotation matrix is a reflection (determinant −1)",
            ));
        }
        let rotation = matrix_to_quaternion(axes);
        let half = size * 0.5;
        Ok(match shape {
            "Ball" => Shape::Sphere {
                center,
                radius: size.x.min(size.y).min(size.z) / 2.0,
            },
            "Block" => Shape::Box {
                center,
                half_extents: half,
                rotation,
            },
            "Cylinder" => Shape::Cylinder {
                a: center - axes[0] * half.x,
                b: center + axes[0] * half.x,
                radius: size.y.min(size.z) / 2.0,
            },
            "Wedge" => Shape::Wedge {
                center,
                half_extents: half,
                rotation,
            },
            "CornerWedge" => Shape::CornerWedge {
                center,
                half_extents: half,
                rotation,
            },
            other => {
                return Err(self.error(
                    "shape",
                    format!(
                        "unknown part shape `{other}` (Ball, Block, Cylinder, Wedge, CornerWedge)"
                    ),
                ));
            }
        })
    }

    fn read(&self) -> Result<Shape> {
        let shape = self.read_fields()?;
        match shape.span_problem() {
            Some((field, problem)) => Err(self.error(field, problem)),
            None => Ok(shape),
        }
    }

    fn read_fields(&self) -> Result<Shape> {
        let value;
        let kind = match self.plain_str("type") {
            Some(kind) => kind,
            None => {
                value = self.present("type")?;
                value
                    .as_str()
                    .ok_or_else(|| self.error("type", "must be a string"))?
            }
        };
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
                                number(min.get(axis)),
                                number(max.get(axis))
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
            "cylinder" => Shape::Cylinder {
                a: self.vec3("a")?,
                b: self.vec3("b")?,
                radius: self.non_negative("radius")?,
            },
            "wedge" => Shape::Wedge {
                center: self.vec3("center")?,
                half_extents: self.extents("half_extents")?,
                rotation: self.unit_quaternion("rotation")?,
            },
            "corner_wedge" => Shape::CornerWedge {
                center: self.vec3("center")?,
                half_extents: self.extents("half_extents")?,
                rotation: self.unit_quaternion("rotation")?,
            },
            "cone" => Shape::Cone {
                a: self.vec3("a")?,
                b: self.vec3("b")?,
                radius: self.non_negative("radius")?,
            },
            "torus" => {
                let center = self.vec3("center")?;
                let axis = self.unit_vector("axis")?;
                let major_radius = self.non_negative("major_radius")?;
                let minor_radius = self.non_negative("minor_radius")?;
                if minor_radius > major_radius {
                    return Err(self.error(
                        "minor_radius",
                        format!(
                            "must be ≤ major_radius (found {} > {})",
                            number(minor_radius),
                            number(major_radius)
                        ),
                    ));
                }
                Shape::Torus {
                    center,
                    axis,
                    major_radius,
                    minor_radius,
                }
            }
            "ellipsoid" => Shape::Ellipsoid {
                center: self.vec3("center")?,
                radii: self.positive_extents("radii")?,
                rotation: self.unit_quaternion("rotation")?,
            },
            "convex_hull" => {
                let points = self.point_list("points")?;
                Shape::ConvexHull(ConvexHull::new(points).map_err(|e| match e {
                    HullError::Points(why) => self.error("points", why),
                    HullError::Memory(why) => Error::OutOfMemory(format!(
                        "{}: shape {}: field `points`: {why}",
                        self.file, self.index
                    )),
                })?)
            }
            "part" => self.part()?,
            other => {
                let mut known: Vec<&str> = ShapeKind::ALL.iter().map(|k| k.name()).collect();
                known.push("part");
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::math::quaternion_axes;

    fn part(shape: &str, size: [f64; 3], cframe: [f64; 12]) -> Shape {
        let json = serde_json::json!({"shapes": [{"type": "part", "shape": shape, "size": size, "cframe": cframe}]});
        parse_scene(&json.to_string(), "scene.json")
            .unwrap()
            .remove(0)
    }

    /// The parser knows every kind: a bare `{"type": name}` fails on a missing field, never on
    /// the type (the parser's string match is the one kind list the compiler cannot check).
    #[test]
    fn every_kind_parses_by_its_name() {
        for kind in ShapeKind::ALL {
            let json = serde_json::json!({"shapes": [{"type": kind.name()}]});
            match parse_scene(&json.to_string(), "scene.json") {
                Err(Error::BadShape { field, .. }) => {
                    assert_ne!(field, "type", "{} is not parsed", kind.name())
                }
                other => panic!("{}: {other:?}", kind.name()),
            }
        }
    }

    /// Every field any kind reads is in `SHAPE_FIELDS`: each kind parses from an object that
    /// gives all of them (in debug builds `ShapeReader::field` asserts it of each read).
    #[test]
    fn every_kind_reads_only_fields_it_is_given() {
        for kind in ShapeKind::ALL {
            let json = serde_json::json!({"shapes": [{
                "type": kind.name(), "shape": "Block", "center": [1, 2, 3], "radius": 0.5,
                "min": [0, 0, 0], "max": [1, 1, 1], "a": [0, 0, 0], "b": [1, 0, 0],
                "c": [0, 1, 0], "axis": [0, 0, 1], "half_extents": [1, 2, 3],
                "rotation": [0, 0, 0, 1], "radii": [1, 2, 3], "major_radius": 2,
                "minor_radius": 0.5, "normal": [0, 0, 1], "offset": 1, "origin": [0, 0, 0],
                "direction": [1, 0, 0], "size": [1, 2, 3],
                "points": [[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]],
                "cframe": [0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1],
            }]});
            let parsed = parse_scene(&json.to_string(), "scene.json");
            assert!(parsed.is_ok(), "{}: {parsed:?}", kind.name());
        }
    }

    /// A file's shapes are read from their fields' texts, numbers parsed straight from them
    /// where they are plain: each shape here, of every way JSON writes a number, a string
    /// and their mistakes, reads the same (or fails the same) as from its parsed `Value`, as
    /// the Python package's shapes are read.
    #[test]
    fn field_texts_read_as_their_values() {
        let shapes = [
            r#"{"type": "sphere", "center": [1, -0, 2.5e-3], "radius": 1E2}"#,
            r#"{"type":"sphere","center":[ 1.0 ,
                 -2 ,3E+1 ],"radius":0.5,"extra":{"center":[9]}}"#,
            r#"{"type": "sphere", "center": [1, 2, 3], "radius": -1}"#,
            r#"{"type": "sphere", "center": [1, 2, 1e999], "radius": 1}"#,
            r#"{"type": "sphere", "center": [1, 2, -1e999], "radius": 1}"#,
            r#"{"type": "sphere", "center": [1, 2, 1e39], "radius": 1}"#,
            r#"{"type": "sphere", "center": [1, 2, 1e-400], "radius": 1}"#,
            r#"{"type": "sphere", "center": [1, 2, "3"], "radius": 1}"#,
            r#"{"type": "sphere", "center": [1, 2], "radius": 1}"#,
            r#"{"type": "sphere", "center": [1, 2, 3, 4], "radius": 1}"#,
            r#"{"type": "sphere", "center": [[1], 2, 3], "radius": 1}"#,
            r#"{"type": "sphere", "center": [1, 2, null], "radius": 1}"#,
            r#"{"type": "sphere", "center": {"x": 1}, "radius": 1}"#,
            r#"{"type": "sphere", "center": [1, 2, 3], "radius": [1]}"#,
            r#"{"type": "sphere", "center": [1, 2, 3], "radius": true}"#,
            r#"{"type": "sphere", "center": [], "radius": 1}"#,
            r#"{"type": "sph\u0065re", "center": [1, 2, 3], "radius": 1}"#,
            r#"{"type": "cube", "center": [1, 2, 3]}"#,
            r#"{"type": 5}"#,
            r#"{"center": [1, 2, 3]}"#,
            r#"{"type": "box", "center": [0, 0, 0], "half_extents": [1, 2, 3], "rotation": [0, 0, 0, 0]}"#,
            r#"{"type": "box", "center": [0, 0, 0], "half_extents": [1, 2, 3], "rotation": [0, 0, 1, 1]}"#,
            r#"{"type": "part", "shape": "Ball", "size": [1, 2, 3], "cframe": [0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1]}"#,
            r#"{"type": "part", "shape": "B\u0061ll", "size": [1, 2, 3], "cframe": [0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1]}"#,
            r#"{"type": "part", "shape": ["Ball"], "size": [1, 2, 3], "cframe": [0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1]}"#,
            r#"{"type": "convex_hull", "points": [[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1e0]]}"#,
            r#"{"type": "convex_hull", "points": [[0, 0, 0], [1, 0, 0], [0, 1, "0"]]}"#,
            r#"7"#,
            r#"[1, 2, 3]"#,
        ];
        for shape in shapes {
            let from_text = parse_scene(&format!(r#"{{"shapes": [{shape}]}}"#), "s.json");
            let value: Value = serde_json::from_str(shape).unwrap();
            let from_value = shapes_from_values(&[value], "s.json");
            assert_eq!(
                format!("{from_text:?}"),
                format!("{from_value:?}"),
                "{shape}"
            );
        }
    }

    /// Fields longer than `LARGEST_PARSED_FIELD` are never parsed into a tree: a hull's long
    /// `points` are read as coordinates into the same shape, with the same messages for bad
    /// coordinates; any other long field is skipped when no kind reads it, refused by name
    /// when the shape's kind does, and ignored when its kind does not.
    #[test]
    fn long_fields_are_read_without_a_value_tree() {
        let points: Vec<[f64; 3]> = (0..20_000)
            .map(|i| {
                let t = i as f64 * 0.618;
                [t.cos() * 3.0, t.sin() * 2.0, (i % 97) as f64 * 0.01 - 0.5]
            })
            .collect();
        let hull = serde_json::json!({"type": "convex_hull", "points": points});
        let text = format!(r#"{{"shapes": [{hull}]}}"#);
        assert!(text.len() > 4 * LARGEST_PARSED_FIELD);
        let long = parse_scene(&text, "s.json").unwrap();
        let tree = shapes_from_values(&[hull], "s.json").unwrap();
        assert_eq!(long, tree);

        let problem = |text: &str| match parse_scene(text, "s.json") {
            Err(Error::BadShape {
                index,
                field,
                problem,
                ..
            }) => (index, field, problem),
            other => panic!("{other:?}"),
        };
        let first = "[3.0,0.0,-0.5]";
        assert!(text.contains(first));
        let (index, field, why) = problem(&text.replacen(first, "[3.0,1e39,-0.5]", 1));
        assert_eq!((index, field.as_str()), (0, "points[0]"));
        assert!(why.contains("1e39 is beyond the f32 range"), "{why}");
        let (_, field, why) = problem(&text.replacen(first, "[3.0,-0.5]", 1));
        assert_eq!(field, "points");
        assert!(why.contains("must be an array of points"), "{why}");

        let zeros = format!("[{}0]", "0,".repeat(LARGEST_PARSED_FIELD));
        let sphere = r#""type": "sphere", "center": [0, 0, 0], "radius": 1"#;
        for junk in ["junk", "points", "cframe"] {
            let text = format!(r#"{{"shapes": [{{{sphere}, "{junk}": {zeros}}}]}}"#);
            assert_eq!(parse_scene(&text, "s.json").unwrap().len(), 1, "{junk}");
        }
        let text = format!(
            r#"{{"shapes": [{{{sphere}}}, {{"type": "box", "center": {zeros}, "half_extents": [1, 1, 1]}}]}}"#
        );
        let (index, field, why) = problem(&text);
        assert_eq!((index, field.as_str()), (1, "center"));
        assert!(why.contains("more than any valid value takes"), "{why}");
        // Whitespace around a shape is no part of it.
        let spaced = format!("{{\"shapes\": [ \n\t{{{sphere}}} \n]}}");
        assert_eq!(parse_scene(&spaced, "s.json").unwrap().len(), 1);
    }

    /// The shapes of a scene are read one at a time wherever its `shapes` array is and however
    /// it is laid out, counted before any is read, and a chunk at a time they are the list.
    #[test]
    fn shapes_are_counted_and_read_one_at_a_time_wherever_the_array_is() {
        let sphere =
            |r: f64| format!(r#"{{"type": "sphere", "center": [0, 0, 0], "radius": {r}}}"#);
        let three = format!("[{} ,\n\t{},{}  ]", sphere(1.0), sphere(2.0), sphere(3.0));
        let cases: Vec<(String, usize)> = vec![
            (format!(r#"{{"shapes": {three}}}"#), 3),
            (format!("\u{feff}{{\"shapes\":{three}}}"), 3),
            (
                format!(
                    r#"{{"a": [[1, 2], {{"shapes": [1, 2, 3, 4]}}], "shapes": {three}, "b": [5, 6]}}"#
                ),
                3,
            ),
            (
                format!(r#"{{"sh\u0061pes": {three}, "c": {{"d": [7, 8]}}}}"#),
                3,
            ),
            (r#"{"shapes": [ ]}"#.into(), 0),
            (r#"{"shapes": []}"#.into(), 0),
            (format!(r#"{{"shapes": [{}]}}"#, sphere(1.5)), 1),
        ];
        for (text, count) in &cases {
            let mut shapes = SceneShapes::new(text, "s.json").unwrap();
            assert_eq!(shapes.len(), *count, "{text}");
            let mut read = Vec::new();
            let mut chunk = Vec::new();
            loop {
                assert_eq!(shapes.position(), read.len());
                shapes.next_chunk(2, &mut chunk).unwrap();
                if chunk.is_empty() {
                    break;
                }
                read.append(&mut chunk);
            }
            assert_eq!(read, parse_scene(text, "s.json").unwrap(), "{text}");
            assert_eq!(read.len(), *count, "{text}");
            for (k, shape) in read.iter().enumerate() {
                let Shape::Sphere { radius, .. } = shape else {
                    panic!("{shape:?}")
                };
                assert!(*radius == [1.0, 2.0, 3.0][k] || *radius == 1.5, "{text}");
            }
        }
        let refused = [
            (r#"[{"shapes": []}]"#, "missing top-level field `shapes`"),
            (
                r#"{"a": {"shapes": []}}"#,
                "missing top-level field `shapes`",
            ),
            (
                r#"{"shapes": {"x": [1]}}"#,
                "top-level field `shapes` must be an array",
            ),
            (
                r#"{"shapes": 3, "b": [1]}"#,
                "top-level field `shapes` must be an array",
            ),
            (r#"{"shapes": [1, 2]"#, "malformed JSON"),
            (
                r#"{"shapes": [{"type": "sphere"}]}"#,
                "shape 0: field `center`: missing",
            ),
        ];
        for (text, problem) in refused {
            let error = SceneShapes::new(text, "s.json")
                .and_then(|mut shapes| shapes.next_shape())
                .unwrap_err()
                .to_string();
            assert!(error.contains(problem), "{text}: {error}");
        }
    }

    /// A file that gives a key twice is ambiguous (serde_json and Python keep the last):
    /// refused at any depth, escaped spellings and large objects included; a byte-order mark
    /// is read past.
    #[test]
    fn keys_given_twice_are_refused_and_a_byte_order_mark_is_read_past() {
        let sphere = r#"{"type": "sphere", "center": [0,0,0], "radius": 1}"#;
        let ok = format!(r#"{{"shapes": [{sphere}]}}"#);
        assert_eq!(
            parse_scene(&format!("\u{feff}{ok}"), "s.json")
                .unwrap()
                .len(),
            1
        );
        let many: Vec<String> = (0..40)
            .map(|k| format!(r#""k{k}": [{k}, {{"a": 1}}]"#))
            .collect();
        let large = format!(r#"{{"shapes": [{sphere}], {}}}"#, many.join(", "));
        assert_eq!(parse_scene(&large, "s.json").unwrap().len(), 1);
        for twice in [
            r#"{"shapes": [{"type": "sphere", "center": [0,0,0], "radius": 1, "radius": 2}]}"#
                .to_string(),
            r#"{"shapes": [{"type": "sphere", "center": [0,0,0], "radius": 1, "r\u0061dius": 2}]}"#
                .to_string(),
            format!(r#"{{"shapes": [{sphere}], "shapes": []}}"#),
            format!(r#"{{"shapes": [{sphere}], {}, "k39": 0}}"#, many.join(", ")),
            format!(r#"{{"shapes": [{sphere}], "deep": [[{{"x": 1, "y": {{"z": 0, "z": 1}}}}]]}}"#),
        ] {
            let error = parse_scene(&twice, "s.json").unwrap_err().to_string();
            assert!(error.contains("given twice"), "{twice}: {error}");
        }
    }

    #[test]
    fn parts_follow_roblox_semantics() {
        // A part at (1, 2, 3) turned 90° about Y: its local X axis is world −Z.
        let cframe = [1.0, 2.0, 3.0, 0.0, 0.0, 1.0, 0.0, 1.0, 0.0, -1.0, 0.0, 0.0];
        let c = DVec3::new(1.0, 2.0, 3.0);
        assert_eq!(
            part("Ball", [4.0, 2.0, 3.0], cframe),
            Shape::Sphere {
                center: c,
                radius: 1.0
            }
        );
        // Cylinder: axis along local X with length size.x, radius min(size.y, size.z)/2.
        let Shape::Cylinder { a, b, radius } = part("Cylinder", [6.0, 2.0, 3.0], cframe) else {
            panic!("a cylinder")
        };
        assert!((a - DVec3::new(1.0, 2.0, 6.0)).length() < 1e-12, "{a:?}");
        assert!((b - DVec3::new(1.0, 2.0, 0.0)).length() < 1e-12, "{b:?}");
        assert_eq!(radius, 1.0);
        for (name, kind) in [
            ("Block", ShapeKind::Box),
            ("Wedge", ShapeKind::Wedge),
            ("CornerWedge", ShapeKind::CornerWedge),
        ] {
            let shape = part(name, [2.0, 4.0, 6.0], cframe);
            assert_eq!(shape.kind(), kind);
            let (Shape::Box {
                half_extents,
                rotation,
                ..
            }
            | Shape::Wedge {
                half_extents,
                rotation,
                ..
            }
            | Shape::CornerWedge {
                half_extents,
                rotation,
                ..
            }) = shape
            else {
                unreachable!()
            };
            assert_eq!(half_extents, DVec3::new(1.0, 2.0, 3.0));
            let x = quaternion_axes(rotation)[0];
            assert!(
                (x - DVec3::new(0.0, 0.0, -1.0)).length() < 1e-12,
                "{name}: {x:?}"
            );
        }
    }

    #[test]
    fn matrix_to_quaternion_inverts_quaternion_axes() {
        // Every branch of Shepperd's method: identity, and half-turns about X, Y and Z.
        let cases = [
            [0.0, 0.0, 0.0, 1.0],
            [1.0, 0.0, 0.0, 0.0],
            [0.0, 1.0, 0.0, 0.0],
            [0.0, 0.0, 1.0, 0.0],
            [0.3, -0.5, 0.1, 0.8],
            [-0.7, 0.1, 0.6, 0.2],
        ];
        for q in cases {
            let norm = q.iter().map(|c: &f64| c * c).sum::<f64>().sqrt();
            let q = q.map(|c| c / norm);
            let back = matrix_to_quaternion(quaternion_axes(q));
            // q and −q are the same rotation.
            let same = q.iter().zip(&back).all(|(a, b)| (a - b).abs() < 1e-12);
            let opposite = q.iter().zip(&back).all(|(a, b)| (a + b).abs() < 1e-12);
            assert!(same || opposite, "{q:?} -> {back:?}");
        }
    }
}
