//! `closest serve` against hostile and faulty clients (SPEC §7): one client never harms
//! another. Each test starts its own server on a loopback port and stops it; every loop is
//! bounded in count and time.

mod serve_harness;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

use serve_harness::*;

const SCENE: &[u8] = br#"{"shapes": [{"type": "sphere", "center": [0, 0, 0], "radius": 1},
    {"type": "box", "center": [2, 0, 0], "half_extents": [0.5, 0.4, 0.3], "rotation": [0.1, 0.2, 0.3, 0.9]}]}"#;

/// A connection that sends part of a request head and then nothing.
fn half_open(address: &str) -> TcpStream {
    let mut stream = TcpStream::connect(address).unwrap();
    stream
        .write_all(b"GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-A: ")
        .unwrap();
    stream
}

/// Whether the server closed `stream` within `limit` (a read that ends, not one that waits).
fn closed_within(stream: &mut TcpStream, limit: Duration) -> bool {
    stream.set_read_timeout(Some(limit)).unwrap();
    let mut byte = [0u8; 64];
    loop {
        match stream.read(&mut byte) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
            Err(_) => return false,
        }
    }
}

/// The issue's attack: a `.npy` whose declared byte count wraps to 8 in 64 bits, with 8
/// bytes of data, sent among concurrent batched queries; and other malformed bodies beside it.
#[test]
fn malformed_bodies_never_reach_another_clients_batch() {
    // Two batches at once (a hardware GPU's path; lavapipe's default is one).
    let server = Server::start(&["--batch-delay-ms", "200", "--jobs-at-once", "2"]);
    assert_eq!(server.put("/v1/scenes/s", SCENE).status, 201);
    let path = "/v1/scenes/s/query?fields=distance,shape";
    let bodies: Vec<Vec<u8>> = (0..6)
        .map(|k| points_npy(&points(5000, 40 + k, -3.0, 3.0)))
        .collect();
    let alone: Vec<Vec<u8>> = bodies.iter().map(|b| server.post(path, b).body).collect();
    let mut wrapping = npy_bytes("<f8", &[768_614_336_404_564_651, 3], &[0u8; 8]);
    let attacks: Vec<(Vec<u8>, u16)> = vec![
        (std::mem::take(&mut wrapping), 400),
        (npy_bytes("<f4", &[5, 3], &[0u8; 4 * 14]), 400),
        (npy_bytes("<f4", &[5, 3], &[0u8; 4 * 16]), 400),
        (npy_bytes("<f4", &[4, 2], &[0u8; 4 * 8]), 400),
        (npy_bytes("<f4", &[100_000_000, 3], &[0u8; 8]), 413),
        (b"\x93NUMPY\x01\x00\xff\xff{'descr'".to_vec(), 415),
    ];
    for round in 0..3 {
        let address = server.address.clone();
        let clients: Vec<_> = bodies
            .iter()
            .cloned()
            .map(|body| {
                let address = address.clone();
                std::thread::spawn(move || request(&address, "POST", path, &[], &body))
            })
            .collect();
        let attackers: Vec<_> = attacks
            .iter()
            .cloned()
            .map(|(body, status)| {
                let address = address.clone();
                std::thread::spawn(move || (request(&address, "POST", path, &[], &body), status))
            })
            .collect();
        for (k, client) in clients.into_iter().enumerate() {
            let reply = client.join().unwrap();
            assert_eq!(reply.status, 200, "{}", reply.text());
            assert!(
                reply.body == alone[k],
                "round {round}, client {k}: a malformed body beside it changed its answer"
            );
        }
        for attacker in attackers {
            let (reply, status) = attacker.join().unwrap();
            assert_eq!(reply.status, status, "{}", reply.text());
        }
    }
    assert_eq!(metric(&server, "closest_queue_depth"), 0.0);
}

#[test]
fn half_open_and_idle_connections_are_closed_by_their_timeouts() {
    let server = Server::start(&["--header-timeout-s", "1", "--idle-timeout-s", "2"]);
    let started = Instant::now();
    let mut stalled: Vec<TcpStream> = (0..50).map(|_| half_open(&server.address)).collect();
    // Meanwhile others are served.
    assert_eq!(server.get("/v1/health").status, 200);
    for stream in &mut stalled {
        assert!(
            closed_within(stream, Duration::from_secs(10)),
            "a half-open connection stayed"
        );
    }
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(900) && waited < Duration::from_secs(6),
        "the header timeout of 1 s closed them after {waited:?}"
    );
    // A silent new connection is closed by the header timeout too.
    let mut silent = TcpStream::connect(&server.address).unwrap();
    assert!(closed_within(&mut silent, Duration::from_secs(10)));
    // A keep-alive connection: served twice, then closed after 2 s without traffic, not
    // after the header timeout of 1 s.
    let mut alive = TcpStream::connect(&server.address).unwrap();
    for _ in 0..2 {
        alive
            .write_all(b"GET /v1/health/live HTTP/1.1\r\nHost: localhost\r\n\r\n")
            .unwrap();
        let mut answer = [0u8; 1024];
        alive
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let n = alive.read(&mut answer).unwrap();
        assert!(answer[..n].starts_with(b"HTTP/1.1 200"));
    }
    let idle_from = Instant::now();
    std::thread::sleep(Duration::from_millis(1500));
    alive
        .write_all(b"GET /v1/health/live HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .expect("still open past the header timeout");
    let mut answer = [0u8; 1024];
    let n = alive.read(&mut answer).unwrap();
    assert!(answer[..n].starts_with(b"HTTP/1.1 200"));
    let idle_from = idle_from.max(Instant::now());
    assert!(closed_within(&mut alive, Duration::from_secs(10)));
    assert!(idle_from.elapsed() >= Duration::from_millis(1800));
}

#[test]
fn sigterm_ends_within_the_drain_timeout_whatever_clients_do() {
    let mut server = Server::start(&["--drain-timeout-s", "2", "--header-timeout-s", "60"]);
    assert_eq!(server.put("/v1/scenes/s", SCENE).status, 201);
    let stalled: Vec<TcpStream> = (0..200).map(|_| half_open(&server.address)).collect();
    // An upload that stalls mid-body: a request in flight that never finishes by itself.
    let mut uploading = TcpStream::connect(&server.address).unwrap();
    uploading
        .write_all(
            b"PUT /v1/scenes/t HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000\r\n\r\n{\"sha",
        )
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let started = Instant::now();
    server.terminate();
    assert_eq!(server.wait(), Some(0));
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(5),
        "SIGTERM took {took:?} with a drain timeout of 2 s"
    );
    drop(stalled);
}

#[test]
fn ready_answers_503_while_draining() {
    let mut server = Server::start(&["--drain-timeout-s", "10"]);
    assert_eq!(server.get("/v1/health/ready").status, 200);
    // A keep-alive connection held open with a request in flight (a stalled upload) keeps
    // the server draining; a second kept-alive connection asks if it is ready.
    let mut asking = TcpStream::connect(&server.address).unwrap();
    asking
        .write_all(b"GET /v1/health/live HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .unwrap();
    let mut answer = [0u8; 2048];
    asking
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let _ = asking.read(&mut answer).unwrap();
    let mut uploading = TcpStream::connect(&server.address).unwrap();
    uploading
        .write_all(b"PUT /v1/scenes/t HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000\r\n\r\n{")
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    server.terminate();
    std::thread::sleep(Duration::from_millis(300));
    // The kept-alive connection was idle, so the drain closed it; the stalled upload holds
    // the server open meanwhile. A new connection is refused: the listener is gone.
    assert!(closed_within(&mut asking, Duration::from_secs(5)));
    assert!(TcpStream::connect(&server.address).is_err());
    drop(uploading);
    assert_eq!(server.wait(), Some(0));
}

#[test]
fn a_foreign_host_is_refused_without_a_token() {
    let server = Server::start(&["--allow-host", "closest.internal"]);
    for host in [
        "evil.example",
        "evil.example:7341",
        "127.0.0.1.evil.example",
        "10.1.2.3",
    ] {
        server
            .request("GET", "/v1/health", &[("Host", host)], &[])
            .assert_error(421, &["not served", "--allow-host"]);
    }
    for host in [
        "localhost",
        "127.0.0.1:9",
        "[::1]:80",
        "closest.internal",
        "Closest.Internal:1",
    ] {
        let reply = server.request("GET", "/v1/health", &[("Host", host)], &[]);
        assert_eq!(reply.status, 200, "{host}: {}", reply.text());
    }
    // The authority is the target's when it is absolute (RFC 9112 §3.2.2), and a request
    // that names two Hosts, or none in HTTP/1.1, is refused: a proxy may have believed the
    // other one.
    let status_of = |raw: &str| -> u16 {
        let reply = raw_reply(&server.address, raw.as_bytes());
        reply
            .get(9..12)
            .and_then(|code| code.parse().ok())
            .unwrap_or_else(|| panic!("{raw:?}: {reply}"))
    };
    let end = "Connection: close\r\n\r\n";
    for (raw, status) in [
        (
            format!("GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: evil.example\r\n{end}"),
            400,
        ),
        (
            format!("GET /v1/health HTTP/1.1\r\nHost: evil.example\r\nHost: localhost\r\n{end}"),
            400,
        ),
        (format!("GET /v1/health HTTP/1.1\r\n{end}"), 400),
        (format!("GET /v1/health HTTP/1.0\r\n{end}"), 421),
        (
            format!("GET http://evil.example/v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n{end}"),
            421,
        ),
        (
            format!("GET http://localhost/v1/health HTTP/1.1\r\nHost: evil.example\r\n{end}"),
            200,
        ),
        (
            format!("GET /v1/health HTTP/1.1\r\nHost: closest.internal.\r\n{end}"),
            200,
        ),
    ] {
        assert_eq!(status_of(&raw), status, "{raw:?}");
    }
    // With a token the token is the guard: any Host that bears it is served.
    let dir = tempdir();
    let token = dir.path().join("token");
    std::fs::write(&token, "s3cret\n").unwrap();
    let guarded = Server::start(&["--token-file", token.to_str().unwrap()]);
    let reply = guarded.request(
        "GET",
        "/v1/targets",
        &[
            ("Host", "closest.example.org"),
            ("Authorization", "Bearer s3cret"),
        ],
        &[],
    );
    assert_eq!(reply.status, 200, "{}", reply.text());
    let reply = raw_reply(
        &guarded.address,
        b"GET /v1/health HTTP/1.1\r\nHost: a.example\r\nHost: b.example\r\nConnection: close\r\n\r\n",
    );
    assert!(reply.starts_with("HTTP/1.1 400 "), "{reply}");
    assert!(reply.contains("2 Host headers"), "{reply}");
}

#[test]
fn bodies_in_a_coding_the_server_does_not_decode_are_415() {
    // hyper reads `Transfer-Encoding: gzip, chunked` as chunked alone and leaves any
    // Content-Encoding to the route: the coded bytes would be read as the file itself.
    let server = Server::start(&[]);
    assert_eq!(server.put("/v1/scenes/s", SCENE).status, 201);
    let body = points_npy(&points(4, 1, -1.0, 1.0));
    let path = "/v1/scenes/s/query";
    for (name, value) in [
        ("Content-Encoding", "gzip"),
        ("Content-Encoding", "identity, br"),
        ("Transfer-Encoding", "gzip, chunked"),
    ] {
        let mut head = format!(
            "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n{name}: {value}\r\n"
        )
        .into_bytes();
        if name == "Transfer-Encoding" {
            head.extend(format!("\r\n{:x}\r\n", body.len()).bytes());
            head.extend(&body);
            head.extend(b"\r\n0\r\n\r\n");
        } else {
            head.extend(format!("Content-Length: {}\r\n\r\n", body.len()).bytes());
            head.extend(&body);
        }
        let reply = raw_reply(&server.address, &head);
        assert!(
            reply.starts_with("HTTP/1.1 415 "),
            "{name}: {value}: {reply}"
        );
        assert!(reply.contains("does not decode"), "{reply}");
    }
    // Identity and chunked are the body itself.
    let reply = request(
        &server.address,
        "POST",
        path,
        &[("Content-Encoding", "identity")],
        &body,
    );
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert_eq!(
        post_chunked(&server.address, path, &[&body[..7], &body[7..]]).status,
        200
    );
}

#[test]
fn made_up_methods_and_paths_do_not_grow_the_metrics() {
    let server = Server::start(&[]);
    let label_sets = |server: &Server| {
        server
            .get("/metrics")
            .text()
            .lines()
            .filter(|l| l.starts_with("closest_requests_total{"))
            .count()
    };
    let send = |k: usize| {
        let method = format!("M{:05}", k * 7919 % 100_000);
        let path = format!("/x{k}/{}", k * 31);
        let reply = server.request(&method, &path, &[], &[]);
        assert!(reply.status >= 400, "{method} {path}: {}", reply.status);
    };
    for k in 0..5 {
        send(k);
    }
    // The first look at /metrics counts itself from then on.
    label_sets(&server);
    let before = label_sets(&server);
    for k in 5..305 {
        send(k);
    }
    assert_eq!(
        label_sets(&server),
        before,
        "300 made-up requests added label sets"
    );
    let text = server.get("/metrics").text();
    assert!(text.contains("route=\"other\""), "{text}");
    assert!(!text.contains("M0"), "a made-up method became a label");
}

/// Messages quote what a client sent; a client that sends 60 KB of it (a name, a field list)
/// gets a message of at most about 2 KB back, saying how much was cut.
#[test]
fn error_messages_quote_at_most_2_kb_of_what_a_client_sent() {
    let server = Server::start(&[]);
    let scene = br#"{"shapes": [{"type": "sphere", "center": [0, 0, 0], "radius": 1}]}"#;
    assert_eq!(server.put("/v1/scenes/s", scene).status, 201);
    // 10,000 `é`s, percent-encoded: the cut must fall on a character's boundary.
    let long = "%C3%A9".repeat(10_000);
    let points = points_npy(&points(4, 1, -1.0, 1.0));
    for (method, path, body) in [
        (
            "DELETE",
            format!("/v1/meshes/{}", "a".repeat(60_000)),
            Vec::new(),
        ),
        ("POST", format!("/v1/segments?fields={long}"), Vec::new()),
        (
            "PUT",
            format!("/v1/scenes/s{}", "b".repeat(60_000)),
            scene.to_vec(),
        ),
        (
            "POST",
            format!("/v1/scenes/s/query?fields={}", "c".repeat(60_000)),
            points,
        ),
    ] {
        let reply = server.request(method, &path, &[], &body);
        assert!(
            reply.status == 400 || reply.status == 404,
            "{}",
            reply.status
        );
        let message = reply.json()["error"].as_str().unwrap().to_string();
        assert!(
            message.len() < 2200 && message.ends_with("bytes more)"),
            "{method}: {} bytes: {}",
            message.len(),
            message.chars().take(80).collect::<String>()
        );
    }
    assert_eq!(server.get("/v1/health").status, 200);
}

/// Threads of the server process (Linux).
fn threads(server: &Server) -> usize {
    let status = std::fs::read_to_string(format!("/proc/{}/status", server.child.id())).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn many_targets_share_a_bounded_pool_of_threads() {
    let server = Server::start(&["--workers", "2", "--max-targets", "300"]);
    let scene = |k: usize| {
        format!(r#"{{"shapes": [{{"type": "sphere", "center": [{k}, 0, 0], "radius": 1}}]}}"#)
    };
    for k in 0..300 {
        let reply = server.put(&format!("/v1/scenes/s{k}"), scene(k).as_bytes());
        assert_eq!(reply.status, 201, "{}", reply.text());
    }
    // One past the cap is refused; a replacement is not one more.
    server
        .put("/v1/scenes/one-more", scene(0).as_bytes())
        .assert_error(507, &["--max-targets"]);
    assert_eq!(server.put("/v1/scenes/s7", scene(7).as_bytes()).status, 200);
    // Every target answers, from the shared pool.
    let body = points_npy(&[[0.0, 0.0, 0.0]]);
    for k in (0..300).step_by(37) {
        let reply = server.post(&format!("/v1/scenes/s{k}/query?fields=distance"), &body);
        assert_eq!(reply.status, 200, "{}", reply.text());
    }
    let count = threads(&server);
    assert!(count <= 64, "{count} threads for 300 targets");
}

#[test]
fn a_panic_in_one_request_costs_that_request_only() {
    let server = Server::start(&[
        "--test-hooks",
        "--batch-delay-ms",
        "20",
        "--jobs-at-once",
        "2",
    ]);
    assert_eq!(server.put("/v1/scenes/s", SCENE).status, 201);
    let path = "/v1/scenes/s/query?fields=distance,shape";
    let body = points_npy(&points(2000, 7, -3.0, 3.0));
    let lone = server.post(path, &body);
    assert_eq!(lone.status, 200);
    for (fault, needle) in [
        ("panic-worker", "panicked"),
        ("panic-handler", "a panic in the server"),
    ] {
        for _ in 0..3 {
            server
                .request("POST", path, &[("X-Closest-Test-Fault", fault)], &body)
                .assert_error(500, &[needle]);
            let next = server.post(path, &body);
            assert_eq!(next.status, 200, "after {fault}: {}", next.text());
            assert!(next.body == lone.body, "after {fault}: a different answer");
        }
    }
    // A panicking request batched with others (a long batch delay gathers them): its own
    // 500 only; the others get their lone answers.
    let batched = Server::start(&["--test-hooks", "--batch-delay-ms", "1000"]);
    assert_eq!(batched.put("/v1/scenes/s", SCENE).status, 201);
    let bodies: Vec<Vec<u8>> = (0..4)
        .map(|k| points_npy(&points(500, 20 + k, -3.0, 3.0)))
        .collect();
    let alone: Vec<Vec<u8>> = bodies.iter().map(|b| batched.post(path, b).body).collect();
    let batches_before = metric(&batched, "closest_batches_total");
    let clients: Vec<_> = bodies
        .iter()
        .cloned()
        .enumerate()
        .map(|(k, body)| {
            let address = batched.address.clone();
            std::thread::spawn(move || {
                let fault: &[(&str, &str)] = if k == 2 {
                    &[("X-Closest-Test-Fault", "panic-worker")]
                } else {
                    &[]
                };
                request(&address, "POST", path, fault, &body)
            })
        })
        .collect();
    for (k, client) in clients.into_iter().enumerate() {
        let reply = client.join().unwrap();
        if k == 2 {
            reply.assert_error(500, &["panicked"]);
        } else {
            assert_eq!(reply.status, 200, "client {k}: {}", reply.text());
            assert!(reply.body == alone[k], "client {k}: a different answer");
        }
    }
    // They were batched: one shared call that failed, then one call each.
    assert_eq!(
        metric(&batched, "closest_batches_total") - batches_before,
        5.0
    );
    assert_eq!(metric(&server, "closest_queue_depth"), 0.0);
    assert_eq!(server.get("/v1/health/ready").status, 200);
    // The bodies route runs on the worker pool, unbatched: a panic there is its own 500, and
    // the next bodies request gets the lone answer.
    let bodies_path = "/v1/scenes/s/bodies";
    let capsule =
        br#"{"shapes": [{"type": "capsule", "a": [0, 0, 3], "b": [0, 1, 3], "radius": 0.5}]}"#;
    let lone_bodies = server.post(bodies_path, capsule);
    assert_eq!(lone_bodies.status, 200, "{}", lone_bodies.text());
    for _ in 0..3 {
        server
            .request(
                "POST",
                bodies_path,
                &[("X-Closest-Test-Fault", "panic-worker")],
                capsule,
            )
            .assert_error(500, &["panicked"]);
        let next = server.post(bodies_path, capsule);
        assert!(
            next.status == 200 && next.body == lone_bodies.body,
            "after a panic"
        );
    }
    // Without --test-hooks the header does nothing.
    let plain = Server::start(&[]);
    assert_eq!(plain.put("/v1/scenes/s", SCENE).status, 201);
    let reply = plain.request(
        "POST",
        path,
        &[("X-Closest-Test-Fault", "panic-worker")],
        &body,
    );
    assert_eq!(reply.status, 200);
}

#[test]
fn a_lost_device_is_reopened_and_the_targets_uploaded_again() {
    let server = Server::start(&["--test-hooks", "--jobs-at-once", "2"]);
    assert_eq!(server.put("/v1/scenes/s", SCENE).status, 201);
    let bunny = std::fs::read(meshes().join("stanford-bunny.obj")).unwrap();
    assert_eq!(server.put("/v1/meshes/b?format=obj", &bunny).status, 201);
    let scene_path = "/v1/scenes/s/query?fields=distance,shape";
    let mesh_path = "/v1/meshes/b/query?sign=pseudonormal";
    let scene_body = points_npy(&points(1000, 3, -3.0, 3.0));
    let mesh_body = points_npy(&points(1000, 4, -0.12, 0.2));
    let scene_before = server.post(scene_path, &scene_body);
    let mesh_before = server.post(mesh_path, &mesh_body);
    let lost = server.request(
        "POST",
        scene_path,
        &[("X-Closest-Test-Fault", "lose-device")],
        &scene_body,
    );
    assert!(lost.status == 503 || lost.status == 500, "{}", lost.text());
    // Ready tells the truth meanwhile, and is ready again once the targets are back.
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let ready = server.get("/v1/health/ready");
        if ready.status == 200 {
            break;
        }
        assert_eq!(ready.status, 503, "{}", ready.text());
        let query = server.post(scene_path, &scene_body);
        assert!(
            query.status == 503 || query.status == 200,
            "{}",
            query.text()
        );
        assert!(
            Instant::now() < deadline,
            "the device was not reopened in 120 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let scene_after = server.post(scene_path, &scene_body);
    let mesh_after = server.post(mesh_path, &mesh_body);
    assert_eq!(scene_after.status, 200, "{}", scene_after.text());
    assert!(
        scene_after.body == scene_before.body,
        "the scene answers differently"
    );
    assert!(
        mesh_after.body == mesh_before.body,
        "the mesh answers differently"
    );
    let targets = server.get("/v1/targets").json();
    assert_eq!(targets.as_array().unwrap().len(), 2, "{targets}");
}

#[test]
fn connections_and_bodies_held_at_once_are_capped() {
    let server = Server::start(&["--max-connections", "4", "--max-inflight-mb", "1"]);
    let held: Vec<TcpStream> = (0..4).map(|_| half_open(&server.address)).collect();
    std::thread::sleep(Duration::from_millis(200));
    // A fifth is closed as it arrives.
    let mut fifth = TcpStream::connect(&server.address).unwrap();
    let _ = fifth.write_all(b"GET /v1/health HTTP/1.1\r\nHost: localhost\r\n\r\n");
    assert!(closed_within(&mut fifth, Duration::from_secs(5)));
    drop(held);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(metric(&server, "closest_refused_connections_total"), 1.0);
    // Bodies: a declared 2 MiB (under --max-request-mb) passes --max-inflight-mb 1: 503.
    let mut stream = TcpStream::connect(&server.address).unwrap();
    stream
        .write_all(b"PUT /v1/scenes/big HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2097152\r\nConnection: close\r\n\r\n")
        .unwrap();
    let reply = read_reply(stream);
    assert_eq!(reply.status, 503, "{}", reply.text());
    assert!(
        reply.text().contains("--max-inflight-mb"),
        "{}",
        reply.text()
    );
    assert_eq!(
        reply.headers.get("retry-after").map(String::as_str),
        Some("1")
    );
    // Nothing stays held.
    assert_eq!(metric(&server, "closest_inflight_body_bytes"), 0.0);
    assert_eq!(server.put("/v1/scenes/s", SCENE).status, 201);
}

/// A client that declares a large body and stalls holds only the bytes it sent: the declared
/// length was held up front, so one such connection refused every other body (503) for
/// `--request-timeout-s`. Its request ends at `--idle-timeout-s` (408), holding nothing.
#[test]
fn a_stalled_body_holds_only_what_it_sent_and_ends_at_the_idle_timeout() {
    let server = Server::start(&["--max-inflight-mb", "1", "--idle-timeout-s", "2"]);
    let mut stalled = TcpStream::connect(&server.address).unwrap();
    stalled
        .write_all(b"PUT /v1/scenes/stalled HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1048570\r\n\r\n{\"shapes\"")
        .unwrap();
    let sent = std::time::Instant::now();
    while metric(&server, "closest_inflight_body_bytes") != 9.0 {
        assert!(
            sent.elapsed() < Duration::from_secs(10),
            "the body's bytes were never held"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(server.put("/v1/scenes/s", SCENE).status, 201);
    // A declared body that cannot fit now is still refused at once.
    let mut large = TcpStream::connect(&server.address).unwrap();
    large
        .write_all(b"PUT /v1/scenes/large HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1048570\r\nConnection: close\r\n\r\n")
        .unwrap();
    read_reply(large).assert_error(503, &["--max-inflight-mb"]);
    stalled
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let reply = read_reply(stalled);
    reply.assert_error(408, &["sent nothing", "--idle-timeout-s"]);
    assert!(
        sent.elapsed() < Duration::from_secs(15),
        "{:?}",
        sent.elapsed()
    );
    assert_eq!(metric(&server, "closest_inflight_body_bytes"), 0.0);
}

/// Clients that ask for large answers and never read them: each answer is held against
/// `--max-inflight-mb` until its client takes it or goes, so past the cap the next large
/// request is 503, small ones are still answered, and all is given back when they go.
#[test]
fn answers_clients_do_not_read_are_held_within_the_inflight_cap() {
    // Grids up to 2·10^9 samples are allowed, far more than the cap can hold.
    let server = Server::start(&[
        "--max-inflight-mb",
        "40",
        "--max-grid-samples",
        "2000000000",
    ]);
    let tetrahedron = b"v 0 0 0\nv 1 0 0\nv 0 1 0\nv 0 0 1\nf 1 3 2\nf 1 2 4\nf 1 4 3\nf 2 3 4\n";
    assert_eq!(
        server.put("/v1/meshes/m?format=obj", tetrahedron).status,
        201
    );
    // 160³ samples: an answer of 16.4 MB, far more than the sockets' buffers take.
    let grid = "/v1/meshes/m/sdf?res=160";
    let answer_bytes = 4.0 * 160f64.powi(3);
    let stalled: Vec<TcpStream> = (0..2)
        .map(|_| {
            let mut stream = TcpStream::connect(&server.address).unwrap();
            let head =
                format!("POST {grid} HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n");
            stream.write_all(head.as_bytes()).unwrap();
            stream
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let held = metric(&server, "closest_inflight_body_bytes");
        if held >= 2.0 * answer_bytes {
            break;
        }
        // Twice in CI runs (2026-11-29, 2026-11-30) they were not, after 120 s, with nothing
        // held and neither request logged: the two first signed requests on the new mesh had
        // deadlocked making its `auto` check (`sync::computed_once`, tests/auto_sign.rs). Should
        // it happen again, what the server's threads are doing says why.
        assert!(
            Instant::now() < deadline,
            "the stalled answers were never made: {held} bytes held; the server's log:\n{}\n\
             its threads:\n{}",
            server.log.lock().unwrap().join("\n"),
            server.threads_report()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let refused = server.post(grid, &[]);
    refused.assert_error(503, &["--max-inflight-mb"]);
    assert_eq!(
        refused.headers.get("retry-after").map(String::as_str),
        Some("1")
    );
    let small = server.post("/v1/meshes/m/query", &points_npy(&points(5, 1, -1.0, 2.0)));
    assert_eq!(small.status, 200, "{}", small.text());
    drop(stalled);
    let deadline = Instant::now() + Duration::from_secs(30);
    while metric(&server, "closest_inflight_body_bytes") > 0.0 {
        assert!(
            Instant::now() < deadline,
            "the gone clients' answers are still held"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // An answer larger than the cap itself could never be held: 400, not a 503 to retry,
    // and before any sample is computed (1200³ samples would take the server many minutes
    // and 6.9 GB).
    for res in [220, 1200] {
        server
            .post(&format!("/v1/meshes/m/sdf?res={res}"), &[])
            .assert_error(400, &["the answer takes", "--max-inflight-mb", "fewer"]);
    }
    let taken = server.post(grid, &[]);
    assert_eq!(taken.status, 200, "{}", taken.text());
    assert!(taken.body.len() as f64 > answer_bytes);
    assert_eq!(metric(&server, "closest_inflight_body_bytes"), 0.0);
}

/// A query's answer is held with its body before its work: one whose body and answer the cap
/// could never hold together is 400 at once (before, it was computed, then refused with a 503
/// that no retry could pass); with fewer fields it is answered, and nothing stays held.
#[test]
fn a_query_is_held_with_its_answer_before_its_work() {
    let server = Server::start(&["--max-inflight-mb", "1"]);
    let tetrahedron = b"v 0 0 0\nv 1 0 0\nv 0 1 0\nv 0 0 1\nf 1 3 2\nf 1 2 4\nf 1 4 3\nf 2 3 4\n";
    assert_eq!(
        server.put("/v1/meshes/m?format=obj", tetrahedron).status,
        201
    );
    // 30,000 points: a body of 360 kB and, with every field, an answer of 960 kB; each
    // alone under the cap of 1 MiB, together over it.
    let body = points_npy(&points(30_000, 1, -1.0, 2.0));
    server.post("/v1/meshes/m/query", &body).assert_error(
        400,
        &[
            "the answer takes 960000 bytes beside the request's",
            "fewer",
        ],
    );
    let answered = server.post("/v1/meshes/m/query?fields=distance", &body);
    assert_eq!(answered.status, 200, "{}", answered.text());
    assert!(answered.body.len() > 120_000);
    let deadline = Instant::now() + Duration::from_secs(10);
    while metric(&server, "closest_inflight_body_bytes") > 0.0 {
        assert!(Instant::now() < deadline, "a taken answer is still held");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn requests_are_logged_with_their_id_and_never_a_token() {
    let dir = tempdir();
    let token = dir.path().join("token");
    std::fs::write(&token, "very-secret-token\n").unwrap();
    let server = Server::start(&[
        "--token-file",
        token.to_str().unwrap(),
        "--log-format",
        "json",
    ]);
    let auth = ("Authorization", "Bearer very-secret-token");
    let reply = server.request(
        "PUT",
        "/v1/scenes/s",
        &[auth, ("X-Request-Id", "abc-123")],
        SCENE,
    );
    assert_eq!(reply.status, 201);
    assert_eq!(
        reply.headers.get("x-request-id").map(String::as_str),
        Some("abc-123")
    );
    let body = points_npy(&points(10, 1, -1.0, 1.0));
    let query = server.request("POST", "/v1/scenes/s/query", &[auth], &body);
    let made = query
        .headers
        .get("x-request-id")
        .cloned()
        .expect("an id made");
    assert!(made.len() >= 8);
    // A hostile id is replaced, not echoed.
    let odd = server.request(
        "GET",
        "/v1/targets",
        &[auth, ("X-Request-Id", "a b\"c")],
        &[],
    );
    assert_ne!(
        odd.headers.get("x-request-id").map(String::as_str),
        Some("a b\"c")
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    let lines = loop {
        let lines = server.log.lock().unwrap().clone();
        if lines.iter().filter(|l| l.contains("request_id")).count() >= 3
            || Instant::now() > deadline
        {
            break lines;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    for line in &lines {
        assert!(
            !line.contains("very-secret-token"),
            "a token in the log: {line}"
        );
    }
    let entries: Vec<serde_json::Value> = lines
        .iter()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let put = entries
        .iter()
        .find(|e| e["request_id"] == "abc-123")
        .expect("the PUT's line");
    assert_eq!(put["status"], 201);
    assert_eq!(put["method"], "PUT");
    let post = entries
        .iter()
        .find(|e| e["request_id"] == made.as_str())
        .expect("the query's line");
    assert_eq!(post["target"], "s");
    assert_eq!(post["rows"], 10);
    assert_eq!(post["route"], "POST /v1/scenes/{name}/query");
    for field in [
        "bytes_in",
        "bytes_out",
        "queue_wait_ms",
        "device_ms",
        "ms",
        "timestamp",
    ] {
        assert!(!post[field].is_null(), "no {field} in {post}");
    }
}

/// The servers' private directories under `tmp` (the TMPDIR a test gave its server).
fn private_dirs(tmp: &std::path::Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(tmp)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("closest-serve-")
        })
        .collect()
}

#[test]
fn uploaded_files_are_private_and_removed_on_every_path() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempdir();
    let server = Server::start_with(&[], &[("TMPDIR", tmp.path().as_os_str())]);
    let dirs = private_dirs(tmp.path());
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    let private = &dirs[0];
    assert_eq!(
        std::fs::metadata(private).unwrap().permissions().mode() & 0o777,
        0o700
    );
    // An upload that stalls mid-body: its file is there, 0600, while the body comes.
    let fandisk = std::fs::read(meshes().join("fandisk.obj")).unwrap();
    let mut stream = TcpStream::connect(&server.address).unwrap();
    let head = format!(
        "PUT /v1/meshes/f?format=obj HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {}\r\n\r\n",
        fandisk.len()
    );
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(&fandisk[..fandisk.len() / 2]).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let file = loop {
        let files: Vec<_> = std::fs::read_dir(private)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        if let Some(file) = files.first() {
            break file.clone();
        }
        assert!(Instant::now() < deadline, "no file while the body arrives");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    // The client goes away: the file goes too.
    drop(stream);
    let deadline = Instant::now() + Duration::from_secs(10);
    while file.exists() {
        assert!(
            Instant::now() < deadline,
            "an abandoned upload's file stayed"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // A bad mesh and a good one: no file left either way.
    server
        .put("/v1/meshes/bad?format=obj", b"v 0 0 0\nf 1 2 3\n")
        .assert_error(400, &[]);
    assert_eq!(server.put("/v1/meshes/f?format=obj", &fandisk).status, 201);
    assert_eq!(std::fs::read_dir(private).unwrap().count(), 0);
    let mut server = server;
    server.terminate();
    assert_eq!(server.wait(), Some(0));
    assert!(
        !private.exists(),
        "the private directory outlived the server"
    );
}

/// Large bodies are parsed off the runtime's threads: two scene uploads of ~60 MB of JSON
/// at once (as many as the runtime has threads with `--workers 2`) held both for the seconds
/// their parse took, and health checks waited as long (3.1 s against uploads of 3.2 s). And
/// shape by shape: a value tree of a whole scene took ~15 times its bytes.
#[test]
fn parsing_large_bodies_does_not_stall_other_connections_or_take_many_times_their_memory() {
    let server = Server::start(&["--workers", "2", "--max-request-mb", "512"]);
    let before = peak_bytes(&server);
    let mut json = String::from(r#"{"shapes": ["#);
    for i in 0..500_000 {
        json += &format!(
            r#"{{"type": "box", "center": [{}.25, {}.5, -3.125], "half_extents": [0.5, 0.25, 1.5], "rotation": [0, 0, 0.38268343, 0.92387953]}}, "#,
            i % 97,
            i % 89
        );
    }
    // Refused once parsed, so that no build follows: the parse is all the work.
    json += r#"{"type": "teapot"}]}"#;
    let json = std::sync::Arc::new(json.into_bytes());
    let uploads: Vec<_> = (0..2)
        .map(|k| {
            let (address, json) = (server.address.clone(), json.clone());
            std::thread::spawn(move || {
                let started = Instant::now();
                let reply = request(&address, "PUT", &format!("/v1/scenes/big{k}"), &[], &json);
                (reply.status, started.elapsed())
            })
        })
        .collect();
    let mut slowest = Duration::ZERO;
    while uploads.iter().any(|u| !u.is_finished()) {
        let asked = Instant::now();
        assert_eq!(server.get("/v1/health/live").status, 200);
        slowest = slowest.max(asked.elapsed());
        std::thread::sleep(Duration::from_millis(20));
    }
    for upload in uploads {
        let (status, took) = upload.join().unwrap();
        assert_eq!(status, 400);
        // Generous for a loaded machine; before, the health check waited about as long as
        // the uploads took.
        assert!(
            slowest < took / 3,
            "a health check waited {slowest:?} while uploads took {took:?}"
        );
    }
    // Both bodies held, each with its shapes: a few times their bytes at most (the value
    // tree of both took 2.3 GB for these 120 MB).
    let grown = peak_bytes(&server) - before;
    let bodies = 2 * json.len() as u64;
    assert!(
        grown < 6 * bodies,
        "the server grew by {grown} bytes for {bodies} bytes of bodies"
    );
}

/// The most memory the server process has held (VmHWM).
fn peak_bytes(server: &Server) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", server.child.id()));
    let status = status.expect("the server's /proc status");
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib * 1024
}

/// One shape's long field once took 30–40 times its text in a JSON value tree (a 160 MB body
/// of hull points held 6.5 GB, past any `--max-inflight-mb`): a field no kind reads is now
/// skipped and a hull's points read as coordinates.
#[test]
fn one_long_field_does_not_take_many_times_its_bytes() {
    let server = Server::start(&["--max-request-mb", "512"]);
    let before = peak_bytes(&server);
    let zeros = "0,".repeat(20_000_000);
    let junk = format!(
        r#"{{"shapes": [{{"type": "sphere", "center": [0, 0, 0], "radius": 1, "junk": [{zeros}0]}}]}}"#
    );
    let reply = request(
        &server.address,
        "PUT",
        "/v1/scenes/junk",
        &[],
        junk.as_bytes(),
    );
    assert_eq!(reply.status, 201, "{}", reply.text());
    // A hull refused once read (its last point beyond f32), so that no build follows.
    let points = "[1,2,3],".repeat(5_000_000);
    let hull =
        format!(r#"{{"shapes": [{{"type": "convex_hull", "points": [{points}[0,1e39,0]]}}]}}"#);
    let reply = request(
        &server.address,
        "PUT",
        "/v1/scenes/hull",
        &[],
        hull.as_bytes(),
    );
    assert_eq!(reply.status, 400);
    assert!(
        reply.text().contains("points[5000000]") && reply.text().contains("1e39"),
        "{}",
        reply.text()
    );
    // The body itself, and the hull's points at 24 bytes each (3 times their 8 bytes here).
    let grown = peak_bytes(&server) - before;
    let largest = junk.len().max(hull.len()) as u64;
    assert!(
        grown < 5 * largest,
        "the server grew by {grown} bytes for bodies of {} and {} bytes",
        junk.len(),
        hull.len()
    );
}

/// A glTF's JSON was parsed whole into a value tree: an 80 MB `.glb` of zeros under `extras`
/// held 2.7 GB. Fields no glTF reading looks at are now skipped as read, and an upload keeps at
/// most 2^22 values of the rest.
#[test]
fn a_gltfs_json_takes_memory_for_what_the_mesh_needs_only() {
    let server = Server::start(&["--max-request-mb", "512"]);
    let before = peak_bytes(&server);
    let gltf = |extra: &str, nodes: &str| {
        format!(
            r#"{{"asset": {{"version": "2.0"}}, {extra}
                "meshes": [{{"primitives": [{{"attributes": {{"POSITION": 0}}}}]}}],
                "nodes": [{{"mesh": 0}}{nodes}], "scenes": [{{"nodes": [0]}}],
                "accessors": [{{"bufferView": 0, "componentType": 5126, "count": 3, "type": "VEC3"}}],
                "bufferViews": [{{"buffer": 0, "byteLength": 36}}],
                "buffers": [{{"byteLength": 36,
                    "uri": "data:application/octet-stream;base64,AAAAAAAAAAAAAAAAAACAPwAAAAAAAAAAAAAAAAAAgD8AAAAA"}}]}}"#
        )
    };
    let zeros = "0,".repeat(20_000_000);
    let padded = gltf(&format!(r#""extras": [{zeros}0],"#), "");
    let reply = request(
        &server.address,
        "PUT",
        "/v1/meshes/padded?format=gltf",
        &[],
        padded.as_bytes(),
    );
    assert_eq!(reply.status, 201, "{}", reply.text());
    assert!(reply.text().contains("\"triangles\":1"), "{}", reply.text());
    let grown = peak_bytes(&server) - before;
    assert!(
        grown < 5 * padded.len() as u64,
        "the server grew by {grown} bytes for a body of {} bytes",
        padded.len()
    );
    // Nodes the scene never reaches still count: more than 2^22 values kept are refused.
    let empty_nodes = ",{}".repeat(1 << 22);
    let crowded = gltf("", &empty_nodes);
    let reply = request(
        &server.address,
        "PUT",
        "/v1/meshes/crowded?format=gltf",
        &[],
        crowded.as_bytes(),
    );
    assert_eq!(reply.status, 400, "{}", reply.text());
    assert!(
        reply.text().contains("more than 4194304 values"),
        "{}",
        reply.text()
    );
}

/// A server killed outright cannot remove its private directory; the next server to start
/// does, and leaves alone those of servers alive, those it cannot tell are abandoned (locked,
/// or made less than a minute ago) and anything not a server's.
#[test]
fn a_killed_servers_private_directory_goes_at_the_next_start() {
    let tmp = tempdir();
    let mut killed = Server::start_with(&[], &[("TMPDIR", tmp.path().as_os_str())]);
    let dirs = private_dirs(tmp.path());
    let [left] = dirs.as_slice() else {
        panic!("one private directory: {dirs:?}");
    };
    std::fs::write(left.join("body-0.obj"), "v 0 0 0\n").unwrap();
    killed.child.kill().unwrap();
    killed.child.wait().unwrap();
    assert!(left.exists());
    // A process that has ended, for directories named after it.
    let mut gone = Command::new("true").spawn().unwrap();
    gone.wait().unwrap();
    let dead_pid = gone.id();
    let fresh = tmp.path().join(format!("closest-serve-{dead_pid}-fresh0"));
    let locked = tmp.path().join(format!("closest-serve-{dead_pid}-locked0"));
    let alive = tmp
        .path()
        .join(format!("closest-serve-{}-alive0", std::process::id()));
    let other = tmp.path().join("closest-serve-notapid");
    for dir in [&locked, &alive, &other] {
        std::fs::create_dir(dir).unwrap();
    }
    let held = std::fs::File::open(&locked).unwrap();
    // SAFETY: flock on a descriptor we own.
    assert_eq!(
        unsafe {
            libc::flock(
                std::os::fd::AsRawFd::as_raw_fd(&held),
                libc::LOCK_EX | libc::LOCK_NB,
            )
        },
        0
    );
    for dir in [left, &locked, &alive, &other] {
        let status = Command::new("touch")
            .args(["-d", "2 minutes ago"])
            .arg(dir)
            .status()
            .unwrap();
        assert!(status.success());
    }
    std::fs::create_dir(&fresh).unwrap();
    let next = Server::start_with(&[], &[("TMPDIR", tmp.path().as_os_str())]);
    assert!(!left.exists(), "the killed server's directory stayed");
    for kept in [&fresh, &locked, &alive, &other] {
        assert!(kept.exists(), "{kept:?} was removed");
    }
    // The new server's own directory, beside those kept.
    assert_eq!(private_dirs(tmp.path()).len(), 5);
    drop(next);
    drop(held);
}

/// A mesh upload still building when the drain ends is not waited for, and the private
/// directory, which holds its file, goes all the same: it went when the last holder of the
/// server's state let go, and a task the runtime's shutdown gave up on (as under load in
/// CI) held it past the process's end.
#[test]
fn the_private_directory_goes_when_a_build_outlives_the_drain() {
    let tmp = tempdir();
    let mut server = Server::start_with(
        &["--drain-timeout-s", "0"],
        &[("TMPDIR", tmp.path().as_os_str())],
    );
    let dirs = private_dirs(tmp.path());
    let [private] = dirs.as_slice() else {
        panic!("one private directory: {dirs:?}");
    };
    let igea = std::fs::read(meshes().join("igea.ply")).unwrap();
    let size = igea.len() as u64;
    let address = server.address.clone();
    // Its connection is cut when the server ends: the reply does not matter.
    let upload = std::thread::spawn(move || {
        std::panic::catch_unwind(|| request(&address, "PUT", "/v1/meshes/i?format=ply", &[], &igea))
    });
    // The whole body in its file: the load and the build have begun (or are about to).
    let deadline = Instant::now() + Duration::from_secs(60);
    while !std::fs::read_dir(private)
        .unwrap()
        .any(|e| e.unwrap().metadata().is_ok_and(|m| m.len() == size))
    {
        assert!(Instant::now() < deadline, "the upload's file never filled");
        std::thread::sleep(Duration::from_millis(2));
    }
    server.terminate();
    assert_eq!(server.wait(), Some(0));
    assert!(
        !private.exists(),
        "the private directory outlived the server"
    );
    let _ = upload.join();
}

#[test]
fn targets_preload_before_ready_and_admin_tokens_guard_changes() {
    let dir = tempdir();
    let scene = dir.path().join("scene.json");
    std::fs::write(&scene, SCENE).unwrap();
    std::fs::copy(meshes().join("fandisk.obj"), dir.path().join("fandisk.obj")).unwrap();
    let targets = dir.path().join("targets.toml");
    std::fs::write(
        &targets,
        "[[target]]\nname = \"f\"\nmesh = \"fandisk.obj\"\n\n[[target]]\nname = \"s\"\nscene = \"scene.json\"\n",
    )
    .unwrap();
    let admin = dir.path().join("admin");
    std::fs::write(&admin, "admin-secret").unwrap();
    let server = Server::start(&[
        "--targets",
        targets.to_str().unwrap(),
        "--admin-token-file",
        admin.to_str().unwrap(),
    ]);
    let deadline = Instant::now() + Duration::from_secs(60);
    while server.get("/v1/health/ready").status != 200 {
        assert_eq!(server.get("/v1/health/live").status, 200);
        assert!(Instant::now() < deadline, "not ready in 60 s");
        std::thread::sleep(Duration::from_millis(50));
    }
    let listed = server.get("/v1/targets").json();
    assert_eq!(listed.as_array().unwrap().len(), 2, "{listed}");
    // Queries need no token here; changes need the admin one.
    let body = points_npy(&[[0.0, 0.0, 5.0]]);
    assert_eq!(server.post("/v1/scenes/s/query", &body).status, 200);
    server
        .put("/v1/scenes/t", SCENE)
        .assert_error(401, &["--admin-token-file"]);
    server
        .request("DELETE", "/v1/scenes/s", &[], &[])
        .assert_error(401, &[]);
    let auth = [("Authorization", "Bearer admin-secret")];
    assert_eq!(
        server.request("PUT", "/v1/scenes/t", &auth, SCENE).status,
        201
    );
    assert_eq!(
        server.request("DELETE", "/v1/scenes/s", &auth, &[]).status,
        204
    );
    // A targets file naming a missing mesh stops the server: exit 2, the target named; a
    // malformed one is refused before listening.
    let refused = |text: &str| {
        std::fs::write(&targets, text).unwrap();
        let out = std::process::Command::new(BIN)
            .args(["serve", "--listen", "127.0.0.1:0", "--targets"])
            .arg(&targets)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2));
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    let stderr = refused("[[target]]\nname = \"gone\"\nmesh = \"nowhere.obj\"\n");
    assert!(
        stderr.contains("gone") && stderr.contains("nowhere.obj"),
        "{stderr}"
    );
    let out = refused("[[target]]\nname = \"x\"\n");
    assert!(out.contains("give one of `mesh` or `scene`"), "{out}");
}

#[test]
fn an_answer_given_before_the_body_is_read_reaches_the_client() {
    // A request refused before its body is read (an unknown target, a missing token) is
    // answered while the client still sends. Closed at once with bytes unread, the server's
    // socket reset the connection and the client's send failed: Python's urllib reported a
    // broken pipe, never the 404 or 401 (20 of 20 tries with 12 MB bodies). Here the client
    // sends its whole body, as urllib does, before it reads the answer.
    let dir = tempdir();
    let token = dir.path().join("token");
    std::fs::write(&token, "s3cret\n").unwrap();
    let server = Server::start(&["--token-file", token.to_str().unwrap()]);
    let body = vec![0u8; 16 << 20];
    let send_whole = |bearer: &str| {
        let mut stream = TcpStream::connect(&server.address).unwrap();
        stream
            .set_write_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let head = format!(
            "POST /v1/scenes/nothing/query HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\
             Content-Length: {}\r\n{bearer}\r\n",
            server.address,
            body.len()
        );
        stream.write_all(head.as_bytes()).unwrap();
        stream
            .write_all(&body)
            .expect("the client sends its whole body");
        read_reply(stream)
    };
    for _ in 0..3 {
        send_whole("Authorization: Bearer s3cret\r\n").assert_error(404, &["nothing"]);
        send_whole("").assert_error(401, &[]);
    }
    // The connection lingers a bounded time only: the server still answers promptly.
    let started = Instant::now();
    assert_eq!(server.get("/v1/health").status, 200);
    assert!(started.elapsed() < Duration::from_secs(5));
}

/// What `raw` gets as an answer: the whole reply, read until the server closes.
fn raw_reply(address: &str, raw: &[u8]) -> String {
    let mut stream = TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    // The server may answer and close before it has read everything.
    let _ = stream.write_all(raw);
    let mut reply = Vec::new();
    let _ = stream.read_to_end(&mut reply);
    String::from_utf8_lossy(&reply).into_owned()
}

#[test]
fn heads_the_http_parser_refuses_get_json_errors_too() {
    // hyper answers these itself, before any route sees them, with an empty body; SPEC §7
    // says every error is `{"error": ...}`.
    let server = Server::start(&[]);
    let many_headers: String = (0..150).map(|i| format!("X-H{i}: 1\r\n")).collect();
    let cases: [(Vec<u8>, u16, &str); 4] = [
        (
            format!("GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n{many_headers}\r\n").into(),
            431,
            "too large",
        ),
        (
            b"G\x01T /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".to_vec(),
            400,
            "not valid HTTP/1.1",
        ),
        (
            b"GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nBad Header: x\r\n\r\n".to_vec(),
            400,
            "not valid HTTP/1.1",
        ),
        (
            format!(
                "GET /{} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
                "a".repeat(70_000)
            )
            .into(),
            414,
            "too long",
        ),
    ];
    for (raw, status, needle) in cases {
        let reply = raw_reply(&server.address, &raw);
        let (head, body) = reply.split_once("\r\n\r\n").unwrap_or((&reply, ""));
        assert!(head.starts_with(&format!("HTTP/1.1 {status} ")), "{reply}");
        assert!(
            head.to_ascii_lowercase()
                .contains("content-type: application/json"),
            "{head}"
        );
        let error: serde_json::Value =
            serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"));
        let message = error["error"].as_str().unwrap_or_default();
        assert!(message.contains(needle), "{body}");
        assert!(
            head.contains(&format!("content-length: {}", body.len())),
            "{head}"
        );
    }
    // The app's own 400s are untouched, and the server answers on.
    let reply = server.post("/v1/scenes/nothing/query", b"not npy");
    assert!(reply.status >= 400);
    assert_eq!(server.get("/v1/health").status, 200);
}

#[test]
fn a_cold_pipeline_build_does_not_stall_other_clients() {
    // A job's first pipeline of its kind builds for a second or more on lavapipe when the
    // driver's shader cache is cold (disabled here). The pipeline cache's one lock was held
    // through the build, so every other client's query, cached pipelines and other targets
    // included, waited for it: one query answered meanwhile, against ~140 now.
    let server = Server::start_with(
        &[],
        &[("MESA_SHADER_CACHE_DISABLE", std::ffi::OsStr::new("true"))],
    );
    for name in ["s", "other"] {
        assert_eq!(server.put(&format!("/v1/scenes/{name}"), SCENE).status, 201);
    }
    let query = points_npy(&points(100, 3, -2.0, 2.0));
    // The query's own pipeline, built before.
    assert_eq!(server.post("/v1/scenes/other/query", &query).status, 200);
    let bodies =
        br#"{"shapes": [{"type": "capsule", "a": [0, 0, 3], "b": [0, 1, 3], "radius": 0.5}]}"#;
    let answered = std::sync::atomic::AtomicBool::new(false);
    let meanwhile = std::thread::scope(|scope| {
        scope.spawn(|| {
            assert_eq!(server.post("/v1/scenes/s/bodies", bodies).status, 200);
            answered.store(true, std::sync::atomic::Ordering::SeqCst);
        });
        let (start, mut meanwhile) = (Instant::now(), 0);
        for _ in 0..400 {
            if answered.load(std::sync::atomic::Ordering::SeqCst)
                || start.elapsed() > Duration::from_secs(120)
            {
                break;
            }
            assert_eq!(server.post("/v1/scenes/other/query", &query).status, 200);
            meanwhile += usize::from(!answered.load(std::sync::atomic::Ordering::SeqCst));
        }
        meanwhile
    });
    assert!(answered.load(std::sync::atomic::Ordering::SeqCst));
    assert!(
        meanwhile >= 10,
        "{meanwhile} queries answered while the bodies' pipeline built"
    );
}
