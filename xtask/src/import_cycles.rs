//! `cargo xtask import-cycles` (and the first step of `cargo xtask test`):
//! no import cycle between the top-level modules of any crate of the
//! workspace.
//!
//! A top-level module is a module the crate root declares (`src/x.rs` or
//! `src/x/`, or an inline `mod x { .. }` in the root); the root itself
//! (`main.rs`, `lib.rs`, a test or build script file) is not one. Module `a`
//! imports module `b` when a file of `a` names `b` by a path: `use crate::b`,
//! `use crate::{b::c, ..}`, `crate::b::f()` in code, `super::b::T` from a file
//! directly under the root, or such a path inside a macro's tokens
//! (`$crate::b::..` included). `super::`/`self::` paths that stay inside the
//! module are not imports. Files are parsed with `syn`, so comments, doc text
//! and string literals never count. Each crate's files are found from its
//! targets' roots (`cargo metadata`) by following `mod` declarations, so a
//! crate added to the workspace is checked too.

use std::{
    collections::{BTreeMap, BTreeSet, VecDeque},
    fmt::Write as _,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context as _, bail};
use proc_macro2::{TokenStream, TokenTree};
use syn::visit::Visit;

/// One crate root to check: `name` says which (a package, and the target
/// when the package has several roots).
#[derive(Debug, Clone)]
pub struct Root {
    pub name: String,
    pub file: PathBuf,
}

/// Where a module names another.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Site {
    pub file: PathBuf,
    pub line: usize,
    /// The path as written (`crate::record::recorder::Recorder`).
    pub path: String,
}

/// The imports between the top-level modules of one crate root.
#[derive(Debug, Default)]
pub struct Graph {
    pub modules: BTreeSet<String>,
    /// (from, to) → every place `from` names `to`, in file and line order.
    pub edges: BTreeMap<(String, String), Vec<Site>>,
}

/// A cycle: `modules[0] → modules[1] → … → modules[0]`, with the first
/// place each edge is made (`sites[i]` is `modules[i] → modules[i + 1]`).
#[derive(Debug)]
pub struct Cycle {
    pub modules: Vec<String>,
    pub sites: Vec<Site>,
    /// The other modules tangled with these (the rest of the strongly
    /// connected component), if any.
    pub tangled: Vec<String>,
}

/// Where the generated import table lives, between [`TABLE_BEGIN`] and
/// [`TABLE_END`].
pub const DOC: &str = "docs/architecture.md";
pub const TABLE_BEGIN: &str = "<!-- import-table begin -->";
pub const TABLE_END: &str = "<!-- import-table end -->";
/// The command that rewrites the doc's copy of the table.
pub const WRITE_DOC: &str = "cargo xtask import-cycles --edges --write-doc";

const USAGE: &str = "usage: cargo xtask import-cycles [--edges [--sites | --write-doc]]";

/// The task: checks every crate of this workspace, printing one line when
/// there is no cycle, failing with every cycle otherwise. With `--edges`,
/// first prints the import table ([`edge_table`]); with `--edges --sites`,
/// every import between top-level modules with its first file:line; with
/// `--write-doc`, puts the table into [`DOC`] instead of printing it.
pub fn run(args: &[String]) -> anyhow::Result<()> {
    let mut edges = false;
    let mut sites = false;
    let mut write_doc = false;
    for a in args {
        match a.as_str() {
            "--edges" => edges = true,
            "--sites" => sites = true,
            "--write-doc" => write_doc = true,
            _ => bail!("{USAGE}"),
        }
    }
    if (sites && (!edges || write_doc)) || (write_doc && !edges) {
        bail!("{USAGE}");
    }
    let root = crate::root();
    let roots = workspace_roots(&root)?;
    if write_doc {
        let doc = root.join(DOC);
        let text = std::fs::read_to_string(&doc).with_context(|| format!("cannot read {DOC}"))?;
        let table = edge_table(&roots)?;
        match with_table(&text, &table)? {
            Some(new) => {
                std::fs::write(&doc, new).with_context(|| format!("cannot write {DOC}"))?;
                eprintln!("import-cycles: wrote the import table into {DOC}");
            }
            None => eprintln!("import-cycles: {DOC}'s import table is up to date"),
        }
    } else if sites {
        for r in &roots {
            let graph = graph(r)?;
            println!("{}:", r.name);
            for ((from, to), sites) in &graph.edges {
                let s = &sites[0];
                println!(
                    "  {from} -> {to}: {}:{} ({}{})",
                    relative(&s.file, &root).display(),
                    s.line,
                    s.path,
                    more(sites.len())
                );
            }
        }
    } else if edges {
        print!("{}", edge_table(&roots)?);
        eprintln!("import-cycles: `{WRITE_DOC}` puts this table into {DOC}");
    }
    check(&root, &roots)?;
    // With a table on stdout, the verdict goes to stderr, so that stdout
    // is the table alone.
    let verdict = format!(
        "import-cycles: no import cycle between top-level modules ({} crate root{} checked)",
        roots.len(),
        if roots.len() == 1 { "" } else { "s" }
    );
    if edges && !sites {
        eprintln!("{verdict}");
    } else {
        println!("{verdict}");
    }
    Ok(())
}

/// The crates the doc's table leaves out: the project's tooling, whose
/// modules are independent tasks (`cargo xtask import-cycles` still checks
/// them for cycles).
const NOT_IN_DOC: &[&str] = &["xtask"];

/// The imports between top-level modules as markdown, for [`DOC`]: for
/// each product crate root with more than one top-level module (by name), a line
/// naming it and a table `| module | imports |` with every module and the
/// modules it imports, sorted and comma-separated. No file or line: the
/// table changes only when an import between modules does.
pub fn edge_table(roots: &[Root]) -> anyhow::Result<String> {
    let mut named: Vec<(&str, Graph)> = Vec::new();
    for r in roots {
        if NOT_IN_DOC.contains(&r.name.as_str()) {
            continue;
        }
        let g = graph(r)?;
        if g.modules.len() > 1 {
            named.push((&r.name, g));
        }
    }
    named.sort_by(|a, b| a.0.cmp(b.0));
    let mut out = String::new();
    for (i, (name, g)) in named.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let _ = writeln!(out, "`{name}`:\n\n| module | imports |\n| --- | --- |");
        for m in &g.modules {
            let imports: Vec<&str> = g
                .edges
                .keys()
                .filter(|(from, _)| from == m)
                .map(|(_, to)| to.as_str())
                .collect();
            let _ = writeln!(out, "| {m} | {} |", imports.join(", "));
        }
    }
    Ok(out)
}

/// The table between the markers of `doc`, as written there.
pub fn doc_table(doc: &str) -> anyhow::Result<&str> {
    let (begin, end) = markers(doc)?;
    Ok(doc[begin..end].trim_start_matches('\n'))
}

/// `doc` with `table` between its markers, or `None` when it holds that
/// table already.
pub fn with_table(doc: &str, table: &str) -> anyhow::Result<Option<String>> {
    if doc_table(doc)? == table {
        return Ok(None);
    }
    let (begin, end) = markers(doc)?;
    Ok(Some(format!("{}\n{table}{}", &doc[..begin], &doc[end..])))
}

/// Where the table starts (after the begin marker's line) and ends (the
/// end marker's line).
fn markers(doc: &str) -> anyhow::Result<(usize, usize)> {
    let find = |marker: &str| {
        doc.match_indices(marker)
            .map(|(at, _)| at)
            .collect::<Vec<_>>()
    };
    let (begins, ends) = (find(TABLE_BEGIN), find(TABLE_END));
    match (begins.as_slice(), ends.as_slice()) {
        (&[begin], &[end]) if begin < end => {
            let after = begin + TABLE_BEGIN.len();
            Ok((
                after,
                doc[..end].rfind('\n').map_or(end, |n| n + 1).max(after),
            ))
        }
        _ => bail!(
            "{DOC} must hold `{TABLE_BEGIN}` once, then `{TABLE_END}` once, each on a line \
             of its own"
        ),
    }
}

/// Fails, naming every cycle, unless no crate root in `roots` has one.
pub fn check(workspace: &Path, roots: &[Root]) -> anyhow::Result<()> {
    let mut report = String::new();
    let mut count = 0;
    for r in roots {
        for cycle in cycles(&graph(r)?) {
            count += 1;
            report.push_str(&describe(&r.name, &cycle, workspace));
        }
    }
    if count > 0 {
        bail!(
            "{count} import cycle{} between top-level modules (a module may not import one that \
             imports it, directly or through others):\n{report}",
            if count == 1 { "" } else { "s" }
        );
    }
    Ok(())
}

fn more(n: usize) -> String {
    match n {
        1 => String::new(),
        n => format!(", and {} more", n - 1),
    }
}

fn relative<'a>(file: &'a Path, workspace: &Path) -> &'a Path {
    file.strip_prefix(workspace).unwrap_or(file)
}

/// One cycle as the failure message shows it: the modules in order, then
/// one `file:line` per edge.
pub fn describe(crate_name: &str, cycle: &Cycle, workspace: &Path) -> String {
    let mut ring = cycle.modules.clone();
    ring.push(cycle.modules[0].clone());
    let mut s = format!("  in {crate_name}: {}\n", ring.join(" -> "));
    for (i, site) in cycle.sites.iter().enumerate() {
        let _ = writeln!(
            s,
            "    {} -> {}: {}:{} uses {}",
            ring[i],
            ring[i + 1],
            relative(&site.file, workspace).display(),
            site.line,
            site.path
        );
    }
    if !cycle.tangled.is_empty() {
        let _ = writeln!(
            s,
            "    (tangled in the same cycle with: {})",
            cycle.tangled.join(", ")
        );
    }
    s
}

/// The crate roots of every package of the workspace at `workspace`, from
/// `cargo metadata`: each target's root file (lib, bins, tests, build
/// script, ...), once each.
pub fn workspace_roots(workspace: &Path) -> anyhow::Result<Vec<Root>> {
    let out = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(workspace)
        .output()
        .context("cannot run cargo metadata")?;
    if !out.status.success() {
        bail!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let meta: serde_json::Value =
        serde_json::from_slice(&out.stdout).context("cargo metadata's output")?;
    let members: BTreeSet<&str> = meta["workspace_members"]
        .as_array()
        .context("cargo metadata: no workspace_members")?
        .iter()
        .filter_map(|m| m.as_str())
        .collect();
    let mut roots = Vec::new();
    let mut seen = BTreeSet::new();
    for package in meta["packages"].as_array().into_iter().flatten() {
        let id = package["id"].as_str().unwrap_or_default();
        if !members.contains(id) {
            continue;
        }
        let name = package["name"].as_str().unwrap_or_default();
        let targets: Vec<_> = package["targets"]
            .as_array()
            .into_iter()
            .flatten()
            .collect();
        let main_kinds = ["lib", "proc-macro", "bin"];
        let kind = |t: &serde_json::Value| t["kind"][0].as_str().unwrap_or_default().to_string();
        let mains = targets
            .iter()
            .filter(|t| main_kinds.contains(&kind(t).as_str()))
            .count();
        for target in &targets {
            let Some(file) = target["src_path"].as_str() else {
                continue;
            };
            let file = PathBuf::from(file);
            if !seen.insert(file.clone()) {
                continue;
            }
            let kind = kind(target);
            let tname = target["name"].as_str().unwrap_or_default();
            // The package's name for its one library or binary; the
            // target's kind and name for the others.
            let name = if mains == 1 && main_kinds.contains(&kind.as_str()) {
                name.to_string()
            } else {
                format!("{name} ({kind} {tname})")
            };
            roots.push(Root { name, file });
        }
    }
    if roots.is_empty() {
        bail!("cargo metadata listed no crate in {}", workspace.display());
    }
    Ok(roots)
}

/// A path some code names, by its segments (each with its line), and the
/// module whose code names it.
struct Reference {
    module: Vec<String>,
    segments: Vec<(String, usize)>,
    /// In a `use` tree: `use crate::b;` imports `b` itself.
    in_use: bool,
    file: PathBuf,
}

/// The imports between `root`'s top-level modules, from every file of its
/// module tree.
pub fn graph(root: &Root) -> anyhow::Result<Graph> {
    let mut references = Vec::new();
    let mut modules = BTreeSet::new();
    // (module path, candidate files) of each module declared by `mod x;`.
    let mut queue: VecDeque<(Vec<String>, PathBuf, Vec<PathBuf>)> = VecDeque::new();
    let root_dir = root.file.parent().context("a crate root has a folder")?;
    let first = scan_file(&root.file, Vec::new(), root_dir.to_path_buf())?;
    for (path, _, _) in &first.declared {
        modules.insert(path[0].clone());
    }
    modules.extend(first.inline_top.iter().cloned());
    references.extend(first.references);
    queue.extend(first.declared);
    while let Some((module, declared_in, candidates)) = queue.pop_front() {
        let Some(file) = candidates.iter().find(|f| f.is_file()) else {
            bail!(
                "{}: module {} is declared but none of {} exists",
                declared_in.display(),
                module.join("::"),
                candidates
                    .iter()
                    .map(|c| c.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        };
        let name = file.file_name().and_then(|n| n.to_str()).unwrap_or("");
        // A `mod.rs` holds its children beside it; `x.rs` in `x/`.
        let children = if name == "mod.rs" {
            file.parent().unwrap_or(Path::new("")).to_path_buf()
        } else {
            file.with_extension("")
        };
        let scanned = scan_file(file, module, children)?;
        references.extend(scanned.references);
        queue.extend(scanned.declared);
    }
    let mut graph = Graph {
        modules,
        ..Graph::default()
    };
    for r in references {
        let Some(from) = r.module.first() else {
            continue; // the crate root: not a module
        };
        let Some((to, line)) = target(&r, &graph.modules) else {
            continue;
        };
        if to == *from {
            continue;
        }
        let path = r
            .segments
            .iter()
            .map(|(s, _)| s.as_str())
            .collect::<Vec<_>>()
            .join("::");
        graph
            .edges
            .entry((from.clone(), to))
            .or_default()
            .push(Site {
                file: r.file,
                line,
                path,
            });
    }
    for sites in graph.edges.values_mut() {
        sites.sort();
    }
    Ok(graph)
}

/// The top-level module `r` names, and the line of that name, unless it is
/// the module `r` is in (or a crate, or the root's items).
fn target(r: &Reference, modules: &BTreeSet<String>) -> Option<(String, usize)> {
    let segments = &r.segments;
    let rest = match segments.first()?.0.as_str() {
        "crate" => &segments[1..],
        "super" => {
            let up = segments.iter().take_while(|(s, _)| s == "super").count();
            if up < r.module.len() {
                return None; // still inside the module
            }
            &segments[up..]
        }
        // `self::` stays in the module; anything else is a crate, or a
        // name in scope that was imported (and counted) by its own path.
        _ => return None,
    };
    let (name, line) = rest.first()?;
    // `crate::b` alone in code is an item of the root (a function may
    // share a module's name); in a `use` tree it is the module.
    if !modules.contains(name) || (!r.in_use && rest.len() < 2) {
        return None;
    }
    Some((name.clone(), *line))
}

struct Scanned {
    references: Vec<Reference>,
    /// Modules declared with `mod x;` (to be read from files): module path,
    /// the file declaring it, candidate files.
    declared: Vec<(Vec<String>, PathBuf, Vec<PathBuf>)>,
    /// Inline modules (`mod x { .. }`) of the crate root.
    inline_top: Vec<String>,
}

fn scan_file(file: &Path, module: Vec<String>, children: PathBuf) -> anyhow::Result<Scanned> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
    let ast = syn::parse_file(&text)
        .map_err(|e| {
            let at = e.span().start();
            anyhow::anyhow!("{}:{}:{}: {e}", file.display(), at.line, at.column + 1)
        })
        .context("cannot parse a file to check its imports")?;
    let mut scan = Scanner {
        file: file.to_path_buf(),
        file_dir: file.parent().unwrap_or(Path::new("")).to_path_buf(),
        module,
        inline: 0,
        children,
        out: Scanned {
            references: Vec::new(),
            declared: Vec::new(),
            inline_top: Vec::new(),
        },
    };
    scan.visit_file(&ast);
    Ok(scan.out)
}

struct Scanner {
    file: PathBuf,
    file_dir: PathBuf,
    /// The module being read (the file's, then inline modules').
    module: Vec<String>,
    /// How many inline modules deep.
    inline: usize,
    /// Where the current module's `mod x;` files are.
    children: PathBuf,
    out: Scanned,
}

fn ident(i: &syn::Ident) -> String {
    let s = i.to_string();
    s.strip_prefix("r#").map(str::to_string).unwrap_or(s)
}

fn line(i: &syn::Ident) -> usize {
    i.span().start().line
}

impl Scanner {
    fn reference(&mut self, segments: Vec<(String, usize)>, in_use: bool) {
        if segments.is_empty() {
            return;
        }
        self.out.references.push(Reference {
            module: self.module.clone(),
            segments,
            in_use,
            file: self.file.clone(),
        });
    }

    fn use_tree(&mut self, prefix: &mut Vec<(String, usize)>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push((ident(&p.ident), line(&p.ident)));
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                let mut path = prefix.clone();
                if n.ident != "self" {
                    path.push((ident(&n.ident), line(&n.ident)));
                }
                self.reference(path, true);
            }
            syn::UseTree::Rename(r) => {
                let mut path = prefix.clone();
                if r.ident != "self" {
                    path.push((ident(&r.ident), line(&r.ident)));
                }
                self.reference(path, true);
            }
            syn::UseTree::Glob(g) => {
                let mut path = prefix.clone();
                path.push(("*".into(), g.star_token.spans[0].start().line));
                self.reference(path, true);
            }
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.use_tree(prefix, t);
                }
            }
        }
    }

    /// Paths in a macro's tokens, which `syn` leaves unparsed: every
    /// `crate::a::..`, `$crate::a::..` and `super::..` run of `::`-joined
    /// names.
    fn tokens(&mut self, tokens: TokenStream) {
        let flat = flatten(tokens);
        let mut i = 0;
        while i < flat.len() {
            let start = match &flat[i] {
                Flat::Ident(s, _) if s == "crate" || s == "super" => {
                    // `a::super` cannot be; `x::crate` neither.
                    !(i >= 2 && flat[i - 1].is_colon() && flat[i - 2].is_colon())
                }
                _ => false,
            };
            if !start {
                i += 1;
                continue;
            }
            let mut segments = Vec::new();
            let mut j = i;
            while let Some(Flat::Ident(s, l)) = flat.get(j) {
                segments.push((s.clone(), *l));
                if flat.get(j + 1).is_some_and(Flat::is_colon)
                    && flat.get(j + 2).is_some_and(Flat::is_colon)
                {
                    j += 3;
                } else {
                    j += 1;
                    break;
                }
            }
            i = j.max(i + 1);
            self.reference(segments, false);
        }
    }
}

enum Flat {
    Ident(String, usize),
    Punct(char),
    Other,
}

impl Flat {
    fn is_colon(&self) -> bool {
        matches!(self, Flat::Punct(':'))
    }
}

/// A token stream's tokens in order, groups opened (a group's delimiters
/// break a path, as `Other`).
fn flatten(tokens: TokenStream) -> Vec<Flat> {
    let mut out = Vec::new();
    for t in tokens {
        match t {
            TokenTree::Ident(i) => out.push(Flat::Ident(ident(&i), line(&i))),
            TokenTree::Punct(p) => out.push(Flat::Punct(p.as_char())),
            TokenTree::Literal(_) => out.push(Flat::Other),
            TokenTree::Group(g) => {
                out.push(Flat::Other);
                out.extend(flatten(g.stream()));
                out.push(Flat::Other);
            }
        }
    }
    out
}

/// `#[path = "..."]` on a module declaration.
fn path_attribute(attrs: &[syn::Attribute]) -> Option<String> {
    attrs.iter().find_map(|a| match &a.meta {
        syn::Meta::NameValue(nv) if nv.path.is_ident("path") => match &nv.value {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) => Some(s.value()),
            _ => None,
        },
        _ => None,
    })
}

impl<'ast> Visit<'ast> for Scanner {
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        let name = ident(&m.ident);
        let mut path = self.module.clone();
        path.push(name.clone());
        match &m.content {
            Some(_) => {
                if self.module.is_empty() {
                    self.out.inline_top.push(name.clone());
                }
                self.module.push(name.clone());
                self.inline += 1;
                let outer = self.children.clone();
                self.children = self.children.join(&name);
                syn::visit::visit_item_mod(self, m);
                self.children = outer;
                self.inline -= 1;
                self.module.pop();
            }
            None => {
                let candidates = match path_attribute(&m.attrs) {
                    // Relative to the file's folder, or inside inline
                    // modules to theirs.
                    Some(p) if self.inline == 0 => vec![self.file_dir.join(p)],
                    Some(p) => vec![self.children.join(p)],
                    None => vec![
                        self.children.join(format!("{name}.rs")),
                        self.children.join(&name).join("mod.rs"),
                    ],
                };
                self.out
                    .declared
                    .push((path, self.file.clone(), candidates));
                // Attributes may hold paths too.
                for a in &m.attrs {
                    self.visit_attribute(a);
                }
            }
        }
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        if u.leading_colon.is_some() {
            return; // `use ::x`: a crate
        }
        self.use_tree(&mut Vec::new(), &u.tree);
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        if p.leading_colon.is_none() {
            let segments = p
                .segments
                .iter()
                .map(|s| (ident(&s.ident), line(&s.ident)))
                .collect();
            self.reference(segments, false);
        }
        syn::visit::visit_path(self, p);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        self.visit_path(&m.path);
        self.tokens(m.tokens.clone());
    }
}

/// The graph's cycles: one per strongly connected component of more than
/// one module, its shortest (the rest of the component is `tangled`).
pub fn cycles(graph: &Graph) -> Vec<Cycle> {
    let next: BTreeMap<&str, Vec<&str>> = graph.edges.keys().fold(
        BTreeMap::new(),
        |mut m: BTreeMap<&str, Vec<&str>>, (a, b)| {
            m.entry(a.as_str()).or_default().push(b.as_str());
            m
        },
    );
    let mut out = Vec::new();
    for component in components(&graph.modules, &next) {
        if component.len() < 2 {
            continue;
        }
        let inside: BTreeSet<&str> = component.iter().copied().collect();
        // The shortest cycle of the component (the first module by name
        // on a tie): the most direct account of it.
        let Some(ring) = component
            .iter()
            .filter_map(|&start| shortest_cycle(start, &inside, &next))
            .reduce(|best, ring| if ring.len() < best.len() { ring } else { best })
        else {
            continue;
        };
        let sites = (0..ring.len())
            .map(|i| {
                let key = (ring[i].to_string(), ring[(i + 1) % ring.len()].to_string());
                graph.edges[&key][0].clone()
            })
            .collect();
        let on_ring: BTreeSet<&str> = ring.iter().copied().collect();
        out.push(Cycle {
            modules: ring.iter().map(|s| s.to_string()).collect(),
            sites,
            tangled: component
                .iter()
                .filter(|m| !on_ring.contains(*m))
                .map(|s| s.to_string())
                .collect(),
        });
    }
    out
}

/// The shortest cycle from `start` back to it within `inside` (breadth
/// first), as the modules in order from `start`.
fn shortest_cycle<'a>(
    start: &'a str,
    inside: &BTreeSet<&'a str>,
    next: &BTreeMap<&'a str, Vec<&'a str>>,
) -> Option<Vec<&'a str>> {
    let mut came_from: BTreeMap<&str, &str> = BTreeMap::new();
    let mut queue = VecDeque::from([start]);
    while let Some(m) = queue.pop_front() {
        for &n in next.get(m).into_iter().flatten() {
            if !inside.contains(n) {
                continue;
            }
            if n == start {
                let mut ring = vec![m];
                let mut at = m;
                while at != start {
                    at = came_from[at];
                    ring.push(at);
                }
                ring.reverse();
                return Some(ring);
            }
            if let std::collections::btree_map::Entry::Vacant(e) = came_from.entry(n) {
                e.insert(m);
                queue.push_back(n);
            }
        }
    }
    None
}

/// Strongly connected components (Tarjan), each sorted by name.
fn components<'a>(
    nodes: &'a BTreeSet<String>,
    next: &BTreeMap<&'a str, Vec<&'a str>>,
) -> Vec<Vec<&'a str>> {
    struct State<'a> {
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        out: Vec<Vec<&'a str>>,
    }
    fn visit<'a>(v: &'a str, next: &BTreeMap<&'a str, Vec<&'a str>>, s: &mut State<'a>) {
        let i = s.index.len();
        s.index.insert(v, i);
        s.low.insert(v, i);
        s.stack.push(v);
        s.on_stack.insert(v);
        for &w in next.get(v).into_iter().flatten() {
            if !s.index.contains_key(w) {
                visit(w, next, s);
                let low = s.low[v].min(s.low[w]);
                s.low.insert(v, low);
            } else if s.on_stack.contains(w) {
                let low = s.low[v].min(s.index[w]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.push(w);
                if w == v {
                    break;
                }
            }
            component.sort();
            s.out.push(component);
        }
    }
    let mut s = State {
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in nodes {
        if !s.index.contains_key(v.as_str()) {
            visit(v.as_str(), next, &mut s);
        }
    }
    s.out.sort();
    s.out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh folder under the system's temporary folder, removed on drop.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(tag: &str) -> Self {
            use std::sync::atomic::{AtomicUsize, Ordering};
            static N: AtomicUsize = AtomicUsize::new(0);
            let dir = std::env::temp_dir().join(format!(
                "xtask-import-cycles-{}-{tag}-{}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            Scratch(dir)
        }

        fn write(&self, path: &str, text: &str) -> &Self {
            let p = self.0.join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
            self
        }

        fn root(&self, path: &str) -> Root {
            Root {
                name: "planted".into(),
                file: self.0.join(path),
            }
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// A crate whose modules import each other only in ways that are not
    /// imports between top-level modules, or only one way.
    fn acyclic(t: &Scratch) {
        t.write(
            "src/main.rs",
            "mod a;\nmod b;\nmod c;\nfn b() {}\nfn main() { crate::b(); a::f(); }\n",
        )
        .write(
            "src/a/mod.rs",
            "//! Not `crate::b::X`, nor use crate::c::Y;\n\
             mod inner;\n\
             /// See [`crate::c::Z`].\n\
             pub fn f() { let _ = \"crate::c::W\"; let _ = r#\"use crate::c;\"#; \
             inner::g(); crate::b(); }\n\
             #[cfg(test)]\nmod tests { use super::*; use super::inner::g; }\n",
        )
        // super:: from a file of `a` below its mod.rs stays in `a`.
        .write(
            "src/a/inner.rs",
            "use super::f;\npub fn g() { super::super::a::f(); self::h(); }\nfn h() {}\n",
        )
        .write(
            "src/b.rs",
            "use crate::a::f;\nmod deep;\npub fn x() { f(); crate::a::f(); }\n",
        )
        .write(
            "src/b/deep.rs",
            "use super::super::a;\npub fn y() { a::f(); super::x(); }\n",
        )
        // `c` imports `b` (b → a, c → b, c → a: no cycle).
        .write(
            "src/c.rs",
            "use crate::{a, b::x};\npub fn z() { x(); format!(\"{}\", crate::a::f()); }\n",
        );
    }

    #[test]
    fn a_tree_without_cycles_passes() {
        let t = Scratch::new("acyclic");
        acyclic(&t);
        let g = graph(&t.root("src/main.rs")).unwrap();
        let edges: Vec<_> = g.edges.keys().map(|(a, b)| format!("{a}->{b}")).collect();
        assert_eq!(edges, ["b->a", "c->a", "c->b"]);
        assert!(cycles(&g).is_empty());
        check(&t.0, &[t.root("src/main.rs")]).unwrap();
        // Each edge's first place, by file and line.
        let site = &g.edges[&("c".to_string(), "a".to_string())][0];
        assert_eq!((site.file.ends_with("src/c.rs"), site.line), (true, 1));
        let sites: Vec<_> = g.edges[&("b".to_string(), "a".to_string())]
            .iter()
            .map(|s| (s.file.strip_prefix(&t.0).unwrap().to_owned(), s.line))
            .collect();
        assert_eq!(
            sites,
            [
                (PathBuf::from("src/b/deep.rs"), 1),
                (PathBuf::from("src/b.rs"), 1),
                (PathBuf::from("src/b.rs"), 3)
            ]
        );
    }

    #[test]
    fn a_planted_cycle_fails_naming_its_modules_and_edges() {
        let t = Scratch::new("cycle");
        acyclic(&t);
        // a → c, closing a → c → a (and c → b → a).
        t.write(
            "src/a/inner.rs",
            "use super::f;\n\npub fn g() {\n    crate::c::z();\n}\n",
        );
        let g = graph(&t.root("src/main.rs")).unwrap();
        let found = cycles(&g);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].modules, ["a", "c"]);
        assert_eq!(found[0].tangled, ["b"]);
        let err = check(&t.0, &[t.root("src/main.rs")])
            .unwrap_err()
            .to_string();
        assert!(err.contains("1 import cycle "), "{err}");
        assert!(err.contains("in planted: a -> c -> a"), "{err}");
        assert!(
            err.contains("a -> c: src/a/inner.rs:4 uses crate::c::z"),
            "{err}"
        );
        assert!(err.contains("c -> a: src/c.rs:1 uses crate::a"), "{err}");
    }

    #[test]
    fn cycles_through_super_macros_and_inline_modules_are_found() {
        // x.rs's `super::` is the root, so `super::y` is module y; the
        // macro's tokens name z; z's inline module imports x.
        let t = Scratch::new("forms");
        t.write("src/lib.rs", "mod x;\nmod y;\nmod z;\n")
            .write("src/x.rs", "pub fn f() { super::y::g(); }\n")
            .write(
                "src/y.rs",
                "pub fn g() { println!(\"{}\", crate::z::N); }\n",
            )
            .write(
                "src/z/mod.rs",
                "pub const N: u8 = 1;\nmod w {\n    #[allow(unused)]\n    use crate::x as _;\n}\n",
            );
        let found = cycles(&graph(&t.root("src/lib.rs")).unwrap());
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].modules, ["x", "y", "z"]);
        let lines: Vec<_> = found[0].sites.iter().map(|s| s.line).collect();
        assert_eq!(lines, [1, 1, 4]);
    }

    #[test]
    fn a_tangle_is_named_by_its_shortest_cycle() {
        // a -> b -> c -> a, and c -> b: b and c import each other.
        let t = Scratch::new("tangle");
        t.write("src/lib.rs", "mod a;\nmod b;\nmod c;\n")
            .write("src/a.rs", "use crate::b::B;\n")
            .write("src/b.rs", "pub struct B;\nuse crate::c::C;\n")
            .write("src/c.rs", "pub struct C;\nuse crate::{a, b};\n");
        let found = cycles(&graph(&t.root("src/lib.rs")).unwrap());
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].modules, ["b", "c"]);
        assert_eq!(found[0].tangled, ["a"]);
        let text = describe("planted", &found[0], &t.0);
        assert_eq!(
            text,
            "  in planted: b -> c -> b\n    b -> c: src/b.rs:2 uses crate::c::C\n    \
             c -> b: src/c.rs:2 uses crate::b\n    (tangled in the same cycle with: a)\n"
        );
    }

    #[test]
    fn workspace_crates_are_found_with_cargo_metadata() {
        // Two crates; the one added "later" has the cycle.
        let t = Scratch::new("workspace");
        t.write(
            "Cargo.toml",
            "[workspace]\nresolver = \"2\"\nmembers = [\"one\", \"two\"]\n",
        )
        .write(
            "one/Cargo.toml",
            "[package]\nname = \"one\"\nversion = \"0.0.0\"\nedition = \"2021\"\n",
        )
        .write("one/src/lib.rs", "mod p;\nmod q;\n")
        .write("one/src/p.rs", "use crate::q::Q;\n")
        .write("one/src/q.rs", "pub struct Q;\n")
        .write(
            "two/Cargo.toml",
            "[package]\nname = \"two\"\nversion = \"0.0.0\"\nedition = \"2021\"\n",
        )
        .write("two/src/main.rs", "mod p;\nmod q;\nfn main() {}\n")
        .write(
            "two/src/p.rs",
            "pub struct P;\npub fn f(_: crate::q::Q) {}\n",
        )
        .write(
            "two/src/q.rs",
            "pub struct Q;\npub fn f(_: crate::p::P) {}\n",
        );
        let roots = workspace_roots(&t.0).unwrap();
        let names: BTreeSet<_> = roots.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, BTreeSet::from(["one", "two"]));
        let err = check(&t.0, &roots).unwrap_err().to_string();
        assert!(err.contains("in two: p -> q -> p"), "{err}");
        assert!(
            err.contains("p -> q: two/src/p.rs:2 uses crate::q::Q"),
            "{err}"
        );
        assert!(
            err.contains("q -> p: two/src/q.rs:2 uses crate::p::P"),
            "{err}"
        );
        assert!(!err.contains("in one"), "{err}");
    }

    #[test]
    fn a_missing_module_file_is_an_error() {
        let t = Scratch::new("missing");
        t.write("src/lib.rs", "mod gone;\n");
        let err = graph(&t.root("src/lib.rs")).unwrap_err().to_string();
        assert!(err.contains("module gone is declared"), "{err}");
    }

    #[test]
    fn the_edge_table_lists_every_module_and_its_imports_without_lines() {
        let t = Scratch::new("table");
        acyclic(&t);
        // A root with one module gets no table.
        t.write("single/src/lib.rs", "mod only;\n")
            .write("single/src/only.rs", "");
        let roots = [
            Root {
                name: "zeta".into(),
                file: t.0.join("single/src/lib.rs"),
            },
            t.root("src/main.rs"),
        ];
        let table = edge_table(&roots).unwrap();
        assert_eq!(
            table,
            "`planted`:\n\n| module | imports |\n| --- | --- |\n| a |  |\n| b | a |\n\
             | c | a, b |\n"
        );
    }

    #[test]
    fn the_table_goes_between_the_markers_and_nowhere_else() {
        let doc = format!("# T\n\nbefore\n{TABLE_BEGIN}\nold\n{TABLE_END}\nafter\n");
        assert_eq!(doc_table(&doc).unwrap(), "old\n");
        let new = with_table(&doc, "| a | b |\n").unwrap().unwrap();
        assert_eq!(
            new,
            format!("# T\n\nbefore\n{TABLE_BEGIN}\n| a | b |\n{TABLE_END}\nafter\n")
        );
        assert_eq!(with_table(&new, "| a | b |\n").unwrap(), None);
        // An empty copy, and markers missing, repeated or out of order.
        let empty = format!("{TABLE_BEGIN}\n{TABLE_END}\n");
        assert_eq!(doc_table(&empty).unwrap(), "");
        for bad in [
            "no markers".to_string(),
            format!("{TABLE_END}\n{TABLE_BEGIN}\n"),
            format!("{TABLE_BEGIN}\n{TABLE_BEGIN}\n{TABLE_END}\n"),
        ] {
            let err = doc_table(&bad).unwrap_err().to_string();
            assert!(err.contains("must hold"), "{err}");
        }
    }

    /// The doc's copy of the table is what the sources give now.
    #[test]
    fn the_architecture_docs_import_table_is_current() {
        let root = crate::root();
        let doc = std::fs::read_to_string(root.join(DOC)).unwrap();
        let table = edge_table(&workspace_roots(&root).unwrap()).unwrap();
        let written = doc_table(&doc).unwrap();
        if written != table {
            let first = written
                .lines()
                .zip(table.lines())
                .position(|(a, b)| a != b)
                .unwrap_or(written.lines().count().min(table.lines().count()));
            panic!(
                "{DOC}'s import table differs from the imports in the sources (first at \
                 table line {}: written {:?}, now {:?}); regenerate it with `{WRITE_DOC}`",
                first + 1,
                written.lines().nth(first).unwrap_or("(end)"),
                table.lines().nth(first).unwrap_or("(end)")
            );
        }
    }

    /// The workspace itself: what `cargo xtask test` checks first.
    #[test]
    fn this_workspace_has_no_import_cycle() {
        let root = crate::root();
        check(&root, &workspace_roots(&root).unwrap()).unwrap();
    }
}
