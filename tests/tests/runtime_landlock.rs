//! The Landlock policy a bundle carries (`run.shadow.landlock`) is enforced by the runtime inside
//! the container, whatever the mounts expose: the case of an engine that bind-mounts a secret.

use serde_json::json;
use shadow_integration_tests::*;

/// A bundle whose container sees a "credentials" file through a bind mount, and a policy.
fn ctx_with_policy(tag: &str, script: &str, policy: serde_json::Value) -> Ctx {
    let mut ctx = Ctx::new(tag, &["sh", "-c", script]);
    let secrets = ctx.dir().join("aws");
    std::fs::create_dir_all(&secrets).unwrap();
    std::fs::write(
        secrets.join("credentials"),
        "aws_secret_access_key=hunter2\n",
    )
    .unwrap();
    std::fs::create_dir_all(ctx.rootfs.join("root/.aws")).unwrap();
    std::fs::create_dir_all(ctx.rootfs.join("work")).unwrap();
    ctx.spec["mounts"]
        .as_array_mut()
        .unwrap()
        .push(json!({"destination": "/root/.aws", "type": "bind",
                     "source": secrets, "options": ["rbind", "ro"]}));
    ctx.spec["mounts"]
        .as_array_mut()
        .unwrap()
        .push(json!({"destination": "/work", "type": "tmpfs", "source": "tmpfs"}));
    ctx.spec["annotations"] = json!({"run.shadow.landlock": policy.to_string()});
    ctx.write_spec();
    ctx
}

#[test]
fn a_denied_path_stays_unreadable_even_when_mounted() {
    let script = "cat /root/.aws/credentials; echo rc=$?; ls /root/.aws >/dev/null && echo listed; \
                  echo hi > /work/ok && cat /work/ok; echo x > /tmp/no; echo tmp=$?; cat /etc/passwd >/dev/null && echo etc-ok";
    let ctx = ctx_with_policy(
        "llden",
        script,
        json!({"version": 1, "read_only": ["/"], "read_write": ["/work", "/dev"],
               "deny": ["/root/.aws"]}),
    );
    let id = ctx.id("c");
    let o = ctx.rt(&["run", &id]);
    assert_eq!(o.code(), Some(0), "{o}");
    assert!(o.stderr.contains("Permission denied"), "{o}");
    assert!(!o.stdout.contains("hunter2"), "{o}");
    assert!(o.stdout.contains("rc=1"), "{o}");
    // The project-like tree is writable, the rest read-only, the rest of / readable.
    assert!(o.stdout.contains("hi\n"), "{o}");
    assert!(
        o.stdout.contains("tmp=1") || o.stdout.contains("tmp=2"),
        "{o}"
    );
    assert!(o.stdout.contains("etc-ok"), "{o}");
    ctx.assert_clean();
}

#[test]
fn without_a_policy_the_mount_is_readable() {
    // The control: the same bundle without the annotation reads the file, so the test above
    // measures Landlock, not the mount.
    let mut ctx = ctx_with_policy("llctl", "cat /root/.aws/credentials", json!({}));
    ctx.spec["annotations"] = json!({});
    ctx.write_spec();
    let id = ctx.id("c");
    let o = ctx.rt(&["run", &id]);
    assert_eq!(o.code(), Some(0), "{o}");
    assert!(o.stdout.contains("hunter2"), "{o}");
    ctx.assert_clean();
}

#[test]
fn tcp_connect_is_limited_to_the_listed_ports() {
    // Two listeners on the container's own loopback; only port 8081 may be connected to.
    let script = "nc -l -p 8080 >/dev/null & nc -l -p 8081 >/dev/null & sleep 0.3; \
                  echo a | nc -w1 127.0.0.1 8080; echo c8080=$?; echo b | nc -w1 127.0.0.1 8081; echo c8081=$?";
    let ctx = ctx_with_policy(
        "llnet",
        script,
        json!({"version": 1, "read_only": ["/"], "read_write": ["/dev", "/tmp"],
               "tcp_connect": [8081]}),
    );
    let id = ctx.id("c");
    let o = ctx.rt(&["run", &id]);
    assert!(o.stdout.contains("c8080=1"), "{o}");
    assert!(o.stdout.contains("c8081=0"), "{o}");
    ctx.assert_clean();
}

#[test]
fn a_malformed_policy_is_refused_at_create_with_its_position() {
    let ctx = ctx_with_policy("llbad", "true", json!({"version": 1, "read_only": [7]}));
    let id = ctx.id("c");
    let o = ctx.rt(&["create", &id]);
    assert_ne!(o.code(), Some(0), "{o}");
    let line = o.one_error_line();
    assert!(
        line.contains("annotation run.shadow.landlock: at read_only[0]: invalid type"),
        "{line}"
    );
    ctx.assert_clean();
}

/// A second seccomp filter carried by the bundle (`run.shadow.seccomp`, what an agent profile on
/// an engine container becomes) is stacked by the executor: the call it denies fails with its
/// errno, everything else runs; without no-new-privileges, or malformed, it is refused at create.
#[test]
fn a_stacked_seccomp_filter_denies_its_calls() {
    let filter = json!({"defaultAction": "SCMP_ACT_ALLOW",
        "syscalls": [{"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1}]});
    let mut ctx = Ctx::new(
        "stack",
        &["sh", "-c", "mkdir /tmp/d; echo mkdir=$?; echo ran"],
    );
    ctx.spec["process"]["noNewPrivileges"] = json!(true);
    ctx.spec["annotations"] = json!({"run.shadow.seccomp": filter.to_string()});
    ctx.write_spec();
    let o = ctx.rt(&["run", &ctx.id("c")]);
    assert_eq!(o.code(), Some(0), "{o}");
    assert!(o.stdout.contains("mkdir=1\nran\n"), "{o}");
    assert!(o.stderr.contains("Operation not permitted"), "{o}");

    ctx.spec["process"]["noNewPrivileges"] = json!(false);
    ctx.write_spec();
    let o = ctx.rt(&["run", &ctx.id("d")]);
    assert_ne!(o.code(), Some(0), "{o}");
    assert!(
        o.stderr
            .contains("annotation run.shadow.seccomp: needs process.noNewPrivileges = true"),
        "{o}"
    );
    ctx.spec["process"]["noNewPrivileges"] = json!(true);
    ctx.spec["annotations"] = json!({"run.shadow.seccomp": "{\"defaultAction\": 7}"});
    ctx.write_spec();
    let o = ctx.rt(&["run", &ctx.id("e")]);
    assert_ne!(o.code(), Some(0), "{o}");
    assert!(o.stderr.contains("annotation run.shadow.seccomp:"), "{o}");
    ctx.assert_clean();
}

/// A denied path the spec masks (`linux.maskedPaths`: /dev/null over a file, an empty tmpfs over
/// a directory) is not carved out of its parent's grant: the mask already hides it, and a
/// Landlock-restricted process cannot unmount it. Observable: a new file can be created next to
/// the masked paths (a carve would have made the parent list-only), the masks read empty, and
/// `umount` fails even with CAP_SYS_ADMIN and no seccomp filter. The control run, without the
/// policy, unmounts the mask and reads the secret: the test measures Landlock, not the mount.
#[test]
fn a_masked_denied_path_is_not_carved_and_its_mask_cannot_be_removed() {
    let script = "cat /data/secret; echo cat=$?; ls /data/keys; echo ls=$?; \
                  echo new > /data/new && cat /data/new; \
                  umount /data/secret; echo um=$?; umount /data/keys; echo umk=$?; \
                  cat /data/secret; ls /data/keys";
    let run = |tag: &str, policy: Option<serde_json::Value>| {
        let mut ctx = Ctx::new(tag, &["sh", "-c", script]);
        let data = ctx.dir().join("data");
        std::fs::create_dir_all(data.join("keys")).unwrap();
        std::fs::write(data.join("secret"), "hunter2\n").unwrap();
        std::fs::write(data.join("keys/id_ed25519"), "PRIVATE KEY\n").unwrap();
        std::fs::create_dir_all(ctx.rootfs.join("data")).unwrap();
        ctx.spec["mounts"]
            .as_array_mut()
            .unwrap()
            .push(json!({"destination": "/data", "type": "bind",
                         "source": data, "options": ["rbind", "rw"]}));
        ctx.spec["linux"]["maskedPaths"] = json!(["/data/secret", "/data/keys"]);
        for set in ["bounding", "effective", "permitted"] {
            ctx.spec["process"]["capabilities"][set]
                .as_array_mut()
                .unwrap()
                .push(json!("CAP_SYS_ADMIN"));
        }
        ctx.spec["process"]["noNewPrivileges"] = json!(true);
        if let Some(p) = policy {
            ctx.spec["annotations"] = json!({"run.shadow.landlock": p.to_string()});
        }
        ctx.write_spec();
        let o = ctx.rt(&["run", &ctx.id("c")]);
        ctx.assert_clean();
        o
    };
    let o = run(
        "llmask",
        Some(
            json!({"version": 1, "read_only": ["/"], "read_write": ["/data", "/dev"],
                    "deny": ["/data/secret", "/data/keys"]}),
        ),
    );
    assert_eq!(o.code(), Some(0), "{o}");
    assert!(o.stdout.contains("cat=0\n"), "{o}");
    assert!(o.stdout.contains("ls=0\n"), "{o}");
    assert!(
        o.stdout.contains("new\n"),
        "a carve would have refused the new file: {o}"
    );
    assert!(
        o.stdout.contains("um=1\n") && o.stdout.contains("umk=1\n"),
        "{o}"
    );
    assert!(o.stderr.contains("Operation not permitted"), "{o}");
    assert!(
        !o.stdout.contains("hunter2") && !o.stdout.contains("id_ed25519"),
        "{o}"
    );

    let o = run("llmaskctl", None);
    assert!(o.stdout.contains("um=0\n"), "{o}");
    assert!(
        o.stdout.contains("hunter2") && o.stdout.contains("id_ed25519"),
        "{o}"
    );
}
