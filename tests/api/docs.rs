//! The documentation a newcomer follows works: every relative link of README.md and docs/**/*.md
//! reaches a file (and its `#anchor` a heading there, as GitHub names it), and every command of their
//! shell blocks names a real subcommand and flags (`faultline ...`, `cargo run [--release] -- ...`)
//! or a real route (`curl` to /v1/..., /docs, /metrics, ...). No network, no tool: the CLI is read
//! from `faultline::cli`, the routes from the OpenAPI document.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};

use clap::Parser;
use serde_json::Value;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// README.md and every Markdown file under docs/, in a stable order.
fn markdown_files() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "md") {
                out.push(path);
            }
        }
    }
    let mut files = vec![root().join("README.md")];
    walk(&root().join("docs"), &mut files);
    files.sort();
    files
}

/// A fenced code block: its info string (`sh`, `console`, ...), first line number and lines.
struct Fence {
    lang: String,
    first_line: usize,
    lines: Vec<String>,
}

/// The prose lines (with their 1-based numbers) and the fenced blocks of a Markdown text.
fn split_fences(text: &str) -> (Vec<(usize, &str)>, Vec<Fence>) {
    let mut prose = Vec::new();
    let mut fences = Vec::new();
    let mut open: Option<(String, Fence)> = None;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let marker = ["```", "~~~"].into_iter().find(|m| trimmed.starts_with(m));
        match (&mut open, marker) {
            (None, Some(m)) => {
                let lang = trimmed.trim_start_matches(m.chars().next().unwrap()).trim();
                let lang = lang.split([' ', ',', '{']).next().unwrap_or("").to_lowercase();
                open = Some((
                    m.to_string(),
                    Fence {
                        lang,
                        first_line: i + 2,
                        lines: Vec::new(),
                    },
                ));
            }
            (Some((m, _)), Some(close)) if close == m && trimmed.trim_start_matches(close).trim().is_empty() => {
                fences.push(open.take().unwrap().1);
            }
            (Some((_, fence)), _) => fence.lines.push(line.to_string()),
            (None, None) => prose.push((i + 1, line)),
        }
    }
    (prose, fences)
}

/// `line` without its inline code spans (a link shown as code is not a link).
fn without_code_spans(line: &str) -> String {
    let mut out = String::new();
    let mut in_code = false;
    for c in line.chars() {
        if c == '`' {
            in_code = !in_code;
        } else if !in_code {
            out.push(c);
        }
    }
    out
}

/// Targets of the inline links and images of a prose line: `[text](target "title")`.
fn link_targets(line: &str) -> Vec<String> {
    let line = without_code_spans(line);
    let mut targets = Vec::new();
    let mut rest = line.as_str();
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        // Up to the matching parenthesis (a target may hold balanced ones).
        let mut depth = 0usize;
        let mut end = None;
        for (i, c) in after.char_indices() {
            match c {
                '(' => depth += 1,
                ')' if depth == 0 => {
                    end = Some(i);
                    break;
                }
                ')' => depth -= 1,
                _ => {}
            }
        }
        let Some(end) = end else { break };
        let inside = after[..end].trim();
        let target = inside.split_whitespace().next().unwrap_or("");
        let target = target.trim_start_matches('<').trim_end_matches('>');
        if !target.is_empty() {
            targets.push(target.to_string());
        }
        rest = &after[end..];
    }
    targets
}

/// The anchor GitHub gives a heading: its text as rendered (link text kept, markup dropped),
/// lowercased, punctuation other than `-` and `_` removed, spaces turned into `-`.
fn slug(heading: &str) -> String {
    let mut text = String::new();
    let mut rest = heading;
    // [text](url) -> text
    while let Some(open) = rest.find('[') {
        let Some(mid) = rest[open..].find("](") else { break };
        let Some(close) = rest[open + mid..].find(')') else {
            break;
        };
        text.push_str(&rest[..open]);
        text.push_str(&rest[open + 1..open + mid]);
        rest = &rest[open + mid + close + 1..];
    }
    text.push_str(rest);
    text.trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// Every anchor of a Markdown text's headings (a repeated heading gets `-1`, `-2`, ...).
fn anchors(text: &str) -> HashSet<String> {
    let (prose, _) = split_fences(text);
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut out = HashSet::new();
    for (_, line) in prose {
        let trimmed = line.trim_start();
        let hashes = trimmed.chars().take_while(|&c| c == '#').count();
        if !(1..=6).contains(&hashes) || !trimmed[hashes..].starts_with(' ') {
            continue;
        }
        let title = trimmed[hashes..].trim().trim_end_matches('#').trim();
        let base = slug(title);
        let n = seen.entry(base.clone()).or_insert(0);
        out.insert(if *n == 0 { base.clone() } else { format!("{base}-{n}") });
        *n += 1;
    }
    out
}

/// What is wrong with the relative links of `file` (whose text is `text`).
fn broken_links(file: &Path, text: &str) -> Vec<String> {
    let dir = file.parent().unwrap();
    let mut broken = Vec::new();
    let (prose, _) = split_fences(text);
    for (n, line) in prose {
        for target in link_targets(line) {
            let lower = target.to_lowercase();
            if lower.starts_with("http://") || lower.starts_with("https://") || lower.starts_with("mailto:") {
                continue;
            }
            if let Some(anchor) = target.strip_prefix('#') {
                if !anchors(text).contains(anchor) {
                    broken.push(format!(
                        "{}:{n}: ({target}): no heading #{anchor} on this page",
                        file.display()
                    ));
                }
                continue;
            }
            let (path, anchor) = target.split_once('#').unwrap_or((&target, ""));
            let resolved = dir.join(path.replace("%20", " "));
            let at = format!("{}:{n}: ({target})", file.display());
            if !resolved.exists() {
                broken.push(format!("{at}: no such file"));
                continue;
            }
            if !anchor.is_empty() && resolved.extension().is_some_and(|e| e == "md") {
                let target_text = std::fs::read_to_string(&resolved).unwrap();
                if !anchors(&target_text).contains(anchor) {
                    broken.push(format!("{at}: no heading #{anchor} in {path}"));
                }
            }
        }
    }
    broken
}

/// The words of a shell command: quotes and backslashes resolved, no expansion.
fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = line.chars();
    let mut quote: Option<char> = None;
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some('"'), '\\') => word.extend(chars.next()),
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                in_word = true;
            }
            (None, '\\') => {
                word.extend(chars.next());
                in_word = true;
            }
            (None, c) if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                }
                in_word = false;
            }
            (None, c) => {
                word.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        words.push(word);
    }
    words
}

/// The commands of a shell block: `\` continuations and quoted words over several lines joined;
/// in a `console` block only the lines
/// after a `$ ` prompt (the others are output); comments (`# ...`) dropped; each line cut at `&&`,
/// `||`, `|`, `;` and a trailing `&` into the commands it runs.
fn commands(fence: &Fence) -> Vec<(usize, String)> {
    let console = fence.lang == "console";
    let mut out = Vec::new();
    let mut pending: Option<(usize, String)> = None;
    for (i, raw) in fence.lines.iter().enumerate() {
        let n = fence.first_line + i;
        let (start, mut text) = match pending.take() {
            Some((start, so_far)) => (start, format!("{so_far} {}", raw.trim())),
            None => {
                let line = raw.trim();
                let line = match line.strip_prefix("$ ") {
                    Some(command) => command,
                    None if console => continue,
                    None => line,
                };
                (n, line.to_string())
            }
        };
        if let Some(joined) = text.strip_suffix('\\') {
            pending = Some((start, joined.trim_end().to_string()));
            continue;
        }
        // A quoted word that goes on over the next lines (a JSON body written out).
        if quote_open(&strip_comment(&text)) {
            pending = Some((start, text));
            continue;
        }
        text = strip_comment(&text);
        for part in split_commands(&text) {
            if !part.is_empty() {
                out.push((start, part));
            }
        }
    }
    // A block that ends inside a continuation or a quote: what it has is still a command.
    if let Some((start, text)) = pending {
        out.extend(split_commands(&strip_comment(&text)).into_iter().map(|p| (start, p)));
    }
    out
}

/// Whether `line` ends inside a quoted word.
fn quote_open(line: &str) -> bool {
    let mut quote: Option<char> = None;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some('"'), '\\') => {
                chars.next();
            }
            (None, '\\') => {
                chars.next();
            }
            (None, '\'' | '"') => quote = Some(c),
            _ => {}
        }
    }
    quote.is_some()
}

/// `line` without a shell comment (a `#` at the start of a word, outside quotes).
fn strip_comment(line: &str) -> String {
    let mut quote: Option<char> = None;
    let mut previous = ' ';
    for (i, c) in line.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (None, '\'' | '"') => quote = Some(c),
            (None, '#') if previous.is_whitespace() => return line[..i].trim_end().to_string(),
            _ => {}
        }
        previous = c;
    }
    line.trim_end().to_string()
}

/// The commands of one line, cut at `&&`, `||`, `|`, `;`, `&` outside quotes.
fn split_commands(line: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut current = String::new();
    let mut quote: Option<char> = None;
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => {
                quote = None;
                current.push(c);
            }
            (None, '\'' | '"') => {
                quote = Some(c);
                current.push(c);
            }
            (None, '&' | '|' | ';') => {
                parts.push(current.trim().to_string());
                current.clear();
            }
            _ => current.push(c),
        }
    }
    parts.push(current.trim().to_string());
    parts.retain(|p| !p.is_empty());
    parts
}

/// Routes outside the OpenAPI document (the dashboard, its assets, the Swagger UI and the document).
const OTHER_ROUTES: &[&str] = &[
    "/",
    "/assets/dashboard.js",
    "/assets/dashboard.css",
    "/docs",
    "/docs/",
    "/openapi.json",
];

/// Paths that look like ours when a `curl` names them: checked against the routes.
fn looks_like_ours(path: &str) -> bool {
    path == "/v1"
        || path.starts_with("/v1/")
        || [
            "/",
            "/dashboard",
            "/docs",
            "/openapi.json",
            "/metrics",
            "/healthz",
            "/readyz",
            "/assets",
        ]
        .iter()
        .any(|p| path == *p || path.starts_with(&format!("{p}/")) && *p != "/")
}

/// Whether `path` matches a path template of the OpenAPI document (`{param}`: any one segment).
fn template_matches(template: &str, path: &str) -> bool {
    let t: Vec<&str> = template.trim_end_matches('/').split('/').collect();
    let p: Vec<&str> = path.trim_end_matches('/').split('/').collect();
    t.len() == p.len()
        && t.iter()
            .zip(&p)
            .all(|(t, p)| (t.starts_with('{') && t.ends_with('}') && !p.is_empty()) || t == p)
}

/// The method and URL path a `curl` command requests (None when it names no URL).
fn curl_request(words: &[String]) -> Option<(String, String)> {
    const WITH_VALUE: &[&str] = &[
        "-H",
        "--header",
        "-o",
        "--output",
        "-u",
        "--user",
        "-w",
        "--write-out",
        "-A",
        "--user-agent",
        "-m",
        "--max-time",
        "--connect-timeout",
        "--retry",
        "-b",
        "--cookie",
        "-c",
        "--cookie-jar",
        "--cacert",
        "-e",
        "--referer",
        "--url",
    ];
    const WITH_BODY: &[&str] = &[
        "-d",
        "--data",
        "--data-binary",
        "--data-raw",
        "--data-urlencode",
        "-F",
        "--form",
        "--json",
        "-T",
        "--upload-file",
    ];
    let mut method: Option<String> = None;
    let mut body = false;
    let mut get = false;
    let mut url: Option<String> = None;
    let mut i = 1;
    while i < words.len() {
        let w = words[i].as_str();
        if w == "-X" || w == "--request" {
            method = words.get(i + 1).map(|m| m.to_uppercase());
            i += 2;
        } else if let Some(m) = w.strip_prefix("-X").filter(|m| !m.is_empty()) {
            method = Some(m.to_uppercase());
            i += 1;
        } else if WITH_BODY.contains(&w) {
            body = true;
            i += 2;
        } else if w == "--url" {
            url = words.get(i + 1).cloned();
            i += 2;
        } else if WITH_VALUE.contains(&w) {
            i += 2;
        } else if w == "-G" || w == "--get" {
            get = true;
            i += 1;
        } else if w == "-I" || w == "--head" {
            method = Some("HEAD".into());
            i += 1;
        } else if w.starts_with('-') {
            i += 1;
        } else {
            url.get_or_insert_with(|| w.to_string());
            i += 1;
        }
    }
    let url = url?;
    let path = if let Some((_, after_scheme)) = url.split_once("://") {
        after_scheme.find('/').map_or("/", |at| &after_scheme[at..]).to_string()
    } else if url.starts_with('$') || url.starts_with('/') {
        // `$FAULTLINE_SERVER/v1/...` or a bare path.
        url.find('/').map_or("/", |at| &url[at..]).to_string()
    } else {
        // host:port/path without a scheme
        url.find('/').map_or("/", |at| &url[at..]).to_string()
    };
    let path = path.split(['?', '#']).next().unwrap_or("/").to_string();
    let method = method.unwrap_or_else(|| if body && !get { "POST".into() } else { "GET".into() });
    Some((method, path))
}

/// What is wrong with one command of a shell block (None: fine, or not one we check).
fn command_problem(command: &str, openapi: &Value) -> Option<String> {
    let mut words = shell_words(command);
    // Leading `NAME=value` assignments.
    while words.first().is_some_and(|w| {
        w.split_once('=')
            .is_some_and(|(name, _)| !name.is_empty() && name.chars().all(|c| c == '_' || c.is_ascii_alphanumeric()))
    }) {
        words.remove(0);
    }
    let first = words.first()?.as_str();
    let cli_args: Option<Vec<String>> = if Path::new(first).file_name().is_some_and(|f| f == "faultline") {
        Some(words[1..].to_vec())
    } else if words.len() >= 2 && first == "cargo" && words[1] == "run" {
        let dash = words.iter().position(|w| w == "--")?;
        Some(words[dash + 1..].to_vec())
    } else {
        None
    };
    if let Some(args) = cli_args {
        let argv = std::iter::once("faultline".to_string()).chain(args);
        return match faultline::cli::Cli::try_parse_from(argv) {
            Ok(_) => None,
            Err(e) => {
                use clap::error::ErrorKind::*;
                match e.kind() {
                    // What a reader substitutes (a value, a required token given by the
                    // environment) is not the document's mistake; a name that does not exist is.
                    InvalidSubcommand
                    | UnknownArgument
                    | MissingSubcommand
                    | DisplayHelpOnMissingArgumentOrSubcommand => Some(format!(
                        "`{command}`: {}",
                        e.render().to_string().lines().next().unwrap_or("")
                    )),
                    _ => None,
                }
            }
        };
    }
    if first == "curl" {
        let (method, path) = curl_request(&words)?;
        if !looks_like_ours(&path) {
            return None;
        }
        if OTHER_ROUTES.contains(&path.as_str()) {
            return (method != "GET" && method != "HEAD").then(|| format!("`{command}`: {path} answers GET only"));
        }
        let paths = openapi["paths"].as_object().unwrap();
        let Some((template, item)) = paths.iter().find(|(t, _)| template_matches(t, &path)) else {
            return Some(format!("`{command}`: no route {path} (not in the OpenAPI document)"));
        };
        let verb = if method == "HEAD" {
            "get".to_string()
        } else {
            method.to_lowercase()
        };
        if item.get(&verb).is_none() {
            return Some(format!("`{command}`: {template} has no {method}"));
        }
    }
    None
}

fn openapi() -> Value {
    serde_json::from_str(&faultline::http::openapi::openapi_json()).unwrap()
}

/// Problems with the commands of every shell block of `text`.
fn broken_commands(file: &Path, text: &str, openapi: &Value) -> Vec<String> {
    let (_, fences) = split_fences(text);
    let mut broken = Vec::new();
    for fence in fences
        .iter()
        .filter(|f| ["sh", "bash", "shell", "console", "zsh"].contains(&f.lang.as_str()))
    {
        for (n, command) in commands(fence) {
            if let Some(problem) = command_problem(&command, openapi) {
                broken.push(format!("{}:{n}: {problem}", file.display()));
            }
        }
    }
    // A systemd unit's command line (`ExecStart=/usr/local/bin/faultline slurm sync ...`).
    for fence in fences.iter().filter(|f| ["ini", "systemd"].contains(&f.lang.as_str())) {
        for (i, line) in fence.lines.iter().enumerate() {
            let Some(command) = line.trim().strip_prefix("ExecStart=") else {
                continue;
            };
            if let Some(problem) = command_problem(command.trim_start_matches(['-', '@', '+', '!']), openapi) {
                broken.push(format!("{}:{}: {problem}", file.display(), fence.first_line + i));
            }
        }
    }
    broken
}

/// The repository's top-level folders, as a path in backticks starts.
const REPOSITORY_DIRS: &[&str] = &[
    "src/",
    "tests/",
    "docs/",
    "crates/",
    "migrations/",
    "scripts/",
    "api/",
    "deploy/",
    "grafana/",
    ".ci/",
    ".sqlx/",
    ".cargo/",
];

/// Repository paths in backticks (`src/http/error.rs`, `tests/api/`) in the prose of `text` that do
/// not exist; paths the repository ignores (written by the tests or the service) are left alone.
fn broken_paths(file: &Path, text: &str) -> Vec<String> {
    let ignored: Vec<String> = std::fs::read_to_string(root().join(".gitignore"))
        .unwrap_or_default()
        .lines()
        .map(|l| l.trim().trim_start_matches('/').trim_end_matches('/').to_string())
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    let (prose, _) = split_fences(text);
    let mut broken = Vec::new();
    for (n, line) in prose {
        for (i, span) in line.split('`').enumerate() {
            // Odd pieces are inside backticks.
            if i % 2 == 0
                || !REPOSITORY_DIRS.iter().any(|d| span.starts_with(d))
                || span.contains(|c: char| c.is_whitespace() || "*<>{}[]$".contains(c))
            {
                continue;
            }
            let path = span.split([':', '#']).next().unwrap_or(span);
            if ignored.iter().any(|g| path.starts_with(g.as_str())) {
                continue;
            }
            if !root().join(path).exists() {
                broken.push(format!("{}:{n}: `{span}`: no such file or folder", file.display()));
            }
        }
    }
    broken
}

/// Code blocks indented by four spaces (outside lists) in `text`: every block is fenced, so that
/// its language is named and its commands are checked like the others.
fn indented_code_blocks(file: &Path, text: &str) -> Vec<String> {
    let (prose, _) = split_fences(text);
    let mut found = Vec::new();
    let mut previous: Option<(usize, &str)> = None;
    let mut in_list = false;
    for (n, line) in prose {
        let trimmed = line.trim_start();
        let is_item = trimmed.starts_with(['-', '*', '+']) && trimmed[1..].starts_with(' ')
            || trimmed
                .split_once(". ")
                .is_some_and(|(d, _)| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()));
        if is_item {
            in_list = true;
        } else if !line.is_empty() && !line.starts_with(' ') {
            in_list = false;
        }
        // A block starts after a blank line (the line before it in the prose, with no fence between).
        let after_blank = previous.is_none_or(|(p, l)| p + 1 == n && l.trim().is_empty());
        if after_blank && line.starts_with("    ") && !trimmed.is_empty() && !in_list {
            found.push(format!("{}:{n}: an indented code block; fence it", file.display()));
        }
        previous = Some((n, line));
    }
    found
}

/// CI runs the README's test command as written: `.ci/run`'s one command is the README's, and
/// what it does before (naming the Citus archive kept beside the checkout) only sets the environment.
#[test]
fn ci_runs_the_readme_test_command_as_written() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let test_command = readme
        .lines()
        .map(|l| l.split(" # ").next().unwrap().trim())
        .find(|l| l.starts_with("scripts/test"))
        .expect("the README names its test command");
    let ci = std::fs::read_to_string(root().join(".ci/run")).unwrap();
    let commands: Vec<&str> = ci
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter(|l| !l.starts_with("set ") && !l.starts_with("cd "))
        .collect();
    assert_eq!(
        commands,
        [test_command],
        ".ci/run runs other commands than the README's:\n{ci}"
    );
}

#[test]
fn every_code_block_of_the_docs_is_fenced() {
    let found: Vec<String> = markdown_files()
        .iter()
        .flat_map(|f| indented_code_blocks(f, &std::fs::read_to_string(f).unwrap()))
        .collect();
    assert!(found.is_empty(), "{}", found.join("\n"));
    let page = Path::new("page.md");
    let text = "Run\n\n    faultline serve\n\n- an item\n\n    more of the item\n\n```sh\nfaultline serve\n```\n";
    let found = indented_code_blocks(page, text);
    assert_eq!(found, ["page.md:3: an indented code block; fence it"]);
}

#[test]
fn every_repository_path_the_docs_name_exists() {
    let broken: Vec<String> = markdown_files()
        .iter()
        .flat_map(|f| broken_paths(f, &std::fs::read_to_string(f).unwrap()))
        .collect();
    assert!(broken.is_empty(), "paths that do not exist:\n{}", broken.join("\n"));
    let page = root().join("docs/page.md");
    let found = broken_paths(
        &page,
        "`src/http/error.rs`, `tests/api/`, `src/moved.rs`, `src/http/*.rs`, `tests/screenshots/x.png`, `x/y`\n",
    );
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].contains("`src/moved.rs`"), "{found:?}");
}

#[test]
fn every_relative_link_of_the_docs_reaches_a_file_and_heading() {
    let files = markdown_files();
    assert!(files.len() > 1, "{files:?}");
    let broken: Vec<String> = files
        .iter()
        .flat_map(|f| broken_links(f, &std::fs::read_to_string(f).unwrap()))
        .collect();
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// docs/getting-started.md (when it exists) and every other page: the commands shown run.
#[test]
fn every_command_of_the_docs_names_a_real_subcommand_or_route() {
    let openapi = openapi();
    let mut checked = BTreeSet::new();
    let mut broken = Vec::new();
    for file in markdown_files() {
        let text = std::fs::read_to_string(&file).unwrap();
        broken.extend(broken_commands(&file, &text, &openapi));
        checked.insert(file);
    }
    let getting_started = root().join("docs/getting-started.md");
    assert_eq!(checked.contains(&getting_started), getting_started.exists());
    assert!(broken.is_empty(), "commands that do not work:\n{}", broken.join("\n"));
}

/// The checks above catch what they are for (so a pass means something).
#[test]
fn the_doc_checks_catch_broken_links_and_commands() {
    let dir = root().join("docs");
    let page = dir.join("page.md");
    let text = "# Getting started\n\n## Run it, `now`!\n\nSee [a](../README.md#run-it), \
                [b](missing.md), [c](../README.md#no-such-heading), [d](#local), `[e](nowhere.md)`, \
                [f](https://example.com/x) and [g](page.md#run-it-now).\n";
    let broken = broken_links(&page, text);
    let page_text = text.to_string();
    // page.md does not exist on disk: [g] is reported as a missing file, which is fine here.
    assert_eq!(broken.len(), 4, "{broken:#?}");
    assert!(broken[0].contains("(missing.md): no such file"), "{broken:#?}");
    assert!(broken[1].contains("no heading #no-such-heading"), "{broken:#?}");
    assert!(
        broken[2].contains("(#local): no heading #local on this page"),
        "{broken:#?}"
    );
    assert!(broken_links(&page, "# Local\n\n[d](#local)\n").is_empty());
    assert!(anchors(&page_text).contains("run-it-now"));
    assert_eq!(
        slug("Tokens, scopes and the audit log"),
        "tokens-scopes-and-the-audit-log"
    );
    assert_eq!(slug("The [API](x.md) `v1`"), "the-api-v1");
    assert!(anchors("# A\n# A\n").contains("a-1"));

    let openapi = openapi();
    let block = "```sh\n\
                 cargo run -- serve --demo          # start it\n\
                 cargo run --release -- bench-parse --lines 1000\n\
                 faultline simulate --token $T --days 7 && faultline report --token $T --out r.html\n\
                 cargo run -- sreve\n\
                 faultline serve --no-such-flag\n\
                 curl -H \"Authorization: Bearer $TOKEN\" http://127.0.0.1:8080/v1/analytics/mtbf\n\
                 curl -H 'Authorization: Bearer t' -X POST --data-binary @f \\\n  'http://faultline:8080/v1/logs?cluster=c'\n\
                 curl http://127.0.0.1:8080/v1/failures/0b5e/history\n\
                 curl http://127.0.0.1:8080/v1/no-such-thing\n\
                 curl -X DELETE http://127.0.0.1:8080/v1/analytics/mtbf\n\
                 curl http://127.0.0.1:8080/dashboard\n\
                 curl -s http://127.0.0.1:8080/healthz\n\
                 curl https://example.com/elsewhere\n\
                 ```\n\
                 ```ini\n\
                 ExecStart=/usr/local/bin/faultline slurm sync --folow 300\n\
                 ```\n\
                 ```console\n\
                 $ faultline nope\n\
                 faultline nope (output, not a command)\n\
                 ```\n";
    let broken = broken_commands(Path::new("x.md"), block, &openapi);
    let expect = [
        "`cargo run -- sreve`",
        "`faultline serve --no-such-flag`",
        "/v1/no-such-thing",
        "has no DELETE",
        "no route /dashboard",
        "`faultline nope`",
        "--folow",
    ];
    assert_eq!(broken.len(), expect.len(), "{broken:#?}");
    for (b, e) in broken.iter().zip(expect) {
        assert!(b.contains(e), "{b} should mention {e}");
    }
}

// Sections of the docs written from the code: the route list (the OpenAPI document), the commands
// and their environment variables (clap), the audit actions (the enum), the Citus table plan
// (storage::distribution). A page holds one as
//
//     <!-- generated: NAME; tests/api/docs.rs writes it (FAULTLINE_BLESS_DOCS=1) -->
//     ...
//     <!-- end generated -->
//
// and the test below fails when the text between differs from what the code says today;
// `FAULTLINE_BLESS_DOCS=1 cargo nextest run -E 'test(/docs::/)'` rewrites it.

const GENERATED_BEGIN: &str = "<!-- generated: ";
const GENERATED_END: &str = "<!-- end generated -->";

/// A table cell: one line, `|` escaped.
fn cell(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}

/// The first sentence of `text` (up to a `. ` that does not end an abbreviation).
fn first_sentence(text: &str) -> String {
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut from = 0;
    while let Some(at) = text[from..].find(". ") {
        let end = from + at;
        let word = text[..end].rsplit(' ').next().unwrap_or("");
        if !["e.g", "i.e", "etc", "vs", "cf"].contains(&word) {
            return text[..=end].to_string();
        }
        from = end + 2;
    }
    text
}

fn route_table() -> String {
    let doc = openapi();
    let order = ["get", "put", "post", "patch", "delete"];
    let mut rows = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in order {
            let Some(op) = item.get(method) else { continue };
            let tag = op["tags"][0].as_str().unwrap_or("");
            let what = first_sentence(op["summary"].as_str().unwrap_or(""));
            rows.push(format!(
                "| `{} {path}` | {tag} | {} |",
                method.to_uppercase(),
                cell(&what)
            ));
        }
    }
    format!("| route | tag | what |\n|---|---|---|\n{}\n", rows.join("\n"))
}

/// Every command of the `faultline` binary with its path (`slurm sync`), leaves only.
fn commands_of_cli() -> Vec<(String, clap::Command)> {
    fn walk(prefix: &str, cmd: &clap::Command, out: &mut Vec<(String, clap::Command)>) {
        for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
            let name = format!("{prefix} {}", sub.get_name());
            if sub.has_subcommands() {
                walk(&name, sub, out);
            } else {
                out.push((name, sub.clone()));
            }
        }
    }
    let mut out = Vec::new();
    walk(
        "faultline",
        &<faultline::cli::Cli as clap::CommandFactory>::command(),
        &mut out,
    );
    out
}

fn command_table() -> String {
    let rows: Vec<String> = commands_of_cli()
        .iter()
        .map(|(name, cmd)| {
            let about = cmd.get_about().map(|a| a.to_string()).unwrap_or_default();
            format!("| `{name}` | {} |", cell(&about))
        })
        .collect();
    format!("| command | what it does |\n|---|---|\n{}\n", rows.join("\n"))
}

/// `help` without its `[default: ...]` note, and that note's text.
fn split_default(help: &str) -> (String, Option<String>) {
    let Some(at) = help.find("[default: ") else {
        return (help.trim().to_string(), None);
    };
    let rest = &help[at + "[default: ".len()..];
    let Some(end) = rest.find(']') else {
        return (help.trim().to_string(), None);
    };
    let without = format!("{}{}", &help[..at], &rest[end + 1..]);
    (without.trim().to_string(), Some(rest[..end].to_string()))
}

/// An environment table's row: (variable, flag, default, meaning), and the commands reading it so.
type EnvRow = ((String, String, String, String), Vec<String>);

fn environment_table() -> String {
    let mut rows: Vec<EnvRow> = Vec::new();
    for (name, cmd) in commands_of_cli() {
        for arg in cmd.get_arguments().filter(|a| !a.is_hide_set()) {
            let Some(env) = arg.get_env() else { continue };
            let help = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
            let (meaning, noted) = split_default(&help);
            let defaults: Vec<String> = arg
                .get_default_values()
                .iter()
                .map(|v| v.to_string_lossy().into_owned())
                .collect();
            let default = if defaults.iter().any(|d| !d.is_empty()) {
                format!("`{}`", defaults.join(","))
            } else if !defaults.is_empty() {
                "empty".to_string()
            } else if let Some(noted) = noted {
                noted
            } else if arg.get_action().takes_values() {
                "none".to_string()
            } else {
                "off".to_string()
            };
            let flag = arg.get_long().map(|l| format!("`--{l}`")).unwrap_or_default();
            let key = (env.to_string_lossy().into_owned(), flag, default, meaning);
            let command = name.trim_start_matches("faultline ").to_string();
            match rows.iter_mut().find(|(k, _)| *k == key) {
                Some((_, commands)) => commands.push(command),
                None => rows.push((key, vec![command])),
            }
        }
    }
    rows.sort_by(|a, b| a.0.0.cmp(&b.0.0).then(a.1.cmp(&b.1)));
    let lines: Vec<String> = rows
        .iter()
        .map(|((env, flag, default, meaning), commands)| {
            format!(
                "| `{env}` | {flag} | {} | {} | {} |",
                commands.join(", "),
                cell(default),
                cell(meaning)
            )
        })
        .collect();
    format!(
        "| environment | flag | commands | default | meaning |\n|---|---|---|---|---|\n{}\n",
        lines.join("\n")
    )
}

fn audit_actions() -> String {
    use faultline::domain::audit::AuditAction;
    let names: Vec<String> = AuditAction::ALL.iter().map(|a| format!("`{}`", a.as_str())).collect();
    format!("{}\n", names.join(", "))
}

fn citus_tables() -> String {
    use faultline::storage::distribution::{DISTRIBUTED_TABLES, LOCAL_TABLES, REFERENCE_TABLES};
    let list = |tables: &[&str]| tables.iter().map(|t| format!("`{t}`")).collect::<Vec<_>>().join(", ");
    format!(
        "| tables | Citus kind |\n|---|---|\n\
         | {} | distributed by `cluster`, co-located with `events` |\n\
         | {} | reference tables (a copy on every node) |\n\
         | {} | on the coordinator only |\n",
        list(DISTRIBUTED_TABLES),
        list(REFERENCE_TABLES),
        list(LOCAL_TABLES)
    )
}

fn generated_section(name: &str) -> Option<String> {
    match name {
        "citus-tables" => Some(citus_tables()),
        "routes" => Some(route_table()),
        "commands" => Some(command_table()),
        "environment" => Some(environment_table()),
        "audit-actions" => Some(audit_actions()),
        _ => None,
    }
}

/// `text` with each generated section rewritten from the code, and what was wrong: sections that
/// differ (by name) or are malformed.
fn regenerate(text: &str) -> (String, Vec<String>) {
    let mut out = String::new();
    let mut problems = Vec::new();
    let mut rest = text;
    while let Some(begin) = rest.find(GENERATED_BEGIN) {
        let Some(marker_end) = rest[begin..].find("-->").map(|e| begin + e + 3) else {
            problems.push("an unterminated generated marker".into());
            break;
        };
        let marker = &rest[begin..marker_end];
        let name = marker[GENERATED_BEGIN.len()..]
            .split([';', ' '])
            .next()
            .unwrap_or("")
            .trim()
            .to_string();
        let body_start = marker_end + 1;
        let Some(end) = rest[marker_end..].find(GENERATED_END).map(|e| marker_end + e) else {
            problems.push(format!("generated section {name} has no {GENERATED_END}"));
            break;
        };
        let Some(expected) = generated_section(&name) else {
            problems.push(format!("unknown generated section {name}"));
            break;
        };
        if rest.get(body_start..end) != Some(expected.as_str()) {
            problems.push(format!("generated section {name} differs from the code"));
        }
        out.push_str(&rest[..marker_end]);
        out.push('\n');
        out.push_str(&expected);
        rest = &rest[end..];
    }
    out.push_str(rest);
    (out, problems)
}

/// The route list, the commands, the environment variables, the audit actions and the Citus table
/// plan in the docs are what the code has: every route of the OpenAPI document, every subcommand and
/// every variable clap reads (with its default), every action of the enum, every table of the
/// distribution plan, and nothing else.
#[test]
fn the_generated_sections_of_the_docs_match_the_code() {
    let bless = std::env::var("FAULTLINE_BLESS_DOCS").is_ok_and(|v| v == "1");
    let mut seen = BTreeSet::new();
    let mut problems = Vec::new();
    for file in markdown_files() {
        let text = std::fs::read_to_string(&file).unwrap();
        for part in text.split(GENERATED_BEGIN).skip(1) {
            seen.insert(part.split([';', ' ']).next().unwrap_or("").to_string());
        }
        let (fresh, wrong) = regenerate(&text);
        if wrong.is_empty() {
            continue;
        }
        if bless && fresh != text {
            std::fs::write(&file, fresh).unwrap();
        } else {
            problems.extend(wrong.into_iter().map(|w| format!("{}: {w}", file.display())));
        }
    }
    assert!(
        problems.is_empty(),
        "{}\n(rewrite them with FAULTLINE_BLESS_DOCS=1 cargo nextest run -E 'test(/docs::/)')",
        problems.join("\n")
    );
    let want: BTreeSet<String> = ["routes", "commands", "environment", "audit-actions", "citus-tables"]
        .map(String::from)
        .into();
    assert_eq!(seen, want, "each generated section appears in the docs");
}

/// The generated sections hold what they are for: a route, a command, a variable with its default,
/// an action; and a section edited by hand is caught.
#[test]
fn the_generated_sections_catch_drift() {
    let routes = route_table();
    assert!(routes.contains("| `GET /v1/alerts` | alerts |"), "{routes}");
    assert!(
        routes.contains("| `PUT /v1/sync-cursors/{cluster}/{source}` |"),
        "{routes}"
    );
    let commands = command_table();
    assert!(commands.contains("| `faultline slurm sync` |"), "{commands}");
    assert!(commands.contains("| `faultline bench-parse` |"), "{commands}");
    let env = environment_table();
    assert!(
        env.contains("| `FAULTLINE_ADDR` | `--addr` | serve | `127.0.0.1:8080` |"),
        "{env}"
    );
    assert!(
        env.contains("| `FAULTLINE_CA_FILE` | `--ca-file` | simulate, report, slurm sync, gpud sync | none |"),
        "{env}"
    );
    assert!(audit_actions().contains("`alert_rule.upsert`"));
    assert!(citus_tables().contains("`sync_cursors`"));

    let page = format!("# P\n\n{GENERATED_BEGIN}routes -->\n{routes}{GENERATED_END}\n");
    assert!(regenerate(&page).1.is_empty());
    let edited = page.replace("| `GET /v1/alerts` | alerts |", "| `GET /v1/alarms` | alerts |");
    let (fixed, problems) = regenerate(&edited);
    assert_eq!(problems, ["generated section routes differs from the code"]);
    assert_eq!(fixed, page);
    let unknown = format!("{GENERATED_BEGIN}nope -->\nx\n{GENERATED_END}\n");
    assert_eq!(regenerate(&unknown).1, ["unknown generated section nope"]);
}

/// The JSON of a shell block's here-document (`<<'JSON'` ... `JSON`).
fn heredoc(block: &str) -> Option<String> {
    let start = block.find("<<'JSON'\n")? + "<<'JSON'\n".len();
    let end = block[start..].find("\nJSON")? + start;
    Some(block[start..end].to_string())
}

/// Whether `actual` is what `shown` shows: objects with the same keys, lists of the same length,
/// strings equal or, where the page shortens one with `...`, starting with what it shows.
fn shows(actual: &Value, shown: &Value) -> bool {
    match (actual, shown) {
        (Value::Object(a), Value::Object(s)) => {
            a.len() == s.len() && s.iter().all(|(k, v)| a.get(k).is_some_and(|av| shows(av, v)))
        }
        (Value::Array(a), Value::Array(s)) => a.len() == s.len() && a.iter().zip(s).all(|(a, s)| shows(a, s)),
        (Value::String(a), Value::String(s)) => match s.strip_suffix("...") {
            Some(prefix) => a.starts_with(prefix),
            None => a == s,
        },
        _ => actual == shown,
    }
}

/// docs/parts.md's worked history import: the JSON body of its `curl`, posted to a real server,
/// answers what the page shows (counts, refusals and warnings; shortened messages by their start).
#[tokio::test]
async fn the_worked_history_import_of_the_parts_page_answers_as_shown() {
    let text = std::fs::read_to_string(root().join("docs/parts.md")).unwrap();
    let (_, fences) = split_fences(&text);
    let at = fences
        .iter()
        .position(|f| f.lang == "sh" && f.lines.iter().any(|l| l.contains("/v1/gpus/history")))
        .expect("a curl to /v1/gpus/history in parts.md");
    let body = heredoc(&fences[at].lines.join("\n")).expect("the body as a here-document");
    let body: Value = serde_json::from_str(&body).unwrap();
    let shown = fences[at + 1..]
        .iter()
        .find(|f| f.lang == "json")
        .expect("the answer shown after it");
    let shown: Value = serde_json::from_str(&shown.lines.join("\n")).unwrap();

    let app = crate::helpers::spawn_app().await;
    // The node inventory the page sets up first (the `-d` body of its `PUT /v1/nodes`).
    let nodes = fences[..at]
        .iter()
        .rev()
        .find(|f| f.lang == "sh" && f.lines.iter().any(|l| l.contains("/v1/nodes") && l.contains("-X PUT")))
        .expect("the inventory step before the import");
    let words = shell_words(&nodes.lines.join(" "));
    let body_at = words.iter().position(|w| w == "-d").expect("a -d body") + 1;
    let nodes: Value = serde_json::from_str(&words[body_at]).unwrap();
    let (status, answer) = app.put_nodes(crate::helpers::ADMIN_TOKEN, &nodes).await;
    assert_eq!(status, 200, "{answer}");
    let (status, answer) = app
        .post_json(crate::helpers::ADMIN_TOKEN, "/v1/gpus/history", &body)
        .await;
    assert_eq!(status, 200, "{answer}");
    assert!(
        shows(&answer, &shown),
        "the import answered\n{answer:#}\nthe page shows\n{shown:#}"
    );
    // What the page says after it: A closed as failed on 2021-01-01, B failed, C not created.
    let (status, a) = app.get(crate::helpers::ADMIN_TOKEN, "/v1/gpus/A?cluster=c1").await;
    assert_eq!(status, 200, "{a:#}");
    assert!(a.to_string().contains("2021-01-01"), "{a:#}");
    let (status, c) = app.get(crate::helpers::ADMIN_TOKEN, "/v1/gpus/C?cluster=c1").await;
    assert_eq!(status, 404, "{c:#}");

    // Sent again: nothing is written.
    let (status, again) = app
        .post_json(crate::helpers::ADMIN_TOKEN, "/v1/gpus/history", &body)
        .await;
    assert_eq!(status, 200, "{again}");
    assert_eq!(
        again["written"],
        serde_json::json!({"parts": 0, "placements": 0, "removals": 0}),
        "{again:#}"
    );
}

#[test]
fn shows_compares_an_answer_with_what_a_page_shows() {
    let answer = serde_json::json!({"n": 1, "list": [{"message": "node 'x' is not known; kept"}]});
    assert!(shows(
        &answer,
        &serde_json::json!({"n": 1, "list": [{"message": "node 'x' is not..."}]})
    ));
    assert!(!shows(&answer, &serde_json::json!({"n": 1})));
    assert!(!shows(
        &answer,
        &serde_json::json!({"n": 2, "list": [{"message": "node 'x' is not..."}]})
    ));
    assert!(!shows(&answer, &serde_json::json!({"n": 1, "list": []})));
    assert_eq!(
        heredoc("curl -d @- <<'JSON'\n{\"a\": 1}\nJSON\n").as_deref(),
        Some("{\"a\": 1}")
    );
}

/// The node agent's command line, read from the built `faultline-agent`'s `--help`: the flags of
/// each subcommand (its own and the global ones; `""` for none given), long and short.
struct AgentCli {
    flags: HashMap<String, BTreeSet<String>>,
}

impl AgentCli {
    fn read() -> AgentCli {
        let binary = Path::new(env!("CARGO_BIN_EXE_faultline")).with_file_name("faultline-agent");
        assert!(
            binary.exists(),
            "{} is missing: build the workspace (cargo build --workspace, or cargo nextest run from the root)",
            binary.display()
        );
        let help = |args: &[&str]| -> String {
            let out = std::process::Command::new(&binary)
                .args(args)
                .arg("--help")
                .output()
                .unwrap();
            assert!(out.status.success(), "faultline-agent {args:?} --help: {out:?}");
            String::from_utf8(out.stdout).unwrap()
        };
        let top = help(&[]);
        let mut flags = HashMap::new();
        flags.insert(String::new(), help_flags(&top));
        for sub in help_subcommands(&top) {
            let text = help(&[sub.as_str()]);
            flags.insert(sub, help_flags(&text));
        }
        AgentCli { flags }
    }

    /// What is wrong with `words` (the words after `faultline-agent`): a subcommand it does not
    /// have, a flag the subcommand does not take.
    fn problem(&self, words: &[String]) -> Option<String> {
        // A first word that is neither a flag nor a subcommand.
        if let Some(w) = words
            .first()
            .filter(|w| !w.starts_with('-') && !self.flags.contains_key(*w))
        {
            return Some(format!("no subcommand {w}"));
        }
        let sub = words.first().filter(|w| self.flags.contains_key(*w));
        let known = &self.flags[sub.map_or("", |s| s.as_str())];
        for w in words.iter().filter(|w| w.starts_with('-') && *w != "-") {
            let name = w.split('=').next().unwrap();
            if !known.contains(name) {
                return Some(format!(
                    "no flag {name} (faultline-agent {})",
                    sub.map_or("", |s| s.as_str())
                ));
            }
        }
        None
    }
}

/// The flags (`--name`, `-n`) a clap `--help` lists.
fn help_flags(help: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in help.lines().map(str::trim_start).filter(|l| l.starts_with('-')) {
        let spec = line.split("  ").next().unwrap_or("");
        for word in spec.split([',', ' ']) {
            let word = word.split(['=', '<', '[']).next().unwrap_or("");
            if word.starts_with('-') && word.len() > 1 {
                out.insert(word.to_string());
            }
        }
    }
    out
}

/// The subcommands a clap `--help` lists under `Commands:` (but `help`).
fn help_subcommands(help: &str) -> Vec<String> {
    let Some(at) = help.find("Commands:") else {
        return Vec::new();
    };
    help[at..]
        .lines()
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(String::from)
        .collect()
}

/// Every `faultline-agent ...` command line of `text`: in any code block (shell, a unit's
/// `ExecStart=`), and in inline code (`faultline-agent status [--json]`); the words after the
/// program's name, up to a pipe, `;`, `&&` or a comment. Option brackets are dropped.
fn agent_command_lines(text: &str) -> Vec<(usize, Vec<String>)> {
    let mut out = Vec::new();
    let mut in_fence = false;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            in_fence = !in_fence;
            continue;
        }
        let pieces: Vec<String> = if in_fence {
            vec![line.to_string()]
        } else {
            line.split('`').skip(1).step_by(2).map(String::from).collect()
        };
        for piece in pieces {
            let mut rest = piece.as_str();
            while let Some(at) = rest.find("faultline-agent") {
                let prefix = &rest[..at];
                let after = &rest[at + "faultline-agent".len()..];
                rest = after;
                // The program run, not a path or a name (`crates/faultline-agent`,
                // `faultline-agent.service`, `cargo build -p faultline-agent`): at the start of a
                // command, after a directory (`target/release/`), `sudo`, `exec` or assignments.
                let dir_start = prefix
                    .rfind(|c: char| c.is_whitespace() || c == '=')
                    .map_or(0, |i| i + 1);
                let dir = &prefix[dir_start..];
                let before = prefix[..dir_start].trim_end();
                let previous = before.rsplit(char::is_whitespace).next().unwrap_or("");
                let starts_command = previous.is_empty()
                    || ["sudo", "exec", "$", "|", "&&", ";", "ExecStart="].contains(&previous)
                    || previous.ends_with("ExecStart=")
                    || previous.contains('=') && !previous.starts_with('-');
                if !(dir.is_empty() || dir.ends_with('/')) || !starts_command || !after.starts_with(' ') {
                    continue;
                }
                let command = strip_comment(after);
                let command = split_commands(&command).into_iter().next().unwrap_or_default();
                let words: Vec<String> = shell_words(&command)
                    .into_iter()
                    .map(|w| w.trim_matches(|c| c == '[' || c == ']').to_string())
                    .filter(|w| !w.is_empty() && w != "...")
                    .collect();
                out.push((i + 1, words));
            }
        }
    }
    out
}

/// Every `faultline-agent ...` command the docs show takes only flags (and subcommands) the agent
/// has, and every flag of agent.md's flag table is one of them.
#[test]
fn every_agent_command_of_the_docs_uses_real_flags() {
    let cli = AgentCli::read();
    assert!(
        cli.flags[""].contains("--server") && cli.flags.contains_key("status"),
        "{:?}",
        cli.flags
    );
    let mut broken = Vec::new();
    let mut seen = 0;
    for file in markdown_files() {
        let text = std::fs::read_to_string(&file).unwrap();
        for (n, words) in agent_command_lines(&text) {
            seen += 1;
            if let Some(problem) = cli.problem(&words) {
                broken.push(format!(
                    "{}:{n}: `faultline-agent {}`: {problem}",
                    file.display(),
                    words.join(" ")
                ));
            }
        }
    }
    assert!(seen >= 3, "the docs show agent commands ({seen})");
    // The flag table of agent.md names only real flags.
    let agent_md = std::fs::read_to_string(root().join("docs/agent.md")).unwrap();
    for (n, line) in agent_md.lines().enumerate().filter(|(_, l)| l.starts_with("| `--")) {
        let cell = line.split('|').nth(1).unwrap();
        for flag in cell.split('`').skip(1).step_by(2) {
            if !cli.flags[""].contains(flag) {
                broken.push(format!(
                    "docs/agent.md:{}: {flag} is not a flag of faultline-agent",
                    n + 1
                ));
            }
        }
    }
    assert!(
        broken.is_empty(),
        "agent commands that do not work:\n{}",
        broken.join("\n")
    );

    // The check catches a flag and a subcommand that do not exist.
    let page = "Run `faultline-agent --oneshot --no-such-flag`.\n\n```sh\nsudo faultline-agent stauts --json\n\
                faultline-agent status --json --state-dir /x # fine\n```\n\
                See `crates/faultline-agent`, `faultline-agent.service`, `cargo build -p faultline-agent --release`.\n";
    let found: Vec<Option<String>> = agent_command_lines(page).iter().map(|(_, w)| cli.problem(w)).collect();
    assert_eq!(found.len(), 3, "{found:?}");
    assert!(
        found[0].as_deref().is_some_and(|p| p.contains("--no-such-flag")),
        "{found:?}"
    );
    assert!(found[1].as_deref().is_some_and(|p| p.contains("stauts")), "{found:?}");
    assert_eq!(found[2], None);
}

/// A request a `curl` of the docs sends with a JSON body written out on its command line.
struct DocRequest {
    at: String,
    method: String,
    path_and_query: String,
    content_type: String,
    body: String,
}

/// Every `curl` of the docs' shell blocks that sends a literal JSON body (`-d '{...}'`) to one of
/// our routes.
fn json_requests() -> Vec<DocRequest> {
    let mut out = Vec::new();
    for file in markdown_files() {
        let text = std::fs::read_to_string(&file).unwrap();
        let (_, fences) = split_fences(&text);
        for fence in fences
            .iter()
            .filter(|f| ["sh", "bash", "shell", "console"].contains(&f.lang.as_str()))
        {
            for (n, command) in commands(fence) {
                let words = shell_words(&command);
                if words.first().map(String::as_str) != Some("curl") {
                    continue;
                }
                let Some(body) = words
                    .windows(2)
                    .find(|w| ["-d", "--data", "--data-raw", "--data-binary", "--json"].contains(&w[0].as_str()))
                    .map(|w| w[1].clone())
                    .filter(|b| b.starts_with('{') || b.starts_with('['))
                else {
                    continue;
                };
                let Some((method, path)) = curl_request(&words) else {
                    continue;
                };
                if !path.starts_with("/v1/") {
                    continue;
                }
                let url = words
                    .iter()
                    .find(|w| w.contains(&path) && !w.starts_with('-'))
                    .cloned()
                    .unwrap_or_default();
                let query = url.split_once('?').map(|(_, q)| format!("?{q}")).unwrap_or_default();
                let content_type = words
                    .windows(2)
                    .filter(|w| w[0] == "-H" || w[0] == "--header")
                    .find_map(|w| {
                        w[1].split_once(':')
                            .filter(|(k, _)| k.eq_ignore_ascii_case("content-type"))
                            .map(|(_, v)| v.trim().to_string())
                    })
                    .unwrap_or_else(|| "application/json".into());
                out.push(DocRequest {
                    at: format!("{}:{n}", file.display()),
                    method,
                    path_and_query: format!("{path}{query}"),
                    content_type,
                    body,
                });
            }
        }
    }
    out
}

/// Every JSON body the docs send with `curl` is one the server takes: sent to a real server (the
/// admin token, a fresh database, in page order), each answers 2xx, or 404 where it names a failure
/// or part this database does not hold, never 400, 415 or 422 (a field, a shape or a value the
/// route does not take).
#[tokio::test]
async fn every_json_body_the_docs_send_is_accepted() {
    let requests = json_requests();
    let pages: BTreeSet<String> = requests
        .iter()
        .map(|r| {
            r.at.split(":")
                .next()
                .unwrap()
                .rsplit("docs/")
                .next()
                .unwrap()
                .to_string()
        })
        .collect();
    for page in [
        "getting-started.md",
        "ingest/events.md",
        "ingest/inventory-and-jobs.md",
        "ingest/nvsentinel.md",
        "ingest/lifecycles.md",
        "alerts.md",
        "parts.md",
    ] {
        assert!(pages.contains(page), "no JSON body sent from {page}: {pages:?}");
    }
    let app = crate::helpers::spawn_app().await;
    let mut refused = Vec::new();
    for r in &requests {
        let method = reqwest::Method::from_bytes(r.method.as_bytes()).unwrap();
        let res = app
            .client
            .request(method, app.url(&r.path_and_query))
            .bearer_auth(crate::helpers::ADMIN_TOKEN)
            .header("Content-Type", &r.content_type)
            .body(r.body.clone())
            .send()
            .await
            .unwrap();
        let status = res.status().as_u16();
        let text = res.text().await.unwrap();
        let names_a_stored_thing =
            r.path_and_query.starts_with("/v1/failures/") || r.path_and_query.starts_with("/v1/gpus/");
        let fine =
            (200..300).contains(&status) && !text.contains("\"rejected\":[{") || status == 404 && names_a_stored_thing;
        if !fine {
            refused.push(format!(
                "{}: {} {} -> {status} {text}",
                r.at, r.method, r.path_and_query
            ));
        }
    }
    assert!(refused.is_empty(), "bodies the server refuses:\n{}", refused.join("\n"));
}
