//! Network policy by host: the sandbox's only way out is shadow's proxy, which reaches the
//! allowed hosts only and logs every decision. Loopback only: the "internet" here is a test
//! HTTP server on the host's 127.0.0.1, which the sandbox's own loopback cannot reach directly.

use serde_json::Value;
use shadow_integration_tests::shadow::*;

fn records(p: &Project, kind: &str) -> Vec<Value> {
    let o = p.ok(&["log", "--json"]);
    o.stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| r["kind"] == kind)
        .map(|r| r["data"].clone())
        .collect()
}

/// Debian's interpreter (pyenv's lives under /root, which the sandbox hides).
const PY: &str = "/usr/bin/python3";

#[test]
fn allowed_host_is_reached_and_everything_else_is_refused_and_logged() {
    let p = Project::new("net-allow");
    let ok_port = http_origin("allowed");
    let other = http_origin("forbidden");
    // A UDP socket on the host's loopback: nothing sent inside may arrive here.
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let udp_port = udp.local_addr().unwrap().port();
    let script = format!(
        "curl -sS -w ' %{{http_code}}\\n' http://127.0.0.1:{ok_port}/a; \
         curl -sS -w ' %{{http_code}}\\n' http://127.0.0.1:{other}/b; \
         curl -sS -p -w ' %{{http_code}}\\n' http://127.0.0.1:{ok_port}/tunnel; \
         curl -sS --noproxy '*' http://127.0.0.1:{ok_port}/direct; echo direct=$?; \
         {PY} - <<'EOF'
import socket
for what, f in [
    ('udp-out', lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('192.0.2.1', 53))),
    ('udp-lo', lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('127.0.0.1', {udp_port}))),
    ('dns', lambda: socket.getaddrinfo('example.com', 443)),
    ('raw', lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)),
    ('tcp-out', lambda: socket.create_connection(('192.0.2.1', 443), timeout=3)),
]:
    try:
        f()
        print(what, 'OK')
    except Exception as e:
        print(what, 'failed', type(e).__name__)
EOF"
    );
    let o = p.run_with(&["--allow-host", &format!("127.0.0.1:{ok_port}")], &script);
    assert_eq!(o.code(), Some(0), "{o}");
    let lines: Vec<&str> = o.stdout.lines().collect();
    assert_eq!(lines[0], format!("allowed [GET /a HTTP/1.1] 200"), "{o}");
    assert_eq!(
        lines[1],
        format!("shadow proxy: port {other} of 127.0.0.1 is not in the session's allowed hosts")
    );
    assert_eq!(lines[2], " 403");
    assert_eq!(lines[3], "allowed [GET /tunnel HTTP/1.1] 200");
    // Direct: the sandbox's 127.0.0.1 is its own, where nothing listens on that port.
    assert_eq!(lines[4], "direct=7");
    // UDP to the outside has no route (the send itself fails); to loopback it stays in the
    // sandbox's namespace (the send "works" but nothing arrives on the host, checked below).
    assert_eq!(lines[5], "udp-out failed OSError", "{o}");
    assert_eq!(lines[6], "udp-lo OK");
    assert_eq!(lines[7], "dns failed gaierror");
    assert_eq!(lines[8], "raw failed PermissionError");
    assert_eq!(lines[9], "tcp-out failed OSError");
    udp.set_nonblocking(true).unwrap();
    let mut b = [0u8; 16];
    assert!(
        udp.recv_from(&mut b).is_err(),
        "a UDP datagram left the sandbox"
    );

    let net = records(&p, "net");
    assert_eq!(net.len(), 3, "{net:?}");
    let get = &net[0];
    assert_eq!(get["method"], "GET");
    assert_eq!(get["allowed"], true);
    assert_eq!(get["status"], 200);
    assert_eq!(get["port"], ok_port);
    assert!(get["bytes_down"].as_u64().unwrap() > 20, "{get}");
    assert_eq!(net[1]["allowed"], false);
    assert_eq!(net[1]["status"], 403);
    assert_eq!(net[1]["port"], other);
    assert_eq!(net[2]["method"], "CONNECT");
    assert_eq!(net[2]["allowed"], true);
    assert!(net[2]["bytes_down"].as_u64().unwrap() > 20);
    let start = &records(&p, "session.start")[0];
    assert_eq!(
        start["network"]["hosts"],
        serde_json::json!([format!("127.0.0.1:{ok_port}")])
    );
    let end = &records(&p, "session.end")[0];
    assert_eq!(
        end["network"],
        serde_json::json!({"allowed": 2, "denied": 1})
    );
    let v = p.ok(&["log", "--verify"]);
    assert!(v.stdout.contains("chain intact"), "{v}");
}

#[test]
fn profile_hosts_go_through_the_proxy_with_landlock_connect_rules() {
    let p = Project::new("net-profile");
    let port = http_origin("via-profile");
    // claude-code limits TCP connects to 443 with Landlock: the proxy's port must be added.
    p.write(
        ".shadow/profiles/agent.toml",
        &format!(
            "extends = \"claude-code\"\n[network]\nmode = \"hosts\"\nhosts = [\"127.0.0.1:{port}\"]\n"
        ),
    );
    let o = p.run_with(
        &["--profile", "agent"],
        &format!("curl -sS http://127.0.0.1:{port}/p; echo; {PY} -c \"import socket; socket.create_connection(('127.0.0.1', 80), timeout=2)\" 2>&1 | tail -1"),
    );
    assert_eq!(o.code(), Some(0), "{o}");
    let lines: Vec<&str> = o.stdout.lines().collect();
    assert_eq!(lines[0], "via-profile [GET /p HTTP/1.1]", "{o}");
    // Landlock refuses a connect to a port that is neither 443 nor the proxy's.
    assert_eq!(
        lines[1], "PermissionError: [Errno 13] Permission denied",
        "{o}"
    );
    // --network none wins over the profile: no proxy, no variables.
    let o = p.run_with(
        &["--profile", "agent", "--network", "none"],
        &format!(
            "echo proxy=${{HTTP_PROXY:-unset}}; curl -sS http://127.0.0.1:{port}/p; echo rc=$?"
        ),
    );
    assert_eq!(o.code(), Some(0), "{o}");
    assert!(o.stdout.starts_with("proxy=unset\n"), "{o}");
    assert!(o.stdout.ends_with("rc=7\n"), "{o}");
}

#[test]
fn dry_run_shows_the_proxy_hook_and_variables() {
    let p = Project::new("net-dry");
    let o = p.ok(&[
        "run",
        "--dry-run",
        "--allow-host",
        "*.github.com",
        "--",
        "true",
    ]);
    let spec: Value = serde_json::from_str(&o.stdout).unwrap();
    let hook = &spec["hooks"]["createContainer"][0];
    assert_eq!(hook["path"], "/proc/self/exe");
    assert_eq!(hook["args"][1], "__shadow-listen");
    assert_eq!(hook["args"][3], "127.0.0.1:3128");
    let env: Vec<&str> = spec["process"]["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(
        env.contains(&"HTTPS_PROXY=http://127.0.0.1:3128"),
        "{env:?}"
    );
    assert!(env.contains(&"NO_PROXY=localhost,127.0.0.1,::1"), "{env:?}");
    let ns: Vec<&str> = spec["linux"]["namespaces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["type"].as_str().unwrap())
        .collect();
    assert!(ns.contains(&"network"), "{ns:?}");
    assert!(
        o.stderr
            .contains("# network: proxy on 127.0.0.1:3128 allowing *.github.com"),
        "{o}"
    );
}

#[test]
fn bad_host_rules_get_one_line_and_no_session() {
    let p = Project::new("net-bad");
    for (rule, needle) in [
        ("*", "* alone would allow everything"),
        ("https://x.org/", "give a host, not a URL"),
        ("x.org:99999", "the port must be 1-65535 or *"),
    ] {
        let o = p.sh(&["run", "--allow-host", rule, "--", "true"]);
        assert_ne!(o.code(), Some(0), "{o}");
        let line = one_line(&o);
        assert!(
            line.contains("--allow-host") && line.contains(needle),
            "{line}"
        );
    }
    p.write(
        ".shadow/profiles/bad.toml",
        "extends = \"default\"\n[network]\nmode = \"hosts\"\nhosts = [\"a.*.org\"]\n",
    );
    let o = p.sh(&["run", "--profile", "bad", "--", "true"]);
    assert_ne!(o.code(), Some(0));
    let line = one_line(&o);
    // The profile schema places the error: file, line, column.
    assert!(line.contains("bad.toml:4:10: host \"a.*.org\""), "{line}");
    let o = p.sh(&[
        "run",
        "--allow-network",
        "--allow-host",
        "x.org",
        "--",
        "true",
    ]);
    assert_eq!(o.code(), Some(2), "{o}");
    assert!(o.stderr.contains("cannot be used with"), "{o}");
    assert!(p.session_ids().is_empty());
}
