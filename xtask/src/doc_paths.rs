//! The files the docs name must exist. In README.md, CONTRIBUTING.md and
//! docs/*.md:
//!
//! - each path of the form `asys-NAME/src/...` or `docs/NAME.md`, from the
//!   repository's root;
//! - each relative link target (`[text](other.md)`), from the doc's folder;
//! - each Rust file named by a shorter path (`kernel/multi.rs`, `spawn.rs`):
//!   some file of the repository must end with it, so that a doc naming a
//!   file by its folder in a crate names the folder it is in now.
//!
//! A file moved or removed fails `cargo test -p xtask` until the docs say
//! where it went. Checked by this module's test.

use std::path::Path;

/// The docs whose paths are checked: README.md, CONTRIBUTING.md and every
/// docs/*.md.
pub fn docs(root: &Path) -> Vec<std::path::PathBuf> {
    let mut out = vec![root.join("README.md"), root.join("CONTRIBUTING.md")];
    if let Ok(entries) = std::fs::read_dir(root.join("docs")) {
        for e in entries.flatten() {
            let p = e.path();
            if p.extension().is_some_and(|x| x == "md") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// What a line of a doc names: a path from the repository's root, or a
/// link relative to the doc.
#[derive(Debug, PartialEq, Eq)]
pub enum Named {
    FromRoot(String),
    Link(String),
    /// A `.rs` file by the end of its path.
    RustFile(String),
}

/// Characters a named path is made of; it ends at the first other one.
fn path_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '/')
}

/// The paths `text` names, each with its line (from 1).
pub fn named(text: &str) -> Vec<(usize, Named)> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let mut at = 0;
        while at < line.len() {
            let rest = &line[at..];
            let boundary = !line[..at].chars().next_back().is_some_and(path_char);
            if boundary && (rest.starts_with("asys-") || rest.starts_with("docs/")) {
                let end = rest.find(|c| !path_char(c)).unwrap_or(rest.len());
                let path = rest[..end].trim_end_matches('.');
                if is_named_path(path) {
                    out.push((i + 1, Named::FromRoot(path.to_string())));
                }
                at += end.max(1);
                continue;
            }
            if boundary && rest.starts_with(path_char) {
                let end = rest.find(|c| !path_char(c)).unwrap_or(rest.len());
                let word = rest[..end].trim_end_matches('.');
                if word.ends_with(".rs") && !word.starts_with(['.', '/']) {
                    out.push((i + 1, Named::RustFile(word.to_string())));
                }
                at += end.max(1);
                continue;
            }
            if let Some(target) = rest.strip_prefix("](")
                && let Some(end) = target.find(')')
            {
                let target = target[..end].split('#').next().unwrap_or("");
                let external = target.contains("://") || target.starts_with("mailto:");
                if !target.is_empty() && !external {
                    out.push((i + 1, Named::Link(target.to_string())));
                }
            }
            at += rest.chars().next().map_or(1, char::len_utf8);
        }
    }
    out
}

/// `asys-NAME/src/...` or `docs/NAME.md`.
fn is_named_path(path: &str) -> bool {
    if let Some(rest) = path.strip_prefix("docs/") {
        return rest.ends_with(".md") && !rest.contains('/');
    }
    path.strip_prefix("asys-")
        .and_then(|rest| rest.split_once('/'))
        .is_some_and(|(krate, rest)| !krate.is_empty() && rest.starts_with("src/"))
}

/// Every path the docs name that does not exist, as `doc:line: path`.
pub fn missing(root: &Path) -> anyhow::Result<Vec<String>> {
    let mut files = Vec::new();
    crate::code_figures::files_under(root, &["rs"], &mut files);
    let files: Vec<String> = files
        .iter()
        .map(|f| f.strip_prefix(root).unwrap_or(f).display().to_string())
        .collect();
    let mut out = Vec::new();
    for doc in docs(root) {
        let Ok(text) = std::fs::read_to_string(&doc) else {
            continue; // a doc that is not there names nothing
        };
        let shown = doc.strip_prefix(root).unwrap_or(&doc).display().to_string();
        let folder = doc.parent().unwrap_or(root);
        for (line, name) in named(&text) {
            let (path, exists) = match &name {
                Named::FromRoot(p) => (p, root.join(p).exists()),
                Named::Link(p) => (p, folder.join(p).exists()),
                Named::RustFile(p) => (
                    p,
                    files.iter().any(|f| {
                        f == p || f.strip_suffix(p.as_str()).is_some_and(|s| s.ends_with('/'))
                    }),
                ),
            };
            if !exists {
                out.push(format!("{shown}:{line}: {path}"));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_from_the_root_and_relative_links_are_found() {
        let text = "See `asys-userspace/src/elf/mapped.rs`. And docs/waits.md, \
                    [probes](probes.md#specs), [web](https://x.org/a.md),\n\
                    not asys-*/src/x.rs nor ../docs/x.md; tests/asys-tests/src/a.rs; \
                    asys-report/src/report/ and asys-ebpf/src/{a,b}.rs and `docs/images/x.png`.\n\
                    `kernel/multi.rs`, spawn.rs, but not crate::x::y nor x.rsa or .rs.\n";
        let found = named(text);
        assert_eq!(
            found,
            [
                (
                    1,
                    Named::FromRoot("asys-userspace/src/elf/mapped.rs".into())
                ),
                (1, Named::FromRoot("docs/waits.md".into())),
                (1, Named::Link("probes.md".into())),
                (2, Named::RustFile("tests/asys-tests/src/a.rs".into())),
                (2, Named::FromRoot("asys-report/src/report/".into())),
                (2, Named::FromRoot("asys-ebpf/src/".into())),
                (3, Named::RustFile("kernel/multi.rs".into())),
                (3, Named::RustFile("spawn.rs".into())),
            ]
        );
    }

    #[test]
    fn a_missing_path_is_named_with_its_doc_and_line() {
        let dir = std::env::temp_dir().join(format!("xtask-doc-paths-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("docs")).unwrap();
        std::fs::create_dir_all(dir.join("asys-x/src")).unwrap();
        std::fs::create_dir_all(dir.join("asys-x/src/stage")).unwrap();
        std::fs::write(dir.join("asys-x/src/here.rs"), "").unwrap();
        std::fs::write(dir.join("asys-x/src/stage/file.rs"), "").unwrap();
        std::fs::write(
            dir.join("README.md"),
            "asys-x/src/here.rs\n[a](docs/a.md)\n",
        )
        .unwrap();
        std::fs::write(
            dir.join("docs/a.md"),
            "ok: asys-x/src/here.rs, stage/file.rs, file.rs\n\
             moved: asys-x/src/gone.rs, [b](b.md), other/file.rs, age/file.rs\n",
        )
        .unwrap();
        let found = missing(&dir);
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(
            found.unwrap(),
            [
                "docs/a.md:2: asys-x/src/gone.rs",
                "docs/a.md:2: b.md",
                "docs/a.md:2: other/file.rs",
                "docs/a.md:2: age/file.rs"
            ]
        );
    }

    /// This repository's docs.
    #[test]
    fn every_path_the_docs_name_exists() {
        let root = crate::root();
        for doc in docs(&root) {
            assert!(doc.is_file(), "{} is missing", doc.display());
        }
        let missing = missing(&root).unwrap();
        assert!(
            missing.is_empty(),
            "the docs name {} path{} that do{} not exist (moved or removed: say where it \
             went):\n{}",
            missing.len(),
            if missing.len() == 1 { "" } else { "s" },
            if missing.len() == 1 { "es" } else { "" },
            missing.join("\n")
        );
    }
}
