//! The built-in lexicon (`lexicon.tsv`, seeded into the database by `migrations/0008_lexicon.sql`)
//! and its parser. At run time the lexicon is read from the `classification_terms` table, where
//! admins edit it; the file is the seed and what the pure tests classify with.

use super::text::{Term, TermKind};
use crate::domain::taxonomy::{Category, Component};

pub const BUILTIN_TSV: &str = include_str!("lexicon.tsv");

/// Parses lexicon rows `term \t kind \t component \t weight \t source`; '#' starts a comment line.
pub fn parse_tsv(tsv: &str) -> Result<Vec<Term>, String> {
    let mut out = Vec::new();
    for (i, line) in tsv.lines().enumerate() {
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let f: Vec<&str> = line.split('\t').collect();
        if f.len() != 5 {
            return Err(format!("line {}: {} fields, want 5", i + 1, f.len()));
        }
        let kind = TermKind::parse(f[1]).ok_or_else(|| format!("line {}: kind '{}'", i + 1, f[1]))?;
        let component = Component::parse(f[2]).ok_or_else(|| format!("line {}: component '{}'", i + 1, f[2]))?;
        let weight: f64 = f[3].parse().map_err(|_| format!("line {}: weight '{}'", i + 1, f[3]))?;
        let term = Term {
            term: f[0].to_string(),
            kind,
            category: if kind.has_component() {
                component.category()
            } else {
                Category::Unknown
            },
            component,
            weight,
            source: f[4].to_string(),
            builtin: true,
        };
        term.validate().map_err(|e| format!("line {}: {e}", i + 1))?;
        out.push(term);
    }
    Ok(out)
}

/// The built-in lexicon (the file is checked by a unit test, so this cannot fail at run time).
pub fn builtin() -> Vec<Term> {
    parse_tsv(BUILTIN_TSV).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classify::text::normalise;

    #[test]
    fn builtin_lexicon_parses_and_has_no_duplicate_phrases() {
        let terms = parse_tsv(BUILTIN_TSV).expect("lexicon.tsv parses");
        assert!(terms.len() > 300, "{} terms", terms.len());
        let mut seen = std::collections::HashMap::new();
        let mut dups = Vec::new();
        for t in &terms {
            let key = normalise(&t.term).tokens.join(" ");
            if let Some(prev) = seen.insert(key.clone(), t.term.clone()) {
                dups.push(format!("'{}' and '{prev}' both normalise to '{key}'", t.term));
            }
        }
        assert!(dups.is_empty(), "{}", dups.join("\n"));
    }

    /// The migrations seed exactly the file's rows: 0008's, with 0025's changed and new terms
    /// (the file is the source; a change to it needs a new migration).
    #[test]
    fn migrations_seed_the_builtin_lexicon() {
        let rows = crate::classify::seed::migrated_term_rows();
        let terms = builtin();
        let as_row = |t: &Term| -> Vec<Option<String>> {
            [
                t.term.clone(),
                t.kind.as_str().into(),
                t.category.as_str().into(),
                t.component.as_str().into(),
                t.weight.to_string(),
                t.source.clone(),
            ]
            .into_iter()
            .map(Some)
            .collect()
        };
        let want: Vec<Vec<Option<String>>> = terms.iter().map(as_row).collect();
        for w in &want {
            assert!(rows.contains(w), "the migrations lack {w:?}");
        }
        for r in &rows {
            assert!(want.contains(r), "lexicon.tsv lacks the migrated row {r:?}");
        }
        assert_eq!(rows.len(), terms.len(), "rows seeded by 0008 + 0025 vs lexicon.tsv");
    }
}
