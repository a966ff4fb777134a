//! docker-compose.yml holds what docs/scaling.md says of it: the `citus` profile runs a
//! coordinator and two workers of the official Citus 13.2 image, adds the workers to the
//! coordinator, and points a Faultline at the coordinator with the variables the page documents;
//! the plain PostgreSQL set-up stays outside any profile. The file is read by a small reader of the
//! YAML it uses (block mappings and lists, flow lists, plain and quoted scalars, comments).

use std::collections::BTreeSet;
use std::path::PathBuf;

use serde_json::{Map, Value};

/// A line of the file: its indentation and its text without a comment.
fn lines(text: &str) -> Vec<(usize, String)> {
    text.lines()
        .filter_map(|l| {
            let indent = l.len() - l.trim_start().len();
            let t = strip_yaml_comment(l.trim_start()).trim_end().to_string();
            (!t.is_empty()).then_some((indent, t))
        })
        .collect()
}

fn strip_yaml_comment(line: &str) -> &str {
    let mut quote = None;
    let mut previous = ' ';
    for (i, c) in line.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (None, '"' | '\'') => quote = Some(c),
            (None, '#') if previous.is_whitespace() => return &line[..i],
            _ => {}
        }
        previous = c;
    }
    line
}

fn scalar(text: &str) -> Value {
    let t = text.trim();
    if let Some(inner) = t.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
        return Value::Array(
            inner
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(scalar)
                .collect(),
        );
    }
    for q in ['"', '\''] {
        if t.len() >= 2 && t.starts_with(q) && t.ends_with(q) {
            return Value::String(t[1..t.len() - 1].to_string());
        }
    }
    Value::String(t.to_string())
}

/// The block starting at `lines[*at]`, all of whose lines are indented by `indent`.
fn block(lines: &[(usize, String)], at: &mut usize, indent: usize) -> Value {
    if lines[*at].1.starts_with("- ") || lines[*at].1 == "-" {
        let mut list = Vec::new();
        while *at < lines.len() && lines[*at].0 == indent && lines[*at].1.starts_with('-') {
            let item = lines[*at].1[1..].trim().to_string();
            *at += 1;
            list.push(scalar(&item));
        }
        return Value::Array(list);
    }
    let mut map = Map::new();
    while *at < lines.len() && lines[*at].0 == indent {
        let line = lines[*at].1.clone();
        let (key, rest) = line
            .split_once(':')
            .unwrap_or_else(|| panic!("not a mapping entry: {line}"));
        *at += 1;
        let value = if !rest.trim().is_empty() {
            scalar(rest)
        } else if *at < lines.len() && lines[*at].0 > indent {
            let inner = lines[*at].0;
            block(lines, at, inner)
        } else if *at < lines.len() && lines[*at].0 == indent && lines[*at].1.starts_with("- ") {
            // A list at the key's own indentation.
            block(lines, at, indent)
        } else {
            Value::Null
        };
        map.insert(scalar(key).as_str().unwrap().to_string(), value);
    }
    Value::Object(map)
}

fn parse(text: &str) -> Value {
    let lines = lines(text);
    let mut at = 0;
    let value = block(&lines, &mut at, 0);
    assert_eq!(at, lines.len(), "unread from line {:?}", lines.get(at));
    value
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn the_yaml_reader_reads_what_the_compose_file_uses() {
    let v =
        parse("a:\n  b: 'x: y'  # c\n  list:\n    - one\n    - \"two\"\n  flow: [p, q]\n  same:\n  - s\nd: ${X:?y}\n");
    assert_eq!(
        v,
        serde_json::json!({"a": {"b": "x: y", "list": ["one", "two"], "flow": ["p", "q"], "same": ["s"]}, "d": "${X:?y}"})
    );
}

/// The variables the `faultline` binary reads (clap's `env`), and the logging one.
fn known_variables() -> BTreeSet<String> {
    fn walk(cmd: &clap::Command, out: &mut BTreeSet<String>) {
        for arg in cmd.get_arguments() {
            if let Some(env) = arg.get_env() {
                out.insert(env.to_string_lossy().into_owned());
            }
        }
        for sub in cmd.get_subcommands() {
            walk(sub, out);
        }
    }
    let mut out = BTreeSet::from(["RUST_LOG".to_string()]);
    walk(&<faultline::cli::Cli as clap::CommandFactory>::command(), &mut out);
    out
}

#[test]
fn the_compose_citus_profile_matches_the_documented_setup() {
    let compose = parse(&std::fs::read_to_string(root().join("docker-compose.yml")).unwrap());
    let services = compose["services"].as_object().unwrap();
    let in_profile = |name: &str| {
        services[name]["profiles"]
            .as_array()
            .is_some_and(|p| p.iter().any(|p| p == "citus"))
    };
    let citus: BTreeSet<&str> = services.keys().map(String::as_str).filter(|s| in_profile(s)).collect();
    assert_eq!(
        citus,
        BTreeSet::from([
            "citus-coordinator",
            "citus-worker-1",
            "citus-worker-2",
            "citus-setup",
            "faultline-citus"
        ])
    );
    // The plain set-up is what `docker compose up` starts.
    for plain in ["postgres", "faultline"] {
        assert!(services[plain].get("profiles").is_none(), "{plain} is in no profile");
    }

    // The nodes: the official image, Citus 13.2, the same database and user.
    let coordinator = &services["citus-coordinator"]["environment"];
    for node in ["citus-coordinator", "citus-worker-1", "citus-worker-2"] {
        let image = services[node]["image"].as_str().unwrap();
        assert!(
            image == "citusdata/citus:13.2" || image.starts_with("citusdata/citus:13.2."),
            "{node}: {image}"
        );
        assert_eq!(&services[node]["environment"], coordinator, "{node}");
    }
    // The set-up adds both workers to the coordinator, once they answer.
    let setup = &services["citus-setup"];
    let command: Vec<&str> = setup["command"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    for worker in ["citus-worker-1", "citus-worker-2"] {
        assert!(
            command.contains(&format!("SELECT citus_add_node('{worker}', 5432)").as_str()),
            "{command:?}"
        );
        assert_eq!(setup["depends_on"][worker]["condition"], "service_healthy");
    }
    assert_eq!(setup["environment"]["PGHOST"], "citus-coordinator");
    assert_eq!(
        services["faultline-citus"]["depends_on"]["citus-setup"]["condition"],
        "service_completed_successfully"
    );

    // Faultline on the coordinator, as the coordinator's user and database.
    let env = services["faultline-citus"]["environment"].as_object().unwrap();
    let url = env["DATABASE_URL"].as_str().unwrap();
    let text = |k: &str| coordinator[k].as_str().unwrap();
    assert_eq!(
        url,
        format!(
            "postgres://{}:{}@citus-coordinator:5432/{}",
            text("POSTGRES_USER"),
            text("POSTGRES_PASSWORD"),
            text("POSTGRES_DB")
        )
    );
    // Published beside the plain set-up's port.
    let ports = |s: &str| {
        services[s]["ports"][0]
            .as_str()
            .unwrap()
            .split(':')
            .next()
            .unwrap()
            .to_string()
    };
    assert_ne!(ports("faultline"), ports("faultline-citus"));

    // Every variable it sets is one the binary reads, and the page documents each, with the port.
    let known = known_variables();
    let page = std::fs::read_to_string(root().join("docs/scaling.md")).unwrap();
    let section = page
        .split("\n### Docker Compose with Citus")
        .nth(1)
        .expect("docs/scaling.md has a 'Docker Compose with Citus' section");
    let section = section.split("\n## ").next().unwrap();
    for name in env.keys() {
        assert!(
            known.contains(name),
            "faultline-citus sets {name}, which faultline does not read"
        );
        assert!(
            section.contains(&format!("`{name}`")),
            "the page does not document {name}"
        );
    }
    assert!(section.contains(url), "the page names the coordinator's URL {url}");
    assert!(
        section.contains(&format!("http://127.0.0.1:{}", ports("faultline-citus"))),
        "the page names the published port"
    );
    assert!(section.contains("docker compose --profile citus up"), "{section}");
    // And documents no variable the service does not set.
    for word in section.split('`').skip(1).step_by(2) {
        if (word.starts_with("FAULTLINE_") || word == "DATABASE_URL") && !word.contains(' ') {
            assert!(
                env.contains_key(word),
                "the page names {word}, which faultline-citus does not set"
            );
        }
    }
}
