//! Shader composition and layout checks that need no GPU: every composed shader parses and
//! validates with naga, and the Rust twins of the WGSL structs match naga's layout.

use std::mem::{offset_of, size_of};

use closest::gpu::interface::{
    DERIVED_OVERRIDES, Entry, Override, Slot, kernel_shaders, reflect, uses_subgroups,
};
use closest::gpu::layout::{GpuHit, GpuSegmentHit, GpuShape, Params};
use closest::gpu::shaders::{WORKGROUP_SIZE, compose, prelude};
use closest::shape::ShapeKind;

#[test]
fn every_kernel_composes_and_validates() {
    for (name, entries) in kernel_shaders() {
        let shader = compose(name).unwrap_or_else(|e| panic!("{e}"));
        for entry in entries {
            let size = shader
                .workgroup_size(entry.name())
                .unwrap_or_else(|| panic!("{name}.wgsl lacks entry point {}", entry.name()));
            assert!(
                size[0] >= 1 && size[1] == 1 && size[2] == 1,
                "{entry:?}: {size:?}"
            );
        }
    }
}

/// The interface naga reads from every kernel is the one `gpu/interface.rs` states: each
/// resource an entry point uses sits in a slot of group 0 with that slot's access, every
/// entry point is an `Entry` of that shader (and every `Entry` is there), every override is
/// one the engine sets (or derived in WGSL), subgroup use is as `Entry::needs_subgroups`
/// says, and all entry points share one workgroup size.
#[test]
fn every_kernel_agrees_with_the_rust_interface() {
    let mut sizes = Vec::new();
    for (name, entries) in kernel_shaders() {
        let shader = compose(name).unwrap_or_else(|e| panic!("{e}"));
        let reflected = reflect(&shader);
        assert!(!reflected.bindings.is_empty(), "{name}: no bindings read");
        for (group, binding, access, variable) in &reflected.bindings {
            let slot = Slot::from_binding(*binding).unwrap_or_else(|| {
                panic!("{name}.wgsl: `{variable}` at binding {binding}: no such Slot")
            });
            assert_eq!(*group, 0, "{name}.wgsl: `{variable}` is not in group 0");
            assert_eq!(
                *access,
                slot.access(),
                "{name}.wgsl: `{variable}` (binding {binding}, {slot:?}) is {access:?}, the \
                 Rust side binds it {:?}",
                slot.access()
            );
        }
        for (entry_name, size) in &reflected.entry_points {
            let entry = Entry::ALL
                .into_iter()
                .find(|e| e.name() == entry_name)
                .unwrap_or_else(|| panic!("{name}.wgsl: entry point `{entry_name}` is no Entry"));
            assert_eq!(entry.shader(), name, "{entry:?} is said to live elsewhere");
            sizes.push((entry_name.clone(), *size));
        }
        for entry in &entries {
            assert!(
                reflected
                    .entry_points
                    .iter()
                    .any(|(n, _)| n == entry.name()),
                "{name}.wgsl lacks {entry:?}"
            );
        }
        for declared in &reflected.overrides {
            assert!(
                Override::ALL.iter().any(|o| o.name() == declared)
                    || DERIVED_OVERRIDES.contains(&declared.as_str()),
                "{name}.wgsl: override `{declared}` is neither set by the engine nor derived"
            );
        }
        assert_eq!(
            uses_subgroups(&shader),
            entries.iter().any(|e| e.needs_subgroups()),
            "{name}.wgsl: subgroup use differs from Entry::needs_subgroups"
        );
    }
    // The engine dispatches by WORKGROUP_SIZE before it composes any shader.
    for (entry, size) in &sizes {
        assert_eq!(
            *size,
            [WORKGROUP_SIZE, 1, 1],
            "{entry}'s workgroup size is not WORKGROUP_SIZE"
        );
    }
    assert_eq!(
        sizes.len(),
        Entry::ALL.len(),
        "every Entry is a kernel's entry point"
    );
}

#[test]
fn an_unknown_import_is_a_readable_error() {
    // The composer names the missing file rather than failing somewhere in naga.
    let err = closest::gpu::shaders::compose("no/such/file")
        .err()
        .unwrap();
    assert!(err.contains("no/such/file"), "{err}");
}

#[test]
fn prelude_names_every_shape_kind() {
    let text = prelude();
    for kind in ShapeKind::ALL {
        let line = format!(
            "const KIND_{}: u32 = {}u;",
            kind.name().to_uppercase(),
            kind as u32
        );
        assert!(text.contains(&line), "missing `{line}` in\n{text}");
    }
}

/// (member name, offset) pairs and the size naga computes for struct `name`.
fn naga_layout(module: &naga::Module, name: &str) -> (Vec<(String, u32)>, u32) {
    for (_, ty) in module.types.iter() {
        if ty.name.as_deref() == Some(name) {
            if let naga::TypeInner::Struct { members, span } = &ty.inner {
                let fields = members
                    .iter()
                    .map(|m| (m.name.clone().unwrap_or_default(), m.offset))
                    .collect();
                return (fields, *span);
            }
        }
    }
    panic!("struct {name} not found in the composed shader");
}

fn assert_layout(name: &str, rust_size: usize, rust_offsets: &[(&str, usize)]) {
    assert_layout_in("query", name, rust_size, rust_offsets);
}

fn assert_layout_in(shader: &str, name: &str, rust_size: usize, rust_offsets: &[(&str, usize)]) {
    let shader = compose(shader).unwrap();
    let (fields, span) = naga_layout(&shader.module, name);
    assert_eq!(
        span as usize, rust_size,
        "{name}: WGSL size {span} vs Rust {rust_size}"
    );
    for (field, offset) in rust_offsets {
        let wgsl = fields
            .iter()
            .find(|(f, _)| f == field)
            .unwrap_or_else(|| panic!("{name}.{field} missing in WGSL"));
        assert_eq!(
            wgsl.1 as usize, *offset,
            "{name}.{field}: WGSL offset {} vs Rust {offset}",
            wgsl.1
        );
    }
}

#[test]
fn shape_layout_matches_wgsl() {
    assert_layout(
        "Shape",
        size_of::<GpuShape>(),
        &[
            ("kind", offset_of!(GpuShape, kind)),
            ("index", offset_of!(GpuShape, index)),
            ("anchor", offset_of!(GpuShape, anchor)),
            ("p0", offset_of!(GpuShape, p0)),
            ("p1", offset_of!(GpuShape, p1)),
            ("p2", offset_of!(GpuShape, p2)),
            ("p3", offset_of!(GpuShape, p3)),
        ],
    );
}

#[test]
fn hit_layout_matches_wgsl() {
    assert_layout(
        "Hit",
        size_of::<GpuHit>(),
        &[
            ("point", offset_of!(GpuHit, point)),
            ("distance", offset_of!(GpuHit, distance)),
            ("normal", offset_of!(GpuHit, normal)),
            ("shape", offset_of!(GpuHit, shape)),
        ],
    );
}

#[test]
fn params_layout_matches_wgsl() {
    assert_layout(
        "Params",
        size_of::<Params>(),
        &[
            ("row_count", offset_of!(Params, row_count)),
            ("shape_count", offset_of!(Params, shape_count)),
            ("mode", offset_of!(Params, mode)),
            ("nan_bits", offset_of!(Params, nan_bits)),
            ("first_row", offset_of!(Params, first_row)),
            ("round", offset_of!(Params, round)),
            ("round_count", offset_of!(Params, round_count)),
        ],
    );
}

#[test]
fn dispatch_grid_stays_within_65535_per_dimension() {
    use closest::gpu::dispatch_grid;
    assert_eq!(dispatch_grid(1, 64), [1, 1]);
    assert_eq!(dispatch_grid(64 * 65_535, 64), [65_535, 1]);
    let [x, y] = dispatch_grid(64 * 65_535 + 1, 64);
    assert_eq!((x, y), (65_535, 2));
    let [x, y] = dispatch_grid(4_000_000_000, 256);
    assert!(x <= 65_535 && y <= 65_535 && x as u64 * y as u64 * 256 >= 4_000_000_000);
}

#[test]
fn nearest_scans_every_shape_kind() {
    // The mixed-scene paths of `nearest` have a loop per kind over its linear range, one over
    // a leaf of that kind and one over its run in a cell list, each calling its kind's own projection, and `project_point` a
    // case per kind (all generated from ShapeKind: this guards the generator).
    let source = compose("query").unwrap().source;
    for kind in ShapeKind::ALL {
        let (name, constant) = (kind.name(), format!("KIND_{}", kind.name().to_uppercase()));
        let offer = format!("offer({constant}, s, project_point_{name}(s, p), p, best);");
        assert_eq!(source.matches(&offer).count(), 3, "query.wgsl: `{offer}`");
        for text in [
            format!("kind_ranges[{constant}]"),
            format!("leaf_count({constant}, leaf)"),
            format!("cell_run({constant}, list)"),
            format!("case {constant}: {{"),
        ] {
            assert!(source.contains(&text), "query.wgsl lacks `{text}`");
        }
    }
    // Never the switch inside those loops: compilers inline every call before they fold a
    // constant switch, and a switch of every kind inlined in every kind's loop made these
    // pipelines take seconds to build on lavapipe (docs/perf-history.md).
    for scan in ["fn scan_every_kind(", "fn scan_leaf_every_kind("] {
        let body = &source[source.find(scan).unwrap()..];
        let body = &body[..body.find("\n}\n").unwrap()];
        assert!(
            !body.contains("project_point("),
            "`{scan}` calls the kind switch"
        );
    }
}

/// With every field selected a packed row is exactly the Rust result struct, so whole-row
/// jobs hand the device's rows on without a copy (`PackedRows::as_hits`).
#[test]
fn rows_with_every_field_are_the_result_structs() {
    use closest::fields::{self, Family, Fields};
    let hits = Fields::all(Family::Hits);
    assert_eq!(hits.row_words() * 4, size_of::<GpuHit>());
    for (bit, offset) in [
        (fields::POINT, offset_of!(GpuHit, point)),
        (fields::DISTANCE, offset_of!(GpuHit, distance)),
        (fields::NORMAL, offset_of!(GpuHit, normal)),
        (fields::SHAPE, offset_of!(GpuHit, shape)),
    ] {
        assert_eq!(hits.offset_words(bit) * 4, offset, "hit field bit {bit}");
    }
    let segments = Fields::all(Family::Segments);
    assert_eq!(segments.row_words() * 4, size_of::<GpuSegmentHit>());
    for (bit, offset) in [
        (fields::POINT_A, offset_of!(GpuSegmentHit, point_a)),
        (fields::S, offset_of!(GpuSegmentHit, s)),
        (fields::POINT_B, offset_of!(GpuSegmentHit, point_b)),
        (fields::T, offset_of!(GpuSegmentHit, t)),
        (
            fields::SEGMENT_DISTANCE,
            offset_of!(GpuSegmentHit, distance),
        ),
    ] {
        assert_eq!(
            segments.offset_words(bit) * 4,
            offset,
            "segment field bit {bit}"
        );
    }
}

#[test]
fn bvh_node_layout_matches_wgsl() {
    use closest::bvh::{GpuBvhChild, GpuBvhNode};
    assert_layout(
        "BvhChild",
        size_of::<GpuBvhChild>(),
        &[
            ("min", offset_of!(GpuBvhChild, min)),
            ("first", offset_of!(GpuBvhChild, first)),
            ("max", offset_of!(GpuBvhChild, max)),
            ("count", offset_of!(GpuBvhChild, count)),
        ],
    );
    let child = size_of::<GpuBvhChild>();
    assert_layout(
        "BvhNode",
        size_of::<GpuBvhNode>(),
        &[
            ("left", 0),
            ("right", child),
            ("left_rotation", offset_of!(GpuBvhNode, rotations)),
            ("right_rotation", offset_of!(GpuBvhNode, rotations) + 16),
        ],
    );
}
