//! What the sandbox of `shadow run` must not see or do: each test attempts it from inside and
//! checks that it failed, and that the host is untouched.

use std::io::ErrorKind;
use std::net::TcpListener;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};

use shadow_integration_tests::shadow::Project;
use shadow_integration_tests::unique;

/// Lines of stdout.
fn lines(s: &str) -> Vec<&str> {
    s.lines().collect()
}

#[test]
fn writes_outside_the_project_fail() {
    let p = Project::new("iso-write");
    let n = unique("x");
    let targets: Vec<String> = ["/usr", "/etc", "/var", "/opt", ""]
        .iter()
        .map(|d| format!("{d}/shadow-etest-{n}"))
        .collect();
    let script: String = targets
        .iter()
        .map(|t| format!("if touch {t} 2>/dev/null; then echo WROTE {t}; else echo denied; fi; "))
        .collect();
    let out = p.run(&script);
    assert_eq!(out.code(), Some(0), "{out}");
    assert_eq!(lines(&out.stdout), vec!["denied"; targets.len()], "{out}");
    for t in &targets {
        assert!(!Path::new(t).exists(), "{t} was created on the host");
    }
    // The reason is a read-only file system (EROFS), not a missing directory.
    let out = p.run("touch /usr/x 2>&1; touch /etc/x 2>&1; true");
    assert_eq!(
        out.stdout.matches("Read-only file system").count(),
        2,
        "{out}"
    );
}

#[test]
fn session_sees_its_changes_the_project_does_not() {
    let p = Project::new("iso-overlay");
    let before = p.snapshot();
    let out = p.run(
        "echo changed > README.md; echo new > new.txt; rm run.sh; \
         cat README.md; cat new.txt; test -e run.sh && echo still-there || echo gone",
    );
    assert_eq!(out.code(), Some(0), "{out}");
    assert_eq!(lines(&out.stdout), vec!["changed", "new", "gone"]);
    shadow_integration_tests::shadow::assert_same_tree("project after run", &before, &p.snapshot());
    assert_eq!(p.read("README.md"), "# demo\n\nA small project.\n");
    // …and the session kept them.
    let ns = p.ok(&["diff", "--name-status"]);
    assert_eq!(ns.stdout, "M\tREADME.md\nA\tnew.txt\nD\trun.sh\n");
}

#[test]
fn home_credentials_are_not_readable() {
    let p = Project::new("iso-creds");
    let files = [
        (
            ".ssh/id_rsa",
            "-----BEGIN OPENSSH PRIVATE KEY----- sekrit-ssh\n",
        ),
        (
            ".aws/credentials",
            "[default]\naws_secret_access_key = sekrit-aws\n",
        ),
        (".netrc", "machine x login y password sekrit-netrc\n"),
        (".config/gh/hosts.yml", "oauth_token: sekrit-gh\n"),
    ];
    for (rel, content) in files {
        let f = p.home.join(rel);
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(&f, content).unwrap();
    }
    let home = p.home.display();
    let out = p.run(&format!(
        "echo HOME=$HOME; \
         for f in ~/.ssh/id_rsa ~/.aws/credentials {home}/.ssh/id_rsa {home}/.aws/credentials \
                  ~/.netrc ~/.config/gh/hosts.yml; do \
           if cat $f 2>/dev/null; then echo READ $f; else echo denied; fi; done; \
         ls -A ~ | wc -l"
    ));
    assert_eq!(out.code(), Some(0), "{out}");
    assert!(!out.stdout.contains("sekrit"), "a credential leaked: {out}");
    assert!(!out.stdout.contains("READ"), "{out}");
    let l = lines(&out.stdout);
    assert_eq!(l[0], format!("HOME={home}"), "HOME is mapped inside");
    assert_eq!(&l[1..7], &["denied"; 6], "{out}");
    assert_eq!(l[7].trim(), "0", "the sandbox's home is empty: {out}");
}

#[test]
fn etc_shadow_is_not_readable() {
    let p = Project::new("iso-etc-shadow");
    assert!(
        std::fs::read_to_string("/etc/shadow")
            .unwrap()
            .contains("root:"),
        "the host's /etc/shadow has root's entry"
    );
    let out = p.run(
        "for f in /etc/shadow /etc/gshadow /etc/sudoers; do \
           test -e $f || continue; cat $f 2>/dev/null | wc -c; done",
    );
    assert_eq!(out.code(), Some(0), "{out}");
    for l in lines(&out.stdout) {
        assert_eq!(l.trim(), "0", "a host secret file is readable: {out}");
    }
    let out = p.run("cat /etc/shadow 2>/dev/null; true");
    assert!(!out.stdout.contains("root:"), "{out}");
}

/// A unix socket on the host, removed on drop.
struct HostSocket {
    path: PathBuf,
    _l: UnixListener,
}

impl HostSocket {
    fn bind(path: PathBuf) -> Self {
        let l = UnixListener::bind(&path).unwrap();
        HostSocket { path, _l: l }
    }
}

impl Drop for HostSocket {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

#[test]
fn host_sockets_are_absent() {
    let p = Project::new("iso-sockets");
    let n = unique("sock");
    let run = HostSocket::bind(format!("/run/shadow-test-{n}.sock").into());
    let tmp = HostSocket::bind(format!("/tmp/shadow-test-{n}.sock").into());
    let mut script = String::new();
    for path in [
        run.path.display().to_string(),
        format!("/var/run/shadow-test-{n}.sock"),
        tmp.path.display().to_string(),
        "/run/docker.sock".into(),
        "/var/run/docker.sock".into(),
        "/run/dbus/system_bus_socket".into(),
    ] {
        script.push_str(&format!(
            "if test -e {path}; then echo PRESENT {path}; else echo absent; fi; "
        ));
    }
    script.push_str("ls -A /run /tmp | grep -c shadow-test || true");
    let out = p.run(&script);
    assert_eq!(out.code(), Some(0), "{out}");
    let l = lines(&out.stdout);
    assert_eq!(&l[..6], &["absent"; 6], "{out}");
    assert_eq!(l[6], "0", "{out}");
    assert!(run.path.exists() && tmp.path.exists());
}

#[test]
fn environment_is_allowlisted() {
    let p = Project::new("iso-env");
    let script = "echo FOO_TOKEN=${FOO_TOKEN-unset}; echo AWS_SECRET_ACCESS_KEY=${AWS_SECRET_ACCESS_KEY-unset}; \
                  echo A=${A-unset}; echo PATH_SET=${PATH:+yes}";
    let mut c = p.cmd(&["run", "--", "sh", "-c", script]);
    c.env("FOO_TOKEN", "secret")
        .env("AWS_SECRET_ACCESS_KEY", "sekrit");
    let out = p.out(c);
    assert_eq!(out.code(), Some(0), "{out}");
    assert_eq!(
        lines(&out.stdout),
        vec![
            "FOO_TOKEN=unset",
            "AWS_SECRET_ACCESS_KEY=unset",
            "A=unset",
            "PATH_SET=yes"
        ]
    );
    // Nothing of the secret shows up anywhere in the environment.
    let mut c = p.cmd(&["run", "--", "env"]);
    c.env("FOO_TOKEN", "secret");
    let out = p.out(c);
    assert!(!out.stdout.contains("secret"), "{out}");

    let mut c = p.cmd(&[
        "run",
        "--env",
        "FOO_TOKEN",
        "--env",
        "A=b",
        "--",
        "sh",
        "-c",
        script,
    ]);
    c.env("FOO_TOKEN", "secret")
        .env("AWS_SECRET_ACCESS_KEY", "sekrit");
    let out = p.out(c);
    assert_eq!(out.code(), Some(0), "{out}");
    assert_eq!(
        lines(&out.stdout),
        vec![
            "FOO_TOKEN=secret",
            "AWS_SECRET_ACCESS_KEY=unset",
            "A=b",
            "PATH_SET=yes"
        ]
    );
}

/// Whether a connection to `l` is waiting in its backlog.
fn connected(l: &TcpListener) -> bool {
    l.set_nonblocking(true).unwrap();
    match l.accept() {
        Ok(_) => true,
        Err(e) if e.kind() == ErrorKind::WouldBlock => false,
        Err(e) => panic!("accept: {e}"),
    }
}

#[test]
fn host_loopback_is_unreachable_without_allow_network() {
    let p = Project::new("iso-net");
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let bash = format!(
        "if bash -c 'echo > /dev/tcp/127.0.0.1/{port}' 2>/dev/null; then echo CONNECTED; else echo refused; fi"
    );
    let out = p.run(&format!(
        "{bash}; if busybox nc -w 2 127.0.0.1 {port} </dev/null; then echo CONNECTED; else echo refused; fi"
    ));
    assert_eq!(out.code(), Some(0), "{out}");
    assert_eq!(lines(&out.stdout), vec!["refused", "refused"], "{out}");
    assert!(!connected(&l), "the host listener got a connection");

    let out = p.run_with(&["--allow-network"], &bash);
    assert_eq!(out.code(), Some(0), "{out}");
    assert_eq!(lines(&out.stdout), vec!["CONNECTED"], "{out}");
    assert!(connected(&l), "the host listener got no connection");
}

#[test]
fn loopback_inside_is_up_and_usable() {
    let p = Project::new("iso-lo");
    // The server's stdin stays open (busybox nc can stop at its stdin's EOF before it has read
    // the peer), and both sides wait by polling, not by a fixed sleep (load made that flaky).
    let out = p.run(
        "grep -c : /proc/net/dev; grep -o 'lo:' /proc/net/dev; \
         busybox ip link show lo | grep -o 'UP' | head -1; \
         sleep 5 | busybox nc -l -p 4567 > /tmp/got & \
         for i in $(seq 100); do echo ping-inside | busybox nc -w 2 127.0.0.1 4567 2>/dev/null && break; sleep 0.05; done; \
         for i in $(seq 100); do [ -s /tmp/got ] && break; sleep 0.05; done; cat /tmp/got",
    );
    assert_eq!(out.code(), Some(0), "{out}");
    assert_eq!(
        lines(&out.stdout),
        vec!["1", "lo:", "UP", "ping-inside"],
        "only lo, up, and a server inside is reachable: {out}"
    );
}

#[test]
fn no_capabilities_and_no_new_privileges() {
    let p = Project::new("iso-caps");
    let out = p.run(
        "grep -E '^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs):' /proc/self/status; \
         mkdir -p /tmp/m; if mount -t tmpfs none /tmp/m 2>/dev/null; then echo MOUNTED; else echo denied; fi; \
         if chown 1234 README.md 2>/dev/null; then echo CHOWNED; else echo denied; fi",
    );
    assert_eq!(out.code(), Some(0), "{out}");
    let l = lines(&out.stdout);
    for cap in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        let line = l
            .iter()
            .find(|x| x.starts_with(&format!("{cap}:")))
            .unwrap_or_else(|| panic!("no {cap}: {out}"));
        assert!(line.ends_with("0000000000000000"), "{line}");
    }
    assert!(l.contains(&"NoNewPrivs:\t1"), "{out}");
    assert_eq!(&l[l.len() - 2..], &["denied", "denied"], "{out}");
}

#[test]
fn pid_namespace_shows_only_the_sandbox() {
    let p = Project::new("iso-pid");
    let me = std::process::id();
    let out = p.run(&format!(
        "ls /proc | grep -c '^[0-9]'; tr '\\0' ' ' < /proc/2/cmdline; echo; \
         test -e /proc/{me} && echo HOST-PID-VISIBLE || echo ok; ps -e | wc -l"
    ));
    assert_eq!(out.code(), Some(0), "{out}");
    let l = lines(&out.stdout);
    let n: usize = l[0].trim().parse().unwrap();
    assert!(n <= 5, "{n} pids visible inside: {out}");
    // pid 1 is shadow's minimal init (runtime-core's init_shim); the command is its child.
    assert!(l[1].starts_with("sh -c"), "pid 2 is the command: {out}");
    if me > 10 {
        assert_eq!(l[2], "ok", "{out}");
    }
    let ps: usize = l[3].trim().parse().unwrap();
    assert!(ps <= 6, "ps shows {ps} lines: {out}");
}

#[test]
fn sandbox_init_binary_is_unreachable_from_inside() {
    // CVE-2019-5736 class: the sandbox's pid 1 is a fork of the shadow binary; a process inside
    // must not be able to open (let alone write) that binary through /proc/1/exe.
    let p = Project::new("iso-exe");
    let out = p.run(
        "readlink /proc/1/exe >/dev/null 2>&1 && echo RESOLVED; \
         head -c 4 /proc/1/exe >/dev/null 2>&1 && echo READABLE; \
         (echo x >> /proc/1/exe) 2>/dev/null && echo WRITABLE; echo done",
    );
    assert_eq!(out.code(), Some(0), "{out}");
    assert_eq!(out.stdout.trim(), "done", "{out}");
}
