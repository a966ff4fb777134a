//! The free-text classifier: normalises a message, finds the lexicon's terms in it and scores
//! them onto the v1 taxonomy. Pure: the lexicon is handed in (it is data, loaded with the rules).
//!
//! How a message is read:
//! 1. normalise: camelCase is split ("KubeletNotReady"), case folded, punctuation becomes a
//!    separator (`;()|[]!?` and `.,:` before a space, and " - ", also end a clause), plurals and
//!    verb forms are folded ("errors", "failed"), misspellings corrected ("temprature") and
//!    abbreviations expanded ("PSU" -> "power supply", "DBE" -> "double bit ecc", "IB" ->
//!    "infiniband"); a message beyond [`MAX_SCORED_BYTES`] is read by its head and tail;
//! 2. match: at each position the longest lexicon phrase wins ("gpu memory" before "gpu");
//! 3. negation, hedges and health: a failure or healthy term right after "no"/"not"/"without" is
//!    negated ("no errors"; "not healthy" is a failure); a clause with "possibly"/"might" is not
//!    evidence; a clause with a healthy term ("passed", "ok", "recovered", "deasserted") and no live
//!    failure is silenced, and when it names no component it speaks for the whole message
//!    ("Power Supply PS1 | Failure detected | Deasserted");
//! 4. score: with a live failure term somewhere (a fault term is one), every component or fault
//!    term outside silenced clauses adds its weight to its component (doubled after a cause
//!    connector: "due to", "caused by", "because"); "memory" and "ECC" take their part from the
//!    context (GPU or DIMM). A short text of component terms only ("GPU HBM3 Memory") is a
//!    root-cause label and is scored as such;
//! 5. decide: unknown without a failure term, without a component, below [`MIN_SCORE`], or when
//!    another category scores more than [`CONTRADICTION`] of the best;
//!    symptom terms (NCCL, watchdog) never name a cause.

use std::collections::HashMap;

use crate::domain::taxonomy::{Category, Component, RootCause};

/// Scoring stops after this many bytes of message (the message itself is kept whole).
pub const MAX_SCORED_BYTES: usize = 4096;
/// The best component needs at least this much evidence.
pub const MIN_SCORE: f64 = 1.0;
/// Unknown when a component of another category scores more than this share of the best.
pub const CONTRADICTION: f64 = 0.75;
/// Longest lexicon phrase, in tokens.
const MAX_PHRASE: usize = 6;

/// What a lexicon term says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum TermKind {
    /// Names a component ("psu", "hbm", "lustre"); needs a failure term to count.
    Component,
    /// Names a failure of a component ("out of memory", "kernel panic"): component and failure.
    Fault,
    /// Says something is wrong ("error", "lost", "down", "mismatch").
    Failure,
    /// Says something is fine ("passed", "ok", "recovered").
    Healthy,
    /// A symptom that names no cause ("nccl", "watchdog"): never decides by itself.
    Symptom,
}

impl TermKind {
    pub const ALL: [TermKind; 5] = [
        TermKind::Component,
        TermKind::Fault,
        TermKind::Failure,
        TermKind::Healthy,
        TermKind::Symptom,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            TermKind::Component => "component",
            TermKind::Fault => "fault",
            TermKind::Failure => "failure",
            TermKind::Healthy => "healthy",
            TermKind::Symptom => "symptom",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }
    /// Component and fault terms carry a component; the others must not.
    pub fn has_component(self) -> bool {
        matches!(self, TermKind::Component | TermKind::Fault)
    }
}

/// One lexicon row.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct Term {
    /// The phrase as written; matched after normalisation (so "PSUs" matches "psu").
    pub term: String,
    pub kind: TermKind,
    /// The category of `component` (unknown for failure, healthy and symptom terms).
    pub category: Category,
    pub component: Component,
    /// Evidence weight, 0 < weight <= 10: more specific terms weigh more.
    pub weight: f64,
    /// Where the term comes from.
    pub source: String,
    pub builtin: bool,
}

impl Term {
    pub fn validate(&self) -> Result<(), String> {
        if self.term.trim().is_empty() || self.term.len() > 200 {
            return Err("term must be 1 to 200 characters".into());
        }
        let n = normalise(&self.term).tokens.len();
        if n == 0 {
            return Err(format!(
                "term '{}' has no letters or digits after normalisation",
                self.term
            ));
        }
        if n > MAX_PHRASE {
            return Err(format!(
                "term '{}' is {n} words after normalisation; at most {MAX_PHRASE}",
                self.term
            ));
        }
        if !(self.weight > 0.0 && self.weight <= 10.0) {
            return Err(format!("weight {} is not in (0, 10]", self.weight));
        }
        if self.kind.has_component() {
            RootCause::new(self.category, self.component)?;
            if self.component == Component::Unknown {
                return Err(format!("a {} term needs a component", self.kind.as_str()));
            }
        } else if self.component != Component::Unknown || self.category != Category::Unknown {
            return Err(format!(
                "a {} term has category and component unknown",
                self.kind.as_str()
            ));
        }
        Ok(())
    }
}

/// The lexicon ready to match: normalised phrase -> term.
#[derive(Debug, Clone, Default)]
pub struct Lexicon {
    by_phrase: HashMap<String, Term>,
}

impl Lexicon {
    pub fn new(terms: Vec<Term>) -> Self {
        let mut by_phrase = HashMap::new();
        for t in terms {
            let key = normalise(&t.term).tokens.join(" ");
            if !key.is_empty() {
                by_phrase.insert(key, t);
            }
        }
        Lexicon { by_phrase }
    }
    pub fn len(&self) -> usize {
        self.by_phrase.len()
    }
    pub fn is_empty(&self) -> bool {
        self.by_phrase.is_empty()
    }
}

/// A normalised message: tokens and the clause each belongs to.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Normalised {
    pub tokens: Vec<String>,
    pub clause: Vec<u32>,
}

/// Abbreviations and spelling variants, after lower-casing and plural folding.
fn canonical(tok: &str) -> Option<&'static [&'static str]> {
    Some(match tok {
        "psu" | "psus" | "ps" | "powersupply" => &["power", "supply"],
        "dbe" => &["double", "bit", "ecc"],
        "sbe" => &["single", "bit", "ecc"],
        "oom" => &["out", "of", "memory"],
        "oomkilled" | "oomkill" => &["out", "of", "memory", "kill"],
        "outofmemory" | "outofmemoryerror" => &["out", "of", "memory"],
        "eccuncorrectable" => &["uncorrectable", "ecc"],
        "ecccorrectable" => &["correctable", "ecc"],
        "ib" | "infinband" | "infiniban" => &["infiniband"],
        "ibport" => &["infiniband", "port"],
        "fs" | "filesys" => &["filesystem"],
        "fw" => &["firmware"],
        "k8s" | "kube" => &["kubernetes"],
        "temp" | "temprature" | "temperture" | "tempreture" | "temperatur" | "tempature" => &["temperature"],
        "memmory" | "memroy" | "mem" => &["memory"],
        "uncorrected" | "uncorrectible" | "uncorrectible_" | "uncorr" | "ue" => &["uncorrectable"],
        "corrected" | "correctible" | "ce" => &["correctable"],
        "fail" | "failed" | "fails" | "failing" | "faild" | "failue" | "failrue" => &["failure"],
        "fault" | "faulty" | "faulted" | "faulting" => &["fault"],
        "crashed" | "crashing" => &["crash"],
        "hung" | "hanging" | "hangs" => &["hang"],
        "overheated" | "overheating" => &["overheat"],
        "throttled" | "throttling" | "throttl" => &["throttle"],
        "mismatched" | "mismatching" => &["mismatch"],
        "degradation" | "degrade" => &["degraded"],
        "panicked" => &["panic"],
        "remapped" | "remapping" | "remaped" => &["remap"],
        "retired" | "retirement" => &["retire"],
        "disconnected" | "disconnection" => &["disconnect"],
        "unreachable" | "unreacheable" => &["unreachable"],
        "unresponsive" => &["not", "responding"],
        "timedout" => &["timeout"],
        "readonly" | "ro" => &["read", "only"],
        "flapping" | "flapped" | "flaps" => &["flap"],
        "recieve" => &["receive"],
        "nvlinks" => &["nvlink"],
        "errored" | "err" | "erro" | "eror" => &["error"],
        "lost" | "lose" | "loss" | "losing" => &["lost"],
        "ok" | "okay" => &["ok"],
        "passed" | "passing" | "pass" => &["passed"],
        "recovered" | "recovery" | "recover" => &["recovered"],
        "deasserted" | "deassert" => &["deasserted"],
        "nic" | "nics" => &["nic"],
        "gpus" => &["gpu"],
        "cpus" => &["cpu"],
        _ => return None,
    })
}

/// Device names with an index ("gpu0", "mlx5", "eth1", "psu2", "fan3a") fold to the device word.
fn strip_device_index(tok: &str) -> &str {
    const PREFIXES: [&str; 22] = [
        "gpu", "cpu", "psu", "fan", "dimm", "eth", "ens", "enp", "ib", "mlx", "nvme", "port", "hca", "ps", "nic", "sd",
        "ssd", "hdd", "nvlink", "bond", "node", "ata",
    ];
    let letters = tok.bytes().take_while(|c| c.is_ascii_alphabetic()).count();
    if letters == 0 || letters == tok.len() {
        return tok;
    }
    let prefix = &tok[..letters];
    if PREFIXES.contains(&prefix) && tok.as_bytes()[letters].is_ascii_digit() {
        return match prefix {
            "ens" | "enp" => "eth",
            "mlx" => "mlx5",
            _ => prefix,
        };
    }
    tok
}

/// Folds a plural: "errors" -> "error", "batteries" -> "battery"; leaves "status", "bus", "loss".
fn singular(tok: &str) -> &str {
    if tok.len() > 3 && tok.ends_with('s') && tok.bytes().all(|c| c.is_ascii_alphabetic()) {
        let keep = ["ss", "us", "is", "os", "as"];
        if !keep.iter().any(|k| tok.ends_with(k)) {
            return &tok[..tok.len() - 1];
        }
    }
    tok
}

/// Pairs split by camelCase that are one word.
fn merge_pair(a: &str, b: &str) -> Option<&'static str> {
    Some(match (a, b) {
        ("infini", "band") => "infiniband",
        ("ro", "ce") => "roce",
        ("info", "rom") => "inforom",
        ("nv", "link") => "nvlink",
        ("nv", "switch") => "nvswitch",
        ("nv", "lnk") => "nvlink",
        ("connect", "x") => "connectx",
        ("blue", "field") => "bluefield",
        ("file", "system") => "filesystem",
        ("time", "out") | ("timed", "out") => "timeout",
        ("over", "temperature") | ("over", "temp") => "overtemperature",
        ("over", "heat") => "overheat",
        ("read", "only") => "readonly",
        ("not", "ready") => "notready",
        ("nvidia", "smi") => "nvidia-smi",
        // LBNL NHC's process checks (check_ps_service), not a power supply.
        ("check", "ps") => "check_ps",
        _ => return None,
    })
}

fn is_clause_break(c: char) -> bool {
    matches!(c, ';' | '(' | ')' | '|' | '[' | ']' | '\n' | '!' | '?' | '"')
}

/// Lower-cases, splits camelCase, folds plurals and variants, expands abbreviations.
pub fn normalise(text: &str) -> Normalised {
    let text = truncate(text, MAX_SCORED_BYTES + 3);
    // Raw words with clause numbers. A word is a run of ASCII letters and digits; "." between
    // digits is kept out (versions, bus ids stay separate numbers, which match nothing).
    let mut words: Vec<(String, u32)> = Vec::new();
    let mut clause = 0u32;
    let mut cur = String::new();
    let mut prev: Option<char> = None;
    let chars: Vec<char> = text.chars().collect();
    let flush = |cur: &mut String, words: &mut Vec<(String, u32)>, clause: u32| {
        if !cur.is_empty() {
            words.push((std::mem::take(cur), clause));
        }
    };
    for (i, &c) in chars.iter().enumerate() {
        if c.is_ascii_alphanumeric() {
            // camelCase boundary: lower -> Upper.
            if c.is_ascii_uppercase() && prev.is_some_and(|p| p.is_ascii_lowercase()) {
                flush(&mut cur, &mut words, clause);
            }
            cur.push(c.to_ascii_lowercase());
        } else {
            flush(&mut cur, &mut words, clause);
            let next = chars.get(i + 1).copied();
            let dash_break = c == '-' && prev == Some(' ') && next == Some(' ');
            // ".", "," and ":" end a clause before a space or the end only: "1200.00",
            // "0000:3b:00.0" and "NIC.Slot.3" stay one clause.
            let spaced = next.is_none_or(|n| n.is_whitespace());
            let soft_break = matches!(c, '.' | ',' | ':') && spaced;
            if is_clause_break(c) || dash_break || soft_break {
                clause += 1;
            }
        }
        prev = Some(c);
    }
    flush(&mut cur, &mut words, clause);

    // Merge camelCase splits and fixed pairs, then canonicalise.
    let mut merged: Vec<(String, u32)> = Vec::with_capacity(words.len());
    let mut words = words.into_iter().peekable();
    while let Some((w, c)) = words.next() {
        if let Some((next, next_clause)) = words.peek()
            && *next_clause == c
            && let Some(m) = merge_pair(&w, next)
        {
            merged.push((m.to_string(), c));
            words.next();
            continue;
        }
        merged.push((w, c));
    }
    let mut out = Normalised::default();
    for (w, c) in merged {
        let w = strip_device_index(&w);
        let expanded = canonical(w).or_else(|| canonical(singular(w)));
        match expanded {
            Some(parts) => {
                for p in parts {
                    out.tokens.push((*p).to_string());
                    out.clause.push(c);
                }
            }
            None => {
                out.tokens.push(singular(w).to_string());
                out.clause.push(c);
            }
        }
    }
    out
}

/// The part of a message that is scored: all of it up to [`MAX_SCORED_BYTES`], else its first and
/// last halves of that (a traceback names its error at the end), joined by a clause break.
pub fn scored(s: &str) -> std::borrow::Cow<'_, str> {
    if s.len() <= MAX_SCORED_BYTES {
        return std::borrow::Cow::Borrowed(s);
    }
    let half = MAX_SCORED_BYTES / 2;
    let head = truncate(s, half);
    let mut start = s.len() - half;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    std::borrow::Cow::Owned(format!("{head} | {}", &s[start..]))
}

/// The first `max` bytes of `s`, cut at a character boundary.
pub fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

const NEGATORS: [&str; 5] = ["no", "not", "without", "never", "none"];
/// A clause that only guesses ("possibly due to a network error") is not evidence.
const HEDGES: [&str; 5] = ["possibly", "perhaps", "maybe", "might", "potentially"];
const CAUSE_CONNECTORS: [&[&str]; 6] = [
    &["due", "to"],
    &["caused", "by"],
    &["because"],
    &["root", "cause"],
    &["triggered", "by"],
    &["result", "of"],
];

/// One lexicon term found in the message.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    /// The normalised phrase that matched.
    pub phrase: String,
    pub kind: TermKind,
    pub component: Component,
    pub weight: f64,
    pub negated: bool,
    /// After a cause connector (weight doubled).
    pub cause: bool,
    clause: u32,
}

/// What the text says.
#[derive(Debug, Clone, PartialEq)]
pub struct TextVerdict {
    pub root_cause: RootCause,
    /// Evidence of the winning component (0 when unknown).
    pub score: f64,
    /// Evidence per component, best first.
    pub scores: Vec<(Component, f64)>,
    /// "terms: power supply(power) + redundancy lost(failure)" or why unknown.
    pub explanation: String,
    /// The text says the part is fine ("passed", "deasserted", "no errors").
    pub healthy: bool,
}

impl TextVerdict {
    pub fn is_known(&self) -> bool {
        self.root_cause != RootCause::UNKNOWN
    }
    pub fn score_of(&self, c: Component) -> f64 {
        self.scores.iter().find(|(k, _)| *k == c).map_or(0.0, |(_, s)| *s)
    }
}

/// Finds the lexicon's terms in a normalised message, longest phrase first.
pub fn find_terms(lex: &Lexicon, n: &Normalised) -> Vec<Hit> {
    let mut hits = Vec::new();
    let toks = &n.tokens;
    let mut cause_clause: Option<u32> = None;
    let mut key = String::new();
    let mut i = 0;
    while i < toks.len() {
        // Cause connectors mark the rest of their clause.
        if let Some(len) = CAUSE_CONNECTORS
            .iter()
            .find(|c| c.len() <= toks.len() - i && c.iter().zip(&toks[i..]).all(|(w, t)| *w == t.as_str()))
            .map(|c| c.len())
        {
            cause_clause = Some(n.clause[i]);
            i += len;
            continue;
        }
        let mut matched = false;
        for len in (1..=MAX_PHRASE.min(toks.len() - i)).rev() {
            // A phrase does not cross a clause boundary.
            if n.clause[i + len - 1] != n.clause[i] {
                continue;
            }
            // One buffer for every candidate phrase: this loop runs for each word of every
            // message folded, and a String per candidate was most of classification's time.
            key.clear();
            for (k, t) in toks[i..i + len].iter().enumerate() {
                if k > 0 {
                    key.push(' ');
                }
                key.push_str(t);
            }
            if let Some(t) = lex.by_phrase.get(key.as_str()) {
                let negated = matches!(t.kind, TermKind::Failure | TermKind::Fault | TermKind::Healthy)
                    && (1..=2).any(|back| {
                        i >= back
                            && n.clause[i - back] == n.clause[i]
                            && NEGATORS.contains(&toks[i - back].as_str())
                            // "no" right before: "no errors"; one word between: "no ECC errors".
                            && (back == 1 || !lex.by_phrase.contains_key(&toks[i - 1]) || lex.by_phrase[&toks[i - 1]].kind.has_component())
                    });
                let cause = cause_clause == Some(n.clause[i]);
                // "not healthy" is a failure.
                let (kind, negated) = if t.kind == TermKind::Healthy && negated {
                    (TermKind::Failure, false)
                } else {
                    (t.kind, negated)
                };
                hits.push(Hit {
                    phrase: key.clone(),
                    kind,
                    component: t.component,
                    weight: if cause { t.weight * 2.0 } else { t.weight },
                    negated,
                    cause,
                    clause: n.clause[i],
                });
                i += len;
                matched = true;
                break;
            }
        }
        if !matched {
            i += 1;
        }
    }
    hits
}

/// Classifies free text with the lexicon.
pub fn classify_text(lex: &Lexicon, text: &str) -> TextVerdict {
    let unknown = |why: String| TextVerdict {
        root_cause: RootCause::UNKNOWN,
        score: 0.0,
        scores: Vec::new(),
        explanation: why,
        healthy: false,
    };
    if lex.is_empty() {
        return unknown("text: no lexicon".into());
    }
    let n = normalise(&scored(text));
    if n.tokens.is_empty() {
        return unknown("text: no words".into());
    }
    let hits = find_terms(lex, &n);
    if hits.is_empty() {
        return unknown("text: no known term".into());
    }
    // Hedged clauses are dropped. A clause is silenced when it has a healthy (or negated
    // failure) term and no live failure; a silenced clause without a component term states the
    // health of the whole message ("... | Failure detected | Deasserted", "Link recovered").
    let hedged: std::collections::BTreeSet<u32> = n
        .tokens
        .iter()
        .zip(&n.clause)
        .filter(|(t, _)| HEDGES.contains(&t.as_str()))
        .map(|(_, c)| *c)
        .collect();
    let hits: Vec<Hit> = hits.into_iter().filter(|h| !hedged.contains(&h.clause)).collect();
    let clauses: std::collections::BTreeSet<u32> = hits.iter().map(|h| h.clause).collect();
    let mut silenced = Vec::new();
    let mut whole_message_healthy = false;
    for c in clauses {
        let in_c = || hits.iter().filter(move |h| h.clause == c);
        let live_failure = in_c().any(|h| matches!(h.kind, TermKind::Failure | TermKind::Fault) && !h.negated);
        let healthy = in_c().any(|h| h.kind == TermKind::Healthy || h.negated);
        if healthy && !live_failure {
            silenced.push(c);
            if !in_c().any(|h| h.kind.has_component()) {
                whole_message_healthy = true;
            }
        }
    }
    let any_failure = hits
        .iter()
        .any(|h| matches!(h.kind, TermKind::Failure | TermKind::Fault) && !h.negated && !silenced.contains(&h.clause));
    let mut live: Vec<&Hit> = if any_failure && !whole_message_healthy {
        hits.iter().filter(|h| !silenced.contains(&h.clause)).collect()
    } else {
        Vec::new()
    };
    // A root-cause label ("GPU HBM3 Memory", "Power Supply", "NIC"): a short text that is all
    // component terms names the failed part without a failure word (post-mortems, drain reasons).
    let mut label = false;
    if live.is_empty() && !whole_message_healthy && is_label(&n, &hits) {
        live = hits.iter().collect();
        label = true;
    }
    let describe = |hs: &[&Hit]| -> String {
        hs.iter()
            .map(|h| {
                let what = if h.kind.has_component() {
                    h.component.as_str()
                } else {
                    h.kind.as_str()
                };
                format!("{}({what})", h.phrase)
            })
            .collect::<Vec<_>>()
            .join(" + ")
    };
    if live.is_empty() {
        let all: Vec<&Hit> = hits.iter().collect();
        let healthy = hits.iter().any(|h| h.kind == TermKind::Healthy || h.negated);
        let why = if healthy { "healthy" } else { "no failure term" };
        let mut v = unknown(format!("text: {why}: {}", describe(&all)));
        v.healthy = healthy;
        return v;
    }
    let live: Vec<Hit> = memory_context(live.into_iter().cloned().collect());
    let live: Vec<&Hit> = live.iter().collect();
    let mut scores: HashMap<Component, f64> = HashMap::new();
    for h in &live {
        if h.kind.has_component() {
            *scores.entry(h.component).or_default() += h.weight;
        }
    }
    let mut ranked: Vec<(Component, f64)> = scores.into_iter().collect();
    // Best first; ties: the single heaviest term, then the taxonomy order (specific first).
    let heaviest = |c: Component| {
        live.iter()
            .filter(|h| h.kind.has_component() && h.component == c)
            .map(|h| h.weight)
            .fold(0.0, f64::max)
    };
    ranked.sort_by(|a, b| {
        b.1.total_cmp(&a.1)
            .then_with(|| heaviest(b.0).total_cmp(&heaviest(a.0)))
            .then_with(|| a.0.cmp(&b.0))
    });
    let Some(&(best, best_score)) = ranked.first() else {
        let symptom = live.iter().any(|h| h.kind == TermKind::Symptom);
        let why = if symptom {
            "symptom without a cause"
        } else {
            "no component"
        };
        return unknown(format!("text: {why}: {}", describe(&live)));
    };
    let mut verdict = unknown(String::new());
    verdict.scores = ranked.clone();
    if best_score < MIN_SCORE {
        verdict.explanation = format!("text: weak evidence: {}", describe(&live));
        return verdict;
    }
    if let Some(&(rival, rival_score)) = ranked.iter().find(|(c, _)| c.category() != best.category())
        && rival_score > CONTRADICTION * best_score
    {
        verdict.explanation = format!(
            "text: contradictory ({} {best_score} vs {} {rival_score}): {}",
            best.as_str(),
            rival.as_str(),
            describe(&live)
        );
        return verdict;
    }
    let shown: Vec<&Hit> = live
        .iter()
        .copied()
        .filter(|h| !h.kind.has_component() || h.component == best || h.kind == TermKind::Fault)
        .filter(|h| h.kind != TermKind::Symptom)
        .collect();
    verdict.root_cause = RootCause {
        category: best.category(),
        component: best,
    };
    verdict.score = best_score;
    let head = if label { "label terms" } else { "terms" };
    verdict.explanation = format!("{head}: {}", describe(&shown));
    verdict
}

/// At most [`MAX_LABEL_TOKENS`] tokens, every hit a component term, and at most one token (a
/// number, an index, a connective) outside the hits.
fn is_label(n: &Normalised, hits: &[Hit]) -> bool {
    let covered: usize = hits.iter().map(|h| h.phrase.split(' ').count()).sum();
    n.tokens.len() <= MAX_LABEL_TOKENS
        && !hits.is_empty()
        && hits.iter().all(|h| h.kind == TermKind::Component)
        && n.tokens.len() - covered <= 1
}

/// Longest text read as a root-cause label.
pub const MAX_LABEL_TOKENS: usize = 5;

/// "Memory" and "ECC" name different parts by context: beside a GPU term and no host-memory
/// term, "memory" is GPU memory ("faulty memory on GPU 2"); beside a host-memory term (DIMM,
/// system memory, EDAC, the bare "memory" of a BMC sensor) and no GPU term, ECC is DIMM ECC
/// ("Memory DIMM_A1 | Uncorrectable ECC"), host memory.
fn memory_context(mut hits: Vec<Hit>) -> Vec<Hit> {
    let host_memory_term =
        |h: &Hit| h.kind.has_component() && h.component == Component::HostMemory && h.phrase != "memory";
    let is_ecc =
        |h: &Hit| h.component == Component::GpuMemory && (h.phrase.contains("ecc") || h.phrase.contains(" bit"));
    let gpu_ctx = hits.iter().any(|h| {
        h.kind.has_component() && (h.component == Component::Gpu || (h.component == Component::GpuMemory && !is_ecc(h)))
    });
    let host_mem_ctx = hits.iter().any(host_memory_term);
    let bare_memory = hits.iter().any(|h| h.phrase == "memory");
    for h in hits.iter_mut() {
        if h.phrase == "memory" && gpu_ctx && !host_mem_ctx {
            h.component = Component::GpuMemory;
        } else if is_ecc(h) && !gpu_ctx && (host_mem_ctx || bare_memory) {
            h.component = Component::HostMemory;
        }
    }
    hits
}

/// Severity and action for a cause found in text (no rule to take them from).
pub fn default_response(c: Component) -> (super::Severity, &'static str) {
    use super::Severity::*;
    use Component::*;
    match c {
        Gpu => (High, "check_hardware"),
        GpuMemory => (High, "reset_gpu"),
        Nvlink => (High, "check_hardware"),
        Network => (High, "check_hardware"),
        Cpu | HostMemory | Host => (High, "drain_node"),
        Disk | Pcie | Baseboard => (High, "check_hardware"),
        Power => (High, "check_hardware"),
        Cooling => (High, "check_hardware"),
        Scheduler | Storage | Runtime | Driver | Framework => (Medium, "investigate"),
        Code => (Medium, "fix_user_code"),
        Config | Oom | Data | Model => (Medium, "fix_config"),
        Unknown => (Medium, "investigate"),
    }
}
