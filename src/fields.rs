//! Output fields (SPEC §5 `--fields`): which arrays a job computes, moves back and writes.
//!
//! The kernels write a packed row holding only the fields of a job's [`Fields`] (a bit each in
//! the pipeline override `FIELDS`), in device order: the order of the bits, which is the order of `GpuHit`
//! (point, distance, normal, shape) and of `GpuSegmentHit` (point_a, s, point_b, t,
//! distance). So a distance-only query moves 4 bytes a row back, and a row with every field
//! is exactly a `GpuHit` or `GpuSegmentHit`. `shaders/shared/hits.wgsl` is the WGSL twin.
//! Outputs (files, Python arrays) list the fields in the family's default order instead.

use bytemuck::{Pod, Zeroable};
use rayon::prelude::*;

use crate::error::{Error, Result};

/// One query's answer as the GPU writes it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct GpuHit {
    pub point: [f32; 3],
    pub distance: f32,
    pub normal: [f32; 3],
    /// Shape index, −1 for a non-finite query row.
    pub shape: i32,
}

/// Closest points between one segment pair, as the GPU writes them.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct GpuSegmentHit {
    pub point_a: [f32; 3],
    pub s: f32,
    pub point_b: [f32; 3],
    pub t: f32,
    pub distance: f32,
}

/// One body's contact (SPEC §9), as the GPU writes it with every field.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct GpuBodyHit {
    pub point_body: [f32; 3],
    pub point_target: [f32; 3],
    /// The separation, or minus the penetration depth.
    pub distance: f32,
    /// The target's shape index (scene) or triangle (mesh); −1 for a non-finite body.
    pub shape: i32,
    /// Unit, from the target towards the body.
    pub normal: [f32; 3],
}

/// Receives each chunk's output rows as the device packed them, in row order.
pub trait PackedSink {
    fn take(&mut self, first_row: usize, rows: PackedRows<'_>) -> Result<()>;
}

impl<F: FnMut(usize, PackedRows<'_>) -> Result<()>> PackedSink for F {
    fn take(&mut self, first_row: usize, rows: PackedRows<'_>) -> Result<()> {
        self(first_row, rows)
    }
}

/// Columns collect a job's rows (the fields they were made for, of rows that may hold more).
impl PackedSink for Columns {
    fn take(&mut self, _first_row: usize, rows: PackedRows<'_>) -> Result<()> {
        self.extend(&rows);
        Ok(())
    }
}

/// A row type whose packed form, with every field of its family, is the row itself.
pub trait WholeRow: bytemuck::Pod {
    const FAMILY: Family;
}

impl WholeRow for GpuHit {
    const FAMILY: Family = Family::Hits;
}

impl WholeRow for GpuSegmentHit {
    const FAMILY: Family = Family::Segments;
}

impl WholeRow for GpuBodyHit {
    const FAMILY: Family = Family::Bodies;
}

/// Whole rows collected in row order (a job asked for every field of their family).
impl<T: WholeRow> PackedSink for Vec<T> {
    fn take(&mut self, first_row: usize, rows: PackedRows<'_>) -> Result<()> {
        if rows.fields != Fields::all(T::FAMILY) {
            return Err(crate::Error::Usage(
                "whole rows are collected from jobs of every field of their family".into(),
            ));
        }
        self.truncate(first_row);
        self.extend_from_slice(bytemuck::cast_slice(rows.words));
        Ok(())
    }
}

/// The shape index the kernel writes for a row whose traversal overflowed.
pub const TRAVERSAL_OVERFLOW: i32 = -2;

/// The kinds of output rows, each with its own field names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Family {
    /// Point queries (scenes, paired, meshes): point, distance, shape, normal.
    Hits,
    /// Sphere contacts: point, depth, normal, shape (computed from hits on the host).
    Contacts,
    /// Segment pairs: point_a, point_b, s, t, distance.
    Segments,
    /// Bodies against shapes (SPEC §9): distance, point_body, point_target, normal, shape.
    Bodies,
}

/// One output array of a family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field {
    pub name: &'static str,
    /// Values per row: 1, or 3 for vectors.
    pub width: usize,
    /// An `i32` array (the shape index), else `f32`.
    pub is_index: bool,
    /// Its bit in `FIELDS`; the bits' order is the device's packing order.
    pub bit: u32,
}

const fn field(name: &'static str, width: usize, is_index: bool, bit: u32) -> Field {
    Field {
        name,
        width,
        is_index,
        bit,
    }
}

/// Device bits of point-query rows (`shaders/shared/hits.wgsl`).
pub const POINT: u32 = 1;
pub const DISTANCE: u32 = 2;
pub const NORMAL: u32 = 4;
pub const SHAPE: u32 = 8;
/// A device bit of point-query rows that is no output field: a mesh walk marks each row whose
/// nearest triangle has no rival within its f32 rounding (`UNIQUE_NEAREST_SHAPE_BIT` in the
/// shape), so that the host settles only the others in f64 (engine::samples). Only the jobs
/// that read it ask for it (`Fields::with_unique_nearest`).
pub const UNIQUE_NEAREST: u32 = 256;
/// The shape's bit that says its row's nearest triangle is unique (`UNIQUE_NEAREST`): asked
/// only of meshes whose triangle indices stay below it.
pub const UNIQUE_NEAREST_SHAPE_BIT: u32 = 1 << 30;
/// Device bits of segment-pair rows.
pub const POINT_A: u32 = 1;
pub const S: u32 = 2;
pub const POINT_B: u32 = 4;
pub const T: u32 = 8;
pub const SEGMENT_DISTANCE: u32 = 16;
/// Device bits of body rows (the shape keeps `SHAPE`'s bit, which `non_finite_rows` reads).
pub const POINT_BODY: u32 = 1;
pub const POINT_TARGET: u32 = 2;
pub const BODY_DISTANCE: u32 = 4;
pub const BODY_NORMAL: u32 = 16;

/// Fields in the default output order of each family.
const HIT_FIELDS: &[Field] = &[
    field("point", 3, false, POINT),
    field("distance", 1, false, DISTANCE),
    field("shape", 1, true, SHAPE),
    field("normal", 3, false, NORMAL),
];
/// Contacts are computed from hits: depth from the distance, on the hits' bits.
const CONTACT_FIELDS: &[Field] = &[
    field("point", 3, false, POINT),
    field("depth", 1, false, DISTANCE),
    field("normal", 3, false, NORMAL),
    field("shape", 1, true, SHAPE),
];
const SEGMENT_FIELDS: &[Field] = &[
    field("point_a", 3, false, POINT_A),
    field("point_b", 3, false, POINT_B),
    field("s", 1, false, S),
    field("t", 1, false, T),
    field("distance", 1, false, SEGMENT_DISTANCE),
];

const BODY_FIELDS: &[Field] = &[
    field("distance", 1, false, BODY_DISTANCE),
    field("point_body", 3, false, POINT_BODY),
    field("point_target", 3, false, POINT_TARGET),
    field("normal", 3, false, BODY_NORMAL),
    field("shape", 1, true, SHAPE),
];

impl Family {
    /// Every field, in the default output order.
    pub fn fields(self) -> &'static [Field] {
        match self {
            Family::Hits => HIT_FIELDS,
            Family::Contacts => CONTACT_FIELDS,
            Family::Segments => SEGMENT_FIELDS,
            Family::Bodies => BODY_FIELDS,
        }
    }

    /// The bits of its fields that hold points: what a move of the frame changes (lengths,
    /// directions and indices keep).
    pub fn point_bits(self) -> u32 {
        match self {
            Family::Hits | Family::Contacts => POINT,
            Family::Segments => POINT_A | POINT_B,
            Family::Bodies => POINT_BODY | POINT_TARGET,
        }
    }

    fn names(self) -> String {
        let names: Vec<&str> = self.fields().iter().map(|f| f.name).collect();
        names.join(", ")
    }
}

/// A set of output fields of one family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Fields {
    family: Family,
    bits: u32,
}

impl Fields {
    /// Every field of `family` (the default).
    pub fn all(family: Family) -> Fields {
        Fields {
            family,
            bits: family.fields().iter().fold(0, |b, f| b | f.bit),
        }
    }

    /// The fields with these device bits.
    pub fn from_bits(family: Family, bits: u32) -> Fields {
        Fields::all(family).intersect(bits)
    }

    /// Parse a comma-separated list of names (`distance,shape`); an empty list, an unknown or
    /// a repeated name is a usage error listing the valid names.
    pub fn parse(family: Family, list: &str) -> Result<Fields> {
        let names: Vec<&str> = list.split(',').map(str::trim).collect();
        Fields::from_names(family, &names)
    }

    /// The fields named, in any order.
    pub fn from_names(family: Family, names: &[&str]) -> Result<Fields> {
        let valid = family.names();
        if names.is_empty() {
            return Err(Error::Usage(format!(
                "fields: name at least one of {valid}"
            )));
        }
        let mut bits = 0;
        for name in names {
            let field = family
                .fields()
                .iter()
                .find(|f| f.name == *name)
                .ok_or_else(|| {
                    Error::Usage(format!(
                        "fields: unknown field `{name}`; the valid ones are {valid}"
                    ))
                })?;
            if bits & field.bit != 0 {
                return Err(Error::Usage(format!("fields: `{name}` is named twice")));
            }
            bits |= field.bit;
        }
        Ok(Fields { family, bits })
    }

    pub fn family(self) -> Family {
        self.family
    }
    /// The device bits (the kernels' `FIELDS` override).
    pub fn bits(self) -> u32 {
        self.bits
    }
    pub fn contains(self, bit: u32) -> bool {
        self.bits & bit != 0
    }
    pub fn is_all(self) -> bool {
        self == Fields::all(self.family)
    }
    /// These fields and those of `bits` too.
    pub fn with(self, bits: u32) -> Fields {
        let mut fields = Fields::from_bits(self.family, self.bits | bits);
        // A request to the walk, not a field: kept as it was.
        fields.bits |= self.bits & UNIQUE_NEAREST;
        fields
    }
    /// These point-query fields, with rows marked where the nearest triangle is unique
    /// (`UNIQUE_NEAREST`).
    pub fn with_unique_nearest(self) -> Fields {
        debug_assert_eq!(self.family, Family::Hits);
        Fields {
            family: self.family,
            bits: self.bits | UNIQUE_NEAREST,
        }
    }
    fn intersect(self, bits: u32) -> Fields {
        Fields {
            family: self.family,
            bits: self.bits & bits,
        }
    }

    /// The selected fields, in the default output order.
    pub fn selected(self) -> impl Iterator<Item = &'static Field> {
        self.family
            .fields()
            .iter()
            .filter(move |f| self.bits & f.bit != 0)
    }

    /// Words of a packed row.
    pub fn row_words(self) -> usize {
        self.selected().map(|f| f.width).sum()
    }

    /// Words of a packed row before the field of `bit` (device order is the bits' order).
    pub fn offset_words(self, bit: u32) -> usize {
        self.selected()
            .filter(|f| f.bit < bit)
            .map(|f| f.width)
            .sum()
    }

    /// The field of `bit`, if selected.
    fn field(self, bit: u32) -> Option<&'static Field> {
        self.selected().find(|f| f.bit == bit)
    }
}

/// The bits a traversal that overflowed its stack writes into every f32 word of its row (a
/// NaN whose payload no arithmetic makes); its shape, if asked for, is `TRAVERSAL_OVERFLOW`.
pub const OVERFLOW_BITS: u32 = 0x7fc0_0b0f;

/// A chunk's output rows as the device packed them.
#[derive(Clone, Copy, Debug)]
pub struct PackedRows<'a> {
    fields: Fields,
    words: &'a [u32],
    /// Whether copies out of these rows may take every core (`PackedRows::spread`).
    spread: bool,
}

impl<'a> PackedRows<'a> {
    pub fn new(fields: Fields, words: &'a [u32]) -> PackedRows<'a> {
        debug_assert_eq!(words.len() % fields.row_words().max(1), 0);
        PackedRows {
            fields,
            words,
            spread: false,
        }
    }

    /// These rows, with copies out of them (`extend_column`) spread over every core where
    /// `spread`: not on CPU adapters, whose device computes the next chunk on those cores.
    pub fn spread(self, spread: bool) -> PackedRows<'a> {
        PackedRows { spread, ..self }
    }
    pub fn fields(&self) -> Fields {
        self.fields
    }
    pub fn words(&self) -> &'a [u32] {
        self.words
    }
    pub fn len(&self) -> usize {
        self.words.len() / self.fields.row_words().max(1)
    }
    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// The first row whose traversal overflowed its stack, if any.
    pub fn overflowed_row(&self) -> Option<usize> {
        let stride = self.fields.row_words();
        let first = self.fields.selected().min_by_key(|f| f.bit)?;
        // The first word of a row is a float, unless the shape is the only field.
        let marker = if first.is_index {
            TRAVERSAL_OVERFLOW as u32
        } else {
            OVERFLOW_BITS
        };
        if self.spread && self.len() >= 2 * DRAIN_PIECE_ROWS {
            return self
                .words
                .par_chunks(DRAIN_PIECE_ROWS * stride)
                .enumerate()
                .filter_map(|(piece, words)| {
                    let row = words.iter().step_by(stride).position(|&w| w == marker)?;
                    Some(piece * DRAIN_PIECE_ROWS + row)
                })
                .min();
        }
        self.words.iter().step_by(stride).position(|&w| w == marker)
    }

    /// Rows answered with NaN (a non-finite input): shape −1, or NaN in the first word.
    pub fn non_finite_rows(&self) -> usize {
        let stride = self.fields.row_words();
        match self.fields.field(SHAPE) {
            Some(f) if f.is_index => {
                let at = self.fields.offset_words(SHAPE);
                self.words
                    .chunks_exact(stride)
                    .filter(|row| (row[at] as i32) < 0)
                    .count()
            }
            _ => self
                .words
                .iter()
                .step_by(stride.max(1))
                .filter(|w| f32::from_bits(**w).is_nan())
                .count(),
        }
    }

    /// Row `i`'s words of the field of `bit` (empty when not selected).
    pub fn get(&self, i: usize, bit: u32) -> &'a [u32] {
        match self.fields.field(bit) {
            Some(f) => {
                let at = i * self.fields.row_words() + self.fields.offset_words(bit);
                &self.words[at..at + f.width]
            }
            None => &[],
        }
    }

    /// Row `i` as a hit; fields not selected are zero.
    pub fn hit(&self, i: usize) -> GpuHit {
        let vector = |bit| match self.get(i, bit) {
            [x, y, z] => [x, y, z].map(|w| f32::from_bits(*w)),
            _ => [0.0; 3],
        };
        let scalar = |bit| self.get(i, bit).first().copied().unwrap_or(0);
        GpuHit {
            point: vector(POINT),
            distance: f32::from_bits(scalar(DISTANCE)),
            normal: vector(NORMAL),
            shape: scalar(SHAPE) as i32,
        }
    }

    /// Every row as a hit, when every hit field is there (no copy).
    pub fn as_hits(&self) -> Option<&'a [GpuHit]> {
        (self.fields == Fields::all(Family::Hits)).then(|| bytemuck::cast_slice(self.words))
    }

    /// Every row as a segment-pair answer, when every segment field is there (no copy).
    pub fn as_segment_hits(&self) -> Option<&'a [GpuSegmentHit]> {
        (self.fields == Fields::all(Family::Segments)).then(|| bytemuck::cast_slice(self.words))
    }

    /// Every row as a body contact, when every body field is there (no copy).
    pub fn as_body_hits(&self) -> Option<&'a [GpuBodyHit]> {
        (self.fields == Fields::all(Family::Bodies)).then(|| bytemuck::cast_slice(self.words))
    }

    /// Append the words of the field of `bit`, row after row, to `out`.
    pub fn extend_column(&self, bit: u32, out: &mut Vec<u32>) {
        let Some(f) = self.fields.field(bit) else {
            return;
        };
        let stride = self.fields.row_words();
        let offset = self.fields.offset_words(bit);
        let (rows, width) = (self.len(), f.width);
        if !self.spread || rows < 2 * DRAIN_PIECE_ROWS {
            out.reserve(rows * width);
            // One copy when the field is the whole row; else a word at a time for the common
            // one-word fields (a call per row costs more than the copy: docs/perf-history.md,
            // H200).
            match (stride == width, width) {
                (true, _) => out.extend_from_slice(self.words),
                (false, 1) => out.extend(self.words.chunks_exact(stride).map(|row| row[offset])),
                _ => {
                    for row in self.words.chunks_exact(stride) {
                        out.extend_from_slice(&row[offset..offset + width]);
                    }
                }
            }
            return;
        }
        let start = out.len();
        out.reserve(rows * width);
        // Pieces on all cores: a fresh column's page faults and the reads of mapped memory
        // set the pace of one core's copy (docs/perf-history.md, the parallel drain).
        let pieces = out.spare_capacity_mut()[..rows * width]
            .par_chunks_mut(DRAIN_PIECE_ROWS * width)
            .zip(self.words.par_chunks(DRAIN_PIECE_ROWS * stride));
        pieces.for_each(|(to, from)| {
            for (t, row) in to.chunks_exact_mut(width).zip(from.chunks_exact(stride)) {
                for (t, w) in t.iter_mut().zip(&row[offset..offset + width]) {
                    t.write(*w);
                }
            }
        });
        // SAFETY: every one of the `rows * width` words past `start` was written above (the
        // pieces cover the spare capacity's first `rows * width` words, the chunks' words
        // pair with them one to one).
        unsafe { out.set_len(start + rows * width) };
    }
}

/// Rows a piece of a chunk's drain on one core.
const DRAIN_PIECE_ROWS: usize = 1 << 15;

/// A full row of a family as the GPU writes it, which a job may mend on the host before
/// packing the fields its caller asked ([`mended_rows`]).
pub trait FullRow: Pod {
    const FAMILY: Family;
    /// Pack full rows into rows of `fields` (a subset of the family's).
    fn pack(fields: Fields, rows: &[Self], out: &mut Vec<u32>);
}

impl FullRow for GpuHit {
    const FAMILY: Family = Family::Hits;
    fn pack(fields: Fields, rows: &[Self], out: &mut Vec<u32>) {
        pack_hits(fields, rows, out)
    }
}

impl FullRow for GpuBodyHit {
    const FAMILY: Family = Family::Bodies;
    fn pack(fields: Fields, rows: &[Self], out: &mut Vec<u32>) {
        pack_body_hits(fields, rows, out)
    }
}

/// A sink for rows asked with every field of `H`'s family: each row mended by `mend` (given
/// its index in the job), then packed to `fields` and handed to `sink` (jobs that move rows
/// into a frame of their own and their answers back).
pub fn mended_rows<'s, H: FullRow>(
    fields: Fields,
    sink: &'s mut dyn PackedSink,
    mut mend: impl FnMut(usize, &mut H) + 's,
) -> impl FnMut(usize, PackedRows<'_>) -> Result<()> + 's {
    let (mut rows_out, mut packed) = (Vec::<H>::new(), Vec::new());
    move |first, rows| {
        debug_assert_eq!(rows.fields(), Fields::all(H::FAMILY));
        rows_out.clear();
        rows_out.extend_from_slice(bytemuck::cast_slice(rows.words()));
        for (k, row) in rows_out.iter_mut().enumerate() {
            mend(first + k, row);
        }
        H::pack(fields, &rows_out, &mut packed);
        sink.take(first, PackedRows::new(fields, &packed))
    }
}

/// Move the points of packed `rows` of `fields` by `by`, in f64: answers made in a frame of
/// their own (a mesh's, a far scene's) back to world coordinates.
pub fn move_points(fields: Fields, rows: &mut [u32], by: crate::math::DVec3) {
    let point_bits = fields.family().point_bits();
    let starts: Vec<usize> = (fields.selected())
        .filter(|f| f.bit & point_bits != 0)
        .map(|f| fields.offset_words(f.bit))
        .collect();
    if starts.is_empty() || rows.is_empty() {
        return;
    }
    let by = [by.x, by.y, by.z];
    rows.par_chunks_exact_mut(fields.row_words())
        .with_min_len(1024)
        .for_each(|row| {
            for &start in &starts {
                for (word, shift) in row[start..start + 3].iter_mut().zip(by) {
                    *word = ((f32::from_bits(*word) as f64 + shift) as f32).to_bits();
                }
            }
        });
}

/// A sink handing `sink` each chunk's rows with their points moved by `by` ([`move_points`]);
/// rows without a point field pass as they are.
pub fn points_moved<'s>(
    by: crate::math::DVec3,
    sink: &'s mut dyn PackedSink,
) -> impl FnMut(usize, PackedRows<'_>) -> Result<()> + 's {
    let mut moved = Vec::new();
    move |first, rows| {
        let fields = rows.fields();
        if fields
            .selected()
            .all(|f| f.bit & fields.family().point_bits() == 0)
        {
            return sink.take(first, rows);
        }
        moved.clear();
        moved.extend_from_slice(rows.words());
        move_points(fields, &mut moved, by);
        sink.take(first, PackedRows::new(fields, &moved))
    }
}

/// Pack hits into rows of `fields` (the host's side of `write_hit`, for answers finished on
/// the host such as a mesh's signed hits).
pub fn pack_hits(fields: Fields, hits: &[GpuHit], out: &mut Vec<u32>) {
    out.clear();
    out.reserve(hits.len() * fields.row_words());
    for h in hits {
        if fields.contains(POINT) {
            out.extend(h.point.map(f32::to_bits));
        }
        if fields.contains(DISTANCE) {
            out.push(h.distance.to_bits());
        }
        if fields.contains(NORMAL) {
            out.extend(h.normal.map(f32::to_bits));
        }
        if fields.contains(SHAPE) {
            out.push(h.shape as u32);
        }
    }
}

/// Pack body contacts with every field into rows of `fields` (a `Bodies` subset).
pub fn pack_body_hits(fields: Fields, hits: &[GpuBodyHit], out: &mut Vec<u32>) {
    out.clear();
    out.reserve(hits.len() * fields.row_words());
    for h in hits {
        if fields.contains(POINT_BODY) {
            out.extend(h.point_body.map(f32::to_bits));
        }
        if fields.contains(POINT_TARGET) {
            out.extend(h.point_target.map(f32::to_bits));
        }
        if fields.contains(BODY_DISTANCE) {
            out.push(h.distance.to_bits());
        }
        if fields.contains(SHAPE) {
            out.push(h.shape as u32);
        }
        if fields.contains(BODY_NORMAL) {
            out.extend(h.normal.map(f32::to_bits));
        }
    }
}

/// Named output arrays, filled chunk by chunk: what the library and the Python package return
/// for a job with [`Fields`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Columns {
    /// (field, values row after row: `width` words each, f32 or i32 bits), in output order.
    pub columns: Vec<(Field, Vec<u32>)>,
}

impl Columns {
    /// Empty columns for `fields`, with room for `rows` rows.
    pub fn new(fields: Fields, rows: usize) -> Columns {
        Columns {
            columns: fields
                .selected()
                .map(|f| (*f, Vec::with_capacity(rows * f.width)))
                .collect(),
        }
    }

    /// The columns of `fields` for a streamed job of `rows` rows: `run` is given the sink that
    /// gathers each chunk.
    pub fn collect(
        fields: Fields,
        rows: usize,
        run: impl FnOnce(&mut dyn PackedSink) -> Result<()>,
    ) -> Result<Columns> {
        let mut columns = Columns::new(fields, rows);
        run(&mut columns)?;
        Ok(columns)
    }

    /// Append a chunk's rows (which may hold more fields than these columns).
    pub fn extend(&mut self, rows: &PackedRows<'_>) {
        for (field, values) in &mut self.columns {
            rows.extend_column(field.bit, values);
        }
    }

    /// The values of the field `name`, if there.
    pub fn get(&self, name: &str) -> Option<&[u32]> {
        self.columns
            .iter()
            .find(|(f, _)| f.name == name)
            .map(|(_, v)| v.as_slice())
    }

    /// The f32 values of the field `name`.
    pub fn f32s(&self, name: &str) -> Option<&[f32]> {
        self.get(name).map(bytemuck::cast_slice)
    }

    /// The f32 values of the field `name`, taken out of the columns (no copy).
    pub fn take_f32s(&mut self, name: &str) -> Option<Vec<f32>> {
        let at = self.columns.iter().position(|(f, _)| f.name == name)?;
        Some(bytemuck::allocation::cast_vec(std::mem::take(
            &mut self.columns[at].1,
        )))
    }

    /// The i32 values of the field `name`.
    pub fn i32s(&self, name: &str) -> Option<&[i32]> {
        self.get(name).map(bytemuck::cast_slice)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_pack_in_device_order_and_list_in_output_order() {
        let f = Fields::parse(Family::Hits, "normal,distance").unwrap();
        assert_eq!(f.row_words(), 4);
        assert_eq!(f.offset_words(DISTANCE), 0);
        assert_eq!(f.offset_words(NORMAL), 1);
        let names: Vec<_> = f.selected().map(|f| f.name).collect();
        assert_eq!(names, ["distance", "normal"]);
        assert_eq!(Fields::all(Family::Hits).row_words(), 8);
        assert_eq!(Fields::all(Family::Segments).row_words(), 9);
        let hit = GpuHit {
            point: [1.0, 2.0, 3.0],
            distance: 4.0,
            normal: [5.0, 6.0, 7.0],
            shape: 8,
        };
        let mut words = Vec::new();
        pack_hits(f, &[hit, hit], &mut words);
        let rows = PackedRows::new(f, &words);
        assert_eq!(rows.len(), 2);
        assert_eq!(
            rows.hit(1),
            GpuHit {
                point: [0.0; 3],
                shape: 0,
                ..hit
            }
        );
        pack_hits(Fields::all(Family::Hits), &[hit], &mut words);
        assert_eq!(bytemuck::cast_slice::<u32, GpuHit>(&words), &[hit]);
    }

    /// The first overflowed row is found alike on one core and on every core.
    #[test]
    fn overflowed_rows_are_found_alike_on_every_core() {
        let fields = Fields::parse(Family::Hits, "distance,normal").unwrap();
        let rows = 3 * DRAIN_PIECE_ROWS + 5;
        for marked in [
            vec![],
            vec![0],
            vec![rows - 1],
            vec![DRAIN_PIECE_ROWS + 3, rows - 2],
        ] {
            let mut words = vec![0u32; rows * fields.row_words()];
            for &row in &marked {
                words[row * fields.row_words()] = OVERFLOW_BITS;
            }
            let one = PackedRows::new(fields, &words).overflowed_row();
            let every = PackedRows::new(fields, &words)
                .spread(true)
                .overflowed_row();
            assert_eq!(one, marked.first().copied());
            assert_eq!(every, one);
        }
    }

    /// Columns copied out on every core are the columns copied on one, for whole rows, one-word
    /// and three-word fields, row counts that leave a part piece, after rows already there.
    #[test]
    fn columns_copied_on_every_core_are_those_copied_on_one() {
        for (names, rows) in [
            ("distance", 2 * DRAIN_PIECE_ROWS + 17),
            ("point,distance,normal,shape", 3 * DRAIN_PIECE_ROWS - 1),
            ("normal,shape", 2 * DRAIN_PIECE_ROWS),
        ] {
            let fields = Fields::parse(Family::Hits, names).unwrap();
            let words: Vec<u32> = (0..rows * fields.row_words())
                .map(|k| (k as u32).wrapping_mul(2_654_435_761))
                .collect();
            let mut one = Columns::new(fields, 2 * rows);
            let mut every = Columns::new(fields, 2 * rows);
            for _ in 0..2 {
                one.extend(&PackedRows::new(fields, &words));
                every.extend(&PackedRows::new(fields, &words).spread(true));
            }
            for ((field, a), (_, b)) in one.columns.iter().zip(&every.columns) {
                assert_eq!(a.len(), 2 * rows * field.width, "{names}: {}", field.name);
                assert!(a == b, "{names}: {} differs", field.name);
            }
        }
    }

    #[test]
    fn bad_names_are_usage_errors_listing_the_valid_ones() {
        let e = Fields::parse(Family::Segments, "distance,bogus").unwrap_err();
        assert!(
            e.to_string().contains("point_a, point_b, s, t, distance"),
            "{e}"
        );
        assert!(Fields::parse(Family::Hits, "shape,shape").is_err());
        assert!(Fields::parse(Family::Hits, "").is_err());
    }

    #[test]
    fn overflow_marker_is_found_in_the_first_word() {
        let only_shape = Fields::parse(Family::Hits, "shape").unwrap();
        let words = [0, 5, TRAVERSAL_OVERFLOW as u32];
        assert_eq!(
            PackedRows::new(only_shape, &words).overflowed_row(),
            Some(2)
        );
        let d = Fields::parse(Family::Hits, "distance,shape").unwrap();
        let words = [0, 1, OVERFLOW_BITS, 0];
        assert_eq!(PackedRows::new(d, &words).overflowed_row(), Some(1));
        assert_eq!(PackedRows::new(d, &[0, 1]).overflowed_row(), None);
    }
}
