//! Test support: the built-in catalog as the migrations seed it (rules of
//! `migrations/0002_classification_rules.sql`, terms of `lexicon.tsv`), for pure tests that must
//! classify exactly as a fresh database does.

use super::{Catalog, Rule, Severity};
use crate::domain::taxonomy::{Category, Component};

/// Splits the SQL `VALUES` tuples of an INSERT into their fields ('' escapes, NULL as None).
fn sql_tuples(sql: &str) -> Vec<Vec<Option<String>>> {
    let mut out = Vec::new();
    let b: Vec<char> = sql.chars().collect();
    let mut i = 0;
    // Skip to VALUES.
    let start = sql.find("VALUES").expect("an INSERT ... VALUES");
    i += sql[..start].chars().count() + "VALUES".len();
    while i < b.len() {
        if b[i] == '-' && b.get(i + 1) == Some(&'-') {
            while i < b.len() && b[i] != '\n' {
                i += 1;
            }
            continue;
        }
        if b[i] != '(' {
            i += 1;
            continue;
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
    }
    out
}

pub fn builtin_rules() -> Vec<Rule> {
    let sql = include_str!("../../migrations/0002_classification_rules.sql");
    let end = sql.find(");\n").map_or(sql.len(), |e| e + 2);
    let sql = &sql[..end];
    sql_tuples(sql)
        .into_iter()
        .map(|f| {
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
        })
        .collect()
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
}
