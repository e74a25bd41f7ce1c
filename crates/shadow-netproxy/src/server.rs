//! The proxy server: HTTP CONNECT tunnels and plain-HTTP forwarding to allowed hosts only,
//! every decision reported to a sink.
//!
//! It runs on its own thread (a single-threaded tokio runtime) in the process that started the
//! sandbox, outside the sandbox: it resolves and connects in the host's network namespace,
//! while the socket it listens on may live in the sandbox's (see the `netns` module). HTTP is
//! parsed by hyper; nothing here reads bytes off the wire itself.

use std::io;
use std::net::{SocketAddr, TcpListener as StdListener};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use hyper::header::{HeaderMap, HeaderName, HeaderValue};
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde::Serialize;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::{watch, Notify};

use crate::rules::{address_allowed, parse_host, Allowlist, HostPattern, HostRule};

/// One decision of the proxy, reported when the request or tunnel is over (so it carries the
/// bytes), or at once for a refusal.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Event {
    /// `CONNECT` for a tunnel, else the HTTP method.
    pub method: String,
    /// Host as the client named it.
    pub host: String,
    /// Port asked for.
    pub port: u16,
    /// Allowed by a rule?
    pub allowed: bool,
    /// The rule that allowed it, or why it was refused.
    pub reason: String,
    /// The address connected to, when one was.
    pub addr: Option<String>,
    /// Status answered to the client (200 for an established tunnel).
    pub status: u16,
    /// Bytes sent to the upstream host.
    pub bytes_up: u64,
    /// Bytes received from the upstream host.
    pub bytes_down: u64,
    /// From decision to close.
    pub duration_ms: u64,
    /// What went wrong after an allow (resolution, connection, an upstream error).
    pub error: Option<String>,
}

type Sink = Arc<dyn Fn(Event) + Send + Sync>;
type Body = BoxBody<Bytes, hyper::Error>;

/// Tunables.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Resolution and connection timeout.
    pub connect_timeout: Duration,
    /// How long shutdown waits for open requests to report before dropping them.
    pub drain: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            connect_timeout: Duration::from_secs(10),
            drain: Duration::from_secs(2),
        }
    }
}

/// Counts of what the proxy decided.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Stats {
    /// Requests and tunnels allowed.
    pub allowed: u64,
    /// Refused.
    pub denied: u64,
}

struct Shared {
    allow: Allowlist,
    sink: Sink,
    opts: Options,
    stop: watch::Receiver<bool>,
    active: AtomicUsize,
    idle: Notify,
    allowed: AtomicU64,
    denied: AtomicU64,
}

impl Shared {
    fn emit(&self, e: Event) {
        if e.allowed {
            self.allowed.fetch_add(1, Ordering::Relaxed);
        } else {
            self.denied.fetch_add(1, Ordering::Relaxed);
        }
        (self.sink)(e);
    }
}

/// Marks a request or tunnel in flight, so shutdown can wait for its report.
struct Track(Arc<Shared>);

impl Track {
    fn new(s: &Arc<Shared>) -> Track {
        s.active.fetch_add(1, Ordering::SeqCst);
        Track(s.clone())
    }
}

impl Drop for Track {
    fn drop(&mut self) {
        if self.0.active.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

/// A running proxy.
#[derive(Debug)]
pub struct Proxy {
    stop: watch::Sender<bool>,
    thread: std::thread::JoinHandle<Stats>,
    addr: SocketAddr,
}

impl Proxy {
    /// Serve on `listener` (any TCP listener: the sandbox's, or a host port in tests).
    pub fn spawn(
        listener: StdListener,
        allow: Allowlist,
        opts: Options,
        sink: impl Fn(Event) + Send + Sync + 'static,
    ) -> io::Result<Proxy> {
        let addr = listener.local_addr()?;
        listener.set_nonblocking(true)?;
        let (tx, rx) = watch::channel(false);
        let shared = Arc::new(Shared {
            allow,
            sink: Arc::new(sink),
            opts,
            stop: rx,
            active: AtomicUsize::new(0),
            idle: Notify::new(),
            allowed: AtomicU64::new(0),
            denied: AtomicU64::new(0),
        });
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()?;
        let thread = spawn_signals_blocked(move || {
            rt.block_on(serve(listener, shared.clone()));
            Stats {
                allowed: shared.allowed.load(Ordering::Relaxed),
                denied: shared.denied.load(Ordering::Relaxed),
            }
        })?;
        Ok(Proxy {
            stop: tx,
            thread,
            addr,
        })
    }

    /// The address it listens on (in the namespace the listener was made in).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stop: close open tunnels (each reports its bytes), wait for the reports, return counts.
    pub fn shutdown(self) -> Stats {
        let _ = self.stop.send(true);
        self.thread.join().unwrap_or_default()
    }
}

/// Threads of a process that waits for signals with sigwait must not take them: start ours
/// (and, by inheritance, the runtime's blocking-pool threads) with every signal blocked.
fn spawn_signals_blocked<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> io::Result<std::thread::JoinHandle<T>> {
    // SAFETY: sigset_t is plain data, initialised by sigfillset before use; pthread_sigmask
    // only changes the calling thread's mask and we restore it right after spawning.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        let r = std::thread::Builder::new()
            .name("shadow-netproxy".into())
            .spawn(f);
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        r
    }
}

async fn serve(listener: StdListener, sh: Arc<Shared>) {
    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
        return;
    };
    let mut stop = sh.stop.clone();
    loop {
        tokio::select! {
            r = listener.accept() => {
                let Ok((stream, _)) = r else { continue };
                let _ = stream.set_nodelay(true);
                tokio::spawn(client_connection(stream, sh.clone()));
            }
            _ = stop.changed() => break,
        }
    }
    drop(listener);
    // Let open requests and tunnels see the stop and report.
    let deadline = tokio::time::sleep(sh.opts.drain);
    tokio::pin!(deadline);
    while sh.active.load(Ordering::SeqCst) > 0 {
        tokio::select! {
            _ = sh.idle.notified() => {}
            _ = &mut deadline => break,
            _ = tokio::time::sleep(Duration::from_millis(20)) => {}
        }
    }
}

async fn client_connection(stream: TcpStream, sh: Arc<Shared>) {
    let svc_sh = sh.clone();
    let svc = service_fn(move |req| {
        let sh = svc_sh.clone();
        async move { Ok::<_, std::convert::Infallible>(handle(req, sh).await) }
    });
    let conn = hyper::server::conn::http1::Builder::new()
        .preserve_header_case(true)
        .title_case_headers(true)
        .serve_connection(TokioIo::new(stream), svc)
        .with_upgrades();
    tokio::pin!(conn);
    let mut stop = sh.stop.clone();
    tokio::select! {
        _ = conn.as_mut() => {}
        _ = stop.changed() => {
            conn.as_mut().graceful_shutdown();
            let _ = tokio::time::timeout(sh.opts.drain, conn).await;
        }
    }
}

fn text(status: StatusCode, reason: &str) -> Response<Body> {
    let header: String = reason
        .chars()
        .map(|c| {
            if c.is_ascii_graphic() || c == ' ' {
                c
            } else {
                '?'
            }
        })
        .collect();
    let mut r = Response::new(
        Full::new(Bytes::from(format!("shadow proxy: {reason}\n")))
            .map_err(|never| match never {})
            .boxed(),
    );
    *r.status_mut() = status;
    let h = r.headers_mut();
    h.insert(
        "content-type",
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    if let Ok(v) = HeaderValue::from_str(&header) {
        h.insert("x-shadow-reason", v);
    }
    r
}

fn empty() -> Body {
    Empty::new().map_err(|never| match never {}).boxed()
}

/// A refusal before any connection: reported at once.
fn refuse(
    sh: &Shared,
    method: &Method,
    host: &str,
    port: u16,
    status: StatusCode,
    reason: String,
) -> Response<Body> {
    sh.emit(Event {
        method: method.to_string(),
        host: host.to_string(),
        port,
        allowed: false,
        reason: reason.clone(),
        addr: None,
        status: status.as_u16(),
        bytes_up: 0,
        bytes_down: 0,
        duration_ms: 0,
        error: None,
    });
    text(status, &reason)
}

async fn handle(req: Request<Incoming>, sh: Arc<Shared>) -> Response<Body> {
    let method = req.method().clone();
    // A CONNECT names host:port; a proxied plain-HTTP request carries an absolute URI.
    let target = req.uri().authority().map(|a| {
        let default = if method == Method::CONNECT { 0 } else { 80 };
        (a.host().to_string(), a.port_u16().unwrap_or(default))
    });
    let Some((host, port)) = target else {
        return refuse(
            &sh,
            &method,
            "",
            0,
            StatusCode::BAD_REQUEST,
            "this is shadow's proxy: send CONNECT host:port or an absolute http:// URI".into(),
        );
    };
    if method != Method::CONNECT && req.uri().scheme_str() != Some("http") {
        return refuse(
            &sh,
            &method,
            &host,
            port,
            StatusCode::BAD_REQUEST,
            "only http:// is forwarded; https goes through CONNECT".into(),
        );
    }
    if port == 0 {
        return refuse(
            &sh,
            &method,
            &host,
            port,
            StatusCode::BAD_REQUEST,
            "CONNECT needs host:port".into(),
        );
    }
    let d = sh.allow.decide(&host, port);
    let Some(rule) = d.rule.clone().filter(|_| d.allowed) else {
        return refuse(&sh, &method, &host, port, StatusCode::FORBIDDEN, d.reason);
    };
    let started = Instant::now();
    let track = Track::new(&sh);
    let report = Report {
        sh: sh.clone(),
        method: method.to_string(),
        host: host.clone(),
        port,
        reason: d.reason.clone(),
        started,
    };
    let (upstream, addr) = match connect(&sh, &rule, &host, port).await {
        Ok(c) => c,
        Err(e) => {
            report.finish(None, 502, 0, 0, Some(e.clone()));
            drop(track);
            return text(StatusCode::BAD_GATEWAY, &e);
        }
    };
    let (up, down) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let upstream = Counting {
        inner: upstream,
        up: up.clone(),
        down: down.clone(),
    };
    if method == Method::CONNECT {
        tunnel(req, upstream, addr, report, track)
    } else {
        forward(req, upstream, addr, report, track).await
    }
}

const SESSION_ENDED: &str = "closed: the session ended";

/// How long a request or tunnel still gets to end on its own once the session has ended. A
/// request whose response the client already has is finishing then (its connection notices the
/// end of the body a moment later); it must not be recorded as cut off.
const END_GRACE: Duration = Duration::from_millis(250);

/// `work`'s output, or None if the session ended (`stop`) and it did not finish within
/// [`END_GRACE`] after that.
async fn until_stopped<F: std::future::Future>(
    work: F,
    stop: &mut tokio::sync::watch::Receiver<bool>,
) -> Option<F::Output> {
    tokio::pin!(work);
    tokio::select! {
        r = &mut work => Some(r),
        _ = stop.changed() => tokio::time::timeout(END_GRACE, work).await.ok(),
    }
}

/// Reports an allowed request when it is over.
struct Report {
    sh: Arc<Shared>,
    method: String,
    host: String,
    port: u16,
    reason: String,
    started: Instant,
}

impl Report {
    fn finish(
        &self,
        addr: Option<SocketAddr>,
        status: u16,
        up: u64,
        down: u64,
        error: Option<String>,
    ) {
        self.sh.emit(Event {
            method: self.method.clone(),
            host: self.host.clone(),
            port: self.port,
            allowed: true,
            reason: self.reason.clone(),
            addr: addr.map(|a| a.to_string()),
            status,
            bytes_up: up,
            bytes_down: down,
            duration_ms: self.started.elapsed().as_millis() as u64,
            error,
        });
    }
}

async fn connect(
    sh: &Shared,
    rule: &HostRule,
    host: &str,
    port: u16,
) -> Result<(TcpStream, SocketAddr), String> {
    let t = sh.opts.connect_timeout;
    // Names are resolved here, outside the sandbox (which has no resolver it could reach).
    let addrs: Vec<SocketAddr> = match parse_host(host) {
        Some(HostPattern::Ip(ip)) => vec![SocketAddr::new(ip, port)],
        _ => tokio::time::timeout(t, tokio::net::lookup_host((host, port)))
            .await
            .map_err(|_| format!("resolving {host} timed out"))?
            .map_err(|e| format!("cannot resolve {host}: {e}"))?
            .collect(),
    };
    let mut last = format!("{host} has no address");
    for a in addrs {
        if let Err(e) = address_allowed(rule, a.ip()) {
            last = e;
            continue;
        }
        match tokio::time::timeout(t, TcpStream::connect(a)).await {
            Ok(Ok(s)) => {
                let _ = s.set_nodelay(true);
                return Ok((s, a));
            }
            Ok(Err(e)) => last = format!("cannot connect to {a}: {e}"),
            Err(_) => last = format!("connecting to {a} timed out"),
        }
    }
    Err(last)
}

fn tunnel(
    mut req: Request<Incoming>,
    mut upstream: Counting,
    addr: SocketAddr,
    report: Report,
    track: Track,
) -> Response<Body> {
    let on_upgrade = hyper::upgrade::on(&mut req);
    let mut stop = report.sh.stop.clone();
    tokio::spawn(async move {
        let _track = track;
        let error = match on_upgrade.await {
            Ok(upgraded) => {
                let mut client = TokioIo::new(upgraded);
                let copy = tokio::io::copy_bidirectional(&mut client, &mut upstream);
                let r = until_stopped(copy, &mut stop).await;
                r.map_or_else(
                    || Some(SESSION_ENDED.to_string()),
                    |r| r.err().map(|e| e.to_string()),
                )
            }
            Err(e) => Some(format!("upgrade failed: {e}")),
        };
        report.finish(
            Some(addr),
            200,
            upstream.up.load(Ordering::Relaxed),
            upstream.down.load(Ordering::Relaxed),
            error,
        );
    });
    let mut r = Response::new(empty());
    *r.status_mut() = StatusCode::OK;
    r
}

/// Hop-by-hop headers (RFC 9110 §7.6.1) and the proxy's own: not forwarded either way.
fn strip_hop_by_hop(h: &mut HeaderMap) {
    let named: Vec<HeaderName> = h
        .get_all("connection")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|n| HeaderName::from_bytes(n.trim().as_bytes()).ok())
        .collect();
    for n in named {
        h.remove(n);
    }
    for n in [
        "connection",
        "proxy-connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "upgrade",
    ] {
        h.remove(n);
    }
}

async fn forward(
    mut req: Request<Incoming>,
    upstream: Counting,
    addr: SocketAddr,
    report: Report,
    track: Track,
) -> Response<Body> {
    let (up, down) = (upstream.up.clone(), upstream.down.clone());
    let handshake = hyper::client::conn::http1::Builder::new()
        .preserve_header_case(true)
        .title_case_headers(true)
        .handshake(TokioIo::new(upstream))
        .await;
    let (mut sender, conn) = match handshake {
        Ok(x) => x,
        Err(e) => {
            let e = format!("upstream: {e}");
            report.finish(Some(addr), 502, 0, 0, Some(e.clone()));
            return text(StatusCode::BAD_GATEWAY, &e);
        }
    };
    // The status is known when the response head arrives, which may be after the upstream
    // connection has already ended (HTTP/1.0 servers close right after the body).
    let (status_tx, status_rx) = tokio::sync::oneshot::channel::<u16>();
    let mut stop = report.sh.stop.clone();
    // The upstream connection ends when the response body has been read and the sender is
    // gone: then the byte counts are final.
    tokio::spawn(async move {
        let _track = track;
        let error = until_stopped(conn, &mut stop).await.map_or_else(
            || Some(SESSION_ENDED.to_string()),
            |r| r.err().map(|e| format!("upstream: {e}")),
        );
        let status = status_rx.await.unwrap_or(502);
        report.finish(
            Some(addr),
            status,
            up.load(Ordering::Relaxed),
            down.load(Ordering::Relaxed),
            error,
        );
    });
    let path = req
        .uri()
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "/".into());
    let authority = req.uri().authority().map(|a| a.as_str().to_string());
    if let Ok(uri) = path.parse() {
        *req.uri_mut() = uri;
    }
    strip_hop_by_hop(req.headers_mut());
    if !req.headers().contains_key("host") {
        if let Some(v) = authority.and_then(|a| HeaderValue::from_str(&a).ok()) {
            req.headers_mut().insert("host", v);
        }
    }
    match sender.send_request(req).await {
        Ok(mut resp) => {
            let _ = status_tx.send(resp.status().as_u16());
            strip_hop_by_hop(resp.headers_mut());
            resp.map(|b| b.boxed())
        }
        Err(e) => text(StatusCode::BAD_GATEWAY, &format!("upstream: {e}")),
    }
}

/// The upstream stream, counting bytes each way.
struct Counting {
    inner: TcpStream,
    up: Arc<AtomicU64>,
    down: Arc<AtomicU64>,
}

impl AsyncRead for Counting {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = r {
            let n = (buf.filled().len() - before) as u64;
            self.down.fetch_add(n, Ordering::Relaxed);
        }
        r
    }
}

impl AsyncWrite for Counting {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = r {
            self.up.fetch_add(n as u64, Ordering::Relaxed);
        }
        r
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
