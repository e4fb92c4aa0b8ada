//! NumPy `.npy` headers: reading (f2/f4/f8 of either byte order, C or Fortran order; each
//! reader says which it takes) and writing.

use std::io::{Read, Write};

/// Element type of an array we read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dtype {
    /// Half precision, as ML pipelines store points compactly: widened exactly on read.
    F16,
    F32,
    F64,
}

impl Dtype {
    /// The float dtypes a file of rows may have: either byte order (numpy writes `>f8` for a
    /// byte-swapped array); whether it is big-endian beside it.
    pub fn from_any_order(descr: &str) -> Result<(Dtype, bool), String> {
        match descr {
            ">f2" => Ok((Dtype::F16, true)),
            "<f2" => Ok((Dtype::F16, false)),
            ">f4" => Ok((Dtype::F32, true)),
            ">f8" => Ok((Dtype::F64, true)),
            "<f4" => Ok((Dtype::F32, false)),
            "<f8" => Ok((Dtype::F64, false)),
            other => Err(format!(
                "dtype `{other}` is not supported (use float16, float32 or float64, either byte order)"
            )),
        }
    }

    pub fn size(self) -> usize {
        match self {
            Dtype::F16 => 2,
            Dtype::F32 => 4,
            Dtype::F64 => 8,
        }
    }
}

/// A parsed header: dtype, shape, and where the data starts.
#[derive(Clone, Debug, PartialEq)]
pub struct Header {
    /// The array's `descr`, such as `<f4`.
    pub descr: String,
    pub shape: Vec<usize>,
    pub data_offset: u64,
    /// The values are in Fortran order (the first index varies fastest): pandas' `to_numpy()`
    /// of a float frame gives such arrays, and `numpy.save` keeps the order.
    pub fortran_order: bool,
}

/// Parse the header at the start of `reader`; errors are plain descriptions for the caller to
/// put the file name on.
pub fn read_header(reader: &mut impl Read) -> Result<Header, String> {
    let mut magic = [0u8; 8];
    reader
        .read_exact(&mut magic)
        .map_err(|_| "not a .npy file (too short)".to_string())?;
    if &magic[..6] != b"\x93NUMPY" {
        return Err("not a .npy file (bad magic bytes)".into());
    }
    let (len, prefix) = match magic[6] {
        1 => {
            let mut b = [0u8; 2];
            reader
                .read_exact(&mut b)
                .map_err(|_| "truncated .npy header")?;
            (u16::from_le_bytes(b) as usize, 10)
        }
        2 | 3 => {
            let mut b = [0u8; 4];
            reader
                .read_exact(&mut b)
                .map_err(|_| "truncated .npy header")?;
            (u32::from_le_bytes(b) as usize, 12)
        }
        v => return Err(format!("unsupported .npy version {v}")),
    };
    if len > 1 << 20 {
        return Err(format!(".npy header of {len} bytes is implausibly long"));
    }
    let mut text = vec![0u8; len];
    reader
        .read_exact(&mut text)
        .map_err(|_| "truncated .npy header".to_string())?;
    let text = String::from_utf8_lossy(&text);
    let field = |key: &str| -> Result<String, String> {
        let quoted = format!("'{key}'");
        let at = text
            .find(&quoted)
            .ok_or_else(|| format!(".npy header has no '{key}'"))?;
        // numpy would take the last of two: refused rather than read one way or the other.
        if text[at + quoted.len()..].contains(&quoted) {
            return Err(format!("malformed .npy header: '{key}' given twice"));
        }
        let rest = text[at + key.len() + 2..].trim_start();
        let rest = rest
            .strip_prefix(':')
            .ok_or_else(|| format!("malformed .npy header near '{key}'"))?
            .trim_start();
        let end = if rest.starts_with('(') {
            rest.find(')').map(|i| i + 1)
        } else {
            rest.find([',', '}'])
        }
        .ok_or_else(|| format!("malformed .npy header near '{key}'"))?;
        Ok(rest[..end].trim().to_string())
    };
    let descr = field("descr")?
        .trim_matches(|c| c == '\'' || c == '"')
        .to_string();
    let fortran_order = match field("fortran_order")?.as_str() {
        "False" => false,
        "True" => true,
        other => return Err(format!("malformed .npy header: fortran_order {other}")),
    };
    let shape_text = field("shape")?;
    let shape = shape_text
        .trim_matches(|c| c == '(' || c == ')')
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<usize>()
                .map_err(|_| format!("malformed shape {shape_text}"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Header {
        descr,
        shape,
        data_offset: (prefix + len) as u64,
        fortran_order,
    })
}

/// For a Fortran-ordered array of rows of `npy_dims` trailing dimensions, the index within a
/// C row of each value column in file order: the first index varies fastest, so column
/// `j + d1 l` of (N, d1, d2) holds value (j, l), C's `j d2 + l`.
pub fn fortran_columns(npy_dims: &[usize]) -> Vec<usize> {
    let count: usize = npy_dims.iter().product();
    (0..count)
        .map(|c| {
            // The file's multi-index of column c, first dimension fastest, as C numbers it.
            let (mut rest, mut k, mut stride) = (c, 0, count);
            for &d in npy_dims {
                stride /= d;
                k += (rest % d) * stride;
                rest /= d;
            }
            k
        })
        .collect()
}

/// `values` of a Fortran-ordered array of rows of `npy_dims` (as they lay in the file) in C
/// order.
pub fn fortran_to_c<T: Copy>(values: &[T], npy_dims: &[usize]) -> Vec<T> {
    let columns = fortran_columns(npy_dims);
    let width = columns.len().max(1);
    let rows = values.len() / width;
    let mut out = values.to_vec();
    for (c, &k) in columns.iter().enumerate() {
        for (i, &value) in values[c * rows..(c + 1) * rows].iter().enumerate() {
            out[i * width + k] = value;
        }
    }
    out
}

/// Write a header for a C-ordered little-endian array (`descr` such as `<f4` or `<i4`).
pub fn write_header(out: &mut impl Write, descr: &str, shape: &[usize]) -> std::io::Result<()> {
    let dims = match shape {
        [n] => format!("({n},)"),
        _ => format!(
            "({})",
            shape
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let mut dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {dims}, }}");
    // Pad with spaces so the data starts on a 64-byte boundary; the header ends with '\n'.
    let unpadded = 10 + dict.len() + 1;
    dict.push_str(&" ".repeat(unpadded.next_multiple_of(64) - unpadded));
    dict.push('\n');
    out.write_all(b"\x93NUMPY\x01\x00")?;
    out.write_all(&(dict.len() as u16).to_le_bytes())?;
    out.write_all(dict.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::{Dtype, fortran_to_c, read_header};

    fn file_with_header(dict: &str) -> Vec<u8> {
        let mut file = b"\x93NUMPY\x01\x00".to_vec();
        file.extend_from_slice(&(dict.len() as u16).to_le_bytes());
        file.extend_from_slice(dict.as_bytes());
        file
    }

    /// A key given twice would be read as its first value here and its last by numpy:
    /// refused, naming the key.
    #[test]
    fn a_header_giving_a_key_twice_is_refused() {
        let twice = "{'descr': '<f8', 'fortran_order': False, 'shape': (3, 3), 'shape': (1, 3)}\n";
        let error = read_header(&mut file_with_header(twice).as_slice()).unwrap_err();
        assert!(error.contains("'shape' given twice"), "{error}");
        let once = "{'descr': '<f8', 'fortran_order': False, 'shape': (3, 3), }\n";
        let header = read_header(&mut file_with_header(once).as_slice()).unwrap();
        assert_eq!(header.shape, [3, 3]);
    }

    /// Readers that take either byte order say so when they refuse a dtype.
    #[test]
    fn dtype_errors_name_the_byte_orders_taken() {
        assert_eq!(Dtype::from_any_order(">f8"), Ok((Dtype::F64, true)));
        assert_eq!(Dtype::from_any_order(">f2"), Ok((Dtype::F16, true)));
        let error = Dtype::from_any_order("<f16").unwrap_err();
        assert!(error.contains("either byte order"), "{error}");
    }

    /// A (2, 2, 3) array as numpy writes it in Fortran order (first index fastest) comes back
    /// in C order.
    #[test]
    fn fortran_values_come_back_in_c_order() {
        let value = |i: usize, j: usize, l: usize| (100 * i + 10 * j + l) as f64;
        let mut file = Vec::new();
        for l in 0..3 {
            for j in 0..2 {
                for i in 0..2 {
                    file.push(value(i, j, l));
                }
            }
        }
        let c: Vec<f64> = (0..2)
            .flat_map(|i| (0..2).flat_map(move |j| (0..3).map(move |l| value(i, j, l))))
            .collect();
        assert_eq!(fortran_to_c(&file, &[2, 3]), c);
    }
}
