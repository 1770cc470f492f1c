//! `cargo xtask code-figures [--sites]`: the figures that say how easy the
//! tree is to change, counted from the sources. Rust is parsed with `syn`,
//! so comments and doc text never count as code:
//!
//! - `#[path]` attributes: a module compiled from another crate's file;
//! - root re-imports: a crate root's `use` of another workspace crate's
//!   module, which makes that module look local;
//! - top-level module names that two product crates both have;
//! - functions longer than [`LONG_FUNCTION`] lines, per crate, tests apart;
//! - `Tracer`'s fields and methods;
//! - `docs/architecture.md`'s lines;
//! - silent skips: a test function that returns early (outside a closure),
//!   or test code whose strings say it skipped or did not count, so that a
//!   test can pass without checking what it names;
//! - tracker references (`issue 25`, `issue #7`) in code, scripts and docs.
//!
//! With `--sites`, each counted thing is listed with its file and line.
//! Nothing fails here: the figures are for reading; what must hold (no
//! import cycle, the doc's import table) is checked by its own test.
use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
};

use anyhow::Context as _;
use proc_macro2::{TokenStream, TokenTree};
use syn::visit::Visit;

/// A function is long past this many lines, from its signature to its
/// closing brace.
pub const LONG_FUNCTION: usize = 120;

/// The crates whose sources are counted, by folder.
const CRATES: &[&str] = &[
    "asys-common",
    "asys-ebpf",
    "asys-inject",
    "asys-report",
    "asys-userspace",
    "fuzz",
    "tests",
    "xtask",
];

/// The crates whose top-level module names must not repeat: the product's.
const PRODUCT_CRATES: &[&str] = &[
    "asys-common",
    "asys-inject",
    "asys-report",
    "asys-userspace",
];

/// This file, left out of the counts: its examples of what it counts would
/// count.
const THIS_FILE: &str = "xtask/src/code_figures.rs";

/// Files read for tracker references, besides Rust, by extension.
const TEXT_EXTENSIONS: &[&str] = &["rs", "md", "sh", "py", "c", "h", "toml", "txt"];

pub fn run(args: &[String]) -> anyhow::Result<()> {
    let sites = match args {
        [] => false,
        [a] if a == "--sites" => true,
        _ => anyhow::bail!("usage: cargo xtask code-figures [--sites]"),
    };
    Figures::count(&crate::root())?.print(sites);
    Ok(())
}

#[derive(Debug, Default)]
pub struct Figures {
    pub path_attributes: Vec<String>,
    pub root_reimports: Vec<String>,
    pub shared_module_names: Vec<String>,
    /// Per crate: the long functions outside tests, and those in tests.
    pub long_functions: BTreeMap<String, (Vec<String>, Vec<String>)>,
    pub tracer_fields: usize,
    pub tracer_methods: usize,
    pub architecture_lines: usize,
    pub silent_skips: Vec<String>,
    pub tracker_references: Vec<String>,
}

impl Figures {
    pub fn count(root: &Path) -> anyhow::Result<Self> {
        let mut f = Figures::default();
        let mut modules: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
        for krate in CRATES {
            modules.insert(krate, top_level_modules(&root.join(krate)));
        }
        for krate in CRATES {
            let mut files = Vec::new();
            files_under(&root.join(krate), &["rs"], &mut files);
            files.sort();
            let mut long = (Vec::new(), Vec::new());
            for file in files.iter().filter(|f| !f.ends_with(THIS_FILE)) {
                let text = std::fs::read_to_string(file)
                    .with_context(|| format!("reading {}", file.display()))?;
                let ast = syn::parse_file(&text)
                    .with_context(|| format!("parsing {}", file.display()))?;
                let shown = file
                    .strip_prefix(root)
                    .unwrap_or(file)
                    .display()
                    .to_string();
                let mut v = FileVisitor {
                    file: shown.clone(),
                    in_test: is_test_file(file),
                    test_fn: false,
                    closures: 0,
                    tracer_crate: *krate == "asys-userspace",
                    figures: &mut f,
                    long: &mut long,
                };
                v.visit_file(&ast);
                if is_crate_root(file) {
                    root_reimports(&ast, &shown, &modules, &mut f.root_reimports);
                }
            }
            f.long_functions.insert(krate.to_string(), long);
        }
        let mut seen: BTreeMap<&str, &str> = BTreeMap::new();
        for krate in PRODUCT_CRATES {
            for m in &modules[krate] {
                if let Some(other) = seen.insert(m, krate) {
                    f.shared_module_names
                        .push(format!("{m}: {other} and {krate}"));
                }
            }
        }
        f.architecture_lines = std::fs::read_to_string(root.join("docs/architecture.md"))
            .map(|t| t.lines().count())
            .unwrap_or(0);
        let mut texts = Vec::new();
        files_under(root, TEXT_EXTENSIONS, &mut texts);
        texts.sort();
        for file in texts.into_iter().filter(|f| !f.ends_with(THIS_FILE)) {
            let Ok(text) = std::fs::read_to_string(&file) else {
                continue;
            };
            let shown = file.strip_prefix(root).unwrap_or(&file).display();
            for (i, line) in text.lines().enumerate() {
                if names_an_issue(line) {
                    f.tracker_references
                        .push(format!("{shown}:{}: {}", i + 1, line.trim()));
                }
            }
        }
        Ok(f)
    }

    pub fn print(&self, sites: bool) {
        let list = |name: &str, items: &[String]| {
            println!("{name}: {}", items.len());
            if sites {
                for i in items {
                    println!("    {i}");
                }
            }
        };
        list("#[path] attributes", &self.path_attributes);
        list("root re-imports", &self.root_reimports);
        list(
            "top-level module names in two product crates",
            &self.shared_module_names,
        );
        println!("functions over {LONG_FUNCTION} lines (code / tests):");
        for (krate, (code, tests)) in &self.long_functions {
            println!("    {krate}: {} / {}", code.len(), tests.len());
            if sites {
                for i in code.iter().chain(tests) {
                    println!("        {i}");
                }
            }
        }
        println!(
            "Tracer: {} fields, {} methods",
            self.tracer_fields, self.tracer_methods
        );
        println!("docs/architecture.md: {} lines", self.architecture_lines);
        list("silent skips", &self.silent_skips);
        list("tracker references", &self.tracker_references);
    }
}

/// Files under `dir` with one of `extensions`, leaving out build output,
/// fuzz corpora, git's folder and the Python environments xtask makes.
pub fn files_under(dir: &Path, extensions: &[&str], out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        let name = e.file_name();
        let Ok(kind) = e.file_type() else { continue };
        if kind.is_dir() {
            let skip = ["target", "corpus", "artifacts", ".git", "node_modules"];
            if !skip.iter().any(|s| name == *s) {
                files_under(&p, extensions, out);
            }
        } else if kind.is_file()
            && p.extension()
                .and_then(|x| x.to_str())
                .is_some_and(|x| extensions.contains(&x))
        {
            out.push(p);
        }
    }
}

fn is_test_file(file: &Path) -> bool {
    let s = file.to_string_lossy();
    s.contains("/tests/") || s.ends_with("/tests.rs")
}

fn is_crate_root(file: &Path) -> bool {
    let s = file.to_string_lossy();
    s.ends_with("/src/lib.rs") || s.ends_with("/src/main.rs")
}

/// A crate's top-level modules: the files and module folders beside its
/// root.
fn top_level_modules(dir: &Path) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let Ok(entries) = std::fs::read_dir(dir.join("src")) else {
        return out;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if let Some(m) = name.strip_suffix(".rs") {
            if !matches!(m, "lib" | "main") {
                out.insert(m.to_string());
            }
        } else if e.path().join("mod.rs").exists() {
            out.insert(name);
        }
    }
    out
}

/// Each module of another workspace crate that a crate root's `use` brings
/// in as a name of its own (`use asys_report::{report, stats}`), so that
/// `crate::report` seems to be the crate's own.
fn root_reimports(
    ast: &syn::File,
    file: &str,
    modules: &BTreeMap<&str, BTreeSet<String>>,
    out: &mut Vec<String>,
) {
    for item in &ast.items {
        let syn::Item::Use(u) = item else { continue };
        let syn::UseTree::Path(p) = &u.tree else {
            continue;
        };
        let krate = p.ident.to_string().replace('_', "-");
        let Some(theirs) = modules.get(krate.as_str()) else {
            continue;
        };
        let mut named = Vec::new();
        first_names(&p.tree, &mut named);
        for n in named.into_iter().filter(|n| theirs.contains(n)) {
            out.push(format!(
                "{file}:{}: {} :: {n}",
                u.use_token.span.start().line,
                p.ident
            ));
        }
    }
}

/// The names a use tree imports as they are, one level down: `{a, b as c}`
/// gives `a` and `b`; `a::x` imports `x`, not `a`, and gives nothing.
fn first_names(tree: &syn::UseTree, out: &mut Vec<String>) {
    match tree {
        syn::UseTree::Path(_) => {}
        syn::UseTree::Name(n) => out.push(n.ident.to_string()),
        syn::UseTree::Rename(r) => out.push(r.ident.to_string()),
        syn::UseTree::Group(g) => g.items.iter().for_each(|t| first_names(t, out)),
        syn::UseTree::Glob(_) => {}
    }
}

/// Whether a line names a tracker issue by number: `issue 25`, `Issue
/// #7`, `issues 3`.
fn names_an_issue(line: &str) -> bool {
    let lower = line.to_ascii_lowercase();
    let mut rest = lower.as_str();
    while let Some(at) = rest.find("issue") {
        let before = rest[..at].chars().next_back();
        let after = rest[at + 5..].trim_start_matches('s');
        let after = after.trim_start_matches([' ', '#']);
        if !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
            && after.starts_with(|c: char| c.is_ascii_digit())
        {
            return true;
        }
        rest = &rest[at + 5..];
    }
    false
}

/// Words in a test's strings that say it did not check what it names.
fn says_it_skipped(text: &str) -> bool {
    text.contains("SKIP") || text.contains("NOT COUNTED") || text.contains("skipping")
}

fn is_test_attribute(a: &syn::Attribute) -> bool {
    a.path().segments.last().is_some_and(|s| s.ident == "test")
}

fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg") && a.parse_args::<syn::Ident>().is_ok_and(|i| i == "test")
    })
}

struct FileVisitor<'a> {
    file: String,
    /// In a test file or a `#[cfg(test)]` module.
    in_test: bool,
    /// Inside a `#[test]` function's own body (not a nested function's).
    test_fn: bool,
    /// Closures around the current point, inside a test function.
    closures: usize,
    tracer_crate: bool,
    figures: &'a mut Figures,
    long: &'a mut (Vec<String>, Vec<String>),
}

impl FileVisitor<'_> {
    fn site(&self, line: usize) -> String {
        format!("{}:{line}", self.file)
    }

    /// Counts a function's length, then visits its body with the test
    /// context it sets.
    fn function(
        &mut self,
        name: &syn::Ident,
        attrs: &[syn::Attribute],
        sig: &syn::Signature,
        body: &syn::Block,
    ) {
        let is_test = attrs.iter().any(is_test_attribute);
        let start = sig.fn_token.span.start().line;
        let end = body.brace_token.span.close().end().line;
        let lines = end.saturating_sub(start) + 1;
        if lines > LONG_FUNCTION {
            let entry = format!("{} {name} ({lines} lines)", self.site(start));
            if is_test || self.in_test {
                self.long.1.push(entry);
            } else {
                self.long.0.push(entry);
            }
        }
        let saved = (self.test_fn, self.closures, self.in_test);
        self.test_fn = is_test;
        self.closures = 0;
        self.in_test |= is_test;
        self.visit_block(body);
        (self.test_fn, self.closures, self.in_test) = saved;
    }

    fn literal(&mut self, text: &str, line: usize) {
        if self.in_test && says_it_skipped(text) {
            let site = format!("{} says {text}", self.site(line));
            self.figures.silent_skips.push(site);
        }
    }

    fn tokens(&mut self, tokens: TokenStream) {
        for t in tokens {
            match t {
                TokenTree::Group(g) => self.tokens(g.stream()),
                TokenTree::Literal(l) => {
                    let text = l.to_string();
                    if text.starts_with('"') || text.starts_with('r') {
                        self.literal(&text, l.span().start().line);
                    }
                }
                TokenTree::Ident(i) if i == "return" && self.test_fn && self.closures == 0 => {
                    let site = format!("{} returns early", self.site(i.span().start().line));
                    self.figures.silent_skips.push(site);
                }
                _ => {}
            }
        }
    }
}

impl<'ast> Visit<'ast> for FileVisitor<'_> {
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if let Some(a) = m.attrs.iter().find(|a| a.path().is_ident("path")) {
            let site = format!(
                "{} mod {}",
                self.site(a.pound_token.span.start().line),
                m.ident
            );
            self.figures.path_attributes.push(site);
        }
        let saved = self.in_test;
        self.in_test |= is_cfg_test(&m.attrs);
        syn::visit::visit_item_mod(self, m);
        self.in_test = saved;
    }

    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        self.function(&f.sig.ident, &f.attrs, &f.sig, &f.block);
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        self.function(&f.sig.ident, &f.attrs, &f.sig, &f.block);
    }

    fn visit_trait_item_fn(&mut self, f: &'ast syn::TraitItemFn) {
        if let Some(body) = &f.default {
            self.function(&f.sig.ident, &f.attrs, &f.sig, body);
        }
    }

    fn visit_item_struct(&mut self, s: &'ast syn::ItemStruct) {
        if self.tracer_crate && s.ident == "Tracer" {
            self.figures.tracer_fields += s.fields.len();
        }
        syn::visit::visit_item_struct(self, s);
    }

    fn visit_item_impl(&mut self, i: &'ast syn::ItemImpl) {
        let is_tracer = matches!(&*i.self_ty, syn::Type::Path(p)
            if p.path.segments.last().is_some_and(|s| s.ident == "Tracer"));
        if self.tracer_crate && is_tracer && i.trait_.is_none() {
            self.figures.tracer_methods += i
                .items
                .iter()
                .filter(|it| matches!(it, syn::ImplItem::Fn(_)))
                .count();
        }
        let saved = self.in_test;
        self.in_test |= is_cfg_test(&i.attrs);
        syn::visit::visit_item_impl(self, i);
        self.in_test = saved;
    }

    fn visit_expr_closure(&mut self, c: &'ast syn::ExprClosure) {
        self.closures += 1;
        syn::visit::visit_expr_closure(self, c);
        self.closures -= 1;
    }

    fn visit_expr_async(&mut self, a: &'ast syn::ExprAsync) {
        // An async block's `return` leaves the block, as a closure's does.
        self.closures += 1;
        syn::visit::visit_expr_async(self, a);
        self.closures -= 1;
    }

    fn visit_expr_return(&mut self, r: &'ast syn::ExprReturn) {
        if self.test_fn && self.closures == 0 {
            let site = format!(
                "{} returns early",
                self.site(r.return_token.span.start().line)
            );
            self.figures.silent_skips.push(site);
        }
        syn::visit::visit_expr_return(self, r);
    }

    fn visit_lit_str(&mut self, s: &'ast syn::LitStr) {
        self.literal(&s.value(), s.span().start().line);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        self.tokens(m.tokens.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_names_an_issue_only_by_its_number() {
        assert!(names_an_issue("// as issue 25 asked"));
        assert!(names_an_issue("Issue #7's scenarios"));
        assert!(names_an_issue("(issues 3 and 4)"));
        assert!(!names_an_issue("the issue's bar is 2x"));
        assert!(!names_an_issue("kernels they issue, 4 of them"));
        assert!(!names_an_issue("reissue 4 calls"));
    }

    #[test]
    fn a_test_that_returns_early_or_says_it_skipped_is_counted() {
        let code = r#"
            #[test]
            fn a() { if x() { return; } let f = || { return 1; }; }
            #[test]
            fn b() { eprintln!("SKIPPED: no file"); }
            #[test]
            fn c() { assert!(y()); }
            fn helper() { return; }
        "#;
        let ast = syn::parse_file(code).unwrap();
        let mut figures = Figures::default();
        let mut long = (Vec::new(), Vec::new());
        let mut v = FileVisitor {
            file: "x.rs".into(),
            in_test: false,
            test_fn: false,
            closures: 0,
            tracer_crate: false,
            figures: &mut figures,
            long: &mut long,
        };
        v.visit_file(&ast);
        assert_eq!(figures.silent_skips.len(), 2, "{:?}", figures.silent_skips);
        assert!(figures.silent_skips[0].contains("returns early"));
        assert!(figures.silent_skips[1].contains("SKIPPED"));
    }

    #[test]
    fn a_root_use_of_another_crates_module_is_a_reimport() {
        let ast =
            syn::parse_file("use asys_report::{report, stats::x, Thing, export as e};").unwrap();
        let modules: BTreeMap<&str, BTreeSet<String>> = [(
            "asys-report",
            ["report", "stats", "export"]
                .map(String::from)
                .into_iter()
                .collect(),
        )]
        .into_iter()
        .collect();
        let mut out = Vec::new();
        root_reimports(&ast, "main.rs", &modules, &mut out);
        assert_eq!(out.len(), 2, "{out:?}");
    }
}
