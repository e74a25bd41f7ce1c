use super::*;

#[test]
fn errors_carry_file_line_and_column() {
    let e = parse("p.toml", "[filesystem]\nread_only = [\"~/a\"]\nwrite = 3\n").unwrap_err();
    assert!(
        e.msg.starts_with("p.toml:3:1: unknown field `write`"),
        "{e}"
    );
    let e = parse("p.toml", "[seccomp]\ndeny = [\"mount\", \"sockets\"]\n").unwrap_err();
    assert!(
        e.msg.starts_with("p.toml:2:18: unknown variant `sockets`"),
        "{e}"
    );
    let e = parse("p.toml", "[filesystem]\ndeny = [\"/etc/../root\"]\n").unwrap_err();
    assert_eq!(
        e.msg,
        "p.toml:2:9: path \"/etc/../root\" must not contain `..`"
    );
    let e = parse("p.toml", "[filesystem]\nread_only = [\"**/x\"]\n").unwrap_err();
    assert_eq!(
        e.msg,
        "p.toml:2:14: path \"**/x\": globs are only allowed in `deny`"
    );
    let e = parse("p.toml", "[resources]\nmemory = \"lots\"\n").unwrap_err();
    assert_eq!(
        e.msg,
        "p.toml:2:10: size \"lots\": a number with an optional k, m, g or t"
    );
    let e = parse("p.toml", "[network]\nhosts = [\"a b:1\"]\n").unwrap_err();
    assert!(e.msg.starts_with("p.toml:2:10: host \"a b:1\""), "{e}");
    let e = parse("p.toml", "description = \n").unwrap_err();
    assert!(e.msg.starts_with("p.toml:1:"), "{e}");
}

#[test]
fn merge_appends_lists_and_overrides_scalars() {
    let parent = parse(
        "a",
        "[filesystem]\ndeny=[\"~/.aws\"]\n[network]\nmode=\"off\"\n[resources]\npids=10\nmemory=\"1g\"\n[seccomp]\ndeny=[\"mount\"]\n",
    )
    .unwrap();
    let child = parse(
        "b",
        "extends=\"a\"\n[filesystem]\ndeny=[\"~/.aws\",\"~/.kube\"]\n[resources]\npids=20\n[seccomp]\ndeny=[\"bpf\"]\n",
    )
    .unwrap();
    let base = merge(&Profile::default(), &parent);
    let p = merge(&base, &child);
    assert_eq!(p.filesystem.deny, vec!["~/.aws", "~/.kube"]);
    assert_eq!(p.resources.pids, Some(20));
    assert_eq!(p.resources.memory.as_deref(), Some("1g"));
    assert_eq!(p.network.mode, NetMode::Off);
    assert_eq!(
        p.seccomp.deny,
        vec![crate::seccomp::Group::Mount, crate::seccomp::Group::Bpf]
    );
    // A child that sets no mode keeps the parent's.
    let on = merge(
        &Profile::default(),
        &parse("c", "[network]\nmode=\"on\"\n").unwrap(),
    );
    assert_eq!(merge(&on, &child).network.mode, NetMode::On);
}

#[test]
fn sizes() {
    assert_eq!(parse_size("4g"), Some(4 << 30));
    assert_eq!(parse_size("512M"), Some(512 << 20));
    assert_eq!(parse_size("100"), Some(100));
    assert_eq!(parse_size("0"), None);
    assert_eq!(parse_size("x"), None);
}
