//! The column model of result files: each output array's type and width (`ColumnSpec`) and
//! where its values come from (`Values`: packed device rows, slices or closures), shared by
//! the `.npz` and `.csv` writers and the service's responses.

use crate::fields::{Field, Fields, PackedRows};

/// The element type of an output array.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ColumnType {
    F32,
    I32,
    /// Small codes (a training sample's kind).
    U8,
}

impl ColumnType {
    pub(super) fn descr(self) -> &'static str {
        match self {
            ColumnType::F32 => "<f4",
            ColumnType::I32 => "<i4",
            ColumnType::U8 => "|u1",
        }
    }

    /// Bytes a value.
    pub(super) fn item_bytes(self) -> usize {
        match self {
            ColumnType::U8 => 1,
            _ => 4,
        }
    }
}

/// One named output array: `width` values per row (1, or 3 for vectors).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ColumnSpec {
    pub name: &'static str,
    pub width: usize,
    pub kind: ColumnType,
    /// The array's shape in the `.npz` when it is not (rows,) or (rows, width), e.g. a grid.
    pub shape: Option<Vec<usize>>,
}

impl ColumnSpec {
    pub const fn vector(name: &'static str) -> Self {
        ColumnSpec {
            name,
            width: 3,
            kind: ColumnType::F32,
            shape: None,
        }
    }
    pub const fn scalar(name: &'static str) -> Self {
        ColumnSpec {
            name,
            width: 1,
            kind: ColumnType::F32,
            shape: None,
        }
    }
    pub const fn index(name: &'static str) -> Self {
        ColumnSpec {
            name,
            width: 1,
            kind: ColumnType::I32,
            shape: None,
        }
    }

    /// The bytes of the column's values for `rows` rows.
    pub(super) fn data_bytes(&self, rows: usize) -> usize {
        self.npy_shape(rows).iter().product::<usize>() * self.kind.item_bytes()
    }

    pub(super) fn npy_shape(&self, rows: usize) -> Vec<usize> {
        match (&self.shape, self.width) {
            (Some(shape), _) => shape.clone(),
            (None, 1) => vec![rows],
            (None, width) => vec![rows, width],
        }
    }
}

/// How a column reads row i of the chunk being appended.
pub enum Values<'a> {
    /// f32 values; the first `width` of the three are used.
    F32(Box<dyn Fn(usize) -> [f32; 3] + 'a>),
    I32(Box<dyn Fn(usize) -> i32 + 'a>),
    /// 32-bit words (f32 or i32 bits) as the device packed them: row i's values are
    /// `words[i * stride + offset ..][..width]`. Moved in bulk, on all cores; a column that is
    /// the whole row (`stride == width`) is written straight from `words`.
    Words {
        words: &'a [u32],
        stride: usize,
        offset: usize,
    },
    /// One byte a row (a `ColumnType::U8` column), held whole.
    Bytes(&'a [u8]),
}

/// Rows converted by one task of a parallel gather: enough to outweigh the task's cost.
pub(super) const GATHER_PIECE_ROWS: usize = 1 << 16;

impl<'a> Values<'a> {
    pub fn vector(f: impl Fn(usize) -> [f32; 3] + 'a) -> Self {
        Values::F32(Box::new(f))
    }
    pub fn scalar(f: impl Fn(usize) -> f32 + 'a) -> Self {
        Values::F32(Box::new(move |i| [f(i), 0.0, 0.0]))
    }
    pub fn index(f: impl Fn(usize) -> i32 + 'a) -> Self {
        Values::I32(Box::new(f))
    }
    /// A column held whole: `width` words a row, one after another.
    pub fn column(words: &'a [u32], width: usize) -> Self {
        Values::Words {
            words,
            stride: width,
            offset: 0,
        }
    }
    /// A column of f32 values held whole.
    pub fn f32_column(values: &'a [f32], width: usize) -> Self {
        Values::column(bytemuck::cast_slice(values), width)
    }

    /// Rows `0..count` as little-endian bytes, `width` values each: borrowed from the words
    /// where they are laid out so already, else gathered into `scratch`.
    pub(super) fn bytes<'s>(
        &'s self,
        count: usize,
        width: usize,
        scratch: &'s mut Vec<u8>,
    ) -> &'s [u8] {
        if let Values::Bytes(bytes) = self {
            return &bytes[..count];
        }
        if let Values::Words {
            words,
            stride,
            offset: 0,
        } = *self
            && stride == width
            && cfg!(target_endian = "little")
        {
            return bytemuck::cast_slice(&words[..count * width]);
        }
        scratch.clear();
        self.extend_bytes(count, width, scratch);
        scratch
    }

    /// Rows `0..count` as little-endian bytes, `width` values each, appended to `out`.
    fn extend_bytes(&self, count: usize, width: usize, out: &mut Vec<u8>) {
        out.reserve(count * width * 4);
        match self {
            Values::F32(f) => {
                for i in 0..count {
                    for v in &f(i)[..width] {
                        out.extend_from_slice(&v.to_le_bytes());
                    }
                }
            }
            Values::I32(f) => {
                for i in 0..count {
                    out.extend_from_slice(&f(i).to_le_bytes());
                }
            }
            Values::Bytes(bytes) => out.extend_from_slice(&bytes[..count]),
            &Values::Words {
                words,
                stride,
                offset,
            } => {
                use rayon::prelude::*;
                let start = out.len();
                out.resize(start + count * width * 4, 0);
                let piece_bytes = GATHER_PIECE_ROWS * width * 4;
                out[start..]
                    .par_chunks_mut(piece_bytes)
                    .zip(words[..count * stride].par_chunks(GATHER_PIECE_ROWS * stride))
                    .for_each(|(bytes, rows)| {
                        for (value, row) in
                            bytes.chunks_exact_mut(4 * width).zip(rows.chunks(stride))
                        {
                            for (cell, word) in
                                value.chunks_exact_mut(4).zip(&row[offset..offset + width])
                            {
                                cell.copy_from_slice(&word.to_le_bytes());
                            }
                        }
                    });
            }
        }
    }

    /// Row i's values of `column` as CSV cells.
    pub(super) fn push_cells(&self, i: usize, column: &ColumnSpec, cells: &mut Vec<String>) {
        let width = column.width;
        match self {
            Values::F32(f) => cells.extend(f(i)[..width].iter().map(|v| v.to_string())),
            Values::I32(f) => cells.push(f(i).to_string()),
            Values::Bytes(bytes) => cells.push(bytes[i].to_string()),
            &Values::Words {
                words,
                stride,
                offset,
            } => {
                let row = &words[i * stride + offset..][..width];
                cells.extend(row.iter().map(|&w| match column.kind {
                    ColumnType::F32 => f32::from_bits(w).to_string(),
                    ColumnType::I32 => (w as i32).to_string(),
                    ColumnType::U8 => (w as u8).to_string(),
                }))
            }
        }
    }
}

/// The output columns of `fields`, in the family's default order.
pub fn field_columns(fields: Fields) -> Vec<ColumnSpec> {
    fields.selected().map(field_column).collect()
}

/// The output column of one field.
pub fn field_column(f: &Field) -> ColumnSpec {
    match (f.width, f.is_index) {
        (_, true) => ColumnSpec::index(f.name),
        (1, false) => ColumnSpec::scalar(f.name),
        _ => ColumnSpec::vector(f.name),
    }
}

/// The values of [`field_columns`] for a chunk of packed rows (which may hold more fields).
pub fn field_values<'a>(fields: Fields, rows: &PackedRows<'a>) -> Vec<Values<'a>> {
    fields
        .selected()
        .map(|f| {
            debug_assert!(rows.fields().contains(f.bit), "rows lack `{}`", f.name);
            Values::Words {
                words: rows.words(),
                stride: rows.fields().row_words(),
                offset: rows.fields().offset_words(f.bit),
            }
        })
        .collect()
}
