//! Test support: the built-in catalog as the migrations seed it (rules of
//! `migrations/0002_classification_rules.sql` with the changes of `0025_host_components.sql` and
//! `0031_unusable_gpu_rules.sql`,
//! terms of `lexicon.tsv`), for pure tests that must classify exactly as a fresh database does.

use super::{Catalog, Rule, Severity};
use crate::domain::taxonomy::{Category, Component};

/// Every `VALUES` list of a migration, in order: per list its tuples' fields ('' escapes, NULL
/// as None). A list ends at the first tuple not followed by a comma.
pub fn values_lists(sql: &str) -> Vec<Vec<Vec<Option<String>>>> {
    let b: Vec<char> = sql.chars().collect();
    let mut lists = Vec::new();
    let mut from = 0;
    while let Some(at) = sql[from..].find("VALUES") {
        let start = from + at + "VALUES".len();
        let (list, end) = tuples(&b, sql[..start].chars().count());
        lists.push(list);
        from = b[..end].iter().map(|c| c.len_utf8()).sum();
    }
    lists
}

/// The tuples from char index `i` on; returns them and the index after the last.
fn tuples(b: &[char], mut i: usize) -> (Vec<Vec<Option<String>>>, usize) {
    let mut out = Vec::new();
    // Whitespace and comment lines before the next tuple (or the end of the list).
    let skip = |b: &[char], mut i: usize| {
        loop {
            while i < b.len() && b[i].is_whitespace() {
                i += 1;
            }
            if b.get(i) == Some(&'-') && b.get(i + 1) == Some(&'-') {
                while i < b.len() && b[i] != '\n' {
                    i += 1;
                }
                continue;
            }
            return i;
        }
    };
    loop {
        i = skip(b, i);
        if b.get(i) != Some(&'(') {
            return (out, i);
        }
        i += 1;
        let mut fields = Vec::new();
        loop {
            while b[i] == ' ' || b[i] == '\n' {
                i += 1;
            }
            if b[i] == '\'' {
                let mut s = String::new();
                i += 1;
                loop {
                    if b[i] == '\'' {
                        if b.get(i + 1) == Some(&'\'') {
                            s.push('\'');
                            i += 2;
                            continue;
                        }
                        i += 1;
                        break;
                    }
                    s.push(b[i]);
                    i += 1;
                }
                fields.push(Some(s));
            } else {
                let mut s = String::new();
                while b[i] != ',' && b[i] != ')' {
                    s.push(b[i]);
                    i += 1;
                }
                let s = s.trim().to_string();
                fields.push(if s == "NULL" { None } else { Some(s) });
            }
            while b[i] == ' ' {
                i += 1;
            }
            if b[i] == ',' {
                i += 1;
                continue;
            }
            assert_eq!(b[i], ')');
            i += 1;
            break;
        }
        out.push(fields);
        i = skip(b, i);
        if b.get(i) != Some(&',') {
            return (out, i);
        }
        i += 1;
    }
}

/// The migrations that seed or change the built-in catalog, in order.
pub const CATALOG_MIGRATIONS: [&str; 3] = [
    include_str!("../../migrations/0002_classification_rules.sql"),
    include_str!("../../migrations/0025_host_components.sql"),
    include_str!("../../migrations/0031_unusable_gpu_rules.sql"),
];

/// The built-in lexicon rows (term, kind, category, component, weight, source) a fresh database
/// holds: 0008's, then 0025's changed and new terms (both apply on a fresh database).
pub fn migrated_term_rows() -> Vec<Vec<Option<String>>> {
    let mut rows: Vec<Vec<Option<String>>> = values_lists(include_str!("../../migrations/0008_lexicon.sql"))
        .into_iter()
        .flatten()
        .collect();
    let host = values_lists(CATALOG_MIGRATIONS[1]);
    for row in host[0].iter().chain(&host[1]) {
        match rows.iter_mut().find(|r| r[0] == row[0]) {
            Some(r) => *r = row.clone(),
            None => rows.push(row.clone()),
        }
    }
    rows
}

pub fn builtin_rules() -> Vec<Rule> {
    let rule = |f: &Vec<Option<String>>| {
        let s = |i: usize| f[i].clone().unwrap_or_default();
        Rule {
            rule_id: s(0),
            kind: s(1),
            code: f[2].as_deref().map(|c| c.parse().expect("code")),
            pattern: f[3].clone(),
            priority: s(4).parse().expect("priority"),
            category: Category::parse(&s(5)).expect("category"),
            component: Component::parse(&s(6)).expect("component"),
            severity: Severity::parse(&s(7)).expect("severity"),
            transient: s(8) == "true",
            secondary: s(9) == "true",
            action: s(10),
            description: s(11),
            source: s(12),
            builtin: true,
        }
    };
    let mut rules: Vec<Rule> = values_lists(CATALOG_MIGRATIONS[0])[0].iter().map(rule).collect();
    // 0025: changed rules (rule_id, category, component, description), then new rules.
    let host = values_lists(CATALOG_MIGRATIONS[1]);
    for f in &host[2] {
        let r = rules
            .iter_mut()
            .find(|r| Some(&r.rule_id) == f[0].as_ref())
            .expect("0025 changes a rule of 0002");
        r.category = Category::parse(f[1].as_deref().unwrap_or_default()).expect("category");
        r.component = Component::parse(f[2].as_deref().unwrap_or_default()).expect("component");
        r.description = f[3].clone().unwrap_or_default();
    }
    for f in &host[3] {
        assert!(
            !rules.iter().any(|r| Some(&r.rule_id) == f[0].as_ref()),
            "{:?} is new",
            f[0]
        );
        rules.push(rule(f));
    }
    // 0031: new rules.
    for f in &values_lists(CATALOG_MIGRATIONS[2])[0] {
        assert!(
            !rules.iter().any(|r| Some(&r.rule_id) == f[0].as_ref()),
            "{:?} is new",
            f[0]
        );
        rules.push(rule(f));
    }
    rules
}

/// The catalog of a freshly migrated database.
pub fn builtin_catalog() -> Catalog {
    Catalog::with_lexicon(1, builtin_rules(), super::lexicon::builtin())
}

/// The catalog without the lexicon: rules only (the baseline the corpus test compares against).
pub fn rules_only_catalog() -> Catalog {
    Catalog::new(1, builtin_rules())
}

#[test]
fn the_seeded_rules_parse() {
    let rules = builtin_rules();
    assert!(rules.len() > 150, "{} rules", rules.len());
    assert!(rules.iter().all(|r| r.validate().is_ok()));
    let x79 = rules.iter().find(|r| r.rule_id == "xid-79").unwrap();
    assert_eq!((x79.code, x79.component), (Some(79), Component::Gpu));
    // 0025 moved the PCIe rules to their component and added the host parts' rules.
    let pcie = rules.iter().find(|r| r.rule_id == "any-pcie").unwrap();
    assert_eq!(pcie.component, Component::Pcie);
    let mce = rules.iter().find(|r| r.rule_id == "any-machine-check").unwrap();
    assert_eq!((mce.category, mce.component), (Category::Hardware, Component::Cpu));
    let ids: std::collections::HashSet<&str> = rules.iter().map(|r| r.rule_id.as_str()).collect();
    assert_eq!(ids.len(), rules.len(), "rule ids are unique");
}
