//! The proxy against a real HTTP server and real curl, on loopback.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use shadow_netproxy::{Allowlist, Event, Options, Proxy};

/// A tiny origin server: answers every request on a connection with `body`.
fn origin(body: &'static str) -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            std::thread::spawn(move || serve_one(s, body));
        }
    });
    port
}

fn serve_one(mut s: TcpStream, body: &str) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        // Read one request head, answer, repeat (keep-alive).
        while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
            match s.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        let head = String::from_utf8_lossy(&buf).to_string();
        let end = buf.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        buf.drain(..end);
        let first = head.lines().next().unwrap_or("").to_string();
        let reply = format!("{body} [{first}]");
        let _ = write!(
            s,
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nContent-Type: text/plain\r\n\r\n{reply}",
            reply.len()
        );
    }
}

struct Fixture {
    proxy: Option<Proxy>,
    events: Arc<Mutex<Vec<Event>>>,
    url: String,
}

fn start(rules: &[String]) -> Fixture {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let events = Arc::new(Mutex::new(Vec::new()));
    let ev = events.clone();
    let proxy = Proxy::spawn(
        l,
        Allowlist::parse(rules).unwrap(),
        Options {
            connect_timeout: Duration::from_secs(5),
            drain: Duration::from_secs(2),
        },
        move |e| ev.lock().unwrap().push(e),
    )
    .unwrap();
    let url = format!("http://{}", proxy.local_addr());
    Fixture {
        proxy: Some(proxy),
        events,
        url,
    }
}

impl Fixture {
    fn stop(&mut self) -> Vec<Event> {
        if let Some(p) = self.proxy.take() {
            p.shutdown();
        }
        self.events.lock().unwrap().clone()
    }
}

fn curl(args: &[&str]) -> (i32, String, String) {
    let o = Command::new("curl")
        .args(["-sS", "--max-time", "10", "--noproxy", ""])
        .args(args)
        .env_remove("http_proxy")
        .env_remove("https_proxy")
        .env_remove("HTTPS_PROXY")
        .env_remove("ALL_PROXY")
        .output()
        .expect("curl");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).to_string(),
        String::from_utf8_lossy(&o.stderr).to_string(),
    )
}

#[test]
fn plain_http_to_an_allowed_port_is_forwarded_and_recorded() {
    let port = origin("hello");
    let mut f = start(&[format!("127.0.0.1:{port}")]);
    let (code, out, err) = curl(&["-x", &f.url, &format!("http://127.0.0.1:{port}/a?b=1")]);
    assert_eq!(code, 0, "{err}");
    // The origin saw an origin-form request line.
    assert_eq!(out, "hello [GET /a?b=1 HTTP/1.1]");
    let ev = f.stop();
    assert_eq!(ev.len(), 1, "{ev:?}");
    let e = &ev[0];
    assert!(e.allowed);
    assert_eq!(
        (e.method.as_str(), e.host.as_str(), e.port),
        ("GET", "127.0.0.1", port)
    );
    assert_eq!(e.status, 200);
    assert_eq!(e.reason, format!("allowed by 127.0.0.1:{port}"));
    assert!(e.bytes_down > out.len() as u64, "{e:?}");
    assert!(e.bytes_up > 0);
    assert_eq!(e.error, None);
}

#[test]
fn connect_tunnel_to_an_allowed_port_works_and_counts_bytes() {
    let port = origin("tunnelled");
    let mut f = start(&[format!("127.0.0.1:{port}")]);
    let (code, out, err) = curl(&["-p", "-x", &f.url, &format!("http://127.0.0.1:{port}/x")]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "tunnelled [GET /x HTTP/1.1]");
    let ev = f.stop();
    assert_eq!(ev.len(), 1, "{ev:?}");
    assert_eq!(ev[0].method, "CONNECT");
    assert!(ev[0].allowed);
    assert_eq!(ev[0].status, 200);
    assert!(ev[0].bytes_down > out.len() as u64, "{:?}", ev[0]);
}

#[test]
fn other_ports_and_hosts_get_403_with_the_reason() {
    let port = origin("secret");
    let other = origin("other");
    let mut f = start(&[format!("127.0.0.1:{port}")]);
    let (code, out, _) = curl(&[
        "-w",
        "%{http_code}",
        "-x",
        &f.url,
        &format!("http://127.0.0.1:{other}/"),
    ]);
    assert_eq!(code, 0);
    assert_eq!(
        out,
        format!(
            "shadow proxy: port {other} of 127.0.0.1 is not in the session's allowed hosts\n403"
        )
    );
    let (code, _, err) = curl(&["-p", "-x", &f.url, "http://example.invalid:443/"]);
    assert_ne!(code, 0);
    assert!(err.contains("403"), "{err}");
    let ev = f.stop();
    assert_eq!(ev.len(), 2, "{ev:?}");
    assert!(ev
        .iter()
        .all(|e| !e.allowed && e.status == 403 && e.bytes_down == 0));
    assert_eq!(ev[1].host, "example.invalid");
    assert_eq!(
        ev[1].reason,
        "example.invalid is not in the session's allowed hosts"
    );
}

#[test]
fn an_allowed_name_that_resolves_to_loopback_is_not_connected() {
    // A name other than localhost that /etc/hosts maps to a loopback address (DNS rebinding
    // in miniature).
    let hosts = std::fs::read_to_string("/etc/hosts").unwrap_or_default();
    let name = hosts.lines().find_map(|l| {
        let mut w = l.split_whitespace();
        let ip = w.next()?;
        if !ip.starts_with("127.") {
            return None;
        }
        w.find(|n| {
            *n != "localhost"
                && !n.starts_with('#')
                && n.contains(|c: char| c.is_ascii_alphabetic())
        })
        .map(str::to_string)
    });
    let Some(name) = name else {
        eprintln!("skipped: /etc/hosts maps no name but localhost to loopback");
        return;
    };
    let port = origin("loopback service");
    let mut f = start(&[format!("{name}:{port}")]);
    let (code, out, _) = curl(&[
        "-w",
        "%{http_code}",
        "-x",
        &f.url,
        &format!("http://{name}:{port}/"),
    ]);
    assert_eq!(code, 0);
    assert!(out.ends_with("502"), "{out}");
    assert!(
        out.contains("loopback, link-local or special address"),
        "{out}"
    );
    let ev = f.stop();
    assert_eq!(ev.len(), 1);
    assert!(ev[0].allowed);
    assert_eq!(ev[0].status, 502);
    assert!(ev[0]
        .error
        .as_deref()
        .unwrap()
        .contains("allow it by address"));
}

#[test]
fn shutdown_closes_open_tunnels_and_reports_them() {
    let port = origin("x");
    let mut f = start(&[format!("127.0.0.1:{port}")]);
    let addr = f.url.trim_start_matches("http://").to_string();
    let mut s = TcpStream::connect(&addr).unwrap();
    write!(
        s,
        "CONNECT 127.0.0.1:{port} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n"
    )
    .unwrap();
    let mut buf = [0u8; 128];
    let n = s.read(&mut buf).unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
    let ev = f.stop();
    assert_eq!(ev.len(), 1, "{ev:?}");
    assert_eq!(ev[0].error.as_deref(), Some("closed: the session ended"));
    // The client side sees the tunnel close.
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    assert_eq!(s.read(&mut buf).unwrap_or(0), 0);
}

#[test]
fn origin_form_requests_are_refused() {
    let mut f = start(&[]);
    let (code, out, _) = curl(&["-w", "%{http_code}", &format!("{}/", f.url)]);
    assert_eq!(code, 0);
    assert!(out.ends_with("400"), "{out}");
    assert!(out.contains("send CONNECT host:port or an absolute http:// URI"));
    assert_eq!(f.stop().len(), 1);
}
