//! Mesh files (SPEC §4): OBJ (polygons triangulated as fans), STL (ASCII and binary) and OFF
//! (ModelNet's) by our own readers, PLY (ASCII and binary; faces, or triangle strips as in
//! `igea.ply`; its header parsed by its crate, its payload streamed by ours), glTF (`.glb`,
//! `.gltf`) by `super::gltf`. A malformed or
//! truncated file is an error naming the file and the problem.

use std::path::Path;

use super::records::{PointRecords, ply_scalar_size, read_ply_scalar};
use crate::error::{Error, Result};
use crate::math::DVec3;
use crate::mesh::{Mesh, Vertices};

/// Load a mesh by its extension: `.obj`, `.stl`, `.ply`, `.off`, `.glb` or `.gltf` (whose
/// buffers may be files beside it).
pub fn load_mesh(path: &Path) -> Result<Mesh> {
    load_mesh_from(path, Some(folder_of(path)))
}

/// The folder a file is in (`.` for a bare name), where a `.gltf`'s buffer files are.
fn folder_of(path: &Path) -> &Path {
    path.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// [`load_mesh`] of a file that came alone (a service's upload): no file beside it is read, so
/// that a `.gltf`'s buffer URI cannot make the server read its own files.
pub fn load_uploaded_mesh(path: &Path) -> Result<Mesh> {
    load_mesh_from(path, None)
}

fn load_mesh_from(path: &Path, beside: Option<&Path>) -> Result<Mesh> {
    let file = path.display().to_string();
    let format = MeshFormat::of(path).ok_or_else(|| Error::BadFile {
        file: file.clone(),
        problem: "a mesh must be .obj, .stl, .ply, .off, .glb or .gltf (by its extension)".into(),
    })?;
    read_soup(&mut open_buffered(path)?, format, &file, beside)
        .and_then(|(vertices, triangles)| Mesh::new(vertices, triangles, &file))
        .map_err(|error| with_content_hint(error, path, format))
}

/// A refused file whose bytes look like another mesh format than its extension's (a binary STL
/// saved as `.obj` reads as an OBJ of no triangles) says so.
fn with_content_hint(error: Error, path: &Path, format: MeshFormat) -> Error {
    let Error::BadFile { file, problem } = error else {
        return error;
    };
    let mut head = Vec::with_capacity(1024);
    let len = std::fs::File::open(path).and_then(|f| {
        let len = f.metadata()?.len();
        std::io::Read::read_to_end(&mut std::io::Read::take(f, 1024), &mut head)?;
        Ok(len)
    });
    let problem = match len.ok().and_then(|len| MeshFormat::sniff(&head, len)) {
        Some(looks) if looks != format => format!(
            "{problem}; its bytes look like {}, not {}",
            looks.name(),
            format.name()
        ),
        _ => problem,
    };
    Error::BadFile { file, problem }
}

/// A mesh file's vertex positions, faces or none (a scan's `.ply`, an OBJ of `v` lines
/// alone): the rows of a points file in a mesh format.
pub(crate) fn read_positions(path: &Path, format: MeshFormat) -> Result<Vertices> {
    let file = path.display().to_string();
    let read = read_soup(
        &mut open_buffered(path)?,
        format,
        &file,
        Some(folder_of(path)),
    );
    let vertices = match read {
        // A binary file read as OBJ has no `v` line: said, not answered with no rows.
        Ok((vertices, _)) if vertices.is_empty() => Err(Error::BadFile {
            file,
            problem: "it holds no vertices".into(),
        }),
        read => read.map(|(vertices, _)| vertices),
    };
    vertices.map_err(|error| with_content_hint(error, path, format))
}

fn open_buffered(path: &Path) -> Result<std::io::BufReader<std::fs::File>> {
    Ok(std::io::BufReader::new(super::open_input(path)?))
}

/// The mesh file formats, told apart by extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MeshFormat {
    Obj,
    Stl,
    Ply,
    Off,
    /// glTF 2.0: `.glb`, or `.gltf` with embedded buffers (told apart by their first bytes).
    Gltf,
}

impl MeshFormat {
    /// The format of `path`'s extension (any case), if it is one.
    pub fn of(path: &Path) -> Option<MeshFormat> {
        let ext = path.extension()?.to_str()?.to_lowercase();
        Some(match ext.as_str() {
            "obj" => MeshFormat::Obj,
            "stl" => MeshFormat::Stl,
            "ply" => MeshFormat::Ply,
            "off" => MeshFormat::Off,
            "glb" | "gltf" => MeshFormat::Gltf,
            _ => return None,
        })
    }

    /// The format a file's first bytes (up to 1 KiB) and length look like, if any.
    pub fn sniff(head: &[u8], len: u64) -> Option<MeshFormat> {
        let text = String::from_utf8_lossy(head);
        let text = text.trim_start_matches('\u{feff}').trim_start();
        let binary_stl = len >= 84
            && head.len() >= 84
            && 84
                + 50 * u64::from(u32::from_le_bytes(
                    head[80..84].try_into().expect("4 bytes"),
                ))
                == len;
        Some(if head.starts_with(b"glTF") {
            MeshFormat::Gltf
        } else if head.starts_with(b"ply\n") || head.starts_with(b"ply\r") {
            MeshFormat::Ply
        } else if binary_stl || (text.starts_with("solid") && text.contains("facet")) {
            MeshFormat::Stl
        } else if ["OFF", "COFF", "NOFF", "CNOFF"]
            .iter()
            .any(|keyword| text.starts_with(keyword))
        {
            MeshFormat::Off
        } else if text.starts_with('{') && text.contains("\"asset\"") {
            MeshFormat::Gltf
        } else if text
            .lines()
            .any(|line| line.starts_with("v ") || line.starts_with("f "))
        {
            MeshFormat::Obj
        } else {
            return None;
        })
    }

    /// The format's name in messages.
    pub fn name(self) -> &'static str {
        match self {
            MeshFormat::Obj => "OBJ",
            MeshFormat::Stl => "STL",
            MeshFormat::Ply => "PLY",
            MeshFormat::Off => "OFF",
            MeshFormat::Gltf => "glTF",
        }
    }
}

/// Read a mesh of `format` from `reader`; `file` names it in errors.
pub fn read_mesh<R: std::io::BufRead + std::io::Seek>(
    reader: &mut R,
    format: MeshFormat,
    file: &str,
) -> Result<Mesh> {
    let (vertices, triangles) = read_soup(reader, format, file, None)?;
    Mesh::new(vertices, triangles, file)
}

/// A file's vertices and triangles as its reader gives them, not yet checked as a mesh;
/// `beside`: the folder a glTF's buffer files are read from (none: only embedded buffers).
fn read_soup<R: std::io::BufRead + std::io::Seek>(
    reader: &mut R,
    format: MeshFormat,
    file: &str,
    beside: Option<&Path>,
) -> Result<Soup> {
    let mut reader = Interruptible {
        inner: reader,
        unasked: 0,
        interrupted: false,
    };
    let read = match format {
        MeshFormat::Obj => read_obj(&mut reader),
        MeshFormat::Stl => read_stl(&mut reader),
        MeshFormat::Ply => read_ply(&mut reader),
        MeshFormat::Off => read_off(&mut reader),
        MeshFormat::Gltf => read_gltf(&mut reader, beside),
    };
    if reader.interrupted {
        return Err(Error::Interrupted);
    }
    read.map_err(|problem| Error::BadFile {
        file: file.to_string(),
        problem,
    })
}

/// A mesh file's reader that asks the caller's interrupt check (Python's Ctrl-C) every few
/// MiB: a large file takes seconds to read. The readers see an I/O error and stop; the flag
/// tells it from a real one.
struct Interruptible<'a, R> {
    inner: &'a mut R,
    /// Bytes handed out since the check was last asked.
    unasked: usize,
    interrupted: bool,
}

/// Bytes read between two asks of the interrupt check.
const INTERRUPT_EVERY_BYTES: usize = 4 << 20;

impl<R: std::io::BufRead> Interruptible<'_, R> {
    fn ask(&mut self, bytes: usize) -> std::io::Result<()> {
        self.unasked += bytes;
        if self.unasked >= INTERRUPT_EVERY_BYTES {
            self.unasked = 0;
            if crate::interrupt::interrupted() {
                self.interrupted = true;
            }
        }
        match self.interrupted {
            // Not `ErrorKind::Interrupted`, which std's readers retry.
            true => Err(std::io::Error::other("interrupted")),
            false => Ok(()),
        }
    }
}

impl<R: std::io::BufRead> std::io::Read for Interruptible<'_, R> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        self.ask(0)?;
        let n = self.inner.read(out)?;
        self.ask(n)?;
        Ok(n)
    }
}

impl<R: std::io::BufRead> std::io::BufRead for Interruptible<'_, R> {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        self.ask(0)?;
        self.inner.fill_buf()
    }
    fn consume(&mut self, n: usize) {
        self.unasked += n;
        self.inner.consume(n);
    }
}

impl<R: std::io::Seek> std::io::Seek for Interruptible<'_, R> {
    fn seek(&mut self, to: std::io::SeekFrom) -> std::io::Result<u64> {
        self.inner.seek(to)
    }
}

type Soup = (Vertices, Vec<[u32; 3]>);

/// OBJ, read line by line: `v` positions kept in the file's order, every one, used or not (a
/// vertex's index is the file's, as per-vertex outputs such as `closest distance`'s deviations
/// need), and `f` polygons triangulated as fans from their first corner. Texture coordinates,
/// normals, groups, objects, materials, lines and points are not needed. An index may be
/// relative (negative: counted back from the last position declared) or refer to a position
/// declared later in the file; a backslash ending a line continues it; `#` starts a comment.
fn read_obj<R: std::io::BufRead>(reader: &mut R) -> std::result::Result<Soup, String> {
    // A UTF-8 byte-order mark (Windows editors write one) would hide the first line's keyword.
    if reader
        .fill_buf()
        .is_ok_and(|start| start.starts_with(b"\xEF\xBB\xBF"))
    {
        reader.consume(3);
    }
    let mut vertices: Vec<DVec3> = Vec::new();
    let mut triangles: Vec<[u32; 3]> = Vec::new();
    // Texture coordinates and normals declared so far, for their relative indices' checks.
    let mut declared_others = [0usize; 2];
    // The largest position index, and its line, checked once every position is declared.
    let mut farthest: Option<(u64, usize)> = None;
    let mut corners: Vec<u32> = Vec::new();
    let mut line = Vec::new();
    let mut number = 0;
    loop {
        line.clear();
        let read = |line: &mut Vec<u8>, reader: &mut R, number: usize| {
            read_capped_line(reader, line, number, "OBJ")
        };
        if read(&mut line, reader, number + 1)? == 0 {
            break;
        }
        number += 1;
        let first_line = number;
        while let Some(cut) = continued_at(&line) {
            line.truncate(cut);
            line.push(b' ');
            // Errors name the statement's first line.
            if read(&mut line, reader, first_line)? == 0 {
                break;
            }
            number += 1;
        }
        let bad = |problem: String| format!("not a valid OBJ file: line {first_line}: {problem}");
        let text = match line.iter().position(|&b| b == b'#') {
            Some(comment) => &line[..comment],
            None => &line[..],
        };
        let mut words = text
            .split(|b| b.is_ascii_whitespace())
            .filter(|w| !w.is_empty());
        let Some(keyword) = words.next() else {
            continue;
        };
        match keyword {
            b"v" => {
                let mut position = [0.0; 3];
                for c in &mut position {
                    *c = words
                        .next()
                        .and_then(|w| std::str::from_utf8(w).ok()?.parse::<f64>().ok())
                        .ok_or_else(|| bad("a vertex needs three numbers".into()))?;
                }
                vertices.push(DVec3::from_array(position));
            }
            b"vt" => declared_others[0] += 1,
            b"vn" => declared_others[1] += 1,
            b"f" | b"l" | b"p" => {
                corners.clear();
                for word in words {
                    let mut parts = word.split(|&b| b == b'/');
                    let position = parts.next().unwrap_or_default();
                    let index = obj_index(position, vertices.len(), "position").map_err(&bad)?;
                    corners.push(index);
                    let needed = u64::from(index) + 1;
                    if farthest.is_none_or(|(most, _)| needed > most) {
                        farthest = Some((needed, first_line));
                    }
                    // Texture coordinate and normal indices are not used, but checked as
                    // tobj did (its arithmetic overflowed on 0 or an index before the first).
                    for (k, part) in parts.take(2).enumerate() {
                        if !part.is_empty() {
                            let element = ["texture coordinate", "normal"][k];
                            obj_index(part, declared_others[k], element).map_err(&bad)?;
                        }
                    }
                }
                if keyword == b"f" {
                    if corners.len() < 3 {
                        return Err(bad(format!(
                            "a face needs at least three vertices, found {}",
                            corners.len()
                        )));
                    }
                    for k in 1..corners.len() - 1 {
                        triangles.push([corners[0], corners[k], corners[k + 1]]);
                    }
                }
            }
            _ => {}
        }
    }
    if let Some((index, line)) = farthest.filter(|&(i, _)| i > vertices.len() as u64) {
        return Err(format!(
            "not a valid OBJ file: line {line}: position index {index} out of range (the file \
             declares {} positions)",
            vertices.len()
        ));
    }
    Ok((vertices.into(), triangles))
}

/// glTF, read whole (its JSON says where every array lies) by `super::gltf`.
fn read_gltf<R: std::io::Read>(
    reader: &mut R,
    beside: Option<&Path>,
) -> std::result::Result<Soup, String> {
    let mut bytes = Vec::new();
    reader
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read it: {e}"))?;
    let (vertices, triangles) = super::gltf::read_gltf(&bytes, beside)?;
    Ok((Vertices::F64(vertices), triangles))
}

/// OFF (Object File Format, as ModelNet's meshes are): `OFF`, then the vertex, face and edge
/// counts, then a line per vertex (its first three numbers; colours or normals after them are
/// not needed) and a line per face (its corner count, its corners' 0-based indices, then
/// colours, not needed), polygons triangulated as fans. `#` starts a comment. ModelNet's files
/// that run the counts on to the keyword (`OFF490 518 0`) are read as meant; `COFF` and `NOFF`
/// (colours or normals on the vertex lines) too. Binary OFF is refused by name.
fn read_off<R: std::io::BufRead>(reader: &mut R) -> std::result::Result<Soup, String> {
    let mut line = Vec::new();
    let mut number = 0;
    // The next line with words on it (comments and blank lines skipped) as its words, and its
    // number; `None` at the end of the file.
    let mut next_line =
        |reader: &mut R| -> std::result::Result<Option<(Vec<String>, usize)>, String> {
            loop {
                line.clear();
                if read_capped_line(reader, &mut line, number + 1, "OFF")? == 0 {
                    return Ok(None);
                }
                number += 1;
                let text = match line.iter().position(|&b| b == b'#') {
                    Some(comment) => &line[..comment],
                    None => &line[..],
                };
                let text = String::from_utf8_lossy(text);
                let words: Vec<String> = text.split_whitespace().map(str::to_owned).collect();
                if !words.is_empty() {
                    return Ok(Some((words, number)));
                }
            }
        };
    let bad =
        |line: usize, problem: String| format!("not a valid OFF file: line {line}: {problem}");
    let Some((mut words, first)) = next_line(reader)? else {
        return Err("not a valid OFF file: it is empty".into());
    };
    let keyword = words[0].trim_start_matches('\u{feff}').to_string();
    let counted_on = ["NOFF", "COFF", "OFF"]
        .iter()
        .find_map(|k| keyword.strip_prefix(k).map(str::to_owned));
    let Some(rest) = counted_on.filter(|rest| rest.chars().all(|c| c.is_ascii_digit())) else {
        return Err(bad(
            first,
            format!("expected the keyword OFF, found `{keyword}`"),
        ));
    };
    words.remove(0);
    if !rest.is_empty() {
        words.insert(0, rest);
    }
    if words
        .first()
        .is_some_and(|w| w.eq_ignore_ascii_case("BINARY"))
    {
        return Err(bad(
            first,
            "binary OFF is not read: write it as text (ASCII) OFF".into(),
        ));
    }
    let (counts, counts_line) = if words.is_empty() {
        next_line(reader)?.ok_or_else(|| bad(first, "the file ends before its counts".into()))?
    } else {
        (words, first)
    };
    let count = |k: usize, what: &str| -> std::result::Result<usize, String> {
        counts
            .get(k)
            .and_then(|w| w.parse::<usize>().ok())
            .ok_or_else(|| {
                bad(
                    counts_line,
                    format!("expected the {what} count, a whole number"),
                )
            })
    };
    let (vertex_count, face_count) = (count(0, "vertex")?, count(1, "face")?);
    // Declared counts are not trusted for room: a line per element is read before it is kept.
    let mut vertices: Vec<DVec3> = Vec::with_capacity(vertex_count.min(4096));
    while vertices.len() < vertex_count {
        let (words, at) = next_line(reader)?.ok_or_else(|| {
            format!(
                "not a valid OFF file: it declares {vertex_count} vertices but ends after {}",
                vertices.len()
            )
        })?;
        let mut position = [0.0; 3];
        for (c, word) in position
            .iter_mut()
            .zip(words.iter().chain(std::iter::repeat(&String::new())))
        {
            *c = word
                .parse::<f64>()
                .map_err(|_| bad(at, format!("vertex {} needs three numbers", vertices.len())))?;
        }
        vertices.push(DVec3::from_array(position));
    }
    let mut triangles: Vec<[u32; 3]> = Vec::with_capacity(face_count.min(4096));
    for face in 0..face_count {
        let (words, at) = next_line(reader)?.ok_or_else(|| {
            format!("not a valid OFF file: it declares {face_count} faces but ends after {face}")
        })?;
        let corners = words[0].parse::<usize>().map_err(|_| {
            bad(
                at,
                format!(
                    "face {face}: expected its corner count, found `{}`",
                    words[0]
                ),
            )
        })?;
        if corners < 3 || corners > words.len() - 1 {
            return Err(bad(
                at,
                format!(
                    "face {face}: a face needs at least three corners and lists them all; \
                     it declares {corners} and lists {}",
                    words.len() - 1
                ),
            ));
        }
        let index = |k: usize| -> std::result::Result<u32, String> {
            words[1 + k]
                .parse::<u32>()
                .ok()
                .filter(|&i| (i as usize) < vertex_count)
                .ok_or_else(|| {
                    bad(
                        at,
                        format!(
                            "face {face}: corner `{}` is no vertex index below {vertex_count}",
                            words[1 + k]
                        ),
                    )
                })
        };
        let first_corner = index(0)?;
        for k in 1..corners - 1 {
            triangles.push([first_corner, index(k)?, index(k + 1)?]);
        }
    }
    Ok((vertices.into(), triangles))
}

/// The longest line of a text mesh file read (an OBJ's lines joined by backslashes
/// included): far beyond any real statement (a polygon of millions of corners), and what a
/// line may hold in memory.
const TEXT_LINE_MAX_BYTES: usize = 64 << 20;

/// Append line `number` of a text mesh file (`format`) to `line`, `\n` included; 0 at the
/// end of the file. A line that would make `line` longer than `TEXT_LINE_MAX_BYTES` is an
/// error: a file of one endless line would otherwise be held whole.
fn read_capped_line<R: std::io::BufRead>(
    reader: &mut R,
    line: &mut Vec<u8>,
    number: usize,
    format: &str,
) -> std::result::Result<usize, String> {
    let room = (TEXT_LINE_MAX_BYTES + 1).saturating_sub(line.len());
    let mut capped = std::io::Read::take(&mut *reader, room as u64);
    let read = std::io::BufRead::read_until(&mut capped, b'\n', line)
        .map_err(|e| format!("cannot read line {number}: {e}"))?;
    if line.len() > TEXT_LINE_MAX_BYTES {
        return Err(format!(
            "not a valid {format} file: line {number} is longer than {} MiB{}: no statement \
             is that long",
            TEXT_LINE_MAX_BYTES >> 20,
            if format == "OBJ" {
                " (with the lines a backslash joins to it)"
            } else {
                ""
            }
        ));
    }
    Ok(read)
}

/// A text reader whose lines may be at most `TEXT_LINE_MAX_BYTES` long: once one is longer,
/// reading on is an error (for a library's line reader, as `read_capped_line` caps ours; a
/// line is held at most one buffer past the cap).
struct LinesCapped<R> {
    inner: R,
    /// Bytes handed out since the last newline.
    since_newline: usize,
    /// A line handed out was longer than the cap.
    too_long: bool,
}

impl<R> LinesCapped<R> {
    fn new(inner: R) -> LinesCapped<R> {
        LinesCapped {
            inner,
            since_newline: 0,
            too_long: false,
        }
    }

    fn check(&self) -> std::io::Result<()> {
        match self.too_long {
            true => Err(std::io::Error::other(format!(
                "a line longer than {} MiB: no statement is that long",
                TEXT_LINE_MAX_BYTES >> 20
            ))),
            false => Ok(()),
        }
    }
}

/// Count `handed`, the bytes that follow the `since_newline` counted so far.
fn count_lines(since_newline: &mut usize, too_long: &mut bool, handed: &[u8]) {
    let line_end = handed.iter().position(|&b| b == b'\n');
    *too_long |= *since_newline + line_end.unwrap_or(handed.len()) > TEXT_LINE_MAX_BYTES;
    *since_newline = match handed.iter().rposition(|&b| b == b'\n') {
        Some(k) => handed.len() - 1 - k,
        None => *since_newline + handed.len(),
    };
}

impl<R: std::io::BufRead> std::io::Read for LinesCapped<R> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        self.check()?;
        let n = self.inner.read(out)?;
        count_lines(&mut self.since_newline, &mut self.too_long, &out[..n]);
        Ok(n)
    }
}

impl<R: std::io::BufRead> std::io::BufRead for LinesCapped<R> {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        self.check()?;
        self.inner.fill_buf()
    }
    fn consume(&mut self, n: usize) {
        // The bytes consumed are the start of what `fill_buf` returned, still buffered.
        let LinesCapped {
            inner,
            since_newline,
            too_long,
        } = self;
        if let Ok(buffered) = inner.fill_buf() {
            count_lines(since_newline, too_long, &buffered[..n.min(buffered.len())]);
        }
        inner.consume(n);
    }
}

/// An OBJ element index (`text`, 1-based, or negative: relative to the `declared` elements
/// before it) as a 0-based one. Positive indices may refer to elements declared later, so only
/// 0, one reaching before the first element and one past `u32` are refused here.
fn obj_index(text: &[u8], declared: usize, element: &str) -> std::result::Result<u32, String> {
    let shown = String::from_utf8_lossy(text);
    let index: i64 = std::str::from_utf8(text)
        .ok()
        .and_then(|t| t.parse().ok())
        .ok_or_else(|| format!("`{shown}` is no {element} index"))?;
    let resolved = if index < 0 {
        declared as i64 + index
    } else {
        index - 1
    };
    if index == 0 || resolved < 0 || resolved > u32::MAX as i64 - 1 {
        return Err(format!(
            "{element} index {index} out of range ({declared} declared before it)"
        ));
    }
    Ok(resolved as u32)
}

/// Where the backslash is that ends `line` (before its `\n` or `\r\n`), if one does.
pub(super) fn continued_at(line: &[u8]) -> Option<usize> {
    let text = line.strip_suffix(b"\n").unwrap_or(line);
    let text = text.strip_suffix(b"\r").unwrap_or(text);
    text.ends_with(b"\\").then(|| text.len() - 1)
}

/// Bytes of a binary STL's header (80 free bytes and the triangle count) and of one triangle
/// record (normal, three corners, attribute word).
const STL_HEADER_BYTES: u64 = 84;
const STL_TRIANGLE_BYTES: u64 = 50;
/// Triangle records read per block.
const STL_BLOCK_TRIANGLES: usize = 1 << 16;

/// STL, binary or ASCII. A binary file is one large enough for the count in its header (an
/// ASCII file starts with `solid`, but so do many binary headers); it is streamed, and its
/// corners welded into shared vertices by their exact coordinates.
fn read_stl<R: std::io::Read + std::io::Seek>(reader: &mut R) -> std::result::Result<Soup, String> {
    use std::io::SeekFrom;
    let io = |e: std::io::Error| format!("cannot read: {e}");
    let size = reader.seek(SeekFrom::End(0)).map_err(io)?;
    reader.seek(SeekFrom::Start(0)).map_err(io)?;
    let mut header = [0u8; STL_HEADER_BYTES as usize];
    let whole_header = size >= STL_HEADER_BYTES;
    if whole_header {
        reader.read_exact(&mut header).map_err(io)?;
    }
    let count = u32::from_le_bytes([header[80], header[81], header[82], header[83]]) as u64;
    // Bytes past the last record (some exporters pad the file) are left unread, as other
    // readers leave them. An ASCII file never passes for binary this way: its count bytes are
    // text (0x09 or more each), a count over 151 million triangles, 7.5 GB it does not have.
    if whole_header && size >= STL_HEADER_BYTES + STL_TRIANGLE_BYTES * count {
        return read_binary_stl(reader, count as usize);
    }
    reader.seek(SeekFrom::Start(0)).map_err(io)?;
    let mut start = [0u8; 5];
    let ascii = reader.read_exact(&mut start).is_ok() && &start == b"solid";
    if !ascii {
        return Err(if whole_header {
            format!(
                "a binary STL whose header counts {count} triangles must be {} bytes, but the \
                 file has {size}",
                STL_HEADER_BYTES + STL_TRIANGLE_BYTES * count
            )
        } else {
            format!("not a valid STL file: {size} bytes, shorter than a binary STL's header")
        });
    }
    reader.seek(SeekFrom::Start(0)).map_err(io)?;
    read_ascii_stl(std::io::BufReader::new(reader))
}

/// An ASCII STL, line by line: `solid [name]`, then facets of three `vertex x y z` lines
/// (`facet normal`, `outer loop`, `endloop` and the normal itself are not needed), `endsolid`;
/// keywords in any case (some exporters write them upper-case), the name optional, several
/// solids in one file joined. Corners are welded by their f32 coordinates, as in a binary STL.
fn read_ascii_stl(mut reader: impl std::io::BufRead) -> std::result::Result<Soup, String> {
    let mut welder = CornerWelder::default();
    let mut triangles = Vec::new();
    let mut facet: Vec<u32> = Vec::with_capacity(3);
    let mut bytes = Vec::new();
    for n in 0.. {
        bytes.clear();
        if read_capped_line(&mut reader, &mut bytes, n + 1, "ASCII STL")? == 0 {
            break;
        }
        let line = std::str::from_utf8(&bytes).map_err(|_| {
            format!(
                "cannot read line {}: stream did not contain valid UTF-8",
                n + 1
            )
        })?;
        let bad = |problem: &str| format!("not a valid ASCII STL: line {}: {problem}", n + 1);
        let mut words = line.split_ascii_whitespace();
        let Some(keyword) = words.next() else {
            continue;
        };
        match keyword.to_ascii_lowercase().as_str() {
            "vertex" => {
                let mut corner = [0f32; 3];
                for c in &mut corner {
                    *c = words
                        .next()
                        .and_then(|w| w.parse::<f32>().ok())
                        .ok_or_else(|| bad("a vertex needs three numbers"))?;
                }
                if facet.len() == 3 {
                    return Err(bad("a facet has more than three vertices"));
                }
                facet.push(welder.index(corner.map(|c| (c + 0.0).to_bits())));
            }
            "endfacet" => {
                let [a, b, c] = facet[..] else {
                    return Err(bad(&format!("a facet has {} vertices, not 3", facet.len())));
                };
                triangles.push([a, b, c]);
                facet.clear();
            }
            "solid" | "endsolid" | "facet" | "outer" | "endloop" => {}
            other => return Err(bad(&format!("unexpected `{other}`"))),
        }
    }
    if !facet.is_empty() {
        return Err("not a valid ASCII STL: the last facet has no `endfacet`".into());
    }
    Ok((welder.vertices.into(), triangles))
}

/// Corners welded into shared vertices by their f32 bits (−0 already made +0).
#[derive(Default)]
struct CornerWelder {
    indices: rustc_hash::FxHashMap<[u32; 3], u32>,
    vertices: Vec<[f32; 3]>,
}

impl CornerWelder {
    fn with_capacity(vertices: usize) -> CornerWelder {
        let mut welder = CornerWelder::default();
        welder.indices.reserve(vertices);
        welder.vertices.reserve(vertices);
        welder
    }

    /// The index of the vertex at `key`, added if new.
    fn index(&mut self, key: [u32; 3]) -> u32 {
        let vertices = &mut self.vertices;
        *self.indices.entry(key).or_insert_with(|| {
            vertices.push(key.map(f32::from_bits));
            (vertices.len() - 1) as u32
        })
    }
}

/// `count` binary STL triangle records (the size was checked against the file's), read in
/// blocks; equal corners (by their f32 bits, −0 as +0) become one vertex.
fn read_binary_stl<R: std::io::Read>(
    reader: &mut R,
    count: usize,
) -> std::result::Result<Soup, String> {
    // A closed mesh has about half as many vertices as triangles.
    let mut welder = CornerWelder::with_capacity(count / 2 + 1);
    let mut triangles = Vec::with_capacity(count);
    let mut block = vec![0u8; STL_BLOCK_TRIANGLES * STL_TRIANGLE_BYTES as usize];
    let mut left = count;
    while left > 0 {
        let n = left.min(STL_BLOCK_TRIANGLES);
        let bytes = &mut block[..n * STL_TRIANGLE_BYTES as usize];
        reader
            .read_exact(bytes)
            .map_err(|e| format!("cannot read triangle {}: {e}", count - left))?;
        for record in bytes.chunks_exact(STL_TRIANGLE_BYTES as usize) {
            let corner = |k: usize| {
                let word = |i: usize| {
                    let at = 12 + 12 * k + 4 * i;
                    let bits = u32::from_le_bytes([
                        record[at],
                        record[at + 1],
                        record[at + 2],
                        record[at + 3],
                    ]);
                    // −0 and +0 are one coordinate.
                    (f32::from_bits(bits) + 0.0).to_bits()
                };
                [word(0), word(1), word(2)]
            };
            let mut triangle = [0u32; 3];
            for (k, index) in triangle.iter_mut().enumerate() {
                *index = welder.index(corner(k));
            }
            triangles.push(triangle);
        }
        left -= n;
    }
    Ok((welder.vertices.into(), triangles))
}

/// The fewest bytes one element of `element` takes in a file of `encoding`: its scalars and
/// list counts in binary, at least one byte (a line) in ASCII, so that a header's counts can be
/// checked against the file's size before the reader allocates anything for them.
fn ply_element_min_bytes(
    element: &ply_rs_bw::ply::ElementDef,
    encoding: ply_rs_bw::ply::Encoding,
) -> u64 {
    use ply_rs_bw::ply::{Encoding, PropertyType};
    let binary: u64 = element
        .properties
        .values()
        .map(|p| match &p.data_type {
            PropertyType::Scalar(t) => ply_scalar_size(t) as u64,
            PropertyType::List(count, _) => ply_scalar_size(count) as u64,
        })
        .sum();
    match encoding {
        Encoding::Ascii => 1,
        _ => binary.max(1),
    }
}

fn read_ply<R: std::io::BufRead + std::io::Seek>(
    reader: &mut R,
) -> std::result::Result<Soup, String> {
    use ply_rs_bw::parser::{Parser, Reader};
    use ply_rs_bw::ply::{DefaultElement, Encoding};
    let io = |e: std::io::Error| format!("cannot read: {e}");
    let size = reader.seek(std::io::SeekFrom::End(0)).map_err(io)?;
    reader.seek(std::io::SeekFrom::Start(0)).map_err(io)?;
    let parser = Parser::<DefaultElement>::new();
    let invalid = |e: ply_rs_bw::parser::ParseError| format!("not a valid PLY file: {e}");
    // The header is read line by line, leaving `reader` at the payload's first byte; its lines
    // (and an ASCII payload's) are capped as OBJ and STL lines are.
    let mut wrapped = Reader::new(LinesCapped::new(&mut *reader));
    let header = parser.read_header(&mut wrapped).map_err(invalid)?;
    for element in header.elements.values() {
        let least =
            (element.count as u64).checked_mul(ply_element_min_bytes(element, header.encoding));
        if least.is_none_or(|bytes| bytes > size) {
            return Err(format!(
                "the PLY header declares {} `{}` elements, more than the file's {size} bytes can hold",
                element.count, element.name
            ));
        }
    }
    let mut soup = PlySoup::default();
    match header.encoding {
        Encoding::Ascii => {
            // Lines are numbered on from the header's, for messages.
            let payload_start = reader.stream_position().map_err(io)?;
            reader.seek(std::io::SeekFrom::Start(0)).map_err(io)?;
            let mut header_bytes = Vec::new();
            let mut header_reader = std::io::Read::take(&mut *reader, payload_start);
            std::io::Read::read_to_end(&mut header_reader, &mut header_bytes).map_err(io)?;
            let header_lines = header_bytes.iter().filter(|&&b| b == b'\n').count();
            let mut values = AsciiValues {
                reader,
                line: Vec::new(),
                at: 0,
                number: header_lines,
            };
            for element in header.elements.values() {
                soup.stream(&mut values, element)?;
            }
        }
        Encoding::BinaryLittleEndian | Encoding::BinaryBigEndian => {
            let mut values = BinaryValues {
                reader,
                big_endian: header.encoding == Encoding::BinaryBigEndian,
            };
            for element in header.elements.values() {
                soup.stream(&mut values, element)?;
            }
        }
    }
    let PlySoup {
        vertices,
        mut triangles,
        strip_triangles,
    } = soup;
    triangles.extend(strip_triangles);
    Ok((vertices.into(), triangles))
}

/// A PLY mesh as its elements arrive: `vertex` x, y, z; `face` index lists as fans;
/// `tristrips` index lists with −1 restarts. Other elements are read past.
#[derive(Default)]
struct PlySoup {
    vertices: Vec<DVec3>,
    /// Faces' triangles, then strips' (whatever order the elements come in).
    triangles: Vec<[u32; 3]>,
    strip_triangles: Vec<[u32; 3]>,
}

/// The names PLY writers give a face's index list.
const PLY_INDEX_LISTS: [&str; 2] = ["vertex_indices", "vertex_index"];

impl PlySoup {
    fn index(k: i64, what: &str, i: usize) -> std::result::Result<u32, String> {
        u32::try_from(k).map_err(|_| format!("{what} {i} uses vertex {k}"))
    }

    /// Polygon `i` as a fan, like the OBJ reader.
    fn face(&mut self, i: usize, ks: &[i64]) -> std::result::Result<(), String> {
        for k in 1..ks.len().saturating_sub(1) {
            self.triangles.push([
                Self::index(ks[0], "face", i)?,
                Self::index(ks[k], "face", i)?,
                Self::index(ks[k + 1], "face", i)?,
            ]);
        }
        Ok(())
    }

    /// Strips `i`: −1 restarts a strip; odd triangles swap their first two corners to keep
    /// the winding.
    fn strips(&mut self, i: usize, ks: &[i64]) -> std::result::Result<(), String> {
        for strip in ks.split(|&k| k < 0) {
            for k in 0..strip.len().saturating_sub(2) {
                let (a, b) = if k % 2 == 0 {
                    (strip[k], strip[k + 1])
                } else {
                    (strip[k + 1], strip[k])
                };
                self.strip_triangles.push([
                    Self::index(a, "tristrips", i)?,
                    Self::index(b, "tristrips", i)?,
                    Self::index(strip[k + 2], "tristrips", i)?,
                ]);
            }
        }
        Ok(())
    }

    /// One element's records, read as they stream (the file is never held).
    fn stream(
        &mut self,
        values_in: &mut impl PlyValues,
        element: &ply_rs_bw::ply::ElementDef,
    ) -> std::result::Result<(), String> {
        use ply_rs_bw::ply::{PropertyType, ScalarType};
        let name = element.name.as_str();
        let properties: Vec<(&str, &PropertyType)> = element
            .properties
            .values()
            .map(|p| (p.name.as_str(), &p.data_type))
            .collect();
        let is_float = |t: &ScalarType| matches!(t, ScalarType::Float | ScalarType::Double);
        // What this element gives: a vertex's coordinates by property position, a face's or
        // strip's index list by position.
        let coordinate_at: [Option<usize>; 3] = ["x", "y", "z"].map(|axis| {
            properties
                .iter()
                .position(|(n, t)| *n == axis && matches!(t, PropertyType::Scalar(_)))
        });
        let list_at = properties.iter().position(|(n, t)| {
            PLY_INDEX_LISTS.contains(n) && matches!(t, PropertyType::List(_, v) if !is_float(v))
        });
        let what = match name {
            "vertex" => {
                if let Some(k) = coordinate_at.iter().position(Option::is_none) {
                    if element.count > 0 {
                        return Err(format!("vertex 0 has no numeric `{}`", ["x", "y", "z"][k]));
                    }
                }
                "vertex"
            }
            "face" | "tristrips" => {
                if list_at.is_none() && element.count > 0 {
                    return Err(format!("{name} 0 has no integer list `vertex_indices`"));
                }
                name
            }
            _ => "",
        };
        if what == "vertex" {
            self.vertices.reserve(element.count);
        }
        let mut values = vec![0f64; properties.len()];
        let mut list: Vec<i64> = Vec::new();
        for i in 0..element.count {
            values_in.start(name, i)?;
            for (at, (_, data_type)) in properties.iter().enumerate() {
                match data_type {
                    PropertyType::Scalar(t) => {
                        values[at] = values_in.next(t, name, i)?;
                    }
                    PropertyType::List(count_type, item_type) => {
                        let count = values_in.next(count_type, name, i)?;
                        if !(count >= 0.0 && count.fract() == 0.0) {
                            return Err(format!(
                                "not a valid PLY file: `{name}` element {i} has a list of {count} items"
                            ));
                        }
                        let keep = Some(at) == list_at;
                        list.clear();
                        for _ in 0..count as u64 {
                            let item = values_in.next(item_type, name, i)?;
                            if keep {
                                list.push(item as i64);
                            }
                        }
                    }
                }
            }
            match what {
                "vertex" => {
                    let [x, y, z] = coordinate_at.map(|at| values[at.expect("checked above")]);
                    self.vertices.push(DVec3::new(x, y, z));
                }
                "face" => self.face(i, &list)?,
                "tristrips" => self.strips(i, &list)?,
                _ => {}
            }
        }
        Ok(())
    }
}

/// Where a PLY payload's values come from, element after element.
trait PlyValues {
    /// Before element `i` of `name` (an ASCII file's element is a line of its own).
    fn start(&mut self, name: &str, i: usize) -> std::result::Result<(), String>;
    /// The next value of element `i`, of type `scalar`, as f64 (exact for every integer type).
    fn next(
        &mut self,
        scalar: &ply_rs_bw::ply::ScalarType,
        name: &str,
        i: usize,
    ) -> std::result::Result<f64, String>;
}

struct BinaryValues<'r, R> {
    reader: &'r mut R,
    big_endian: bool,
}

impl<R: std::io::Read> PlyValues for BinaryValues<'_, R> {
    fn start(&mut self, _: &str, _: usize) -> std::result::Result<(), String> {
        Ok(())
    }

    fn next(
        &mut self,
        scalar: &ply_rs_bw::ply::ScalarType,
        name: &str,
        i: usize,
    ) -> std::result::Result<f64, String> {
        read_ply_scalar(self.reader, scalar, self.big_endian)
            .map_err(|e| format!("not a valid PLY file: `{name}` element {i} is cut short ({e})"))
    }
}

/// An ASCII payload, read a line at a time (its lines capped as OBJ's are).
struct AsciiValues<'r, R> {
    reader: &'r mut R,
    line: Vec<u8>,
    /// Where the next value's search starts in `line`.
    at: usize,
    /// The current line's number in the file.
    number: usize,
}

impl<R: std::io::BufRead> PlyValues for AsciiValues<'_, R> {
    fn start(&mut self, name: &str, i: usize) -> std::result::Result<(), String> {
        self.line.clear();
        self.at = 0;
        self.number += 1;
        if read_capped_line(self.reader, &mut self.line, self.number, "PLY")? == 0 {
            return Err(format!(
                "not a valid PLY file: it ends before `{name}` element {i} (line {})",
                self.number
            ));
        }
        Ok(())
    }

    fn next(
        &mut self,
        scalar: &ply_rs_bw::ply::ScalarType,
        name: &str,
        i: usize,
    ) -> std::result::Result<f64, String> {
        use ply_rs_bw::ply::ScalarType;
        let rest = &self.line[self.at..];
        let begin = rest
            .iter()
            .position(|b| !b.is_ascii_whitespace())
            .unwrap_or(rest.len());
        let end = rest[begin..]
            .iter()
            .position(u8::is_ascii_whitespace)
            .map_or(rest.len(), |k| begin + k);
        let token = &rest[begin..end];
        self.at += end;
        let bad = |found: &str| {
            format!(
                "not a valid PLY file: line {}: `{name}` element {i}: {found}",
                self.number
            )
        };
        if token.is_empty() {
            return Err(bad("ends before all its values"));
        }
        // Numbers only, as PLY writes them (no `nan` or `inf`).
        let text = std::str::from_utf8(token).ok().filter(|t| {
            t.bytes()
                .all(|b| b.is_ascii_digit() || b"+-.eE".contains(&b))
        });
        fn parsed<T: std::str::FromStr + Into<f64>>(text: &str) -> Option<f64> {
            text.parse::<T>().ok().map(Into::into)
        }
        let value = text.and_then(|t| match scalar {
            ScalarType::Char => parsed::<i8>(t),
            ScalarType::UChar => parsed::<u8>(t),
            ScalarType::Short => parsed::<i16>(t),
            ScalarType::UShort => parsed::<u16>(t),
            ScalarType::Int => parsed::<i32>(t),
            ScalarType::UInt => parsed::<u32>(t),
            ScalarType::Float => parsed::<f32>(t),
            ScalarType::Double => parsed::<f64>(t),
        });
        value.ok_or_else(|| {
            let shown: String = String::from_utf8_lossy(token).chars().take(40).collect();
            bad(&format!(
                "`{shown}` is not a PLY {} value",
                ply_type_name(scalar)
            ))
        })
    }
}

/// The vertex records of a binary PLY whose first element is `vertex` of scalar properties
/// (a scan's point cloud, as scanners and Open3D write one), to be read in place; `None` for
/// any other PLY. The records' bytes are checked to be in the file.
pub(crate) fn ply_vertex_records(path: &Path) -> Result<Option<PointRecords>> {
    use ply_rs_bw::ply::{Encoding, PropertyType};
    let file = path.display().to_string();
    let bad = |problem: String| Error::BadFile {
        file: file.clone(),
        problem,
    };
    let mut reader = open_buffered(path)?;
    let parser = ply_rs_bw::parser::Parser::<ply_rs_bw::ply::DefaultElement>::new();
    let mut wrapped = ply_rs_bw::parser::Reader::new(LinesCapped::new(&mut reader));
    let Ok(header) = parser.read_header(&mut wrapped) else {
        // Told by the whole reader, as it tells it.
        return Ok(None);
    };
    let big_endian = match header.encoding {
        Encoding::Ascii => return Ok(None),
        Encoding::BinaryLittleEndian => false,
        Encoding::BinaryBigEndian => true,
    };
    let Some(vertex) = header
        .elements
        .values()
        .next()
        .filter(|e| e.name == "vertex")
    else {
        return Ok(None);
    };
    let mut stride = 0;
    let mut offsets = Vec::new();
    for property in vertex.properties.values() {
        let PropertyType::Scalar(scalar) = &property.data_type else {
            return Ok(None);
        };
        offsets.push((property.name.as_str(), stride, scalar.clone()));
        stride += ply_scalar_size(scalar);
    }
    let coordinate = |axis: &str| {
        offsets
            .iter()
            .find(|(name, ..)| *name == axis)
            .map(|(_, at, scalar)| (*at, scalar.clone()))
    };
    let (Some(x), Some(y), Some(z)) = (coordinate("x"), coordinate("y"), coordinate("z")) else {
        return Ok(None);
    };
    let start = std::io::Seek::stream_position(&mut reader).map_err(|e| bad(e.to_string()))?;
    let records = PointRecords {
        start,
        count: vertex.count,
        stride,
        coordinates: [x, y, z],
        big_endian,
    };
    records.check_within(path, "`vertex` elements").map(Some)
}

/// A scalar type's name as a PLY header writes it.
fn ply_type_name(scalar: &ply_rs_bw::ply::ScalarType) -> &'static str {
    use ply_rs_bw::ply::ScalarType;
    match scalar {
        ScalarType::Char => "char",
        ScalarType::UChar => "uchar",
        ScalarType::Short => "short",
        ScalarType::UShort => "ushort",
        ScalarType::Int => "int",
        ScalarType::UInt => "uint",
        ScalarType::Float => "float",
        ScalarType::Double => "double",
    }
}
