//! `--sign auto` (SPEC §8): pseudonormal signs where a mesh is closed, consistently oriented
//! and does not intersect itself, the winding number's inside/outside otherwise. Vertices are
//! compared by their coordinates, so a file that repeats a vertex at a seam is still closed.

use rayon::prelude::*;
use rustc_hash::FxHashMap;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::math::DVec3;
use crate::mesh::{Mesh, Sign};

/// The method `auto` picked for a mesh, and why (the summary line says both).
#[derive(Clone, Debug, PartialEq)]
pub struct AutoSign {
    pub sign: Sign,
    pub reason: String,
    /// Every edge is used as often each way (`is_closed_cycle`), found by the same pass.
    pub closed_cycle: bool,
}

/// What `auto` decides for `mesh`: pseudonormal when every edge is shared by exactly two
/// faces in opposite directions that do not fold flat onto each other, some triangle has an
/// area, no two triangles that share no vertex cross and no piece lies inside another wound
/// the same way; winding number otherwise.
pub fn auto_sign(mesh: &Mesh) -> AutoSign {
    auto_sign_until(mesh, &crate::mesh::NEVER_STOPPED).expect("a check never stopped ends")
}

/// [`auto_sign`], or `None` once `stop` is set (the caller was interrupted: the check of a
/// mesh of millions of triangles takes seconds). It is asked between the check's passes and
/// between the bands of its edge count.
pub fn auto_sign_until(mesh: &Mesh, stop: &AtomicBool) -> Option<AutoSign> {
    let stopped = || stop.load(Ordering::Relaxed);
    let (positions, corners) = welded(mesh);
    if stopped() {
        return None;
    }
    let edges = EdgeCounts::of(&positions, &corners, stop);
    if stopped() {
        return None;
    }
    checked(mesh, &positions, &corners, edges, stop)
}

/// What [`auto_sign_until`] decides from the welded mesh and its edge counts; `None` where
/// `stop` was set before a pass that looks for crossing or nested pieces.
fn checked(
    mesh: &Mesh,
    positions: &[DVec3],
    corners: &[Option<[u32; 3]>],
    edges: EdgeCounts,
    stop: &AtomicBool,
) -> Option<AutoSign> {
    let closed_cycle = edges.unbalanced == 0;
    let winding = |reason: String| AutoSign {
        sign: Sign::Winding,
        reason,
        closed_cycle,
    };
    if edges.open > 0 {
        return Some(winding(format!(
            "{} open edge(s): the mesh has holes",
            edges.open
        )));
    }
    if edges.non_manifold > 0 {
        return Some(winding(format!(
            "{} edge(s) shared by more than two faces",
            edges.non_manifold
        )));
    }
    if edges.same_direction > 0 {
        return Some(winding(format!(
            "{} edge(s) wound the same way by two faces: faces doubled or flipped",
            edges.same_direction
        )));
    }
    if edges.folded > 0 {
        return Some(winding(format!(
            "{} edge(s) where two faces fold flat onto each other: a sheet of no thickness",
            edges.folded
        )));
    }
    if corners.iter().all(Option::is_none) {
        return Some(winding("no triangle has an area: nothing is inside".into()));
    }
    if stop.load(Ordering::Relaxed) {
        return None;
    }
    if let Some((a, b)) = crossing_triangles(mesh, corners) {
        return Some(winding(format!(
            "triangles {a} and {b} cross: the mesh intersects itself"
        )));
    }
    if stop.load(Ordering::Relaxed) {
        return None;
    }
    if let Some(piece) = nested_the_same_way(positions, corners, &edges.pieces) {
        return Some(winding(format!(
            "the piece of triangle {piece} lies inside another wound the same way"
        )));
    }
    Some(AutoSign {
        sign: Sign::Pseudonormal,
        reason: "closed and consistently oriented".into(),
        closed_cycle,
    })
}

/// Whether `mesh` bounds regions: every edge (vertices welded by coordinates) is used as often
/// in one direction as in the other. Then the winding number is constant off the surface,
/// so a box that meets no triangle has one sign; open meshes and flipped patches break it (the
/// winding number changes smoothly across a hole).
pub fn is_closed_cycle(mesh: &Mesh) -> bool {
    let (positions, corners) = welded(mesh);
    let triangles = with_area(&corners);
    let mut balanced = true;
    let never = &crate::mesh::NEVER_STOPPED;
    for_each_edge_use(
        positions.len(),
        &triangles,
        never,
        |_, forward, backward| {
            balanced &= forward == backward;
        },
    );
    balanced
}

/// The triangles that have an area (`welded`'s `Some`).
fn with_area(corners: &[Option<[u32; 3]>]) -> Vec<[u32; 3]> {
    corners.iter().flatten().copied().collect()
}

/// Each undirected edge of `triangles` (welded ids), in ascending order of the edges, with its
/// half-edges (`3 t + k`: corner k of triangle t to the next) and its uses from its lower vertex
/// to its higher and back (`mesh::for_each_edge`, the pseudonormal table's grouping: a
/// counting sort on the lower vertex, in bounded bands). A hash map of every edge took 3–4×
/// as long on a mesh of 10^5 vertices.
fn for_each_edge_use(
    vertex_count: usize,
    triangles: &[[u32; 3]],
    stop: &AtomicBool,
    mut edge: impl FnMut(&[u32], usize, usize),
) {
    let from_higher = |h: u32| {
        let (t, k) = (triangles[h as usize / 3], h as usize % 3);
        t[k] > t[(k + 1) % 3]
    };
    let band = crate::mesh::band_len(vertex_count);
    crate::mesh::for_each_edge(vertex_count, triangles, band, stop, |run| {
        let backward = run.iter().filter(|&&h| from_higher(h)).count();
        edge(run, run.len() - backward, backward);
    });
}

/// For each edge (welded ids, the smaller first), how many more times the faces use it from
/// the first to the second than back.
fn edge_balance(corners: &[Option<[u32; 3]>]) -> FxHashMap<(u32, u32), i64> {
    let mut balance: FxHashMap<(u32, u32), i64> = FxHashMap::default();
    for [a, b, c] in corners.iter().flatten().copied() {
        for (u, v) in [(a, b), (b, c), (c, a)] {
            let (key, step) = if u < v { ((u, v), 1) } else { ((v, u), -1) };
            *balance.entry(key).or_default() += step;
        }
    }
    balance
}

/// The distinct vertex coordinates (−0 and +0 the same), and each triangle's corners as their
/// indices; `None` for a triangle with two corners at one place, which bounds nothing.
fn welded(mesh: &Mesh) -> (Vec<DVec3>, Vec<Option<[u32; 3]>>) {
    let canonical = welded_ids(mesh);
    let mut positions = Vec::new();
    for (v, &id) in canonical.iter().enumerate() {
        if id as usize == positions.len() {
            positions.push(mesh.vertices.get(v));
        }
    }
    let corners = mesh
        .triangles
        .par_iter()
        .map(|t| {
            let [a, b, c] = t.map(|k| canonical[k as usize]);
            (a != b && b != c && c != a).then_some([a, b, c])
        })
        .collect();
    (positions, corners)
}

/// Each vertex's welded id: the distinct coordinates (−0 and +0 the same) numbered in the order
/// they first occur. Found by sorting (coordinates, index) on every core, where a hash map of
/// the coordinates took one thread 26–45 ms on igea's 134,345 vertices.
fn welded_ids(mesh: &Mesh) -> Vec<u32> {
    let key = |v: DVec3| [v.x, v.y, v.z].map(|x| (x + 0.0).to_bits());
    let count = mesh.vertices.len();
    let mut keyed: Vec<([u64; 3], u32)> = (0..count)
        .into_par_iter()
        .map(|v| (key(mesh.vertices.get(v)), v as u32))
        .collect();
    keyed.par_sort_unstable();
    // Each vertex's first occurrence: the first of its coordinates' run.
    let mut first = vec![0u32; count];
    for run in keyed.chunk_by(|a, b| a.0 == b.0) {
        for &(_, v) in run {
            first[v as usize] = run[0].1;
        }
    }
    drop(keyed);
    let mut ids = vec![0u32; count];
    let mut next = 0;
    for v in 0..count {
        let f = first[v] as usize;
        ids[v] = if f == v {
            next += 1;
            next - 1
        } else {
            ids[f]
        };
    }
    ids
}

/// A mesh's holes capped, for a bound on where the winding number's sign can change off the
/// surface. The edges the faces do not use as often each way form closed chains (the mesh's
/// boundary); the cone over each connected chain from its centroid closes the mesh, and the
/// closed surface's winding number is an integer off it. The winding number differs from that
/// integer by the caps' solid angle over 4π, at most Σ area / (4π ρ²) at distance ρ from them:
/// where that stays below ½, the winding number's sign is the closed surface's, constant in any
/// box that meets neither the mesh nor a cap.
///
/// Where the capped surface passes auto's own check (closed, consistently oriented, no two
/// triangles crossing) and bounds a positive volume, its winding number is 0 or 1 off it, and
/// the pseudonormal sign at a point whose nearest point on it lies on the mesh says which: there
/// the mesh's own pseudonormal sign is the winding number's sign (`pseudonormal_sign_holds`).
#[derive(Clone, Debug, Default)]
pub struct HoleCaps {
    caps: Vec<HoleCap>,
    capped_closed: bool,
    rims: Rims,
}

/// The mesh's unbalanced edges as segments, each weighted by its balance times its length:
/// off the surface the winding number's gradient is theirs alone (a triangle's solid angle has
/// the Biot–Savart gradient of its edge loop, and an edge used once each way cancels), at most
/// Σ weight / (4π ρ²) at distance ρ from them. In clusters of neighbours, as a cap's triangles.
#[derive(Clone, Debug, Default)]
struct Rims {
    /// Each segment as a triangle with its second end twice (for `clustered`), and its weight.
    segments: Vec<([DVec3; 3], f64)>,
    clusters: Vec<CapCluster>,
}

impl Rims {
    fn new(positions: &[DVec3], open: &[UnbalancedEdge]) -> Rims {
        let segments: Vec<([DVec3; 3], f64)> = open
            .iter()
            .map(|&((u, v), balance)| {
                let (a, b) = (positions[u as usize], positions[v as usize]);
                ([a, b, b], balance.unsigned_abs() as f64 * (b - a).length())
            })
            .collect();
        if segments.is_empty() {
            return Rims::default();
        }
        let (segments, clusters) = clustered(segments);
        Rims { segments, clusters }
    }

    /// A bound of how far the winding number moves from its value at `centre` over the ball
    /// (`centre`, `radius`), which must meet no triangle: the radius times the gradient's
    /// bound there. Infinite where the ball may meet a rim.
    fn variation(&self, centre: DVec3, radius: f64) -> f64 {
        let distance_to = |s: &[DVec3; 3]| segment_distance(centre, s[0], s[1]);
        let gradient = inverse_square_sum_until(
            &self.clusters,
            &self.segments,
            centre,
            radius,
            distance_to,
            f64::INFINITY,
        );
        radius * gradient
    }
}

/// Σ weight / (4π gap²) over `items` (each corners and a weight, in `clusters`), gap an item's
/// distance (`distance_to`) from the ball (`centre`, `radius`): a cluster far from the ball by
/// its own ball and total weight, a near one item by item. Infinite where the ball may meet
/// an item.
///
/// The sum stops once it reaches `enough` (its terms are not negative, so a caller comparing
/// with `enough` decides the same): what it has summed then.
fn inverse_square_sum_until(
    clusters: &[CapCluster],
    items: &[([DVec3; 3], f64)],
    centre: DVec3,
    radius: f64,
    distance_to: impl Fn(&[DVec3; 3]) -> f64,
    enough: f64,
) -> f64 {
    let mut sum = 0.0;
    for cluster in clusters {
        let gap = (centre - cluster.centre).length() - cluster.reach - radius;
        let coarse = inverse_square(cluster.area, gap);
        sum += if gap > 2.0 * cluster.reach {
            coarse
        } else {
            items[cluster.range.clone()]
                .iter()
                .map(|(corners, weight)| inverse_square(*weight, distance_to(corners) - radius))
                .sum::<f64>()
                .min(coarse)
        };
        if sum >= enough {
            break;
        }
    }
    sum
}

/// weight / (4π gap²); infinite where the gap is not positive.
fn inverse_square(weight: f64, gap: f64) -> f64 {
    if gap.is_nan() || gap <= 0.0 {
        f64::INFINITY
    } else {
        weight / (4.0 * std::f64::consts::PI * gap * gap)
    }
}

/// The distance from `p` to the segment `a`–`b`.
fn segment_distance(p: DVec3, a: DVec3, b: DVec3) -> f64 {
    let ab = b - a;
    let length_squared = ab.dot(ab);
    let t = if length_squared > 0.0 {
        ((p - a).dot(ab) / length_squared).clamp(0.0, 1.0)
    } else {
        0.0
    };
    (a + ab * t - p).length()
}

#[derive(Clone, Debug)]
struct HoleCap {
    /// The cone's apex, and a radius about it that holds the whole cone.
    centre: DVec3,
    reach: f64,
    area: f64,
    /// The cone's triangles (an edge of the chain, the apex) and their areas, each counted
    /// as often as its edge is unbalanced: the finer bound near the cap. In clusters of
    /// neighbours, `clusters` (so that a point far from most of a large cap sums few terms).
    triangles: Vec<([DVec3; 3], f64)>,
    clusters: Vec<CapCluster>,
}

/// Neighbouring triangles of a cap, `HoleCap::triangles[range]` (or segments of the rims),
/// and a ball about them.
#[derive(Clone, Debug)]
struct CapCluster {
    range: std::ops::Range<usize>,
    centre: DVec3,
    reach: f64,
    /// Their total weight: the triangles' area, the segments' length times imbalance.
    area: f64,
}

/// The least and greatest corner of `points`' box.
fn bounds_of(points: impl Iterator<Item = DVec3>) -> (DVec3, DVec3) {
    let (mut lo, mut hi) = ([f64::INFINITY; 3], [f64::NEG_INFINITY; 3]);
    for p in points {
        for (a, x) in p.to_array().into_iter().enumerate() {
            lo[a] = lo[a].min(x);
            hi[a] = hi[a].max(x);
        }
    }
    (DVec3::from_array(lo), DVec3::from_array(hi))
}

/// Triangles a cap cluster holds at most.
const CAP_CLUSTER: usize = 8;

/// `triangles` reordered into clusters of neighbours (halved along their centroids' longest
/// axis, at the median, down to `CAP_CLUSTER`), and the clusters.
fn clustered(mut triangles: Vec<([DVec3; 3], f64)>) -> (Vec<([DVec3; 3], f64)>, Vec<CapCluster>) {
    fn split(triangles: &mut [([DVec3; 3], f64)], first: usize, clusters: &mut Vec<CapCluster>) {
        let centroid = |t: &([DVec3; 3], f64)| (t.0[0] + t.0[1] + t.0[2]) * (1.0 / 3.0);
        if triangles.len() <= CAP_CLUSTER {
            let (lo, hi) = bounds_of(triangles.iter().flat_map(|t| t.0));
            let centre = (lo + hi) * 0.5;
            let reach = triangles
                .iter()
                .flat_map(|t| t.0)
                .map(|p| (p - centre).length())
                .fold(0.0, f64::max);
            clusters.push(CapCluster {
                range: first..first + triangles.len(),
                centre,
                reach,
                area: triangles.iter().map(|t| t.1).sum(),
            });
            return;
        }
        let (lo, hi) = bounds_of(triangles.iter().map(centroid));
        let axis = (hi - lo).longest_axis();
        let mid = triangles.len() / 2;
        triangles.select_nth_unstable_by(mid, |a, b| {
            centroid(a).get(axis).total_cmp(&centroid(b).get(axis))
        });
        let (left, right) = triangles.split_at_mut(mid);
        split(left, first, clusters);
        split(right, first + mid, clusters);
    }
    let mut clusters = Vec::new();
    split(&mut triangles, 0, &mut clusters);
    (triangles, clusters)
}

impl HoleCap {
    /// Whether every point of the cap lies farther than `limit` from `p` (false for NaN): by
    /// its ball, then its clusters' balls, then the triangles of the clusters that come near.
    fn farther_than(&self, p: DVec3, limit: f64) -> bool {
        if (p - self.centre).length() - self.reach > limit {
            return true;
        }
        self.clusters.iter().all(|cluster| {
            (p - cluster.centre).length() - cluster.reach > limit
                || self.triangles[cluster.range.clone()]
                    .iter()
                    .all(|(corners, _)| {
                        (crate::mesh::closest_feature(p, *corners).0 - p).length() > limit
                    })
        })
    }

    /// A bound of |the cap's solid angle| / 4π over the ball (`centre`, `radius`): infinite
    /// where the ball may meet the cap.
    fn bound(&self, centre: DVec3, radius: f64) -> f64 {
        self.bound_until(centre, radius, f64::INFINITY)
    }

    /// [`HoleCap::bound`], or, where it reaches `enough`, some value from `enough` up (its
    /// sum is stopped there, so a caller adding it to what `enough` was left of may land an
    /// ulp below its limit: the caps' bound has far more slack than that).
    fn bound_until(&self, centre: DVec3, radius: f64, enough: f64) -> f64 {
        let whole = inverse_square(
            self.area,
            (centre - self.centre).length() - self.reach - radius,
        );
        if whole < 0.01 {
            return whole;
        }
        // A cluster far from the ball counts by its own ball; a near one by its triangles.
        let distance_to = |corners: &[DVec3; 3]| {
            (crate::mesh::closest_feature(centre, *corners).0 - centre).length()
        };
        inverse_square_sum_until(
            &self.clusters,
            &self.triangles,
            centre,
            radius,
            distance_to,
            enough,
        )
        .min(whole)
    }
}

/// An edge and its balance (`edge_balance`), not zero.
type UnbalancedEdge = ((u32, u32), i64);

/// A cap cluster whose solid angle / 4π is bounded by this much counts by its bound in
/// `HoleCaps::winding_inside`'s first try (its triangles are summed where that does not
/// decide).
const FAR_CLUSTER_BOUND: f64 = 0.01;

/// How far from ½ the bounded sum must lie to decide: far beyond the sums' rounding.
const DECIDED_MARGIN: f64 = 1e-9;

/// How far below ½ the caps' bound must stay: the device's winding numbers are within 0.01 of
/// the exact sum (`mesh::Sign::Winding`), and a margin.
const CAP_BOUND: f64 = 0.45;

impl HoleCaps {
    pub fn of(mesh: &Mesh) -> HoleCaps {
        let (positions, corners) = welded(mesh);
        let open: Vec<UnbalancedEdge> = edge_balance(&corners)
            .into_iter()
            .filter(|(_, b)| *b != 0)
            .collect();
        // The chains' connected parts, by the vertices they share.
        let mut parent: FxHashMap<u32, u32> = FxHashMap::default();
        fn root(parent: &mut FxHashMap<u32, u32>, v: u32) -> u32 {
            let mut r = v;
            while let Some(&p) = parent.get(&r).filter(|&&p| p != r) {
                r = p;
            }
            parent.insert(v, r);
            r
        }
        for &((u, v), _) in &open {
            parent.entry(u).or_insert(u);
            parent.entry(v).or_insert(v);
            let (ru, rv) = (root(&mut parent, u), root(&mut parent, v));
            parent.insert(ru, rv);
        }
        let mut parts: FxHashMap<u32, Vec<UnbalancedEdge>> = FxHashMap::default();
        for &edge in &open {
            let r = root(&mut parent, edge.0.0);
            parts.entry(r).or_default().push(edge);
        }
        // Each part's cap, as triangles over `vertices` (the welded positions, and the cones'
        // apexes after them) oriented to close the mesh, for the closed check.
        let mut vertices = positions.clone();
        let mut cap_triangles: Vec<[u32; 3]> = Vec::new();
        let mut balanced_once = true;
        let caps: Vec<HoleCap> = parts
            .values()
            .map(|edges| {
                let mut chain: Vec<u32> = edges.iter().flat_map(|((u, v), _)| [*u, *v]).collect();
                chain.sort_unstable();
                chain.dedup();
                let at = |k: u32| positions[k as usize];
                let centre =
                    chain.iter().fold(DVec3::ZERO, |s, &k| s + at(k)) * (1.0 / chain.len() as f64);
                let reach = chain
                    .iter()
                    .map(|&k| (at(k) - centre).length())
                    .fold(0.0, f64::max);
                balanced_once &= edges.iter().all(|(_, b)| b.abs() == 1);
                let cap = sound_cap(edges, &positions, &corners, centre, reach);
                let apex = vertices.len() as u32;
                let reach = match cap.apex {
                    Some(point) => {
                        vertices.push(point);
                        reach.max((point - centre).length())
                    }
                    None => reach,
                };
                let corner = |k: u32| if k == APEX { apex } else { k };
                let point = |k: u32| vertices[k as usize];
                let triangles: Vec<([DVec3; 3], f64)> = cap
                    .triangles
                    .iter()
                    .map(|&(t, times)| {
                        let t = t.map(corner);
                        cap_triangles.push(t);
                        let [a, b, c] = t.map(point);
                        ([a, b, c], 0.5 * (b - a).cross(c - a).length() * times)
                    })
                    .collect();
                let (triangles, clusters) = clustered(triangles);
                HoleCap {
                    centre,
                    reach,
                    area: triangles.iter().map(|t| t.1).sum(),
                    triangles,
                    clusters,
                }
            })
            .collect();
        let capped_closed = !caps.is_empty()
            && balanced_once
            && capped_is_closed(vertices, &corners, cap_triangles);
        HoleCaps {
            caps,
            capped_closed,
            rims: Rims::new(&positions, &open),
        }
    }

    /// Whether the mesh with its holes capped passes auto's check and bounds a positive volume.
    pub fn capped_closed(&self) -> bool {
        self.capped_closed
    }

    /// Whether the pseudonormal sign of every point of the ball (`centre`, `radius`) is its
    /// winding number's, `distance` the centre's from the mesh (within `slack`): the capped
    /// surface is closed, every cap lies farther from each point than the mesh (so its nearest
    /// point on the capped surface is the mesh's, and not on a hole's rim), and the caps' solid
    /// angle keeps the winding number within `CAP_BOUND` of that surface's 0 or 1.
    pub fn pseudonormal_sign_holds(
        &self,
        centre: DVec3,
        radius: f64,
        distance: f64,
        slack: f64,
    ) -> bool {
        self.pseudonormal_sign_holds_within(centre, radius, distance + radius, slack)
    }

    /// [`HoleCaps::pseudonormal_sign_holds`] for the points of the ball that lie at most
    /// `farthest` from the mesh (a box of grid samples whose distances are known).
    pub fn pseudonormal_sign_holds_within(
        &self,
        centre: DVec3,
        radius: f64,
        farthest: f64,
        slack: f64,
    ) -> bool {
        if !self.capped_closed || !farthest.is_finite() {
            return false;
        }
        let mut bound = 0.0;
        for cap in &self.caps {
            // Every point of the ball lies farther from the cap than from the mesh.
            if !cap.farther_than(centre, farthest + slack + radius) {
                return false;
            }
            // A cap's sum stops once it alone passes what is left below `CAP_BOUND`.
            bound += cap.bound_until(centre, radius, CAP_BOUND - bound);
            if bound >= CAP_BOUND {
                return false;
            }
        }
        true
    }

    /// A bound of |the caps' solid angle| / 4π over the ball (`centre`, `radius`): how far the
    /// mesh's winding number may lie from the capped surface's (an integer) there.
    pub fn solid_angle_bound(&self, centre: DVec3, radius: f64) -> f64 {
        self.caps.iter().map(|cap| cap.bound(centre, radius)).sum()
    }

    /// Whether the mesh's winding number at `p` exceeds ½, where every cap lies farther from
    /// `p` than the mesh (`distance`, within `slack`): there the capped surface's winding
    /// number is 1 where the mesh's pseudonormal sign says inside (`pseudonormal_inside`) and
    /// 0 outside, and the mesh's is that less the caps' own, summed exactly over their
    /// triangles. `None` where a cap may be as near as the mesh (a rim may be `p`'s nearest
    /// point), or the capped surface does not pass auto's check.
    pub fn winding_inside(
        &self,
        p: DVec3,
        distance: f64,
        pseudonormal_inside: bool,
        slack: f64,
    ) -> Option<bool> {
        if !self.capped_closed || !distance.is_finite() {
            return None;
        }
        if !self
            .caps
            .iter()
            .all(|cap| cap.farther_than(p, distance + slack))
        {
            return None;
        }
        let surface = f64::from(u8::from(pseudonormal_inside));
        // Clusters far from p by their solid angle's bound, the near ones exactly: where that
        // decides, the exact sum below would decide the same.
        let (mut near, mut far) = (0.0, 0.0);
        for cap in &self.caps {
            for cluster in &cap.clusters {
                let gap = (p - cluster.centre).length() - cluster.reach;
                let bound = inverse_square(cluster.area, gap);
                if bound <= FAR_CLUSTER_BOUND {
                    far += bound;
                } else {
                    near += cap.triangles[cluster.range.clone()]
                        .iter()
                        .map(|(corners, _)| crate::mesh::triangle_winding_number(*corners, p))
                        .sum::<f64>();
                }
            }
        }
        let margin = far + DECIDED_MARGIN;
        if surface - near - margin > 0.5 {
            return Some(true);
        }
        if surface - near + margin < 0.5 {
            return Some(false);
        }
        // Each cap triangle once: a capped-closed mesh's rim edges are unbalanced once.
        let caps: f64 = self
            .caps
            .iter()
            .flat_map(|cap| &cap.triangles)
            .map(|(corners, _)| crate::mesh::triangle_winding_number(*corners, p))
            .sum();
        Some(surface - caps > 0.5)
    }

    /// Of `rows` (each with its position `point` and the mesh's pseudonormal signed distance in
    /// `values`), those whose winding number sign the caps settle take it in `values`: by the
    /// caps' bound (`pseudonormal_sign_holds`), else by their exact winding number
    /// (`winding_inside`). Returns the rows left for the winding walk.
    pub fn settle(
        &self,
        rows: &[usize],
        point: impl Fn(usize) -> DVec3 + Sync,
        values: &mut [f32],
        slack: impl Fn(DVec3) -> f64 + Sync,
    ) -> Vec<usize> {
        use rayon::prelude::*;
        let verdicts: Vec<Option<bool>> = rows
            .par_iter()
            .map(|&row| {
                let (p, signed) = (point(row), values[row]);
                let (distance, inside) = (f64::from(signed.abs()), signed.is_sign_negative());
                if self.pseudonormal_sign_holds(p, 0.0, distance, slack(p)) {
                    return Some(inside);
                }
                self.winding_inside(p, distance, inside, slack(p))
            })
            .collect();
        let mut walk = Vec::new();
        for (&row, verdict) in rows.iter().zip(verdicts) {
            match verdict {
                // On the surface (0) the sign is moot, and a gradient there is the face's.
                Some(inside) if inside != values[row].is_sign_negative() && values[row] != 0.0 => {
                    values[row] = -values[row];
                }
                Some(_) => {}
                None => walk.push(row),
            }
        }
        walk
    }

    /// Whether the winding number has one sign in the whole ball of `radius` about `centre`,
    /// which must meet no triangle of the mesh: it meets no cap, and the caps' solid angle
    /// keeps the winding number within `CAP_BOUND` of an integer there.
    pub fn sign_constant_in_ball(&self, centre: DVec3, radius: f64) -> bool {
        let mut bound = 0.0;
        for cap in &self.caps {
            bound += cap.bound_until(centre, radius, CAP_BOUND - bound);
            if bound >= CAP_BOUND {
                return false;
            }
        }
        true
    }
}

impl HoleCaps {
    /// Whether every point of the ball (`centre`, `radius`), which must meet no triangle of the
    /// mesh, has the sign of the device's winding number `centre_winding` at its centre
    /// (`fine` or coarse), and the device would sign each point so. The device's sign at a
    /// point is the exact one wherever the exact number lies farther than the fine error
    /// (`winding::ERROR`) from ½: a coarse number that decides lies beyond `SIGN_MARGIN` and
    /// errs by under half of it (tests/winding.rs). The rims' bound keeps the exact number so
    /// across the ball, allowing the centre's own error and f32's rounding.
    pub fn winding_sign_holds_in_ball(
        &self,
        centre: DVec3,
        radius: f64,
        centre_winding: f64,
        fine: bool,
    ) -> bool {
        use crate::winding::{ERROR, SIGN_MARGIN};
        let centre_error = if fine { ERROR } else { 0.5 * SIGN_MARGIN };
        let margin = centre_error + ERROR + 0.005;
        (centre_winding - 0.5).abs() - self.winding_variation(centre, radius) > margin
    }

    /// A bound of how far the winding number moves from its value at `centre` over the ball
    /// (`centre`, `radius`), which must meet no triangle of the mesh (infinite where it may
    /// meet an unbalanced edge).
    pub fn winding_variation(&self, centre: DVec3, radius: f64) -> f64 {
        self.rims.variation(centre, radius)
    }
}

/// A cap's triangles: corners among the welded positions or `APEX`, each with how often it
/// counts (an edge the faces use twice more one way than back is capped twice).
struct Cap {
    triangles: Vec<([u32; 3], f64)>,
    apex: Option<DVec3>,
}

/// A box: its least and greatest corner.
type Box3 = ([f64; 3], [f64; 3]);

fn box_of(corners: [DVec3; 3]) -> Box3 {
    let [a, b, c] = corners.map(DVec3::to_array);
    (
        std::array::from_fn(|k| a[k].min(b[k]).min(c[k])),
        std::array::from_fn(|k| a[k].max(b[k]).max(c[k])),
    )
}

/// Steps (nodes and triangles looked at) a hole's cap candidate may take through the
/// hierarchy, a triangle of it and of the mesh near it, before it is checked pair by pair
/// instead (`sound_cap`). A clear cone over the bunny's holes or an open terrain takes a few
/// a triangle.
const CAP_SEARCH_STEPS_PER_TRIANGLE: u64 = 64;

/// The corner index that stands for a cone's apex in `Cap::triangles`.
const APEX: u32 = u32::MAX;

/// A cap for one hole (its unbalanced `edges`; `centre` and `reach`, the ball of its rim) that
/// crosses no triangle of the mesh near it, where one of these does: the cone from the centre,
/// the rim clipped by ears in its plane, then cones from the centre moved along the rim's
/// normal. The bunny's largest hole has a rim the mesh bends through: the cone from its
/// centroid crossed it. Where none is clear, that cone (the closed check then fails).
fn sound_cap(
    edges: &[UnbalancedEdge],
    positions: &[DVec3],
    corners: &[Option<[u32; 3]>],
    centre: DVec3,
    reach: f64,
) -> Cap {
    let at = |k: u32| positions[k as usize];
    // The edges as the cap uses them (against the faces), with their multiplicity.
    let directed: Vec<(u32, u32, f64)> = edges
        .iter()
        .map(|&((u, v), b)| {
            if b > 0 {
                (v, u, b as f64)
            } else {
                (u, v, -b as f64)
            }
        })
        .collect();
    let normal = directed
        .iter()
        .fold(DVec3::ZERO, |n, &(u, v, _)| n + at(u).cross(at(v)))
        .normalize_or_zero();
    let cone = |height: f64| Cap {
        triangles: directed
            .iter()
            .map(|&(u, v, times)| ([u, v, APEX], times))
            .collect(),
        apex: Some(centre + normal * (height * reach)),
    };
    let mut candidates = vec![cone(0.0)];
    candidates.extend(
        rim_loop(edges)
            .and_then(|rim| ear_clipped(&rim, positions))
            .map(|ears| Cap {
                triangles: ears.into_iter().map(|t| (t, 1.0)).collect(),
                apex: None,
            }),
    );
    candidates.extend([0.5, -0.5, 1.0, -1.0].map(cone));
    // The mesh's triangles within reach of any candidate (cones reach √2 of the rim's ball),
    // in a hierarchy: a hole's rim of thousands of edges beside a mesh of millions of
    // triangles (an open terrain) met every pair of them, 10^9 box tests a candidate.
    let near: Vec<(Box3, [u32; 3])> = corners
        .iter()
        .flatten()
        .map(|t| (box_of(t.map(at)), *t))
        .filter(|((lo, hi), _)| {
            let nearest = DVec3::from_array(std::array::from_fn(|k| {
                centre.to_array()[k].clamp(lo[k], hi[k])
            }));
            (nearest - centre).length() <= 1.5 * reach
        })
        .collect();
    let near_tree = PairTree::of(&near);
    let point_of = |cap: &Cap| {
        let apex = cap.apex.unwrap_or(centre);
        move |k: u32| if k == APEX { apex } else { at(k) }
    };
    let crosses = |t: [u32; 3], corners: [DVec3; 3], m: [u32; 3]| {
        !m.iter().any(|k| t.contains(k)) && triangles_cross(corners, m.map(at))
    };
    // Each cap triangle through the hierarchy, within `CAP_SEARCH_STEPS_PER_TRIANGLE` steps
    // a triangle of the cap and the mesh near it.
    let clear_by_hierarchy = |cap: &Cap| {
        let point = point_of(cap);
        let mut budget = CAP_SEARCH_STEPS_PER_TRIANGLE * (cap.triangles.len() + near.len()) as u64;
        for &(t, _) in &cap.triangles {
            let corners = t.map(point);
            let crossed = near_tree.first_meeting(corners, &mut budget, |member| {
                crosses(t, corners, near[member].1).then_some(())
            })?;
            if crossed.is_some() {
                return Ok(false);
            }
        }
        Ok(true)
    };
    // A cap lying in a fan's plane meets every sliver at the centre in the hierarchy: it is
    // checked pair by pair, as cheaply as the hierarchy would (n² all the same).
    let clear_by_every_pair = |cap: &Cap| {
        let point = point_of(cap);
        cap.triangles.iter().all(|&(t, _)| {
            let corners = t.map(point);
            let (lo, hi) = box_of(corners);
            near.iter().all(|&((m_lo, m_hi), m)| {
                (0..3).any(|k| m_lo[k] > hi[k] || lo[k] > m_hi[k]) || !crosses(t, corners, m)
            })
        })
    };
    let clear =
        |cap: &Cap| clear_by_hierarchy(cap).unwrap_or_else(|OverBudget| clear_by_every_pair(cap));
    let first_clear = candidates.iter().position(clear).unwrap_or(0);
    candidates.swap_remove(first_clear)
}

/// Whether the mesh (its welded `corners` over `vertices`) closed by `caps` passes auto's check,
/// is one connected piece and bounds a positive volume: then its winding number is 0 or 1 off
/// it (a second piece could nest inside the first, where it would be 2).
fn capped_is_closed(
    vertices: Vec<DVec3>,
    corners: &[Option<[u32; 3]>],
    caps: Vec<[u32; 3]>,
) -> bool {
    let mut triangles: Vec<[u32; 3]> = corners.iter().flatten().copied().collect();
    triangles.extend(caps);
    if !is_one_piece(vertices.len(), &triangles) {
        return false;
    }
    let volume: f64 = triangles
        .iter()
        .map(|t| {
            let [a, b, c] = t.map(|k| vertices[k as usize]);
            a.dot(b.cross(c))
        })
        .sum();
    let Ok(capped) = Mesh::new(vertices, triangles, "the mesh with its holes capped") else {
        return false;
    };
    volume > 0.0 && auto_sign(&capped).sign == Sign::Pseudonormal
}

/// Of a closed mesh whose triangles do not cross (welded `positions`, `corners`, the pieces of
/// the triangles with an area `piece_of`, `EdgeCounts::pieces`), a triangle of a piece whose
/// winding number is not 0 or 1 on both its sides: the other pieces' winding number at the
/// centre of one of its triangles must be 0 where it is wound outward and 1 where inward (a
/// cavity). A ball inside a ball, both wound outward, has 2 inside the inner one, and the
/// pseudonormal calls the gap between them outside. The centre, not a vertex: pieces may
/// touch at a vertex, which lies on both. `None` where every piece is sound.
fn nested_the_same_way(
    positions: &[DVec3],
    corners: &[Option<[u32; 3]>],
    piece_of: &[u32],
) -> Option<usize> {
    let triangles: Vec<(usize, [u32; 3])> = corners
        .iter()
        .enumerate()
        .filter_map(|(t, c)| c.map(|c| (t, c)))
        .collect();
    debug_assert_eq!(triangles.len(), piece_of.len());
    let count = piece_of.iter().max().map_or(0, |&m| m as usize + 1);
    if count < 2 {
        return None;
    }
    let at = |k: u32| positions[k as usize];
    let mut members: Vec<Vec<[DVec3; 3]>> = vec![Vec::new(); count];
    let mut first_triangle = vec![usize::MAX; count];
    for (&(t, c), &piece) in triangles.iter().zip(piece_of) {
        members[piece as usize].push(c.map(at));
        first_triangle[piece as usize] = first_triangle[piece as usize].min(t);
    }
    let boxes: Vec<Box3> = members
        .iter()
        .map(|m| {
            m.iter().fold(
                ([f64::INFINITY; 3], [f64::NEG_INFINITY; 3]),
                |(lo, hi), t| {
                    let (a, b) = box_of(*t);
                    (
                        std::array::from_fn(|k| lo[k].min(a[k])),
                        std::array::from_fn(|k| hi[k].max(b[k])),
                    )
                },
            )
        })
        .collect();
    // The first such piece, not any: the summary names it (the same every run).
    (0..count).into_par_iter().find_map_first(|p| {
        let [a, b, c] = members[p][0];
        let vertex = (a + b + c) * (1.0 / 3.0);
        let v = vertex.to_array();
        let others: f64 = (0..count)
            .filter(|&q| q != p && (0..3).all(|k| boxes[q].0[k] <= v[k] && v[k] <= boxes[q].1[k]))
            .flat_map(|q| members[q].iter())
            .map(|t| crate::mesh::triangle_winding_number(*t, vertex))
            .sum();
        let volume: f64 = members[p].iter().map(|[a, b, c]| a.dot(b.cross(*c))).sum();
        let expected = if volume > 0.0 { 0.0 } else { 1.0 };
        ((others - expected).abs() > 0.25).then_some(first_triangle[p])
    })
}

/// Each triangle's piece (triangles joined by shared corners), numbered from 0.
fn pieces(vertex_count: usize, triangles: &[[u32; 3]]) -> Vec<u32> {
    let mut joined = UnionFind::new(vertex_count);
    for &[a, b, c] in triangles {
        joined.join(a, b);
        joined.join(b, c);
    }
    let corners = joined.numbered();
    // Renumbered in order of first triangle.
    let mut numbers: FxHashMap<u32, u32> = FxHashMap::default();
    triangles
        .iter()
        .map(|t| {
            let next = numbers.len() as u32;
            *numbers.entry(corners[t[0] as usize]).or_insert(next)
        })
        .collect()
}

/// Whether the triangles' corners (among `vertex_count`) join them into one piece.
fn is_one_piece(vertex_count: usize, triangles: &[[u32; 3]]) -> bool {
    !triangles.is_empty() && pieces(vertex_count, triangles).iter().all(|&p| p == 0)
}

/// A hole's rim as one loop of vertices, in the direction its cap uses the edges (against the
/// faces'); `None` unless every edge is unbalanced once and they form a single simple loop.
fn rim_loop(edges: &[UnbalancedEdge]) -> Option<Vec<u32>> {
    let mut next: FxHashMap<u32, u32> = FxHashMap::default();
    for &((u, v), b) in edges {
        let (tail, head) = match b {
            1 => (v, u),
            -1 => (u, v),
            _ => return None,
        };
        if next.insert(tail, head).is_some() {
            return None;
        }
    }
    let start = edges.first()?.0.0;
    let mut rim = vec![start];
    let mut at = *next.get(&start)?;
    while at != start {
        if rim.len() >= edges.len() {
            return None;
        }
        rim.push(at);
        at = *next.get(&at)?;
    }
    (rim.len() == edges.len()).then_some(rim)
}

/// The loop `rim` triangulated by ear clipping in the plane of its Newell normal, each triangle
/// in the loop's direction; `None` where the loop does not project to a simple polygon there.
fn ear_clipped(rim: &[u32], positions: &[DVec3]) -> Option<Vec<[u32; 3]>> {
    let at = |k: u32| positions[k as usize];
    let normal = (0..rim.len()).fold(DVec3::ZERO, |n, i| {
        n + at(rim[i]).cross(at(rim[(i + 1) % rim.len()]))
    });
    let n = normal.normalize_or_zero();
    if n == DVec3::ZERO {
        return None;
    }
    let e1 = crate::math::any_perpendicular(n).normalize_or_zero();
    let e2 = n.cross(e1);
    let flat = |k: u32| (at(k).dot(e1), at(k).dot(e2));
    // Twice the signed area of (a, b, c) in the plane: positive where they turn as the loop.
    let turn = |a: u32, b: u32, c: u32| {
        let ((ax, ay), (bx, by), (cx, cy)) = (flat(a), flat(b), flat(c));
        (bx - ax) * (cy - ay) - (by - ay) * (cx - ax)
    };
    let mut left = rim.to_vec();
    let mut ears = Vec::with_capacity(rim.len().saturating_sub(2));
    while left.len() > 3 {
        let count = left.len();
        let ear = (0..count).find(|&i| {
            let (a, b, c) = (
                left[(i + count - 1) % count],
                left[i],
                left[(i + 1) % count],
            );
            turn(a, b, c) > 0.0
                && left.iter().all(|&p| {
                    p == a
                        || p == b
                        || p == c
                        || turn(a, b, p) < 0.0
                        || turn(b, c, p) < 0.0
                        || turn(c, a, p) < 0.0
                })
        })?;
        ears.push([
            left[(ear + count - 1) % count],
            left[ear],
            left[(ear + 1) % count],
        ]);
        left.remove(ear);
    }
    ears.push([left[0], left[1], left[2]]);
    Some(ears)
}

/// Edges by how the faces use them.
struct EdgeCounts {
    /// Used by one face only.
    open: usize,
    /// Used by more than two faces.
    non_manifold: usize,
    /// Used twice in the same direction (faces doubled or wound against their neighbours).
    same_direction: usize,
    /// Used more often one way than the other (the mesh is not a closed cycle).
    unbalanced: usize,
    /// Used once each way by two faces folded flat onto each other (coplanar, on the same
    /// side of the edge): a sheet of no thickness, a face and its reverse. The edge counts
    /// call such a mesh closed and oriented, but no side of it is inside (its winding number
    /// is 0 off it), where the pseudonormals of its two faces say opposite things.
    folded: usize,
    /// Each triangle's piece (those with an area, in order), triangles joined across the
    /// edges they share once each way: two closed parts that touch at a vertex only are two
    /// pieces, as they bound two regions (joined by shared corners they were one, and a part
    /// touching the inside of another at a vertex hid from `nested_the_same_way`).
    pieces: Vec<u32>,
}

impl EdgeCounts {
    /// The counts, cut short once `stop` is set (then thrown away).
    fn of(positions: &[DVec3], corners: &[Option<[u32; 3]>], stop: &AtomicBool) -> EdgeCounts {
        let triangles = with_area(corners);
        // Half-edge h is corner h % 3 of triangle h / 3 to the next corner.
        let corner = |h: u32, step: usize| triangles[h as usize / 3][(h as usize + step) % 3];
        let mut counts = EdgeCounts {
            open: 0,
            non_manifold: 0,
            same_direction: 0,
            unbalanced: 0,
            folded: 0,
            pieces: Vec::new(),
        };
        let mut joined = UnionFind::new(triangles.len());
        for_each_edge_use(
            positions.len(),
            &triangles,
            stop,
            |run, forward, backward| {
                if forward != backward {
                    counts.unbalanced += 1;
                }
                match (forward, backward) {
                    (1, 1) => {
                        let at = |h: u32, step: usize| positions[corner(h, step) as usize];
                        let (u, v) = (at(run[0], 0), at(run[0], 1));
                        if folded_flat(u, v, at(run[0], 2), at(run[1], 2)) {
                            counts.folded += 1;
                        }
                        joined.join(run[0] / 3, run[1] / 3);
                    }
                    (f, b) if f + b > 2 => counts.non_manifold += 1,
                    (f, b) if f + b < 2 => counts.open += 1,
                    _ => counts.same_direction += 1,
                }
            },
        );
        counts.pieces = joined.numbered();
        counts
    }
}

/// Disjoint sets of `0..n`, joined pairwise.
struct UnionFind {
    parent: Vec<u32>,
}

impl UnionFind {
    fn new(n: usize) -> UnionFind {
        UnionFind {
            parent: (0..n as u32).collect(),
        }
    }

    fn root(&mut self, mut k: u32) -> u32 {
        while self.parent[k as usize] != k {
            let up = self.parent[self.parent[k as usize] as usize];
            self.parent[k as usize] = up;
            k = up;
        }
        k
    }

    fn join(&mut self, a: u32, b: u32) {
        let (ra, rb) = (self.root(a), self.root(b));
        self.parent[ra as usize] = rb;
    }

    /// Each member's set, numbered from 0 in order of first member.
    fn numbered(mut self) -> Vec<u32> {
        let mut numbers: FxHashMap<u32, u32> = FxHashMap::default();
        (0..self.parent.len() as u32)
            .map(|k| {
                let r = self.root(k);
                let next = numbers.len() as u32;
                *numbers.entry(r).or_insert(next)
            })
            .collect()
    }
}

/// Whether the faces (u, v, a) and (v, u, b) across the edge u–v lie folded flat onto each
/// other: coplanar within `FLAT_RELATIVE` of their scale (as `triangles_cross` judges), and
/// a and b on the same side of the edge.
fn folded_flat(u: DVec3, v: DVec3, a: DVec3, b: DVec3) -> bool {
    let (edge, to_a, to_b) = (v - u, a - u, b - u);
    let (side_a, side_b) = (edge.cross(to_a), edge.cross(to_b));
    let volume = side_a.dot(to_b);
    volume.abs() <= FLAT_RELATIVE * edge.length() * to_a.length() * to_b.length()
        && side_a.dot(side_b) > 0.0
}

/// Two triangles sharing no vertex that meet, if any (the lower indices first).
fn crossing_triangles(mesh: &Mesh, corners: &[Option<[u32; 3]>]) -> Option<(usize, usize)> {
    crossing_triangles_with(mesh, corners, LARGE_TRIANGLES_SCAN_PAIRS)
}

/// [`crossing_triangles`], the large triangles scanning every box up to `scan_pairs` pairs.
fn crossing_triangles_with(
    mesh: &Mesh,
    corners: &[Option<[u32; 3]>],
    scan_pairs: u64,
) -> Option<(usize, usize)> {
    let boxes: Vec<Option<Box3>> = (0..mesh.triangles.len())
        .into_par_iter()
        .map(|t| corners[t].map(|_| box_of(mesh.corners(t))))
        .collect();
    let mut extents: Vec<f64> = boxes
        .iter()
        .flatten()
        .map(|(lo, hi)| (0..3).map(|k| hi[k] - lo[k]).fold(0.0, f64::max))
        .collect();
    if extents.len() < 2 {
        return None;
    }
    // Cells about twice a typical triangle: most triangles fall in a few, and the rare large
    // one is checked against every other box.
    let middle = extents.len() / 2;
    let cell = 2.0 * *extents.select_nth_unstable_by(middle, f64::total_cmp).1;
    let cell = if cell > 0.0 { cell } else { 1.0 };
    const MAX_CELLS: u32 = 64;
    let low = mesh.bounds().0.to_array();
    let index = |x: [f64; 3]| -> [i64; 3] {
        std::array::from_fn(|k| ((x[k] - low[k]) / cell).floor() as i64)
    };
    // Every (cell, triangle) as (the cell's key, the box's low x rounded down to f32 beside
    // the triangle), sorted: a cell's members lie side by side by their low x, as its sweep
    // wants, with no map of cells (a hash map of lists took most of the check's time on 10^5
    // triangles); 16 bytes an entry, not 24 (igea's sort of 660,769: 33 → 18 ms).
    let mut entries: Vec<(u64, u64)> = Vec::with_capacity(4 * boxes.len());
    let mut large = Vec::new();
    for (t, bounds) in boxes.iter().enumerate() {
        let Some((lo, hi)) = bounds else { continue };
        let (l, h) = (index(*lo), index(*hi));
        // In f64: a huge triangle among tiny ones spans more cells than an i64 counts, and
        // a wrapped count would send it through the grid cell by cell.
        let cells: f64 = (0..3).map(|k| h[k] as f64 - l[k] as f64 + 1.0).product();
        if cells > MAX_CELLS as f64 {
            large.push(t as u32);
            continue;
        }
        let x = u64::from(low_x_key(lo[0])) << 32 | t as u64;
        for i in l[0]..=h[0] {
            for j in l[1]..=h[1] {
                for k in l[2]..=h[2] {
                    entries.push((cell_key([i, j, k]), x));
                }
            }
        }
    }
    entries.par_sort_unstable();
    let overlap = |a: usize, b: usize| {
        let ((alo, ahi), (blo, bhi)) = (boxes[a].unwrap(), boxes[b].unwrap());
        (0..3).all(|k| alo[k] <= bhi[k] && blo[k] <= ahi[k])
    };
    let crossing = |a: usize, b: usize| {
        let (ca, cb) = (corners[a].unwrap(), corners[b].unwrap());
        !ca.iter().any(|v| cb.contains(v)) && triangles_cross(mesh.corners(a), mesh.corners(b))
    };
    let ordered = |a: usize, b: usize| (a.min(b), a.max(b));
    let in_cells = entries
        .par_chunk_by(|a, b| a.0 == b.0)
        .map_init(
            Vec::new,
            |run: &mut Vec<(usize, f64, Box3, [u32; 3])>, members| {
                // The run's boxes and corners side by side: each is read by many pairs.
                run.clear();
                run.extend(members.iter().map(|&(_, x)| {
                    let t = (x & u64::from(u32::MAX)) as usize;
                    (
                        t,
                        low_x_value((x >> 32) as u32),
                        boxes[t].unwrap(),
                        corners[t].unwrap(),
                    )
                }));
                let key = members[0].0;
                // A pair of `run` (positions n < m) that crosses, if it does.
                let cross = |n: usize, m: usize| {
                    let (a, _, (alo, ahi), ca) = run[n];
                    let (b, _, (blo, bhi), cb) = run[m];
                    // Neighbours sharing a corner, most of the pairs whose boxes meet, first.
                    if !(0..3).all(|k| alo[k] <= bhi[k] && blo[k] <= ahi[k])
                        || ca.iter().any(|v| cb.contains(v))
                    {
                        return None;
                    }
                    // Each pair once: in the cell holding the low corner of the boxes' overlap
                    // (cells whose keys collide share a run, and check its pairs as one).
                    let low_corner = std::array::from_fn(|k| alo[k].max(blo[k]));
                    (cell_key(index(low_corner)) == key
                        && triangles_cross(mesh.corners(a), mesh.corners(b)))
                    .then(|| ordered(a, b))
                };
                if run.len() > HEAVY_RUN {
                    let members: Vec<(Box3, [u32; 3])> =
                        run.iter().map(|&(_, _, bounds, c)| (bounds, c)).collect();
                    return PairTree::of(&members).first_pair(cross);
                }
                // Sorted by the rounded low x, at or below the true one: past the first member
                // whose rounded x lies beyond a's box, none meets it. Members of one rounded x
                // may have any order of true x, so x is tested in `cross` too.
                (0..run.len()).find_map(|n| {
                    (n + 1..run.len())
                        .take_while(|&m| run[m].1 <= run[n].2.1[0])
                        .find_map(|m| cross(n, m))
                })
            },
        )
        // The first crossing in the cells' order, not any: the summary names the pair, and
        // it must be the same every run (and beside the build as alone).
        .find_first(Option::is_some)
        .flatten();
    in_cells.or_else(|| {
        // A few large triangles meet every box (no more memory than the boxes).
        if large.len() as u64 * boxes.len() as u64 <= scan_pairs {
            return large.par_iter().find_map_first(|&a| {
                (0..boxes.len())
                    .filter(|&b| b != a as usize && boxes[b].is_some() && overlap(a as usize, b))
                    .find(|&b| crossing(a as usize, b))
                    .map(|b| ordered(a as usize, b))
            });
        }
        // Many search a hierarchy of every box (about 100 bytes a triangle), passing over the
        // nodes their planes or sides miss: a cone capping a terrain's hole (thousands of
        // triangles across it) met each of its millions of boxes.
        let (members, triangle_of): (Vec<(Box3, [u32; 3])>, Vec<usize>) = (0..boxes.len())
            .filter_map(|t| Some(((boxes[t]?, corners[t]?), t)))
            .unzip();
        let every_box = PairTree::of(&members);
        large.par_iter().find_map_first(|&a| {
            let a = a as usize;
            let mut unbounded = u64::MAX;
            let found = every_box.first_meeting(mesh.corners(a), &mut unbounded, |member| {
                let b = triangle_of[member];
                (b != a && overlap(a, b) && crossing(a, b)).then(|| ordered(a, b))
            });
            found.expect("an unbounded search ends")
        })
    })
}

/// Pairs of (large triangle, box) up to which the large triangles scan every box, a fraction
/// of a second: past it they search a hierarchy.
const LARGE_TRIANGLES_SCAN_PAIRS: u64 = 1 << 26;

/// Cells of more members than this are searched through a hierarchy of their own
/// (`PairTree`), not swept along x: slivers meeting at a vertex (a disk or a cylinder's cap
/// triangulated as a fan from its centre) put every member's box over every other's, and the
/// sweep met n² pairs (a cylinder of 800,000 triangles took minutes).
const HEAVY_RUN: usize = 1024;

/// Members per leaf of a `PairTree`.
const PAIR_TREE_LEAF: usize = 4;

/// A binary hierarchy of boxes over one grid cell's triangles, for the pairs of them whose
/// boxes meet. Each node knows the hub its triangles all have, if they do (a triangle's hub:
/// its corner most shared in the cell): two nodes of one hub hold only pairs that share it,
/// which need no test, so a fan's slivers are never paired with each other.
struct PairTree {
    nodes: Vec<PairNode>,
    /// Member positions, each node's a range of it.
    order: Vec<u32>,
}

struct PairNode {
    bounds: Box3,
    /// The hub every member below has, or `NO_HUB`.
    hub: u32,
    /// The node's range of `order`.
    span: (u32, u32),
    /// Children, or `None` for a leaf.
    children: Option<[u32; 2]>,
}

const NO_HUB: u32 = u32::MAX;

/// A search that ran out of its budget (`PairTree::first_meeting`).
#[derive(Debug, PartialEq)]
struct OverBudget;

impl PairTree {
    /// The hierarchy over `members` (box and corners each).
    fn of(members: &[(Box3, [u32; 3])]) -> PairTree {
        let mut shared: FxHashMap<u32, u32> = FxHashMap::default();
        for (_, corners) in members {
            for &v in corners {
                *shared.entry(v).or_default() += 1;
            }
        }
        // The most shared corner, the least index among equals: the same every run.
        let hubs: Vec<u32> = members
            .iter()
            .map(|(_, corners)| {
                let mut best = corners[0];
                for &v in &corners[1..] {
                    if (shared[&v], std::cmp::Reverse(v)) > (shared[&best], std::cmp::Reverse(best))
                    {
                        best = v;
                    }
                }
                best
            })
            .collect();
        let mut tree = PairTree {
            nodes: Vec::new(),
            order: (0..members.len() as u32).collect(),
        };
        let hub_of = |span: &[u32]| {
            let first = span.first().map_or(NO_HUB, |&m| hubs[m as usize]);
            match span.iter().all(|&m| hubs[m as usize] == first) {
                true => first,
                false => NO_HUB,
            }
        };
        if members.len() < 2 {
            let bounds = members.first().map_or(
                ([f64::INFINITY; 3], [f64::NEG_INFINITY; 3]),
                |&(bounds, _)| bounds,
            );
            let hub = hub_of(&tree.order);
            tree.nodes.push(PairNode {
                bounds,
                hub,
                span: (0, members.len() as u32),
                children: None,
            });
            return tree;
        }
        // The scenes' hierarchy builder (binned SAH, boxes rounded outward to f32, which only
        // opens more), its inner nodes and leaf children as this tree's nodes.
        let item = |m: usize| {
            let (lo, hi) = members[m].0;
            crate::bvh::Item {
                bounds: crate::bvh::Bounds {
                    min: DVec3::from_array(lo),
                    max: DVec3::from_array(hi),
                },
                kind: 0,
            }
        };
        let built = crate::bvh::build_with(members.len(), &item, PAIR_TREE_LEAF, 0, 0);
        tree.order = built.order.clone();
        tree.add_node(&built, 0, &hub_of);
        tree
    }

    /// Adds `built`'s node `node` and everything below it, returning its index here.
    fn add_node(
        &mut self,
        built: &crate::bvh::Bvh,
        node: usize,
        hub_of: &dyn Fn(&[u32]) -> u32,
    ) -> u32 {
        let sides = built.nodes[node].children;
        let [(start, _), (_, end)] = built.spans[node];
        let box_of_side = |side: usize| {
            let child = &sides[side];
            (child.min.map(f64::from), child.max.map(f64::from))
        };
        let ((lo0, hi0), (lo1, hi1)) = (box_of_side(0), box_of_side(1));
        let index = self.nodes.len() as u32;
        self.nodes.push(PairNode {
            bounds: (
                std::array::from_fn(|k| lo0[k].min(lo1[k])),
                std::array::from_fn(|k| hi0[k].max(hi1[k])),
            ),
            hub: hub_of(&built.order[start..end]),
            span: (start as u32, end as u32),
            children: None,
        });
        let children = [0, 1].map(|side| {
            let child = &sides[side];
            if child.count == 0 {
                return self.add_node(built, child.first as usize, hub_of);
            }
            let (start, end) = built.spans[node][side];
            self.nodes.push(PairNode {
                bounds: box_of_side(side),
                hub: hub_of(&built.order[start..end]),
                span: (start as u32, end as u32),
                children: None,
            });
            self.nodes.len() as u32 - 1
        });
        self.nodes[index as usize].children = Some(children);
        index
    }

    /// The first member (in a fixed order) whose box may meet `triangle` that `test`
    /// accepts: nodes the triangle misses by more than `triangles_cross`'s tolerance are
    /// passed over (`triangle_misses_box`), so a cap's triangle over a large flat mesh opens
    /// only the nodes along it. Each node and member looked at spends one of `budget`;
    /// `Err(OverBudget)` once none is left.
    fn first_meeting<T>(
        &self,
        triangle: [DVec3; 3],
        budget: &mut u64,
        mut test: impl FnMut(usize) -> Option<T>,
    ) -> Result<Option<T>, OverBudget> {
        let mut spend = |cost: u64| match budget.checked_sub(cost) {
            Some(left) => {
                *budget = left;
                Ok(())
            }
            None => Err(OverBudget),
        };
        let mut stack = vec![0u32];
        while let Some(node) = stack.pop() {
            spend(1)?;
            let node = &self.nodes[node as usize];
            if triangle_misses_box(triangle, node.bounds) {
                continue;
            }
            match node.children {
                Some([l, r]) => stack.extend([r, l]),
                None => {
                    let members = &self.order[node.span.0 as usize..node.span.1 as usize];
                    spend(members.len() as u64)?;
                    if let Some(found) = members.iter().find_map(|&m| test(m as usize)) {
                        return Ok(Some(found));
                    }
                }
            }
        }
        Ok(None)
    }

    /// The first pair of member positions (the lower first) whose nodes' boxes meet, not of
    /// one hub, that `test` accepts, in a fixed order.
    fn first_pair<T>(&self, mut test: impl FnMut(usize, usize) -> Option<T>) -> Option<T> {
        let meet = |a: &PairNode, b: &PairNode| {
            (0..3).all(|k| a.bounds.0[k] <= b.bounds.1[k] && b.bounds.0[k] <= a.bounds.1[k])
        };
        let members = |node: &PairNode| &self.order[node.span.0 as usize..node.span.1 as usize];
        let mut stack = vec![(0u32, 0u32)];
        while let Some((a, b)) = stack.pop() {
            let (na, nb) = (&self.nodes[a as usize], &self.nodes[b as usize]);
            if na.hub != NO_HUB && na.hub == nb.hub {
                continue;
            }
            if a == b {
                match na.children {
                    Some([l, r]) => stack.extend([(l, r), (r, r), (l, l)]),
                    None => {
                        let own = members(na);
                        for (i, &m) in own.iter().enumerate() {
                            for &n in &own[i + 1..] {
                                if let Some(found) = test(m.min(n) as usize, m.max(n) as usize) {
                                    return Some(found);
                                }
                            }
                        }
                    }
                }
                continue;
            }
            if !meet(na, nb) {
                continue;
            }
            // The larger node is opened; two leaves are paired member by member.
            let larger_a = na.span.1 - na.span.0 >= nb.span.1 - nb.span.0;
            match (na.children, nb.children) {
                (Some([l, r]), _) if larger_a || nb.children.is_none() => {
                    stack.extend([(r, b), (l, b)]);
                }
                (_, Some([l, r])) => stack.extend([(a, r), (a, l)]),
                _ => {
                    for &m in members(na) {
                        for &n in members(nb) {
                            if let Some(found) = test(m.min(n) as usize, m.max(n) as usize) {
                                return Some(found);
                            }
                        }
                    }
                }
            }
        }
        None
    }
}

/// Whether `triangle` and the box lie apart along some separating axis (the box's axes, the
/// triangle's normal, the nine crosses of the two's edges) by more than `FLAT_RELATIVE` of
/// their sizes, twice over: `triangles_cross` cannot find a triangle in the box meeting it.
fn triangle_misses_box(triangle: [DVec3; 3], (lo, hi): Box3) -> bool {
    let (lo, hi) = (DVec3::from_array(lo), DVec3::from_array(hi));
    let (centre, half) = ((lo + hi) * 0.5, (hi - lo) * 0.5);
    let [a, b, c] = triangle.map(|p| p - centre);
    let edges = [b - a, c - b, a - c];
    let size = a.length().max(b.length()).max(c.length()) + half.length();
    let apart = |axis: DVec3, tolerance: f64| {
        let (pa, pb, pc) = (axis.dot(a), axis.dot(b), axis.dot(c));
        let reach = half.x * axis.x.abs() + half.y * axis.y.abs() + half.z * axis.z.abs();
        let margin = reach + 2.0 * tolerance * size;
        pa.min(pb).min(pc) > margin || pa.max(pb).max(pc) < -margin
    };
    let box_axes = [DVec3::X, DVec3::Y, DVec3::Z];
    // Along the normal, `triangles_cross` counts a point flat within FLAT_RELATIVE of the
    // product of the two edges' lengths, more than of their cross's on a sliver.
    let normal = edges[0].cross(edges[2]);
    box_axes.iter().any(|&axis| apart(axis, FLAT_RELATIVE))
        || apart(
            normal,
            FLAT_RELATIVE * edges[0].length() * edges[2].length(),
        )
        || edges.iter().any(|edge| {
            box_axes.iter().any(|axis| {
                let cross = edge.cross(*axis);
                apart(cross, FLAT_RELATIVE * cross.length())
            })
        })
}

/// A grid cell's key: its coordinates mixed into 64 bits. Cells whose keys collide are
/// checked as one cell, which is slower but no less exact.
fn cell_key(cell: [i64; 3]) -> u64 {
    let packed = (cell[0] as u64)
        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
        .wrapping_add((cell[1] as u64).wrapping_mul(0xc2b2_ae3d_27d4_eb4f))
        .wrapping_add(cell[2] as u64);
    crate::math::SplitMix64(packed).next()
}

/// `x` rounded down to an f32, as bits whose order is the numbers' (the crossing check's
/// sort key beside a triangle index in 64 bits).
fn low_x_key(x: f64) -> u32 {
    let mut f = x as f32;
    if f64::from(f) > x {
        f = f.next_down();
    }
    let bits = f.to_bits();
    if bits >> 31 == 1 {
        !bits
    } else {
        bits | 1 << 31
    }
}

/// The number `low_x_key` keeps, as an f64 (at or below the x it was made from).
fn low_x_value(key: u32) -> f64 {
    let bits = if key >> 31 == 1 {
        key & !(1 << 31)
    } else {
        !key
    };
    f64::from(f32::from_bits(bits))
}

/// Volumes within this fraction of the product of their edges' lengths count as flat:
/// vertices read from f32 are coplanar only to f32's precision.
const FLAT_RELATIVE: f64 = 1e-6;

/// Whether an edge of either triangle meets the other, touching included: two triangles
/// that share no vertex may not meet at all on a clean surface. Volumes within
/// `FLAT_RELATIVE` of their scale count as zero: vertices read from f32 are coplanar only
/// to f32's precision. (Edges in the other's plane are left to the edge counts: coplanar
/// overlaps are doubled or flipped faces.) Where an edge meets the other's plane, the point
/// where it does is tested in that plane, not the edge's line against the triangle's edges:
/// an edge nearly in the plane makes those volumes all about zero, and two nearly coplanar
/// neighbours then crossed (fandisk read from STL's f32s).
fn triangles_cross(a: [DVec3; 3], b: [DVec3; 3]) -> bool {
    // orient(a, b, c, d) and its sign, zero within the tolerance of the edges' lengths.
    let orient = |[a, b, c, d]: [DVec3; 4]| {
        let (u, v, w) = (b - a, c - a, d - a);
        let volume = u.cross(v).dot(w);
        let scale = u.length() * v.length() * w.length();
        let sign = if volume.abs() <= FLAT_RELATIVE * scale {
            0
        } else if volume > 0.0 {
            1
        } else {
            -1
        };
        (volume, sign)
    };
    // Each corner's side of the other triangle's plane, once: every edge test reads them.
    let a_sides = a.map(|p| orient([b[0], b[1], b[2], p]));
    let b_sides = b.map(|p| orient([a[0], a[1], a[2], p]));
    // Whether the edge (p, q), whose ends lie at (volume, side) of t's plane, meets t.
    let edge_meets = |t: [DVec3; 3], (p, (vp, sp)): (DVec3, (f64, i32)), (q, (vq, sq))| {
        if sp * sq > 0 || (sp == 0 && sq == 0) {
            return false;
        }
        let at = match (sp, sq) {
            (0, _) => p,
            (_, 0) => q,
            _ => p + (q - p) * (vp / (vp - vq)),
        };
        point_in_triangle(at, t)
    };
    [(0, 1), (1, 2), (2, 0)].iter().any(|&(i, j)| {
        edge_meets(b, (a[i], a_sides[i]), (a[j], a_sides[j]))
            || edge_meets(a, (b[i], b_sides[i]), (b[j], b_sides[j]))
    })
}

/// Whether `x`, a point of `t`'s plane, lies in `t`, its edges included: on the inner side of
/// every edge seen along the normal, sides within `FLAT_RELATIVE` of their scale counting as
/// on the edge. A triangle without area holds nothing (the edge counts judge those).
fn point_in_triangle(x: DVec3, t: [DVec3; 3]) -> bool {
    let normal = (t[1] - t[0]).cross(t[2] - t[0]);
    let area = normal.length();
    if area == 0.0 {
        return false;
    }
    let sides = [(0, 1), (1, 2), (2, 0)].map(|(i, j)| {
        let (edge, to_x) = (t[j] - t[i], x - t[i]);
        let side = edge.cross(to_x).dot(normal);
        if side.abs() <= FLAT_RELATIVE * edge.length() * to_x.length() * area {
            0.0
        } else {
            side
        }
    });
    sides.iter().all(|&s| s >= 0.0)
}

/// A sign method as users name it: one of [`Sign`]'s, or `auto`, decided per mesh.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SignChoice {
    Auto,
    Method(Sign),
}

impl SignChoice {
    /// By name: `auto`, `none`, `pseudonormal` or `winding`; anything else is a usage error
    /// listing the names.
    pub fn parse(name: &str) -> crate::error::Result<SignChoice> {
        match name {
            "auto" => Ok(SignChoice::Auto),
            other => Sign::parse(other).map(SignChoice::Method).map_err(|_| {
                crate::error::Error::Usage(format!(
                    "sign: unknown sign `{other}`; the valid ones are auto, none, pseudonormal, winding"
                ))
            }),
        }
    }

    /// The method for `mesh`, and for `auto` what it found.
    pub fn resolve(self, mesh: &Mesh) -> (Sign, Option<AutoSign>) {
        match self {
            SignChoice::Method(sign) => (sign, None),
            SignChoice::Auto => {
                let auto = auto_sign(mesh);
                (auto.sign, Some(auto))
            }
        }
    }
}

/// How a job's summary names its signs: "pseudonormal", or "winding (auto: 3 open edge(s): …)".
pub fn describe_signs(sign: Sign, auto_reason: Option<&str>) -> String {
    let name = sign.name();
    match auto_reason {
        Some(reason) => format!("{name} (auto: {reason})"),
        None => name.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn triangles_meet_when_pierced_or_touched_and_not_when_apart() {
        let a = [
            DVec3::new(-1.0, -1.0, 0.0),
            DVec3::new(1.0, -1.0, 0.0),
            DVec3::new(0.0, 1.0, 0.0),
        ];
        let moved = |dz: f64, dx: f64| {
            [
                DVec3::new(dx, 0.0, -1.0 + dz),
                DVec3::new(dx + 0.1, 0.0, 1.0 + dz),
                DVec3::new(dx, 0.1, 1.0 + dz),
            ]
        };
        assert!(triangles_cross(a, moved(0.0, 0.0)), "pierced");
        assert!(triangles_cross(a, moved(1.0, 0.0)), "a corner on the face");
        assert!(!triangles_cross(a, moved(1.5, 0.0)), "above");
        assert!(!triangles_cross(a, moved(0.0, 3.0)), "beside");
        // Two faces of fandisk as its STL holds them (f32s): nearly coplanar, sharing no
        // vertex, one's corner on the line of the other's edge beyond its end. They do not
        // meet; the lines' volumes, all about zero, once said they did.
        let f = |x: f32, y: f32, z: f32| DVec3::new(x.into(), y.into(), z.into());
        let face_1497 = [
            f(1.63862, 14.8208, -2.61331),
            f(1.63862, 14.9157, -2.63005),
            f(1.73501, 14.9157, -2.63005),
        ];
        let face_1609 = [
            f(1.73542, 14.7433, -2.59964),
            f(1.73501, 14.8208, -2.61331),
            f(1.8314, 14.8208, -2.61331),
        ];
        assert!(
            !triangles_cross(face_1497, face_1609),
            "nearly coplanar neighbours"
        );
        assert!(
            !triangles_cross(face_1609, face_1497),
            "nearly coplanar neighbours"
        );
        // Nearly coplanar faces that do cross: one tilted by 10^-4 through the other's
        // middle, its edge meeting the plane inside.
        let tilted = [
            DVec3::new(-0.5, 0.0, -1e-4),
            DVec3::new(0.5, 0.0, 1e-4),
            DVec3::new(0.0, 0.5, 1e-4),
        ];
        assert!(triangles_cross(a, tilted), "tilted through the middle");
        let beside = tilted.map(|v| v + DVec3::new(3.0, 0.0, 0.0));
        assert!(!triangles_cross(a, beside), "tilted beside");
    }

    /// The grid's answer against every pair: random soups of small triangles (a few large
    /// ones among them, which skip the grid), some crossing and some not.
    #[test]
    fn the_grid_finds_a_crossing_pair_exactly_when_some_pair_crosses() {
        let mut random = crate::math::SplitMix64(7);
        let mut unit = || random.unit();
        let (mut crossing_soups, mut clean_soups) = (0, 0);
        for soup in 0..60 {
            let count = 20 + soup % 40;
            let size = if soup % 2 == 0 { 0.05 } else { 0.2 };
            let mut vertices = Vec::new();
            let mut triangles = Vec::new();
            for t in 0..count {
                let scale = if t == 0 && soup % 3 == 0 { 5.0 } else { size };
                let spread = if soup % 4 < 2 { 0.6 } else { 4.0 };
                let centre =
                    (DVec3::new(unit(), unit(), unit()) - DVec3::new(0.5, 0.5, 0.5)) * spread;
                for _ in 0..3 {
                    let offset = DVec3::new(unit(), unit(), unit()) - DVec3::new(0.5, 0.5, 0.5);
                    vertices.push(centre + offset * scale + DVec3::new(1.0e6, -3.0e5, 0.0));
                }
                let first = 3 * t as u32;
                triangles.push([first, first + 1, first + 2]);
            }
            let mesh = Mesh::new(vertices, triangles, "a soup").unwrap();
            let (_, corners) = welded(&mesh);
            let every_pair = (0..count)
                .any(|a| (a + 1..count).any(|b| triangles_cross(mesh.corners(a), mesh.corners(b))));
            // The large triangles through the hierarchy of every box answer alike.
            let through_hierarchy = crossing_triangles_with(&mesh, &corners, 0);
            assert_eq!(through_hierarchy.is_some(), every_pair, "soup {soup}");
            let found = crossing_triangles(&mesh, &corners);
            assert_eq!(found.is_some(), every_pair, "soup {soup}");
            if let Some((a, b)) = found {
                assert!(a < b && triangles_cross(mesh.corners(a), mesh.corners(b)));
                crossing_soups += 1;
            } else {
                clean_soups += 1;
            }
        }
        assert!(
            crossing_soups > 5 && clean_soups > 5,
            "{crossing_soups} / {clean_soups}"
        );
    }

    /// Triangles far wider than the grid's cells among small ones skip the grid and meet
    /// every other box: one 10^3 cells wide that pierces a small triangle, one 10^7 cells wide
    /// on every axis (10^21 cells, past an i64's count) and one whose cells an i64 cannot
    /// number, both passing above them all; a wrapped count would send those through the grid
    /// cell by cell.
    #[test]
    fn huge_triangles_among_small_ones_are_checked_without_the_grid() {
        let mut vertices = Vec::new();
        let mut triangles = Vec::new();
        for t in 0..40u32 {
            let c = DVec3::new(t as f64 * 0.2, 0.0, 0.0);
            vertices.extend([
                c,
                c + DVec3::new(0.1, 0.0, 0.0),
                c + DVec3::new(0.0, 0.1, 0.1),
            ]);
            triangles.push([3 * t, 3 * t + 1, 3 * t + 2]);
        }
        // Triangles in the plane z = z0 + x / 2, `reach` across; at 1e30 the cell indices
        // saturate (an i64 count of them wraps negative), and the pair tests overflow, so the
        // grid need only agree with every pair.
        for (z0, reach, crosses) in [
            (0.02, 100.0, Some(true)),
            (100.0, 1e6, Some(false)),
            (100.0, 1e30, None),
        ] {
            let mut v = vertices.clone();
            let mut tris = triangles.clone();
            let first = v.len() as u32;
            let on_plane = |x: f64, y: f64| DVec3::new(x, y, z0 + x / 2.0);
            v.extend([
                on_plane(-reach, -reach),
                on_plane(reach, -reach),
                on_plane(0.0, reach),
            ]);
            tris.push([first, first + 1, first + 2]);
            // Built whole: `Mesh::new` refuses spans past `SPAN_LIMIT`, the API's fields do not.
            let mesh = Mesh {
                vertices: crate::mesh::Vertices::F64(v),
                triangles: tris,
            };
            let (_, corners) = welded(&mesh);
            let count = mesh.triangles.len();
            let every_pair = (0..count)
                .any(|a| (a + 1..count).any(|b| triangles_cross(mesh.corners(a), mesh.corners(b))));
            if let Some(crosses) = crosses {
                assert_eq!(every_pair, crosses, "reach {reach}: the case as built");
            }
            // Scanning every box, and through the hierarchy of them.
            for scan_pairs in [LARGE_TRIANGLES_SCAN_PAIRS, 0] {
                let found = crossing_triangles_with(&mesh, &corners, scan_pairs);
                assert_eq!(
                    found.is_some(),
                    every_pair,
                    "reach {reach}, scan {scan_pairs}"
                );
                if let Some((a, b)) = found {
                    assert!(a < b && triangles_cross(mesh.corners(a), mesh.corners(b)));
                }
            }
        }
    }

    /// The pair tree meets every pair of members whose boxes meet and that have different
    /// hubs exactly once, and any other pair at most once (brute force over every pair, no
    /// twin): random boxes with fans among them, where many members share one corner.
    #[test]
    fn the_pair_tree_meets_every_pair_of_meeting_boxes_once() {
        // None at all (a hole with no triangle near it to search).
        let empty = PairTree::of(&[]);
        assert_eq!(empty.first_pair(|_, _| Some(())), None);
        let triangle = [DVec3::ZERO, DVec3::X, DVec3::Y];
        assert_eq!(
            empty.first_meeting(triangle, &mut 10, |_| Some(())),
            Ok(None)
        );
        let mut random = crate::math::SplitMix64(48);
        for case in 0..20 {
            let count = 50 + 150 * case;
            // About two meeting boxes a member, at any count.
            let spread = 0.4 * (count as f64).cbrt();
            let members: Vec<(Box3, [u32; 3])> = (0..count as u32)
                .map(|m| {
                    let lo: [f64; 3] = std::array::from_fn(|_| random.unit() * spread);
                    let size = if m % 7 == 0 { 5.0 } else { 0.5 };
                    let hi = lo.map(|x| x + random.unit() * size);
                    // A third of them about hub 0 or 1 (fans), the rest on corners of their own.
                    let corners = match m % 6 {
                        0 | 1 => [m % 2, 1000 + 2 * m, 1001 + 2 * m],
                        _ => [1000 + 2 * m, 1001 + 2 * m, 1_000_000 + m],
                    };
                    ((lo, hi), corners)
                })
                .collect();
            let tree = PairTree::of(&members);
            let mut met = vec![0u32; count * count];
            let none: Option<()> = tree.first_pair(|n, m| {
                assert!(n < m, "case {case}: pair ({n}, {m}) not ordered");
                met[n * count + m] += 1;
                None
            });
            assert!(none.is_none());
            let hub = |m: usize| match m % 6 {
                0 | 1 => Some(m % 2),
                _ => None,
            };
            let mut needed = 0;
            for n in 0..count {
                for m in n + 1..count {
                    let ((alo, ahi), (blo, bhi)) = (members[n].0, members[m].0);
                    let meet = (0..3).all(|k| alo[k] <= bhi[k] && blo[k] <= ahi[k]);
                    let same_hub = hub(n).is_some() && hub(n) == hub(m);
                    let times = met[n * count + m];
                    if meet && !same_hub {
                        needed += 1;
                        assert_eq!(times, 1, "case {case}: pair ({n}, {m}) met {times} times");
                    } else {
                        // Leaves' members are paired without a box test, whatever their hubs.
                        assert!(times <= 1, "case {case}: pair ({n}, {m}) met {times} times");
                    }
                }
            }
            assert!(needed > count / 4, "case {case}: only {needed} pairs meet");
        }
    }

    /// Cells of more than `HEAVY_RUN` triangles answer as every pair does: 1,500 triangles
    /// over one another, each in a plane of its own (none cross), then with one of them tilted
    /// through others, far from the origin.
    #[test]
    fn heavy_cells_find_a_crossing_pair_exactly_when_some_pair_crosses() {
        let mut random = crate::math::SplitMix64(11);
        for tilted in [false, true] {
            let count = 1500u32;
            let mut vertices = Vec::new();
            for t in 0..count {
                let z = t as f64 * 1e-4;
                let base = DVec3::new(random.unit() * 0.3, random.unit() * 0.3, z);
                let lift = |k: u32| match tilted && t == 700 && k == 2 {
                    true => 0.5,
                    false => 0.0,
                };
                for k in 0..3 {
                    let offset = DVec3::new(random.unit(), random.unit(), lift(k)) * 0.3;
                    vertices.push(base + offset + DVec3::new(-2e4, 5e3, 1e4));
                }
            }
            let triangles = (0..count).map(|t| [3 * t, 3 * t + 1, 3 * t + 2]).collect();
            let mesh = Mesh::new(vertices, triangles, "a stack").unwrap();
            let (_, corners) = welded(&mesh);
            let count = count as usize;
            let every_pair = (0..count)
                .any(|a| (a + 1..count).any(|b| triangles_cross(mesh.corners(a), mesh.corners(b))));
            assert_eq!(every_pair, tilted, "the case as built");
            let found = crossing_triangles(&mesh, &corners);
            assert_eq!(found.is_some(), every_pair, "tilted: {tilted}");
            if let Some((a, b)) = found {
                assert!(a < b && triangles_cross(mesh.corners(a), mesh.corners(b)));
            }
        }
    }

    /// `triangle_misses_box` never misses a box that a point of the triangle lies in (points
    /// sampled over random triangles, slivers among them, far from the origin, boxes about
    /// them from tiny to large), and does miss most boxes well apart from the triangle.
    #[test]
    fn a_triangle_never_misses_a_box_it_meets() {
        let mut random = crate::math::SplitMix64(31);
        let corner = |r: &mut crate::math::SplitMix64| {
            DVec3::new(r.unit(), r.unit(), r.unit()) - DVec3::new(0.5, 0.5, 0.5)
        };
        let (mut apart, mut missed) = (0, 0);
        for case in 0..4000 {
            let far = DVec3::new(3e4, -1e3, 7e2);
            let mut triangle = [(); 3].map(|_| corner(&mut random) + far);
            if case % 3 == 0 {
                // A sliver: its third corner on the first edge, nudged off it.
                triangle[2] =
                    triangle[0] + (triangle[1] - triangle[0]) * 0.7 + corner(&mut random) * 1e-5;
            }
            let (u, v) = (random.unit(), random.unit());
            let (u, v) = if u + v > 1.0 {
                (1.0 - u, 1.0 - v)
            } else {
                (u, v)
            };
            let on =
                triangle[0] + (triangle[1] - triangle[0]) * u + (triangle[2] - triangle[0]) * v;
            let size = 10f64.powf(-6.0 * random.unit());
            let half = (corner(&mut random) + DVec3::new(0.5, 0.5, 0.5)) * size;
            let shift = corner(&mut random) * 3.0 * (case % 2) as f64;
            let centre = on + shift;
            let bounds = ((centre - half).to_array(), (centre + half).to_array());
            let holds =
                (0..3).all(|k| bounds.0[k] <= on.to_array()[k] && on.to_array()[k] <= bounds.1[k]);
            let misses = triangle_misses_box(triangle, bounds);
            assert!(
                !(holds && misses),
                "case {case}: a box holding {on:?} missed"
            );
            if !holds && shift.length() > 1.0 {
                apart += 1;
                missed += usize::from(misses);
            }
        }
        assert!(missed * 2 > apart, "{missed} of {apart} boxes apart missed");
    }

    /// A closed cylinder with caps of 50,000 slivers each (200,000 triangles, most in one grid
    /// cell) is searched in a pass of its own hierarchy, and a triangle through one cap found.
    #[test]
    fn fans_of_slivers_are_searched_for_crossings_without_meeting_every_pair() {
        let mesh = crate::bench::fan_capped_cylinder(50_000, |p| p);
        let (_, corners) = welded(&mesh);
        assert_eq!(crossing_triangles(&mesh, &corners), None);
        let members: Vec<(Box3, [u32; 3])> = (0..mesh.triangles.len())
            .map(|t| (box_of(mesh.corners(t)), corners[t].unwrap()))
            .collect();
        let mut tested = 0u64;
        let _: Option<()> = PairTree::of(&members).first_pair(|_, _| {
            tested += 1;
            None
        });
        assert!(
            tested < 40 * members.len() as u64,
            "{tested} pairs tested for {} triangles",
            members.len()
        );
        let mut pierced = mesh.clone();
        let mut vertices = match &mesh.vertices {
            crate::mesh::Vertices::F64(v) => v.clone(),
            _ => unreachable!("built in f64"),
        };
        let first = vertices.len() as u32;
        vertices.extend([
            DVec3::new(0.3, 0.3, -0.2),
            DVec3::new(0.31, 0.3, 0.2),
            DVec3::new(0.3, 0.31, 0.2),
        ]);
        pierced.vertices = crate::mesh::Vertices::F64(vertices);
        pierced.triangles.push([first, first + 1, first + 2]);
        let (_, corners) = welded(&pierced);
        let (a, b) = crossing_triangles(&pierced, &corners).expect("the piercing triangle found");
        assert_eq!(b, pierced.triangles.len() - 1);
        assert!(triangles_cross(pierced.corners(a), pierced.corners(b)));
    }

    #[test]
    fn welded_ids_number_coordinates_in_first_occurrence_order() {
        // Against a plain map of coordinates, on vertices repeated in any order, −0 and +0.
        let mut rng = crate::math::SplitMix64(9);
        let pool = [0.0, -0.0, 1.0, -2.5, 1e-300, 3.0];
        let vertices: Vec<DVec3> = (0..3000)
            .map(|_| {
                let mut pick = || pool[(rng.next() % pool.len() as u64) as usize];
                DVec3::new(pick(), pick(), pick())
            })
            .collect();
        let count = vertices.len() as u32;
        let triangles = (0..count - 2).map(|v| [v, v + 1, v + 2]).collect();
        let mesh = Mesh {
            vertices: crate::mesh::Vertices::F64(vertices.clone()),
            triangles,
        };
        let mut seen = std::collections::HashMap::new();
        let expected: Vec<u32> = vertices
            .iter()
            .map(|v| {
                let key = [v.x, v.y, v.z].map(|x| (x + 0.0).to_bits());
                let next = seen.len() as u32;
                *seen.entry(key).or_insert(next)
            })
            .collect();
        assert_eq!(welded_ids(&mesh), expected);
        let (positions, _) = welded(&mesh);
        assert_eq!(positions.len(), seen.len());
    }

    #[test]
    fn low_x_keys_keep_the_numbers_order_and_round_down() {
        let xs = [
            -1e300,
            -3e38,
            -2.5,
            -0.1,
            -1e-300,
            -0.0,
            0.0,
            1e-300,
            0.1,
            1.0 + 1e-12,
            3.0,
            3e38,
            1e300,
        ];
        for pair in xs.windows(2) {
            assert!(low_x_key(pair[0]) <= low_x_key(pair[1]), "{pair:?}");
        }
        for x in xs {
            let kept = low_x_value(low_x_key(x));
            assert!(kept <= x, "{x} kept as {kept}");
            // Down by less than one f32 step (where f32 reaches).
            if x.abs() < 1e38 {
                assert!(x - kept <= x.abs() * 1.2e-7 + 2e-45, "{x} kept as {kept}");
            }
        }
        // Distinct f32s keep their order strictly.
        assert!(low_x_key(-2.5) < low_x_key(-0.1) && low_x_key(0.1) < low_x_key(3.0));
    }
}
