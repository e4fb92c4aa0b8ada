//! `closest serve` end to end: the real binary listening on a loopback port (port 0, so a free
//! one), started and stopped by each test, driven over HTTP/1.1. Every answer is checked
//! against the CLI's `.npz` for the same input, byte for byte. Every loop is bounded in count
//! and time.

mod serve_harness;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serve_harness::*;

#[test]
fn every_route_answers_as_the_cli() {
    let dir = tempdir();
    let d = |name: &str| dir.path().join(name).display().to_string();
    let server = Server::start(&[]);
    assert_eq!(server.get("/v1/health").json()["status"], "ok");

    let scene_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/scene.json");
    let scene = std::fs::read(&scene_path).unwrap();
    let put = server.put("/v1/scenes/demo", &scene);
    assert_eq!(put.status, 201, "{}", put.text());
    assert_eq!(put.json()["name"], "demo");
    assert_eq!(server.put("/v1/scenes/demo", &scene).status, 200);
    let fandisk = meshes().join("fandisk.obj");
    let put = server.put(
        "/v1/meshes/fandisk?format=obj",
        &std::fs::read(&fandisk).unwrap(),
    );
    assert_eq!(
        (put.status, put.json()["triangles"].as_u64()),
        (201, Some(12946))
    );
    let targets = server.get("/v1/targets").json();
    let names: Vec<&str> = targets
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["demo", "fandisk"]);

    let p = points(3000, 1, -6.0, 6.0);
    std::fs::write(d("p.npy"), points_npy(&p)).unwrap();
    let scene_s = scene_path.display().to_string();
    let reply = server.post("/v1/scenes/demo/query?mode=surface", &points_npy(&p));
    assert_eq!(reply.status, 200, "{}", reply.text());
    let want = cli_npz(
        dir.path(),
        &[
            "query",
            "--shapes",
            &scene_s,
            "--points",
            &d("p.npy"),
            "--mode",
            "surface",
        ],
    );
    assert!(
        reply.body == want,
        "scene query differs from the CLI's .npz"
    );

    let reply = server.post(
        "/v1/meshes/fandisk/query?sign=pseudonormal&fields=distance,shape",
        &points_npy(&p),
    );
    let fandisk_s = fandisk.display().to_string();
    let want = cli_npz(
        dir.path(),
        &[
            "query",
            "--mesh",
            &fandisk_s,
            "--points",
            &d("p.npy"),
            "--sign",
            "pseudonormal",
            "--fields",
            "distance,shape",
        ],
    );
    assert!(reply.body == want, "mesh query differs from the CLI's .npz");

    let spheres: Vec<[f32; 4]> = p.iter().map(|q| [q[0], q[1], q[2], 0.5]).collect();
    let spheres_npy = npy_bytes("<f4", &[spheres.len(), 4], bytemuck::cast_slice(&spheres));
    std::fs::write(d("s.npy"), &spheres_npy).unwrap();
    let reply = server.post("/v1/scenes/demo/contacts", &spheres_npy);
    let want = cli_npz(
        dir.path(),
        &["contacts", "--shapes", &scene_s, "--spheres", &d("s.npy")],
    );
    assert!(reply.body == want, "contacts differ from the CLI's .npz");

    // Bodies (SPEC §9): a scene JSON of convex shapes, against the scene and the mesh.
    let bodies = br#"{"shapes": [
        {"type": "box", "center": [0.5, 1.5, 0.25], "half_extents": [0.5, 0.3, 0.2], "rotation": [0, 0, 0.3826834, 0.9238795]},
        {"type": "capsule", "a": [-2, 0, 0], "b": [-1, 0.5, 0], "radius": 0.25},
        {"type": "cylinder", "a": [3, 3, 3], "b": [3, 4, 3], "radius": 0.5}
    ]}"#;
    std::fs::write(d("bodies.json"), bodies).unwrap();
    let reply = server.post("/v1/scenes/demo/bodies", bodies);
    assert_eq!(reply.status, 200, "{}", reply.text());
    let want = cli_npz(
        dir.path(),
        &[
            "contacts",
            "--shapes",
            &scene_s,
            "--bodies",
            &d("bodies.json"),
        ],
    );
    assert!(
        reply.body == want,
        "scene bodies differ from the CLI's .npz"
    );
    let reply = server.post("/v1/meshes/fandisk/bodies?fields=distance,shape", bodies);
    let want = cli_npz(
        dir.path(),
        &[
            "contacts",
            "--mesh",
            &fandisk_s,
            "--bodies",
            &d("bodies.json"),
            "--fields",
            "distance,shape",
        ],
    );
    assert!(reply.body == want, "mesh bodies differ from the CLI's .npz");

    let reply = server.post("/v1/meshes/fandisk/sdf?res=12,13,14&sign=winding", &[]);
    let want = cli_npz(
        dir.path(),
        &["sdf", &fandisk_s, "--res", "12,13,14", "--sign", "winding"],
    );
    assert!(reply.body == want, "sdf differs from the CLI's .npz");

    // Segments: an uncompressed .npz with a and b, as numpy.savez writes.
    let seg: Vec<f64> = points(4000, 2, -3.0, 3.0)
        .iter()
        .flatten()
        .map(|&x| x as f64)
        .collect();
    let (a, b) = seg.split_at(seg.len() / 2);
    let a_npy = npy_bytes("<f8", &[1000, 2, 3], bytemuck::cast_slice(a));
    let b_npy = npy_bytes("<f8", &[1000, 2, 3], bytemuck::cast_slice(b));
    std::fs::write(d("a.npy"), &a_npy).unwrap();
    std::fs::write(d("b.npy"), &b_npy).unwrap();
    let body = stored_zip(&[("a.npy", &a_npy), ("b.npy", &b_npy)]);
    let reply = server.post("/v1/segments?fields=s,t,distance", &body);
    let want = cli_npz(
        dir.path(),
        &[
            "segments",
            "--a",
            &d("a.npy"),
            "--b",
            &d("b.npy"),
            "--fields",
            "s,t,distance",
        ],
    );
    assert!(
        reply.body == want,
        "segments differ from the CLI's .npz: {}",
        reply.text()
    );

    assert_eq!(
        server.request("DELETE", "/v1/scenes/demo", &[], &[]).status,
        204
    );
    assert_eq!(
        server
            .request("DELETE", "/v1/meshes/fandisk", &[], &[])
            .status,
        204
    );
    server
        .post("/v1/scenes/demo/query", &points_npy(&p))
        .assert_error(404, &["demo"]);
    assert_eq!(server.get("/v1/targets").json(), serde_json::json!([]));
    let metrics = server.get("/metrics").text();
    for needle in [
        "closest_requests_total{route=\"POST /v1/scenes/{name}/query\",status=\"200\"} 1",
        "closest_requests_total{route=\"DELETE /v1/scenes/{name}\",status=\"204\"} 1",
        "closest_rows_total 9000",
        "closest_queue_depth 0",
        "closest_batch_rows_bucket",
        "closest_request_seconds_count",
    ] {
        assert!(metrics.contains(needle), "`{needle}` not in:\n{metrics}");
    }
}

#[test]
fn every_error_has_its_status_and_names_the_problem() {
    let server = Server::start(&[
        "--max-request-mb",
        "1",
        "--max-resident-mb",
        "3",
        "--max-grid-samples",
        "1000",
    ]);
    let bad_scene = br#"{"shapes": [{"type": "sphere", "center": [0, 0, 0]}]}"#;
    server
        .put("/v1/scenes/s", bad_scene)
        .assert_error(400, &["shape 0", "`radius`", "missing"]);
    let too_long =
        br#"{"shapes": [{"type": "cone", "a": [0, 0, 0], "b": [0, 0, 1], "radius": 1e18}]}"#;
    server
        .put("/v1/scenes/s", too_long)
        .assert_error(400, &["shape 0", "`radius`", "spans 2.000e18", "1e18"]);
    server
        .put("/v1/scenes/s", b"\xff\xfe")
        .assert_error(415, &["scene JSON"]);
    server
        .put("/v1/scenes/bad%20name", b"{}")
        .assert_error(400, &["target name"]);
    // `..` and `.` are path segments to URL clients: no later request could reach them.
    for dots in ["%2E", "%2E%2E"] {
        server
            .put(&format!("/v1/scenes/{dots}"), b"{}")
            .assert_error(400, &["target name", "path segment"]);
    }
    server
        .put("/v1/meshes/m?format=dxf", b"")
        .assert_error(400, &["format", "off"]);
    // OFF (ModelNet's) is taken as the CLI takes it; a broken one names its line.
    let tetrahedron = b"OFF4 4 0\n0 0 0\n1 0 0\n0 1 0\n0 0 1\n3 0 2 1\n3 0 1 3\n3 0 3 2\n3 1 2 3\n";
    let put = server.put("/v1/meshes/t?format=off", tetrahedron);
    assert_eq!(put.status, 201, "{}", put.text());
    assert!(put.text().contains("\"triangles\":4"), "{}", put.text());
    server
        .put(
            "/v1/meshes/t2?format=off",
            b"OFF\n3 1 0\n0 0 0\n1 0 0\n0 1 0\n3 0 1 7\n",
        )
        .assert_error(400, &["line 6", "face 0"]);
    // A .gltf's buffer file is read beside it by the CLI; an upload brings no folder, and its
    // URI must not make the server read its own files.
    for uri in ["/etc/hostname", "../../../../../../etc/hostname", "t.bin"] {
        let gltf = format!(
            r#"{{"asset": {{"version": "2.0"}},
                "meshes": [{{"primitives": [{{"attributes": {{"POSITION": 0}}}}]}}],
                "accessors": [{{"bufferView": 0, "componentType": 5126, "count": 3, "type": "VEC3"}}],
                "bufferViews": [{{"buffer": 0, "byteLength": 36}}],
                "buffers": [{{"byteLength": 36, "uri": "{uri}"}}]}}"#
        );
        server
            .put("/v1/meshes/g?format=gltf", gltf.as_bytes())
            .assert_error(400, &["buffers[0].uri", "upload does not bring", ".glb"]);
    }
    let deleted = server.request("DELETE", "/v1/meshes/t", &[], &[]);
    assert_eq!(deleted.status, 204);
    server
        .put(
            "/v1/meshes/m?format=stl",
            b"solid x\nfacet normal 0 0 1\nouter loop\n",
        )
        .assert_error(400, &["body"]);
    let scene = br#"{"shapes": [{"type": "sphere", "center": [0, 0, 0], "radius": 1}]}"#;
    assert_eq!(server.put("/v1/scenes/s", scene).status, 201);
    server
        .post(
            "/v1/scenes/s/bodies",
            br#"{"shapes": [{"type": "sphere", "center": [0, 0, 3], "radius": 1},
                {"type": "ray", "origin": [0, 0, 0], "direction": [1, 0, 0]}]}"#,
        )
        .assert_error(400, &["shape 1", "`type`", "ray"]);
    server
        .post("/v1/scenes/s/bodies", br#"{"shapes": [{"type": "box"}]}"#)
        .assert_error(400, &["shape 0", "missing"]);
    server
        .post("/v1/scenes/nothing/bodies", scene)
        .assert_error(404, &["nothing"]);
    server
        .post("/v1/scenes/s/bodies?fields=depth", scene)
        .assert_error(400, &["depth"]);
    // 507: the bunny takes more than 3 MiB of device memory; nothing resident is evicted.
    let bunny = std::fs::read(meshes().join("stanford-bunny.obj")).unwrap();
    let big = bunny.len() > 1 << 20;
    let reply = server.put("/v1/meshes/bunny?format=obj", &bunny);
    if big {
        reply.assert_error(413, &["--max-request-mb"]);
    } else {
        reply.assert_error(507, &["--max-resident-mb", "nothing was evicted"]);
    }
    let fandisk = std::fs::read(meshes().join("fandisk.obj")).unwrap();
    assert!(fandisk.len() < 1 << 20);
    // Fandisk (with its winding tree's reservation) fits the 3 MiB once; a second copy would
    // not, and is refused before its upload.
    assert_eq!(
        server.put("/v1/meshes/fandisk?format=obj", &fandisk).status,
        201
    );
    server
        .put("/v1/meshes/fandisk2?format=obj", &fandisk)
        .assert_error(507, &["--max-resident-mb", "nothing was evicted"]);
    // Replacing it in place fits (its own bytes are not counted twice).
    assert_eq!(
        server.put("/v1/meshes/fandisk?format=obj", &fandisk).status,
        200
    );
    assert_eq!(
        server.get("/v1/targets").json().as_array().unwrap().len(),
        2
    );
    // A body query uploads its target's body targets, against the same budget: fandisk's
    // triangles again, in their own hierarchy, do not fit beside it; the scene's one sphere
    // does, and its bytes are then listed with the scene's.
    let capsule =
        br#"{"shapes": [{"type": "capsule", "a": [0, 0, 3], "b": [0, 0, 4], "radius": 0.5}]}"#;
    server
        .post("/v1/meshes/fandisk/bodies", capsule)
        .assert_error(507, &["body targets of `fandisk`", "--max-resident-mb"]);
    let listed_bytes = |server: &Server| -> u64 {
        let list = server.get("/v1/targets").json();
        let scene = list.as_array().unwrap().iter().find(|t| t["name"] == "s");
        scene.unwrap()["device_bytes"].as_u64().unwrap()
    };
    let before = listed_bytes(&server);
    assert_eq!(server.post("/v1/scenes/s/bodies", capsule).status, 200);
    assert!(
        listed_bytes(&server) > before,
        "the body targets are counted"
    );

    let p = points_npy(&points(10, 3, -1.0, 1.0));
    server
        .post("/v1/scenes/nope/query", &p)
        .assert_error(404, &["nope"]);
    server
        .post("/v1/meshes/s/query", &p)
        .assert_error(404, &["mesh"]);
    server
        .post("/v1/scenes/s/query", b"not an array")
        .assert_error(415, &[".npy"]);
    server
        .post("/v1/scenes/s/query?mode=inside", &p)
        .assert_error(400, &["mode", "`inside`"]);
    server
        .post("/v1/scenes/s/query?fields=depth", &p)
        .assert_error(
            400,
            &["fields", "`depth`", "point, distance, shape, normal"],
        );
    let wrong = npy_bytes("<f4", &[2, 2], &[0; 16]);
    server
        .post("/v1/scenes/s/query", &wrong)
        .assert_error(400, &["(N, 3)"]);
    let ints = npy_bytes("<i4", &[1, 3], &[0; 12]);
    server
        .post("/v1/scenes/s/query", &ints)
        .assert_error(400, &["<i4"]);
    // Half floats are the CLI's, not the service's: widened they would hold twice the bytes
    // --max-inflight-mb counted.
    let halves = npy_bytes("<f2", &[1, 3], &[0; 6]);
    server
        .post("/v1/scenes/s/query", &halves)
        .assert_error(400, &["<f2", "float32 or float64"]);
    // Fortran-ordered (pandas' `to_numpy()`, kept by `numpy.save`) and big-endian bodies are
    // answered as the C-ordered little-endian one.
    let rows = [0.5f32, 2.0, -1.0, 3.0, 0.25, 7.0];
    let c_order: Vec<u8> = rows.iter().flat_map(|v| v.to_le_bytes()).collect();
    let expected = server.post("/v1/scenes/s/query", &npy_bytes("<f4", &[2, 3], &c_order));
    assert_eq!(expected.status, 200, "{}", expected.text());
    let fortran_values = [0.5f32, 3.0, 2.0, 0.25, -1.0, 7.0];
    for (descr, fortran) in [("<f4", true), (">f4", false), (">f4", true)] {
        let values = if fortran { &fortran_values } else { &rows };
        let data: Vec<u8> = values
            .iter()
            .flat_map(|v| {
                if descr == ">f4" {
                    v.to_be_bytes()
                } else {
                    v.to_le_bytes()
                }
            })
            .collect();
        let mut body = npy_bytes(descr, &[2, 3], &data);
        if fortran {
            let at = body.windows(5).position(|w| w == b"False").unwrap();
            body[at..at + 5].copy_from_slice(b"True ");
        }
        let reply = server.post("/v1/scenes/s/query", &body);
        assert_eq!(
            reply.status,
            200,
            "{descr} fortran {fortran}: {}",
            reply.text()
        );
        assert!(
            reply.body == expected.body,
            "{descr} fortran {fortran}: other answers"
        );
    }
    let short = npy_bytes("<f4", &[5, 3], &[0; 12]);
    server
        .post("/v1/scenes/s/query", &short)
        .assert_error(400, &["bytes"]);
    let negative = npy_bytes(
        "<f4",
        &[2, 4],
        bytemuck::cast_slice(&[0f32, 0., 0., 1., 0., 0., 0., -1.]),
    );
    server
        .post("/v1/scenes/s/contacts", &negative)
        .assert_error(400, &["row 1", "radius"]);
    server
        .post("/v1/segments", b"not a zip")
        .assert_error(415, &[".npz"]);
    // numpy.savez_compressed's members are deflated: refused by name, before any is inflated.
    let zeros = npy_bytes("<f8", &[1, 2, 3], &[0u8; 48]);
    let mut deflated = stored_zip(&[("a.npy", &zeros), ("b.npy", &zeros)]);
    mark_deflated(&mut deflated);
    server
        .post("/v1/segments", &deflated)
        .assert_error(415, &["`a.npy` is compressed", "numpy.savez_compressed"]);
    server
        .post("/v1/meshes/s/sdf?res=8", &[])
        .assert_error(404, &[]);
    // 413 before the body is read whole.
    let huge = vec![0u8; 3 << 20];
    server
        .post("/v1/scenes/s/query", &huge)
        .assert_error(413, &["--max-request-mb"]);
    // axum's own answers are JSON too, and say what was asked.
    server
        .get("/v1/nothing-here")
        .assert_error(404, &["no route GET /v1/nothing-here", "/openapi.json"]);
    // An empty target name leaves no route (Python's Client sent `/v1/scenes/`).
    server
        .request("PUT", "/v1/scenes/", &[], b"{}")
        .assert_error(404, &["PUT /v1/scenes/"]);
    let patch = server.request("PATCH", "/v1/scenes/s", &[], &[]);
    assert!(
        patch
            .headers
            .get("allow")
            .is_some_and(|a| a.contains("PUT")),
        "405 keeps its Allow header"
    );
    patch.assert_error(405, &["PATCH /v1/scenes/s", "Allow header"]);
    server
        .post("/v1/meshes/s/sdf?pad=lots", &[])
        .assert_error(400, &["pad"]);
    server
        .post("/v1/meshes/fandisk/sdf?res=11", &[])
        .assert_error(400, &["1331 samples", "--max-grid-samples"]);
    assert_eq!(
        server.post("/v1/meshes/fandisk/sdf?res=10", &[]).status,
        200
    );
    // The value as sent (a negative or too large one was reported as 0), a missing res, and a
    // parameter the route does not take (`band=1` gave a dense grid without a word).
    for (query, needles) in [
        ("res=-5", &["res", "`-5`"][..]),
        ("res=4294967296", &["res", "`4294967296`"]),
        ("pad=0.2", &["res: give"]),
        ("res=8&band=1", &["unknown field `band`"]),
    ] {
        server
            .post(&format!("/v1/meshes/fandisk/sdf?{query}"), &[])
            .assert_error(400, needles);
    }
    server
        .post(
            "/v1/meshes/fandisk/query?sgn=winding",
            &points_npy(&points(4, 1, -1.0, 1.0)),
        )
        .assert_error(400, &["unknown field `sgn`"]);
    server
        .post("/v1/paired", b"not a zip")
        .assert_error(415, &[".npz", "shapes.json"]);
    // NaN rows are answered with NaN, not refused.
    let nan = npy_bytes("<f4", &[1, 3], bytemuck::cast_slice(&[f32::NAN, 0.0, 0.0]));
    assert_eq!(server.post("/v1/scenes/s/query", &nan).status, 200);
    assert_eq!(
        server.get("/v1/health").status,
        200,
        "the server survives all of it"
    );
    // Last, as they add body targets: bodies and targets beyond the body jobs' scale
    // (BODY_SCALE_LIMIT) are refused by index; such a scene still answers point queries.
    server
        .post(
            "/v1/scenes/s/bodies",
            br#"{"shapes": [{"type": "sphere", "center": [0, 0, 3], "radius": 1},
                {"type": "sphere", "center": [1e20, 0, 0], "radius": 1}]}"#,
        )
        .assert_error(400, &["bodies: shape 1", "1e9"]);
    let far = br#"{"shapes": [{"type": "sphere", "center": [0, 0, 0], "radius": 1},
        {"type": "sphere", "center": [0, 3e10, 0], "radius": 1}]}"#;
    assert_eq!(server.put("/v1/scenes/far", far).status, 201);
    server
        .post("/v1/scenes/far/bodies", scene)
        .assert_error(400, &["targets: shape 1"]);
    assert_eq!(server.post("/v1/scenes/far/query", &p).status, 200);
}

#[test]
fn a_full_queue_answers_503_with_retry_after() {
    // One waiting request at most, and a long batch window: the second must be refused.
    let server = Server::start(&["--max-queue", "1", "--batch-delay-ms", "1500"]);
    let scene = br#"{"shapes": [{"type": "sphere", "center": [0, 0, 0], "radius": 1}]}"#;
    assert_eq!(server.put("/v1/scenes/s", scene).status, 201);
    let address = server.address.clone();
    let p = points_npy(&points(10, 4, -1.0, 1.0));
    let first = {
        let (address, p) = (address.clone(), p.clone());
        std::thread::spawn(move || request(&address, "POST", "/v1/scenes/s/query", &[], &p))
    };
    std::thread::sleep(Duration::from_millis(300));
    let second = server.post("/v1/scenes/s/query", &p);
    second.assert_error(503, &["--max-queue"]);
    assert_eq!(
        second.headers.get("retry-after").map(String::as_str),
        Some("1")
    );
    assert_eq!(first.join().unwrap().status, 200);
}

#[test]
fn a_token_guards_every_route_but_health() {
    let dir = tempdir();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, "s3cret-token\n").unwrap();
    let token = token_file.display().to_string();
    let server = Server::start(&["--token-file", &token]);
    assert_eq!(server.get("/v1/health").status, 200);
    server.get("/v1/targets").assert_error(401, &["token"]);
    let wrong = [("Authorization", "Bearer s3cret-tokeN")];
    server
        .request("GET", "/v1/targets", &wrong, &[])
        .assert_error(401, &["token"]);
    let right = [("Authorization", "Bearer s3cret-token")];
    assert_eq!(
        server.request("GET", "/v1/targets", &right, &[]).status,
        200
    );
    assert_eq!(server.request("GET", "/metrics", &right, &[]).status, 200);
    server
        .request("PUT", "/v1/scenes/x", &[], b"{}")
        .assert_error(401, &[]);

    // Beyond loopback without a token: refused before anything starts.
    let out = Command::new(BIN)
        .args(["serve", "--listen", "0.0.0.0:0"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--token-file") && err.contains("0.0.0.0"),
        "{err}"
    );
    // A batch delay past the request timeout (every query waited for company, then was a 408;
    // 10^11 ms was accepted).
    let out = Command::new(BIN)
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--batch-delay-ms",
            "100000000000",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--batch-delay-ms 100000000000 must be below --request-timeout-s 600"),
        "{err}"
    );
    // No room for any target: every PUT would be a 507 (0 was accepted).
    let out = Command::new(BIN)
        .args(["serve", "--listen", "127.0.0.1:0", "--max-resident-mb", "0"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--max-resident-mb"), "{err}");
}

#[test]
fn concurrent_clients_get_their_lone_answers_in_shared_dispatches() {
    concurrent_clients_get_their_lone_answers(&["--batch-delay-ms", "50"]);
}

#[test]
fn concurrent_clients_get_their_lone_answers_with_two_batches_at_once() {
    // A hardware GPU's default: a target's batches overlap, each with its own chunk buffers.
    concurrent_clients_get_their_lone_answers(&["--batch-delay-ms", "50", "--jobs-at-once", "2"]);
}

fn concurrent_clients_get_their_lone_answers(server_args: &[&str]) {
    let server = Server::start(server_args);
    let bunny = std::fs::read(meshes().join("stanford-bunny.obj")).unwrap();
    assert_eq!(
        server.put("/v1/meshes/bunny?format=obj", &bunny).status,
        201
    );
    let bodies: Vec<Vec<u8>> = (0..64)
        .map(|k| points_npy(&points(1000, 100 + k, -0.12, 0.2)))
        .collect();
    let path = "/v1/meshes/bunny/query?sign=pseudonormal";
    let alone: Vec<Vec<u8>> = bodies.iter().map(|b| server.post(path, b).body).collect();
    let batches_before = metric(&server, "closest_batches_total");
    let address = server.address.clone();
    let threads: Vec<_> = bodies
        .into_iter()
        .map(|body| {
            let address = address.clone();
            std::thread::spawn(move || request(&address, "POST", path, &[], &body))
        })
        .collect();
    for (k, thread) in threads.into_iter().enumerate() {
        let reply = thread.join().unwrap();
        assert_eq!(reply.status, 200, "{}", reply.text());
        assert!(
            reply.body == alone[k],
            "client {k}: the batched answer differs from its lone one"
        );
    }
    let batches = metric(&server, "closest_batches_total") - batches_before;
    assert!(
        batches < 64.0,
        "64 concurrent requests ran in {batches} dispatches: no batching"
    );
}

#[test]
fn a_small_query_is_not_held_behind_a_large_batch() {
    // Batches that are not full wait for the target's running ones, but a full batch (one
    // client's many rows) must not make other clients' small queries wait for it.
    let server = Server::start(&[
        "--jobs-at-once",
        "2",
        "--batch-rows",
        "4096",
        "--chunk-rows",
        "16384",
    ]);
    let bunny = std::fs::read(meshes().join("stanford-bunny.obj")).unwrap();
    assert_eq!(
        server.put("/v1/meshes/bunny?format=obj", &bunny).status,
        201
    );
    let path = "/v1/meshes/bunny/query?sign=winding&fields=distance";
    let small = points_npy(&points(10, 3, -0.12, 0.2));
    assert_eq!(server.post(path, &small).status, 200);
    let large = points_npy(&points(800_000, 4, -0.12, 0.2));
    let address = server.address.clone();
    let started = Instant::now();
    let large_thread = std::thread::spawn(move || {
        let reply = request(&address, "POST", path, &[], &large);
        (reply.status, started.elapsed())
    });
    // The large batch is running once its body is read and its first chunks are out.
    std::thread::sleep(Duration::from_millis(300));
    let reply = server.post(path, &small);
    let small_done = started.elapsed();
    let (large_status, large_done) = large_thread.join().unwrap();
    assert_eq!((reply.status, large_status), (200, 200), "{}", reply.text());
    assert!(
        small_done < large_done,
        "the small query ended at {small_done:?}, after the large one ({large_done:?})"
    );
}

#[test]
fn a_delete_during_queries_lets_them_finish() {
    let server = Server::start(&[]);
    let bunny = std::fs::read(meshes().join("stanford-bunny.obj")).unwrap();
    assert_eq!(
        server.put("/v1/meshes/bunny?format=obj", &bunny).status,
        201
    );
    let body = points_npy(&points(50_000, 7, -0.12, 0.2));
    let path = "/v1/meshes/bunny/query?sign=winding&fields=distance";
    let lone = server.post(path, &body).body;
    let address = server.address.clone();
    let threads: Vec<_> = (0..6)
        .map(|_| {
            let (address, body) = (address.clone(), body.clone());
            std::thread::spawn(move || {
                (0..3)
                    .map(|_| request(&address, "POST", path, &[], &body))
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        server
            .request("DELETE", "/v1/meshes/bunny", &[], &[])
            .status,
        204
    );
    let mut finished = 0;
    for thread in threads {
        for reply in thread.join().unwrap() {
            match reply.status {
                200 => {
                    assert!(reply.body == lone, "an answer changed during the DELETE");
                    finished += 1;
                }
                404 => {}
                other => panic!("status {other}: {}", reply.text()),
            }
        }
    }
    assert!(finished > 0, "no request was in flight during the DELETE");
}

#[test]
fn a_client_that_disconnects_costs_only_its_request() {
    let server = Server::start(&[]);
    let scene = br#"{"shapes": [{"type": "sphere", "center": [0, 0, 0], "radius": 1}]}"#;
    assert_eq!(server.put("/v1/scenes/s", scene).status, 201);
    let body = points_npy(&points(200_000, 8, -2.0, 2.0));
    for _ in 0..5 {
        // Mid-body: promise more than is sent, then go.
        let mut stream = TcpStream::connect(&server.address).unwrap();
        let head = format!(
            "POST /v1/scenes/s/query HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        stream.write_all(head.as_bytes()).unwrap();
        stream.write_all(&body[..1000]).unwrap();
        drop(stream);
        // Mid-response: send everything, read nothing, go.
        let mut stream = TcpStream::connect(&server.address).unwrap();
        let head = format!(
            "POST /v1/scenes/s/query HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        stream.write_all(head.as_bytes()).unwrap();
        stream.write_all(&body).unwrap();
        drop(stream);
    }
    let reply = server.post(
        "/v1/scenes/s/query?fields=distance",
        &points_npy(&[[2.0, 0.0, 0.0]]),
    );
    assert_eq!(reply.status, 200);
    assert_eq!(server.get("/v1/health").status, 200);
}

#[test]
fn bodies_are_read_as_they_arrive() {
    let server = Server::start(&["--max-request-mb", "1"]);
    let scene = br#"{"shapes": [{"type": "sphere", "center": [0, 0, 0], "radius": 1}]}"#;
    assert_eq!(server.put("/v1/scenes/s", scene).status, 201);
    let body = points_npy(&points(5000, 9, -3.0, 3.0));
    let whole = server.post("/v1/scenes/s/query", &body);
    assert_eq!(whole.status, 200, "{}", whole.text());
    // Pieces cut inside the header and inside values: the same answer.
    let pieces: Vec<&[u8]> = [0, 7, 61, 131, 4099, 30001, body.len()]
        .windows(2)
        .map(|w| &body[w[0]..w[1]])
        .collect();
    let in_pieces = post_chunked(&server.address, "/v1/scenes/s/query", &pieces);
    assert_eq!(in_pieces.status, 200, "{}", in_pieces.text());
    assert!(
        in_pieces.body == whole.body,
        "a chunked body answers differently"
    );
    // Without a declared length, 413 as soon as the body passes the limit.
    let big = points_npy(&vec![[0.0; 3]; 262_144]);
    let many: Vec<&[u8]> = big.chunks(256 << 10).collect();
    post_chunked(&server.address, "/v1/scenes/s/query", &many)
        .assert_error(413, &["--max-request-mb"]);
    // A mesh body too, stored as it arrives.
    let fandisk = std::fs::read(meshes().join("fandisk.obj")).unwrap();
    let pieces: Vec<&[u8]> = fandisk.chunks(100_000).collect();
    let put = chunked(&server.address, "PUT", "/v1/meshes/f?format=obj", &pieces);
    assert_eq!(put.status, 201, "{}", put.text());
    assert_eq!(put.json()["triangles"], 12946);
}

#[test]
fn the_paired_route_answers_as_the_cli() {
    let dir = tempdir();
    let d = |name: &str| dir.path().join(name).display().to_string();
    let server = Server::start(&[]);
    let scene_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/scene.json");
    let scene = std::fs::read(&scene_path).unwrap();
    let count = serde_json::from_slice::<serde_json::Value>(&scene).unwrap()["shapes"]
        .as_array()
        .unwrap()
        .len();
    let mut p = points(count, 4, -5.0, 5.0);
    p[1] = [f32::NAN, 0.0, 0.0];
    let p_npy = points_npy(&p);
    std::fs::write(d("p.npy"), &p_npy).unwrap();
    let body = stored_zip(&[("shapes.json", &scene), ("points.npy", &p_npy)]);
    let reply = server.post("/v1/paired?mode=surface&fields=distance,normal", &body);
    assert_eq!(reply.status, 200, "{}", reply.text());
    let want = cli_npz(
        dir.path(),
        &[
            "query",
            "--paired",
            "--shapes",
            &scene_path.display().to_string(),
            "--points",
            &d("p.npy"),
            "--mode",
            "surface",
            "--fields",
            "distance,normal",
        ],
    );
    assert!(reply.body == want, "paired answers differ from the CLI's");
    // One point short of the shapes: 400 naming both counts.
    let short = points_npy(&p[1..]);
    let body = stored_zip(&[("shapes.json", &scene), ("points.npy", &short)]);
    server
        .post("/v1/paired", &body)
        .assert_error(400, &[&count.to_string(), &(count - 1).to_string()]);
}

/// A POST to `path` declaring all of `body` that sends its first `sent` bytes and then
/// nothing: what the server answers when it gives up.
fn stalled_request(server: &Server, path: &str, body: &[u8], sent: usize) -> String {
    let mut stream = TcpStream::connect(&server.address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(&body[..sent]).unwrap();
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw);
    String::from_utf8_lossy(&raw).into_owned()
}

#[test]
fn a_stalled_upload_times_out_with_408() {
    let server = Server::start(&["--request-timeout-s", "1"]);
    let scene = br#"{"shapes": [{"type": "sphere", "center": [0, 0, 0], "radius": 1}]}"#;
    assert_eq!(server.put("/v1/scenes/s", scene).status, 201);
    let body = points_npy(&points(100, 1, -1.0, 1.0));
    let text = stalled_request(&server, "/v1/scenes/s/query", &body, 200);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(text.contains("--request-timeout-s"), "{text}");
    assert_eq!(server.get("/v1/health").status, 200);
    // The same for a body of bodies that stops halfway.
    let bodies =
        br#"{"shapes": [{"type": "capsule", "a": [0, 0, 3], "b": [0, 1, 3], "radius": 0.5}]}"#;
    let text = stalled_request(&server, "/v1/scenes/s/bodies", bodies, 20);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    // (Not a bodies request: its first pipeline build may take longer than this server's 1 s.)
    assert_eq!(server.get("/v1/health").status, 200);
}

#[test]
fn sigterm_finishes_requests_in_flight_and_exits_0() {
    let mut server = Server::start(&[]);
    let igea = std::fs::read(meshes().join("igea.ply")).unwrap();
    assert_eq!(server.put("/v1/meshes/igea?format=ply", &igea).status, 201);
    let address = server.address.clone();
    let in_flight = std::thread::spawn(move || {
        request(&address, "POST", "/v1/meshes/igea/sdf?res=40", &[], &[])
    });
    std::thread::sleep(Duration::from_millis(300));
    server.terminate();
    let reply = in_flight.join().unwrap();
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert!(reply.body.starts_with(b"PK"), "an .npz");
    assert_eq!(server.wait(), Some(0));
    assert!(
        TcpStream::connect(&server.address).is_err(),
        "still accepting after SIGTERM"
    );
}

/// A mesh that needs more memory than the machine has is refused with 507 before its build,
/// the sizes named; the server goes on serving (`--memory-bytes` stands in for a small
/// machine).
#[test]
fn a_mesh_larger_than_memory_is_refused_with_507() {
    let server = Server::start(&["--memory-bytes", "1048576"]);
    let fandisk = std::fs::read(meshes().join("fandisk.obj")).unwrap();
    server
        .put("/v1/meshes/fandisk?format=obj", &fandisk)
        .assert_error(507, &["out of memory", "a mesh of 12946 triangles", "MiB"]);
    let scene = br#"{"shapes": [{"type": "sphere", "center": [0, 0, 0], "radius": 1}]}"#;
    assert_eq!(server.put("/v1/scenes/s", scene).status, 201);
}

/// Two first body requests at once, on two targets, with room in `--max-resident-mb` for one
/// target's body targets only: one is answered, the other refused with 507 (the admission
/// reserves the bytes under the targets' lock, so both cannot see the same free room).
#[test]
fn concurrent_first_body_requests_cannot_pass_the_memory_budget_together() {
    let spheres: Vec<String> = (0..12_000)
        .map(|i| {
            let (x, y, z) = ((i % 30) as f64, ((i / 30) % 20) as f64, (i / 600) as f64);
            format!(r#"{{"type": "sphere", "center": [{x}, {y}, {z}], "radius": 0.3}}"#)
        })
        .collect();
    let scene = format!(r#"{{"shapes": [{}]}}"#, spheres.join(", "));
    let capsule =
        br#"{"shapes": [{"type": "capsule", "a": [0, 0, -3], "b": [1, 0, -3], "radius": 0.5}]}"#;
    let device_bytes = |server: &Server, name: &str| -> u64 {
        let list = server.get("/v1/targets").json();
        let target = list.as_array().unwrap().iter().find(|t| t["name"] == name);
        target.unwrap()["device_bytes"].as_u64().unwrap()
    };
    // Measured first, without a budget: a scene's bytes, and its body targets'.
    let probe = Server::start(&[]);
    assert_eq!(probe.put("/v1/scenes/a", scene.as_bytes()).status, 201);
    let scene_bytes = device_bytes(&probe, "a");
    assert_eq!(probe.post("/v1/scenes/a/bodies", capsule).status, 200);
    let body_bytes = device_bytes(&probe, "a") - scene_bytes;
    let mib = 1u64 << 20;
    let budget_mb = (2 * scene_bytes + body_bytes).div_ceil(mib);
    assert!(
        2 * scene_bytes + body_bytes <= budget_mb * mib
            && budget_mb * mib < 2 * scene_bytes + 2 * body_bytes,
        "no whole MiB between one and two body targets ({scene_bytes}, {body_bytes})"
    );
    let server = Server::start(&["--max-resident-mb", &budget_mb.to_string()]);
    for name in ["a", "b"] {
        let path = format!("/v1/scenes/{name}");
        assert_eq!(server.put(&path, scene.as_bytes()).status, 201);
    }
    let clients: Vec<_> = ["a", "b"]
        .iter()
        .map(|name| {
            let address = server.address.clone();
            let path = format!("/v1/scenes/{name}/bodies");
            std::thread::spawn(move || request(&address, "POST", &path, &[], capsule))
        })
        .collect();
    let replies: Vec<_> = clients.into_iter().map(|c| c.join().unwrap()).collect();
    let mut statuses: Vec<u16> = replies.iter().map(|r| r.status).collect();
    statuses.sort();
    assert_eq!(
        statuses,
        [200, 507],
        "{:?}",
        replies.iter().map(|r| r.text()).collect::<Vec<_>>()
    );
    // The refused one stays refused, and the answered one keeps answering.
    let refused = if replies[0].status == 507 { "a" } else { "b" };
    let answered = if refused == "a" { "b" } else { "a" };
    server
        .post(&format!("/v1/scenes/{refused}/bodies"), capsule)
        .assert_error(507, &["body targets", "--max-resident-mb"]);
    assert_eq!(
        server
            .post(&format!("/v1/scenes/{answered}/bodies"), capsule)
            .status,
        200
    );
}

/// Marks every member of a stored zip as deflated (method 8) in its local and central
/// headers, as numpy.savez_compressed writes them (the tests' zip writer stores only).
fn mark_deflated(zip: &mut [u8]) {
    for at in 0..zip.len().saturating_sub(12) {
        match &zip[at..at + 4] {
            b"PK\x03\x04" => zip[at + 8..at + 10].copy_from_slice(&8u16.to_le_bytes()),
            b"PK\x01\x02" => zip[at + 10..at + 12].copy_from_slice(&8u16.to_le_bytes()),
            _ => {}
        }
    }
}
