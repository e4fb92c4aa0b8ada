//! The accept loop and each connection's clock (SPEC §7, hostile and faulty clients): at most
//! `--max-connections` at once (more are closed as they arrive), a request head that must
//! arrive within `--header-timeout-s` of the connection or of its first byte, keep-alive
//! connections closed after `--idle-timeout-s` without traffic, and a drain on SIGTERM that
//! ends within `--drain-timeout-s` whatever the clients do.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tower::ServiceExt;

/// The clocks and caps of connections.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub header_timeout: Duration,
    pub idle_timeout: Duration,
    pub max_connections: usize,
    pub drain_timeout: Duration,
}

/// Open connections, for `/metrics`.
#[derive(Default)]
pub(crate) struct ConnectionCount {
    pub open: AtomicUsize,
    pub refused: AtomicU64,
}

/// Accept connections and serve `app` on them until `shutdown` resolves; then stop accepting,
/// tell every connection to finish its request in flight and close, and return once they
/// have or `drain_timeout` has passed (the rest are dropped, which closes them). `draining`
/// is set as the drain starts (`/v1/health/ready` answers 503 from then on).
pub(crate) async fn serve(
    listener: TcpListener,
    app: Router,
    limits: Limits,
    count: Arc<ConnectionCount>,
    draining: Arc<AtomicBool>,
    shutdown: impl Future<Output = ()>,
) {
    let (close, closing) = watch::channel(false);
    let mut connections = tokio::task::JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(accepted) => accepted,
                    // Out of file descriptors and the like: the next accept may succeed.
                    Err(_) => {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        continue;
                    }
                };
                if count.open.load(Ordering::Relaxed) >= limits.max_connections {
                    count.refused.fetch_add(1, Ordering::Relaxed);
                    drop(stream);
                    continue;
                }
                count.open.fetch_add(1, Ordering::Relaxed);
                let (app, closing, count) = (app.clone(), closing.clone(), count.clone());
                connections.spawn(async move {
                    connection(stream, peer, app, limits, closing).await;
                    count.open.fetch_sub(1, Ordering::Relaxed);
                });
            }
            // Reap finished connections as they end.
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    draining.store(true, Ordering::SeqCst);
    drop(listener);
    let _ = close.send(true);
    let drained = async { while connections.join_next().await.is_some() {} };
    let _ = tokio::time::timeout(limits.drain_timeout, drained).await;
    // Dropping the set aborts what is left.
    connections.abort_all();
}

/// Milliseconds since the connection began, as its clocks keep them.
struct Clock {
    start: Instant,
    /// When bytes last moved either way.
    last_io: AtomicU64,
    /// When the head now awaited began: the connection's start, or the first byte after the
    /// last answer; `u64::MAX` while a request is being answered.
    head_since: AtomicU64,
    in_flight: AtomicUsize,
}

impl Clock {
    fn new() -> Clock {
        Clock {
            start: Instant::now(),
            last_io: AtomicU64::new(0),
            head_since: AtomicU64::new(0),
            in_flight: AtomicUsize::new(0),
        }
    }
    fn now(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }
    fn read(&self, bytes: usize) {
        let now = self.now();
        self.last_io.store(now, Ordering::Relaxed);
        // The first byte of a new head starts its clock.
        if bytes > 0 && self.in_flight.load(Ordering::Relaxed) == 0 {
            let _ =
                self.head_since
                    .compare_exchange(IDLE, now, Ordering::Relaxed, Ordering::Relaxed);
        }
    }
    fn wrote(&self) {
        self.last_io.store(self.now(), Ordering::Relaxed);
    }
    fn request_began(&self) {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        self.head_since.store(ANSWERING, Ordering::Relaxed);
    }
    fn request_ended(&self) {
        if self.in_flight.fetch_sub(1, Ordering::Relaxed) == 1 {
            self.head_since.store(IDLE, Ordering::Relaxed);
        }
        self.wrote();
    }
    /// Why the connection must close now, if it must.
    fn expired(&self, limits: &Limits) -> Option<&'static str> {
        if self.in_flight.load(Ordering::Relaxed) > 0 {
            return None;
        }
        let now = self.now();
        let since = |t: u64| Duration::from_millis(now.saturating_sub(t));
        match self.head_since.load(Ordering::Relaxed) {
            IDLE | ANSWERING => (since(self.last_io.load(Ordering::Relaxed)) > limits.idle_timeout)
                .then_some("idle"),
            began => (since(began) > limits.header_timeout).then_some("header"),
        }
    }
}

/// `head_since` between requests, before the next head's first byte.
const IDLE: u64 = u64::MAX - 1;
/// `head_since` while a request is answered.
const ANSWERING: u64 = u64::MAX;

/// The socket, telling the clock when bytes move.
struct ClockedStream {
    stream: TcpStream,
    clock: Arc<Clock>,
    /// Our JSON answer being written in place of hyper's empty one (`json_answer_for`), and
    /// how many of its bytes have gone.
    replacement: Option<(Vec<u8>, usize)>,
}

/// The JSON error (SPEC §7: every error is `{"error": ...}`) to send in place of `head`, where
/// `head` is the empty answer hyper writes by itself to a request it cannot parse (a malformed
/// head 400, a target too long 414, too many or too long headers 431), which never reaches
/// the app. The app's own answers with those statuses always carry a body.
fn json_answer_for(head: &[u8]) -> Option<Vec<u8>> {
    let problem = match head.get(..13)? {
        b"HTTP/1.1 400 " => {
            "the request's head is not valid HTTP/1.1 (its request line or a header)"
        }
        b"HTTP/1.1 414 " => "the request's target (its path and query) is too long",
        b"HTTP/1.1 431 " => "the request's head is too large (too many headers, or too long)",
        _ => return None,
    };
    let text = std::str::from_utf8(head).ok()?;
    let lines = text.strip_suffix("\r\n\r\n")?;
    if !lines
        .split("\r\n")
        .any(|line| line.eq_ignore_ascii_case("content-length: 0"))
    {
        return None;
    }
    let body = serde_json::json!({ "error": problem }).to_string();
    let mut answer = String::new();
    for line in lines.split("\r\n") {
        if line.eq_ignore_ascii_case("content-length: 0") {
            answer += "content-type: application/json\r\n";
            answer += &format!("content-length: {}\r\n", body.len());
        } else {
            answer += line;
            answer += "\r\n";
        }
    }
    answer += "\r\n";
    answer += &body;
    Some(answer.into_bytes())
}

impl AsyncRead for ClockedStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let poll = Pin::new(&mut self.stream).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = poll {
            self.clock.read(buf.filled().len() - before);
        }
        poll
    }
}

impl AsyncWrite for ClockedStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        if self.replacement.is_none() {
            self.replacement = json_answer_for(data).map(|answer| (answer, 0));
        }
        let this = &mut *self;
        if let Some((answer, sent)) = &mut this.replacement {
            // hyper's bytes count as written once all of ours are (it asks again with the same
            // bytes while we return `Pending`).
            while *sent < answer.len() {
                match Pin::new(&mut this.stream).poll_write(cx, &answer[*sent..]) {
                    Poll::Ready(Ok(n)) => {
                        *sent += n;
                        this.clock.wrote();
                    }
                    Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                    Poll::Pending => return Poll::Pending,
                }
            }
            this.replacement = None;
            return Poll::Ready(Ok(data.len()));
        }
        let poll = Pin::new(&mut this.stream).poll_write(cx, data);
        if let Poll::Ready(Ok(_)) = poll {
            this.clock.wrote();
        }
        poll
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// The peer of a request's connection (request extension, for the access log).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Peer(pub SocketAddr);

/// Serve one connection until it ends, its clock runs out, or the drain closes it.
async fn connection(
    stream: TcpStream,
    peer: SocketAddr,
    app: Router,
    limits: Limits,
    mut closing: watch::Receiver<bool>,
) {
    let _ = stream.set_nodelay(true);
    let clock = Arc::new(Clock::new());
    let io = TokioIo::new(ClockedStream {
        stream,
        clock: clock.clone(),
        replacement: None,
    });
    let service_clock = clock.clone();
    let service =
        hyper::service::service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
            let (app, clock) = (app.clone(), service_clock.clone());
            clock.request_began();
            let mut request = request.map(Body::new);
            request.extensions_mut().insert(Peer(peer));
            // Boxed: `poll_without_shutdown` (for the lingering close) needs an Unpin future.
            Box::pin(async move {
                let response = app.oneshot(request).await;
                clock.request_ended();
                response
            })
        });
    let mut connection = hyper::server::conn::http1::Builder::new()
        // Our clock does it, for the first byte of every head (hyper's would start as soon
        // as a keep-alive connection waits, closing it at the header timeout, not the idle).
        .header_read_timeout(None)
        .serve_connection(io, service);
    let tick = (limits.header_timeout.min(limits.idle_timeout) / 4)
        .clamp(Duration::from_millis(20), Duration::from_secs(1));
    let mut ticks = tokio::time::interval(tick);
    let mut told_to_close = false;
    loop {
        tokio::select! {
            served = std::future::poll_fn(|cx| connection.poll_without_shutdown(cx)) => {
                if served.is_ok() {
                    let stream = connection.into_parts().io.into_inner().stream;
                    linger(stream).await;
                }
                return;
            }
            _ = ticks.tick() => {
                // Dropping the connection closes the socket.
                if clock.expired(&limits).is_some() {
                    return;
                }
                // Draining: a connection between requests (or inside a head) is closed now;
                // one answering a request finishes it first.
                if told_to_close && clock.in_flight.load(Ordering::Relaxed) == 0 {
                    return;
                }
            }
            _ = closing.changed(), if !told_to_close => {
                told_to_close = true;
                Pin::new(&mut connection).graceful_shutdown();
                if clock.in_flight.load(Ordering::Relaxed) == 0 {
                    return;
                }
            }
        }
    }
}

/// How long, and for how many bytes, a connection that hyper has finished reads on before it
/// is closed.
const LINGER: Duration = Duration::from_secs(2);
const LINGER_BYTES: usize = 256 << 20;

/// Close `stream` as a lingering close does: an answer given before the request's body was
/// read (404 for an unknown target, 401, 503, 413) is followed by the end of our side, and
/// what the client still sends is read and dropped for a while. Closed at once with bytes
/// unread, the socket would answer them with a reset, which discards our answer in the
/// client's socket before it reads it (Python's urllib then reported a broken pipe).
async fn linger(mut stream: TcpStream) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    if stream.shutdown().await.is_err() {
        return;
    }
    let mut sink = vec![0u8; 64 << 10];
    let mut left = LINGER_BYTES;
    let drain = async {
        while left > 0 {
            match stream.read(&mut sink).await {
                Ok(0) | Err(_) => break,
                Ok(n) => left = left.saturating_sub(n),
            }
        }
    };
    let _ = tokio::time::timeout(LINGER, drain).await;
}
