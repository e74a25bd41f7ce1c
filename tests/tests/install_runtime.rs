//! `hack/install-runtime`: registers shadow-runtime with Docker, Podman and containerd, shows
//! what it changed, keeps what was there, and changes nothing the second time. The files are
//! then read by the engines themselves (containerd's `config dump`, Podman's `info`); the Docker
//! registration is what `engines.rs` starts dockerd with.

use std::fs;
use std::process::Command;

use shadow_integration_tests::{require_root, runtime, workspace_dir};

fn install(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(workspace_dir().join("hack/install-runtime"))
        .args(args)
        .output()
        .expect("run hack/install-runtime");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn installer_registers_with_all_three_engines_idempotently() {
    let dir = tempfile::tempdir().unwrap();
    let p = |f: &str| dir.path().join(f).to_string_lossy().into_owned();
    let rt = runtime().to_string_lossy().into_owned();
    fs::write(
        p("daemon.json"),
        r#"{"debug": true, "runtimes": {"other": {"path": "/usr/bin/other"}}}"#,
    )
    .unwrap();
    fs::write(
        p("config.toml"),
        "version = 2\n[debug]\n  level = \"info\"\n",
    )
    .unwrap();
    let args = [
        "--runtime",
        &rt,
        "--docker",
        &p("daemon.json"),
        "--podman",
        &p("conf.d/50-shadow.conf"),
        "--containerd",
        &p("config.toml"),
        "--store",
        "/srv/shadow",
    ];
    let (code, out, err) = install(&args);
    assert_eq!(code, 0, "{out}{err}");
    // Shown as diffs, then written.
    for f in ["daemon.json", "conf.d/50-shadow.conf", "config.toml"] {
        assert!(out.contains(&format!("+++ {} (after)", p(f))), "{out}");
        assert!(out.contains(&format!("{} updated", p(f))), "{out}");
    }
    let dj: serde_json::Value =
        serde_json::from_slice(&fs::read(p("daemon.json")).unwrap()).unwrap();
    assert_eq!(
        dj,
        serde_json::json!({
            "debug": true,
            "runtimes": {
                "other": {"path": "/usr/bin/other"},
                "shadow": {"path": rt},
                "shadow-capture": {"path": rt, "runtimeArgs": ["--shadow-capture=/work", "--shadow-store=/srv/shadow"]},
            },
        })
    );
    let before: Vec<Vec<u8>> = ["daemon.json", "conf.d/50-shadow.conf", "config.toml"]
        .iter()
        .map(|f| fs::read(p(f)).unwrap())
        .collect();

    // Second run: nothing to do, and it says so.
    let (code, out, err) = install(&args);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(
        out.matches("unchanged (already registered)").count(),
        3,
        "{out}"
    );
    assert!(!out.contains("+++"), "{out}");
    let after: Vec<Vec<u8>> = ["daemon.json", "conf.d/50-shadow.conf", "config.toml"]
        .iter()
        .map(|f| fs::read(p(f)).unwrap())
        .collect();
    assert_eq!(before, after);

    // containerd parses it: the CRI runtime `shadow` with our binary, run.shadow.* pod
    // annotations passed through, and the user's own settings kept.
    let out = Command::new("containerd")
        .args(["--config", &p("config.toml"), "config", "dump"])
        .output()
        .unwrap();
    let dump = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{dump}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        dump.contains("[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.shadow]"),
        "{dump}"
    );
    assert!(dump.contains(&format!("BinaryName = {rt:?}")), "{dump}");
    assert!(
        dump.contains("pod_annotations = [\"run.shadow.*\"]"),
        "{dump}"
    );
    assert!(dump.contains("level = \"info\""), "{dump}");

    // A file it cannot safely edit is refused, untouched.
    fs::write(p("bad.json"), "[1, 2]").unwrap();
    let (code, _, err) = install(&[
        "--runtime",
        &rt,
        "--docker",
        &p("bad.json"),
        "--no-podman",
        "--no-containerd",
    ]);
    assert_ne!(code, 0);
    assert!(
        err.contains("is not a JSON object; not touching it"),
        "{err}"
    );
    assert_eq!(fs::read_to_string(p("bad.json")).unwrap(), "[1, 2]");
    fs::write(p("v1.toml"), "[debug]\n  level = \"info\"\n").unwrap();
    let (code, _, err) = install(&[
        "--runtime",
        &rt,
        "--containerd",
        &p("v1.toml"),
        "--no-podman",
        "--no-docker",
    ]);
    assert_ne!(code, 0);
    assert!(err.contains("is not a version 2 config"), "{err}");
    let (code, _, err) = install(&["--runtime", "relative/rt", "--no-docker"]);
    assert_ne!(code, 0);
    assert!(err.contains("must be an absolute path"), "{err}");
    // --dry-run shows and writes nothing.
    let (code, out, _) = install(&[
        "--runtime",
        &rt,
        "--docker",
        &p("newdir/new.json"),
        "--no-podman",
        "--no-containerd",
        "--dry-run",
    ]);
    assert_eq!(code, 0);
    assert!(
        out.contains("dry run") && !dir.path().join("newdir").exists(),
        "{out}"
    );
}

/// Podman reads the drop-in: `--runtime shadow` resolves to our binary.
#[test]
fn podman_reads_the_installed_drop_in() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let p = |f: &str| dir.path().join(f).to_string_lossy().into_owned();
    let rt = runtime().to_string_lossy().into_owned();
    let (code, out, err) = install(&[
        "--runtime",
        &rt,
        "--podman",
        &p("50-shadow.conf"),
        "--no-docker",
        "--no-containerd",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let out = Command::new("podman")
        .env("CONTAINERS_CONF", p("50-shadow.conf"))
        .args([
            "--root",
            &p("root"),
            "--runroot",
            &p("runroot"),
            "--runtime",
            "shadow",
            "info",
            "--format",
            "{{.Host.OCIRuntime.Name}} {{.Host.OCIRuntime.Path}}",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(text.trim(), format!("shadow {rt}"));
}
