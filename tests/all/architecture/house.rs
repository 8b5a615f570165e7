//! The rules of the house inside a layer: no import circle between the files
//! of one folder, no function over 100 lines outside tests, no file over 800
//! lines of code. Read from src/ with `syn`, so a path inside a function body
//! or a macro counts as much as a `use`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::rust_files;
use syn::spanned::Spanned;
use syn::visit::Visit;

/// A function longer than this (signature to closing brace) is split into
/// named steps.
const MAX_FUNCTION_LINES: usize = 100;
/// A file with more lines of code than this (blank lines, comments and its
/// tests aside) holds more than one concept.
const MAX_FILE_CODE_LINES: usize = 800;

/// A module's path from the crate root: `["session", "turn"]`.
type ModPath = Vec<String>;

/// One file of src/, parsed.
struct SourceFile {
    /// From the project root, for messages.
    relative: PathBuf,
    module: ModPath,
    text: String,
    syntax: syn::File,
}

/// What the crate defines and imports, by module, for resolving paths.
#[derive(Default)]
struct Crate {
    /// Every module (files and inline `mod`s) and the file-module it is in.
    modules: BTreeMap<ModPath, ModPath>,
    /// Names a module's `use` items bring in: name → the path it stands for.
    imports: BTreeMap<ModPath, BTreeMap<String, ModPath>>,
    /// Modules a module glob-imports (`use foo::*`).
    globs: BTreeMap<ModPath, Vec<ModPath>>,
    /// Items (not modules) each module defines.
    items: BTreeMap<ModPath, BTreeSet<String>>,
    /// File-modules declared `#[cfg(test)] mod name;`, and all below them.
    test_modules: BTreeSet<ModPath>,
}

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// src/lib.rs is the crate root; src/a/b.rs is `a::b`. main.rs is a crate of
/// its own, kept apart as `<main>`.
fn module_of(relative: &Path) -> ModPath {
    let text = relative.with_extension("");
    let parts: Vec<String> = text
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    match parts.as_slice() {
        [only] if only == "lib" => Vec::new(),
        [only] if only == "main" => vec!["<main>".to_string()],
        _ => parts,
    }
}

fn parse_sources() -> Vec<SourceFile> {
    let src = src_dir();
    let mut paths = Vec::new();
    rust_files(&src, &mut paths);
    paths.sort();
    paths
        .into_iter()
        .map(|path| {
            let relative = path.strip_prefix(&src).unwrap().to_path_buf();
            let module = module_of(&relative);
            let text = std::fs::read_to_string(&path).unwrap();
            let syntax = syn::parse_file(&text)
                .unwrap_or_else(|e| panic!("{}: does not parse: {e}", relative.display()));
            SourceFile {
                module,
                relative: Path::new("src").join(relative),
                text,
                syntax,
            }
        })
        .collect()
}

/// `#[cfg(test)]`, exactly: `cfg(any(test, …))` code also ships.
fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|attr| {
        attr.path().is_ident("cfg")
            && attr
                .parse_args::<syn::Ident>()
                .is_ok_and(|ident| ident == "test")
    })
}

/// `#[test]`, `#[tokio::test]` and the like.
fn is_test_fn(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|attr| {
        let path = attr.path();
        path.segments.last().is_some_and(|s| s.ident == "test")
    })
}

/// A `use` tree flattened into (the name it binds, the path it names).
/// Globs come back with the name `*`.
fn flatten_use(
    prefix: &mut Vec<String>,
    tree: &syn::UseTree,
    out: &mut Vec<(String, Vec<String>)>,
) {
    match tree {
        syn::UseTree::Path(path) => {
            prefix.push(path.ident.to_string());
            flatten_use(prefix, &path.tree, out);
            prefix.pop();
        }
        syn::UseTree::Name(name) => {
            let ident = name.ident.to_string();
            if ident == "self" {
                if let Some(last) = prefix.last() {
                    out.push((last.clone(), prefix.clone()));
                }
            } else {
                let mut path = prefix.clone();
                path.push(ident.clone());
                out.push((ident, path));
            }
        }
        syn::UseTree::Rename(rename) => {
            let mut path = prefix.clone();
            path.push(rename.ident.to_string());
            let bound = rename.rename.to_string();
            if rename.ident == "self" {
                path.pop();
            }
            out.push((bound, path));
        }
        syn::UseTree::Glob(_) => out.push(("*".to_string(), prefix.clone())),
        syn::UseTree::Group(group) => {
            for item in &group.items {
                flatten_use(prefix, item, out);
            }
        }
    }
}

impl Crate {
    fn read(files: &[SourceFile]) -> Crate {
        let mut krate = Crate::default();
        for file in files {
            krate
                .modules
                .insert(file.module.clone(), file.module.clone());
        }
        for file in files {
            krate.read_items(&file.module, &file.module, &file.syntax.items);
        }
        // A test module's own children are tests too.
        let tests: Vec<ModPath> = krate.test_modules.iter().cloned().collect();
        for module in krate.modules.keys() {
            if tests.iter().any(|t| module.starts_with(t)) {
                krate.test_modules.insert(module.clone());
            }
        }
        krate
    }

    fn read_items(&mut self, file: &ModPath, module: &ModPath, items: &[syn::Item]) {
        for item in items {
            match item {
                syn::Item::Mod(m) => {
                    let mut child = module.clone();
                    child.push(m.ident.to_string());
                    if is_cfg_test(&m.attrs) {
                        self.test_modules.insert(child.clone());
                    }
                    if let Some((_, inner)) = &m.content {
                        self.modules.insert(child.clone(), file.clone());
                        self.read_items(file, &child, inner);
                    }
                }
                syn::Item::Use(u) => {
                    let mut flat = Vec::new();
                    flatten_use(&mut Vec::new(), &u.tree, &mut flat);
                    for (name, path) in flat {
                        let Some(target) = self.absolute(module, &path) else {
                            continue;
                        };
                        if name == "*" {
                            self.globs.entry(module.clone()).or_default().push(target);
                        } else {
                            self.imports
                                .entry(module.clone())
                                .or_default()
                                .insert(name, target);
                        }
                    }
                }
                other => {
                    if let Some(name) = item_name(other) {
                        self.items.entry(module.clone()).or_default().insert(name);
                    }
                }
            }
        }
    }

    /// A path as written in `module`, made absolute; `None` for another
    /// crate's path.
    fn absolute(&self, module: &ModPath, path: &[String]) -> Option<ModPath> {
        let (first, rest) = path.split_first()?;
        let mut base = match first.as_str() {
            "crate" => {
                if module.first().is_some_and(|m| m == "<main>") {
                    vec!["<main>".to_string()]
                } else {
                    Vec::new()
                }
            }
            "self" => module.clone(),
            "super" => {
                let mut parent = module.clone();
                parent.pop();
                let mut rest = rest;
                while rest.first().is_some_and(|s| s == "super") {
                    parent.pop();
                    rest = &rest[1..];
                }
                parent.extend(rest.iter().cloned());
                return Some(parent);
            }
            // A child module in scope (`use manager::Defaults;` in session.rs).
            name => {
                let mut child = module.clone();
                child.push(name.to_string());
                if !self.modules.contains_key(&child) {
                    return None;
                }
                child.extend(rest.iter().cloned());
                return Some(child);
            }
        };
        base.extend(rest.iter().cloned());
        Some(base)
    }

    /// The file-module an absolute path lands in: modules are walked down,
    /// imported names followed (re-exports resolve to where the name is
    /// defined).
    fn file_of(&self, path: &[String]) -> Option<ModPath> {
        self.file_of_bounded(path, 0)
    }

    fn file_of_bounded(&self, path: &[String], depth: usize) -> Option<ModPath> {
        if depth > 16 {
            return None;
        }
        let mut here: ModPath = Vec::new();
        for (at, segment) in path.iter().enumerate() {
            let mut child = here.clone();
            child.push(segment.clone());
            if self.modules.contains_key(&child) {
                here = child;
                continue;
            }
            if self.items.get(&here).is_some_and(|i| i.contains(segment)) {
                break;
            }
            if let Some(target) = self.imports.get(&here).and_then(|i| i.get(segment)) {
                let mut followed = target.clone();
                followed.extend(path[at + 1..].iter().cloned());
                return self.file_of_bounded(&followed, depth + 1);
            }
            for glob in self.globs.get(&here).into_iter().flatten() {
                let mut followed = glob.clone();
                followed.extend(path[at..].iter().cloned());
                if let Some(file) = self.file_of_bounded(&followed, depth + 1)
                    && file != here
                {
                    return Some(file);
                }
            }
            break;
        }
        self.modules.get(&here).cloned()
    }
}

fn item_name(item: &syn::Item) -> Option<String> {
    let ident = match item {
        syn::Item::Const(i) => &i.ident,
        syn::Item::Enum(i) => &i.ident,
        syn::Item::Fn(i) => &i.sig.ident,
        syn::Item::Static(i) => &i.ident,
        syn::Item::Struct(i) => &i.ident,
        syn::Item::Trait(i) => &i.ident,
        syn::Item::Type(i) => &i.ident,
        syn::Item::Union(i) => &i.ident,
        syn::Item::Macro(i) => i.ident.as_ref()?,
        _ => return None,
    };
    Some(ident.to_string())
}

/// One path in a file that starts at `crate`, `self` or `super`.
struct Reference {
    /// The module the path is written in (an inline module counts).
    module: ModPath,
    path: Vec<String>,
    line: usize,
}

/// Collects every crate-relative path of one file: `use` items, paths in
/// types and expressions, and paths inside macro calls, leaving test code out.
struct References<'a> {
    krate: &'a Crate,
    module: ModPath,
    found: Vec<Reference>,
}

impl References<'_> {
    fn push(&mut self, path: Vec<String>, line: usize) {
        if path
            .first()
            .is_some_and(|s| s == "crate" || s == "self" || s == "super")
            && path.len() > 1
        {
            self.found.push(Reference {
                module: self.module.clone(),
                path,
                line,
            });
        }
    }
}

impl<'ast> Visit<'ast> for References<'_> {
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        let mut child = self.module.clone();
        child.push(m.ident.to_string());
        if is_cfg_test(&m.attrs) || self.krate.test_modules.contains(&child) {
            return;
        }
        let outer = std::mem::replace(&mut self.module, child);
        syn::visit::visit_item_mod(self, m);
        self.module = outer;
    }

    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        if !is_test_fn(&f.attrs) {
            syn::visit::visit_item_fn(self, f);
        }
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        let mut flat = Vec::new();
        flatten_use(&mut Vec::new(), &u.tree, &mut flat);
        let line = u.span().start().line;
        for (_, path) in flat {
            self.push(path, line);
        }
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments = path.segments.iter().map(|s| s.ident.to_string()).collect();
        self.push(segments, path.span().start().line);
        syn::visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        // Macro bodies are tokens: `super :: record :: saving_notice`.
        let text = mac.tokens.to_string();
        let line = mac.span().start().line;
        let words: Vec<&str> = text.split_whitespace().collect();
        let mut at = 0;
        while at < words.len() {
            let starts = matches!(words[at], "crate" | "self" | "super")
                && (at == 0 || words[at - 1] != "::");
            if !starts {
                at += 1;
                continue;
            }
            let mut path = vec![words[at].to_string()];
            let mut next = at + 1;
            while next + 1 < words.len()
                && words[next] == "::"
                && words[next + 1]
                    .chars()
                    .all(|c| c.is_alphanumeric() || c == '_')
            {
                path.push(words[next + 1].to_string());
                next += 2;
            }
            self.push(path, line);
            at = next.max(at + 1);
        }
        syn::visit::visit_macro(self, mac);
    }
}

/// An import from one file of a folder to another, and where it is written.
struct Edge {
    from: String,
    to: String,
    at: String,
}

/// For every folder (a module with files below it), the imports between its
/// children: `session/turn.rs` naming `super::saving_notice`, which
/// session.rs re-exports from `record`, is `turn → record` in `session/`.
fn folder_edges(files: &[SourceFile], krate: &Crate) -> BTreeMap<ModPath, Vec<Edge>> {
    let mut edges: BTreeMap<ModPath, Vec<Edge>> = BTreeMap::new();
    for file in files {
        if krate.test_modules.contains(&file.module)
            || file.module.first().is_some_and(|m| m == "<main>")
        {
            continue;
        }
        let mut references = References {
            krate,
            module: file.module.clone(),
            found: Vec::new(),
        };
        references.visit_file(&file.syntax);
        for reference in references.found {
            let Some(path) = krate.absolute(&reference.module, &reference.path) else {
                continue;
            };
            let Some(target) = krate.file_of(&path) else {
                continue;
            };
            // Every folder both files sit in, from the crate root down.
            let common = file
                .module
                .iter()
                .zip(&target)
                .take_while(|(a, b)| a == b)
                .count();
            if common < file.module.len() && common < target.len() {
                let folder = file.module[..common].to_vec();
                edges.entry(folder).or_default().push(Edge {
                    from: file.module[common].clone(),
                    to: target[common].clone(),
                    at: format!(
                        "{}:{}: {}",
                        file.relative.display(),
                        reference.line,
                        reference.path.join("::")
                    ),
                });
            }
        }
    }
    edges
}

/// The strongly connected parts of a graph with more than one node
/// (Tarjan's algorithm).
fn circles(edges: &[Edge]) -> Vec<BTreeSet<String>> {
    let mut next: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for edge in edges {
        next.entry(&edge.from).or_default().insert(&edge.to);
        next.entry(&edge.to).or_default();
    }
    struct State<'a> {
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        found: Vec<BTreeSet<String>>,
    }
    fn visit<'a>(node: &'a str, next: &BTreeMap<&'a str, BTreeSet<&'a str>>, s: &mut State<'a>) {
        let i = s.index.len();
        s.index.insert(node, i);
        s.low.insert(node, i);
        s.stack.push(node);
        s.on_stack.insert(node);
        for &to in &next[node] {
            if !s.index.contains_key(to) {
                visit(to, next, s);
                let low = s.low[node].min(s.low[to]);
                s.low.insert(node, low);
            } else if s.on_stack.contains(to) {
                let low = s.low[node].min(s.index[to]);
                s.low.insert(node, low);
            }
        }
        if s.low[node] == s.index[node] {
            let mut part = BTreeSet::new();
            while let Some(top) = s.stack.pop() {
                s.on_stack.remove(top);
                part.insert(top.to_string());
                if top == node {
                    break;
                }
            }
            if part.len() > 1 {
                s.found.push(part);
            }
        }
    }
    let mut state = State {
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for &node in next.keys() {
        if !state.index.contains_key(node) {
            visit(node, &next, &mut state);
        }
    }
    state.found
}

fn folder_name(folder: &ModPath) -> String {
    if folder.is_empty() {
        "src/".to_string()
    } else {
        format!("src/{}/", folder.join("/"))
    }
}

#[test]
fn no_import_circle_between_the_files_of_a_folder() {
    let files = parse_sources();
    let krate = Crate::read(&files);
    let mut wrong = Vec::new();
    for (folder, edges) in folder_edges(&files, &krate) {
        // The crate root's folder is the layer table's business.
        if folder.is_empty() {
            continue;
        }
        for circle in circles(&edges) {
            let mut ties: Vec<&Edge> = edges
                .iter()
                .filter(|e| circle.contains(&e.from) && circle.contains(&e.to))
                .collect();
            ties.sort_by(|a, b| (&a.from, &a.to).cmp(&(&b.from, &b.to)));
            ties.dedup_by(|a, b| a.from == b.from && a.to == b.to);
            let names: Vec<&str> = circle.iter().map(String::as_str).collect();
            let ties: Vec<String> = ties
                .iter()
                .map(|e| format!("    {} → {} ({})", e.from, e.to, e.at))
                .collect();
            wrong.push(format!(
                "{}: {{{}}} import each other:\n{}",
                folder_name(&folder),
                names.join(", "),
                ties.join("\n")
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "import circles inside a folder (move the shared type down into a leaf file, or invert the call through a trait):\n{}",
        wrong.join("\n")
    );
}

/// A function's lines, from `fn` to its closing brace, and its name.
struct LongFunctions<'a> {
    krate: &'a Crate,
    module: ModPath,
    file: &'a Path,
    found: Vec<String>,
}

impl LongFunctions<'_> {
    fn measure(
        &mut self,
        name: &syn::Ident,
        attrs: &[syn::Attribute],
        sig: &syn::Signature,
        block: &syn::Block,
    ) {
        if is_test_fn(attrs) {
            return;
        }
        let start = sig.span().start().line;
        let end = block.span().end().line;
        let lines = end + 1 - start;
        if lines > MAX_FUNCTION_LINES {
            self.found.push(format!(
                "{}:{start}: `{name}` is {lines} lines",
                self.file.display()
            ));
        }
    }
}

impl<'ast> Visit<'ast> for LongFunctions<'_> {
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        let mut child = self.module.clone();
        child.push(m.ident.to_string());
        if is_cfg_test(&m.attrs) || self.krate.test_modules.contains(&child) {
            return;
        }
        let outer = std::mem::replace(&mut self.module, child);
        syn::visit::visit_item_mod(self, m);
        self.module = outer;
    }

    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        self.measure(&f.sig.ident, &f.attrs, &f.sig, &f.block);
        if !is_test_fn(&f.attrs) {
            syn::visit::visit_item_fn(self, f);
        }
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        self.measure(&f.sig.ident, &f.attrs, &f.sig, &f.block);
        syn::visit::visit_impl_item_fn(self, f);
    }

    fn visit_trait_item_fn(&mut self, f: &'ast syn::TraitItemFn) {
        if let Some(block) = &f.default {
            self.measure(&f.sig.ident, &f.attrs, &f.sig, block);
        }
        syn::visit::visit_trait_item_fn(self, f);
    }
}

#[test]
fn no_function_over_100_lines_outside_tests() {
    let files = parse_sources();
    let krate = Crate::read(&files);
    let mut wrong = Vec::new();
    for file in &files {
        if krate.test_modules.contains(&file.module) {
            continue;
        }
        let mut long = LongFunctions {
            krate: &krate,
            module: file.module.clone(),
            file: &file.relative,
            found: Vec::new(),
        };
        long.visit_file(&file.syntax);
        wrong.extend(long.found);
    }
    assert!(
        wrong.is_empty(),
        "functions over {MAX_FUNCTION_LINES} lines (split them into named steps):\n{}",
        wrong.join("\n")
    );
}

/// Lines of code: not blank, not only a comment, not inside an inline
/// `#[cfg(test)]` module.
fn code_lines(file: &SourceFile) -> usize {
    let mut test_lines = BTreeSet::new();
    for item in &file.syntax.items {
        if let syn::Item::Mod(m) = item
            && is_cfg_test(&m.attrs)
        {
            test_lines.extend(m.span().start().line..=m.span().end().line);
        }
    }
    let mut in_block_comment = false;
    file.text
        .lines()
        .enumerate()
        .filter(|(n, line)| {
            let line = line.trim();
            if in_block_comment {
                in_block_comment = !line.contains("*/");
                return false;
            }
            if line.starts_with("/*") {
                in_block_comment = !line.contains("*/");
                return false;
            }
            !line.is_empty() && !line.starts_with("//") && !test_lines.contains(&(n + 1))
        })
        .count()
}

#[test]
fn no_file_over_800_lines_of_code() {
    let files = parse_sources();
    let krate = Crate::read(&files);
    let wrong: Vec<String> = files
        .iter()
        .filter(|file| !krate.test_modules.contains(&file.module))
        .filter_map(|file| {
            let lines = code_lines(file);
            (lines > MAX_FILE_CODE_LINES)
                .then(|| format!("{}: {lines} lines of code", file.relative.display()))
        })
        .collect();
    assert!(
        wrong.is_empty(),
        "files over {MAX_FILE_CODE_LINES} lines of code (move a concept into a file of its own):\n{}",
        wrong.join("\n")
    );
}

/// The reader itself: a re-export through the folder's root file is an
/// import of the file that defines the name, and test code is left out.
#[test]
fn the_folder_reader_resolves_re_exports_and_skips_tests() {
    let sources = [
        ("lib.rs", "pub mod session;"),
        (
            "session.rs",
            "mod record; mod turn; #[cfg(test)] mod tests; pub use record::saving_notice;",
        ),
        (
            "session/record.rs",
            "pub fn saving_notice() {} pub fn other() { super::turn::Journaled::new(); }",
        ),
        (
            "session/turn.rs",
            "pub struct Journaled; fn f() { super::saving_notice(); }",
        ),
        ("session/tests.rs", "fn t() { super::turn::Journaled; }"),
    ];
    let files: Vec<SourceFile> = sources
        .iter()
        .map(|(path, text)| SourceFile {
            relative: PathBuf::from(path),
            module: module_of(Path::new(path)),
            text: text.to_string(),
            syntax: syn::parse_file(text).unwrap(),
        })
        .collect();
    let krate = Crate::read(&files);
    let edges = folder_edges(&files, &krate);
    let session = &edges[&vec!["session".to_string()]];
    let pairs: BTreeSet<(&str, &str)> = session
        .iter()
        .map(|e| (e.from.as_str(), e.to.as_str()))
        .collect();
    assert_eq!(
        pairs,
        BTreeSet::from([("record", "turn"), ("turn", "record")])
    );
    assert_eq!(circles(session).len(), 1);
}
