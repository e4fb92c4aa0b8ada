//! Where an `.npy` input's bytes are read: a file of its own, or one array of an `.npz`
//! (numpy's `savez` stores it, read in place; `savez_compressed` deflates it, inflated as the
//! rows are read, so that memory stays bounded however large the array is).

use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom, Take};
use std::path::{Path, PathBuf};

use flate2::read::DeflateDecoder;

use super::npy;
use crate::error::{Error, Result};

/// The bytes of one `.npy`, read at offsets from its start.
pub(super) struct NpySource {
    bytes: Bytes,
    /// How many bytes the `.npy` has (header and data).
    len: u64,
    /// The `.npz` array's name (`None` for an `.npy` file), for messages.
    array: Option<String>,
    /// The archive's CRC-32 of the `.npy`, checked once the cursors' forward runs cover it.
    crc: Option<CrcCheck>,
}

/// The archive's CRC-32 and, for each cursor, the bytes it has read in one forward run,
/// hashed: a C-ordered array's one run, or a Fortran-ordered one's column each. When the runs
/// tile the whole `.npy`, their hashes are combined in order and checked; a read that does not
/// go on from its cursor's run (rows read out of order) drops the check.
struct CrcCheck {
    expected: u32,
    runs: Vec<Option<HashedRun>>,
}

struct HashedRun {
    start: u64,
    end: u64,
    hasher: crc32fast::Hasher,
}

impl CrcCheck {
    /// Where cursor `cursor`'s run has reached (cursor 0's starts at byte 0, before the header).
    fn reached(&self, cursor: usize) -> Option<u64> {
        match self.runs.get(cursor) {
            Some(Some(run)) => Some(run.end),
            _ if cursor == 0 => Some(0),
            _ => None,
        }
    }

    /// `bytes` read by `cursor` from `offset`; `Err(())` where they do not go on from its run.
    fn extend(&mut self, cursor: usize, offset: u64, bytes: &[u8]) -> Result<(), ()> {
        if self.runs.len() <= cursor {
            self.runs.resize_with(cursor + 1, || None);
        }
        let run = self.runs[cursor].get_or_insert_with(|| HashedRun {
            start: offset,
            end: offset,
            hasher: crc32fast::Hasher::new(),
        });
        if run.end != offset {
            return Err(());
        }
        run.hasher.update(bytes);
        run.end += bytes.len() as u64;
        Ok(())
    }

    /// The CRC of bytes `0..len` where the runs cover exactly those, one after another.
    fn whole(&self, len: u64) -> Option<u32> {
        let mut runs: Vec<&HashedRun> = self.runs.iter().flatten().collect();
        runs.sort_by_key(|run| run.start);
        let mut combined = crc32fast::Hasher::new();
        let mut reached = 0;
        for run in runs {
            if run.start != reached {
                return None;
            }
            combined.combine(&run.hasher);
            reached = run.end;
        }
        (reached == len).then(|| combined.finalize())
    }

    fn hashed(&self) -> u64 {
        self.runs
            .iter()
            .flatten()
            .map(|run| run.end - run.start)
            .sum()
    }
}

/// A gap before cursor 0's read that is hashed by reading it (the header); a larger one (rows
/// read out of order) drops the check.
const MOST_HASHED_GAP: u64 = 1 << 20;

enum Bytes {
    /// The `.npy` lies as it is in the file from `start`.
    Stored {
        reader: BufReader<File>,
        start: u64,
        /// Where `reader` is, to read on without a seek (which drops its buffer).
        position: Option<u64>,
    },
    /// The `.npy` is the deflate stream of `compressed` bytes at `start` of `path`. Each cursor
    /// inflates forward on its own (a Fortran-ordered array's columns each keep one).
    Deflated {
        path: PathBuf,
        start: u64,
        compressed: u64,
        cursors: Vec<Option<Inflating>>,
    },
}

struct Inflating {
    stream: DeflateDecoder<Take<BufReader<File>>>,
    /// Bytes of the `.npy` inflated so far.
    position: u64,
}

impl NpySource {
    /// An `.npy` file.
    pub fn npy_file(path: &Path) -> Result<NpySource> {
        let (file, len) = open_with_len(path)?;
        Ok(NpySource {
            bytes: Bytes::Stored {
                reader: BufReader::with_capacity(1 << 20, file),
                start: 0,
                position: None,
            },
            len,
            array: None,
            crc: None,
        })
    }

    /// The array of an `.npz` file that rows of `wanted` are read from: its only array, or the
    /// one named `wanted`.
    pub fn npz_array(path: &Path, wanted: &str) -> Result<NpySource> {
        let bad = |problem: String| Error::BadFile {
            file: path.display().to_string(),
            problem,
        };
        let (file, file_len) = open_with_len(path)?;
        let mut archive = zip::ZipArchive::new(BufReader::new(file))
            .map_err(|e| bad(format!("not a .npz (zip) archive: {e}")))?;
        let arrays: Vec<(usize, String)> = (0..archive.len())
            .filter_map(|k| {
                let name = match archive.name_for_index(k)? {
                    Ok(name) => name.into_owned(),
                    Err(_) => "(a name not in UTF-8)".into(),
                };
                let array = name.strip_suffix(".npy").unwrap_or(&name).to_string();
                (!name.ends_with('/')).then_some((k, array))
            })
            .collect();
        let (index, array) = match arrays.as_slice() {
            [] => return Err(bad("the archive holds no array".into())),
            [only] => only.clone(),
            _ => arrays
                .iter()
                .find(|(_, name)| name == wanted)
                .cloned()
                .ok_or_else(|| {
                    let names: Vec<&str> = arrays.iter().map(|(_, n)| n.as_str()).collect();
                    bad(format!(
                        "it holds the arrays {}: {wanted} are read from the one named `{wanted}`, \
                         or from an archive of one array",
                        names.join(", ")
                    ))
                })?,
        };
        let bad_array = |problem: String| bad(format!("array `{array}`: {problem}"));
        let entry = archive
            .by_index_raw(index)
            .map_err(|e| bad_array(format!("unreadable entry: {e}")))?;
        if entry.encrypted() {
            return Err(bad_array("encrypted; numpy writes no such archive".into()));
        }
        let start = entry
            .data_start()
            .ok_or_else(|| bad_array("unreadable entry".into()))?;
        let compressed = entry.compressed_size();
        let len = entry.size();
        let method = entry.compression();
        let expected_crc = entry.crc32();
        drop(entry);
        if start
            .checked_add(compressed)
            .is_none_or(|end| end > file_len)
        {
            return Err(bad_array(format!(
                "truncated: its {compressed} bytes at byte {start} run past the file's {file_len}"
            )));
        }
        let reader = archive.into_inner();
        let bytes = match method {
            zip::CompressionMethod::Stored => {
                if len != compressed {
                    return Err(bad_array(format!(
                        "stored uncompressed, yet its sizes differ ({len} and {compressed} bytes)"
                    )));
                }
                Bytes::Stored {
                    reader,
                    start,
                    position: None,
                }
            }
            zip::CompressionMethod::Deflated => Bytes::Deflated {
                path: path.to_path_buf(),
                start,
                compressed,
                cursors: Vec::new(),
            },
            other => {
                return Err(bad_array(format!(
                    "compressed with {other}; numpy's savez stores arrays and savez_compressed \
                     deflates them, and only those are read"
                )));
            }
        };
        Ok(NpySource {
            bytes,
            len,
            array: Some(array),
            crc: Some(CrcCheck {
                expected: expected_crc,
                runs: Vec::new(),
            }),
        })
    }

    /// How many bytes the `.npy` has.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// What holds the `.npy`: "array" (of an `.npz`) or "file".
    pub fn holder(&self) -> &'static str {
        if self.array.is_some() {
            "array"
        } else {
            "file"
        }
    }

    /// What the file's messages call these bytes: the file, or its array.
    pub fn describe(&self, path: &Path) -> String {
        match &self.array {
            Some(array) => format!("{} (array `{array}`)", path.display()),
            None => path.display().to_string(),
        }
    }

    /// The `.npy` header at the start.
    pub fn header(&mut self) -> Result<npy::Header, String> {
        match &mut self.bytes {
            Bytes::Stored {
                reader,
                start,
                position,
            } => {
                *position = None;
                reader
                    .seek(SeekFrom::Start(*start))
                    .map_err(|e| format!("cannot read its header: {e}"))?;
                npy::read_header(reader)
            }
            Bytes::Deflated {
                path,
                start,
                compressed,
                ..
            } => {
                let inflating = Inflating::open(path, *start, *compressed)
                    .map_err(|e| format!("cannot read its header: {e}"))?;
                // The header's reader calls any failure "too short": an inflating error is
                // kept to be told as it is.
                let mut kept = KeepingError {
                    inner: inflating.stream,
                    error: None,
                };
                npy::read_header(&mut kept).map_err(|problem| match kept.error {
                    Some(e) => format!("cannot inflate its header: {e}"),
                    None => problem,
                })
            }
        }
    }

    /// Fill `buf` from `offset` of the `.npy`, through `cursor` (reads through one cursor that
    /// go forward need no seek, nor any inflating twice). An `.npz` array read whole, each
    /// cursor forward (a C-ordered array through one, a Fortran-ordered one's columns through
    /// one each), is checked against the archive's CRC-32 at its last byte, as numpy's `load`
    /// checks it.
    pub fn read_at(&mut self, cursor: usize, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        if cursor == 0 {
            self.hash_gap(offset)?;
        }
        self.read_raw(cursor, offset, buf)?;
        let Some(check) = &mut self.crc else {
            return Ok(());
        };
        if check.extend(cursor, offset, buf).is_err() {
            self.crc = None;
            return Ok(());
        }
        if check.hashed() < self.len {
            return Ok(());
        }
        let (crc, expected) = (check.whole(self.len), check.expected);
        self.crc = None;
        match crc {
            Some(crc) if crc != expected => Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!(
                    "its array's CRC-32 is {crc:08x}, not the archive's {expected:08x}: the file \
                     is damaged"
                ),
            )),
            // Equal, or runs that overlap: nothing more to check.
            _ => Ok(()),
        }
    }

    /// Hash what lies before cursor 0's read at `offset` and was not read through it (the
    /// header), or drop the check if that is more than a header.
    fn hash_gap(&mut self, offset: u64) -> std::io::Result<()> {
        let Some(from) = self.crc.as_ref().and_then(|check| check.reached(0)) else {
            return Ok(());
        };
        let gap = offset.saturating_sub(from);
        if gap == 0 {
            return Ok(());
        }
        if gap > MOST_HASHED_GAP {
            self.crc = None;
            return Ok(());
        }
        let mut bytes = vec![0; gap as usize];
        self.read_raw(0, from, &mut bytes)?;
        let check = self.crc.as_mut().expect("checked");
        if check.extend(0, from, &bytes).is_err() {
            self.crc = None;
        }
        Ok(())
    }

    fn read_raw(&mut self, cursor: usize, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        match &mut self.bytes {
            Bytes::Stored {
                reader,
                start,
                position,
            } => {
                let at = *start + offset;
                if *position != Some(at) {
                    *position = None;
                    reader.seek(SeekFrom::Start(at))?;
                }
                reader.read_exact(buf)?;
                *position = Some(at + buf.len() as u64);
                Ok(())
            }
            Bytes::Deflated {
                path,
                start,
                compressed,
                cursors,
            } => {
                if cursors.len() <= cursor {
                    cursors.resize_with(cursor + 1, || None);
                }
                let slot = &mut cursors[cursor];
                if slot.as_ref().is_none_or(|c| c.position > offset) {
                    *slot = Some(Inflating::open(path, *start, *compressed)?);
                }
                let inflating = slot.as_mut().expect("opened above");
                let skip = offset - inflating.position;
                let skipped = std::io::copy(
                    &mut (&mut inflating.stream).take(skip),
                    &mut std::io::sink(),
                )?;
                let read = if skipped == skip {
                    inflating.stream.read_exact(buf)
                } else {
                    Err(std::io::ErrorKind::UnexpectedEof.into())
                };
                let ended = |e: std::io::Error| {
                    if e.kind() == std::io::ErrorKind::UnexpectedEof {
                        std::io::Error::new(
                            e.kind(),
                            "its array inflates to fewer bytes than its header promises",
                        )
                    } else {
                        e
                    }
                };
                if let Err(e) = read {
                    *slot = None;
                    return Err(ended(e));
                }
                inflating.position = offset + buf.len() as u64;
                Ok(())
            }
        }
    }
}

/// An input file, opened, and its length.
fn open_with_len(path: &Path) -> Result<(File, u64)> {
    let file = super::open_input(path)?;
    let len = file
        .metadata()
        .map_err(|source| Error::Read {
            path: path.to_path_buf(),
            source,
        })?
        .len();
    Ok((file, len))
}

impl Inflating {
    fn open(path: &Path, start: u64, compressed: u64) -> std::io::Result<Inflating> {
        let mut file = File::open(path)?;
        file.seek(SeekFrom::Start(start))?;
        Ok(Inflating {
            stream: DeflateDecoder::new(BufReader::with_capacity(1 << 16, file).take(compressed)),
            position: 0,
        })
    }
}

/// A reader that keeps its inner reader's last error other than an early end.
struct KeepingError<R> {
    inner: R,
    error: Option<std::io::Error>,
}

impl<R: Read> Read for KeepingError<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.inner.read(buf).inspect_err(|e| {
            if e.kind() != std::io::ErrorKind::UnexpectedEof {
                self.error = Some(std::io::Error::new(e.kind(), e.to_string()));
            }
        })
    }
}
