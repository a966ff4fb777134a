//! GPU architecture generations and mapping of reported model names to them.
//!
//! Model strings arrive from nvidia-smi, DCGM, PCI databases, Kubernetes GPU
//! feature discovery labels and humans, so the matcher tokenises the name and
//! looks at whole tokens: substring matching would read "A100" as "A10" or
//! "L40S" as "L4".

/// NVIDIA GPU architecture generation (data-centre relevant ones), in age order: the derived `Ord`
/// is oldest first (Kepler 2012, Maxwell 2014, Pascal 2016, Volta 2017, Turing 2018, Ampere 2020,
/// Ada 2022, Hopper 2022, Blackwell 2024), `Unknown` last. Deserializes from (and documents in
/// OpenAPI as) the identifiers of [`as_str`](Self::as_str).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum GpuGeneration {
    Kepler,
    Maxwell,
    Pascal,
    Volta,
    Turing,
    Ampere,
    Ada,
    Hopper,
    Blackwell,
    Unknown,
}

impl GpuGeneration {
    /// Every variant, oldest first, `Unknown` last.
    pub const ALL: [GpuGeneration; 10] = [
        GpuGeneration::Kepler,
        GpuGeneration::Maxwell,
        GpuGeneration::Pascal,
        GpuGeneration::Volta,
        GpuGeneration::Turing,
        GpuGeneration::Ampere,
        GpuGeneration::Ada,
        GpuGeneration::Hopper,
        GpuGeneration::Blackwell,
        GpuGeneration::Unknown,
    ];

    /// Orders generation names (as stored and shown) by age, oldest first: known generations in
    /// [`ALL`](Self::ALL) order, `unknown` after them, anything unrecognised last, by name.
    pub fn age_order(a: &str, b: &str) -> std::cmp::Ordering {
        let rank = |s: &str| GpuGeneration::parse(s).map_or(GpuGeneration::ALL.len(), |g| g as usize);
        rank(a).cmp(&rank(b)).then_with(|| a.cmp(b))
    }

    /// Stable lowercase identifier (used in storage and APIs).
    pub fn as_str(&self) -> &'static str {
        match self {
            GpuGeneration::Kepler => "kepler",
            GpuGeneration::Maxwell => "maxwell",
            GpuGeneration::Pascal => "pascal",
            GpuGeneration::Volta => "volta",
            GpuGeneration::Turing => "turing",
            GpuGeneration::Ampere => "ampere",
            GpuGeneration::Ada => "ada",
            GpuGeneration::Hopper => "hopper",
            GpuGeneration::Blackwell => "blackwell",
            GpuGeneration::Unknown => "unknown",
        }
    }

    /// Inverse of [`as_str`](Self::as_str); case-insensitive, surrounding
    /// whitespace ignored. "lovelace"/"ada lovelace" are accepted for `Ada`.
    pub fn parse(s: &str) -> Option<Self> {
        let s = s.trim().to_ascii_lowercase();
        match s.as_str() {
            "kepler" => Some(GpuGeneration::Kepler),
            "maxwell" => Some(GpuGeneration::Maxwell),
            "pascal" => Some(GpuGeneration::Pascal),
            "volta" => Some(GpuGeneration::Volta),
            "turing" => Some(GpuGeneration::Turing),
            "ampere" => Some(GpuGeneration::Ampere),
            "ada" | "lovelace" | "ada lovelace" | "ada_lovelace" | "ada-lovelace" => Some(GpuGeneration::Ada),
            "hopper" => Some(GpuGeneration::Hopper),
            "blackwell" => Some(GpuGeneration::Blackwell),
            "unknown" => Some(GpuGeneration::Unknown),
            _ => None,
        }
    }
}

impl std::fmt::Display for GpuGeneration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A token split as `<letters><digits><letters>`, e.g. "l40s" -> ("l", 40, "s").
struct ModelToken<'a> {
    prefix: &'a str,
    number: u32,
    suffix: &'a str,
}

fn split_model_token(tok: &str) -> Option<ModelToken<'_>> {
    let b = tok.as_bytes();
    let p_end = b.iter().position(|c| !c.is_ascii_alphabetic())?;
    let d_len = b[p_end..].iter().take_while(|c| c.is_ascii_digit()).count();
    // Cap the digit run so parsing cannot overflow on garbage.
    if d_len == 0 || d_len > 6 {
        return None;
    }
    let d_end = p_end + d_len;
    let suffix = &tok[d_end..];
    // Only letters may follow ("a10g", "v100s", "h100nvl"); anything else
    // (e.g. "sxm5" has digits after letters but that is a prefix+number) is
    // not a model token of the shape we know.
    if !suffix.bytes().all(|c| c.is_ascii_alphabetic()) {
        return None;
    }
    Some(ModelToken {
        prefix: &tok[..p_end],
        number: tok[p_end..d_end].parse().ok()?,
        suffix,
    })
}

/// Variants of the K-series (K20X, K20m, K20c, K40t, K20Xm, K2000D); anything else ("k8s") is not
/// a GPU.
const KEPLER_SUFFIXES: [&str; 7] = ["", "x", "m", "c", "t", "xm", "d"];

/// Classify a data-centre / workstation model token such as "h100" or "a6000".
fn classify_model_token(t: &ModelToken<'_>) -> Option<GpuGeneration> {
    use GpuGeneration::*;
    let n = t.number;
    let g = match t.prefix {
        // Chip codenames: GK110/GK210, GM200/GM204, GP100/GP102, GV100, TU102, GA100, AD102,
        // GH100/GH200, GB200/GB202/GB10.
        "gk" => Kepler,
        "gm" => Maxwell,
        "gp" => Pascal,
        "gv" => Volta,
        "tu" => Turing,
        "ga" => Ampere,
        "ad" => Ada,
        "gh" => Hopper,
        "gb" => Blackwell,
        // Tesla K8/K10/K20(X/m/c)/K40(m/c/t)/K80/K520, GRID K1/K2/K520 and the Kepler Quadro
        // K420/K600/K2000/K4000/K5000/K6000; Quadro K620/K1200/K2200 are Maxwell (GM107).
        "k" if !KEPLER_SUFFIXES.contains(&t.suffix) => return None,
        "k" if matches!(
            n,
            1 | 2 | 8 | 10 | 20 | 40 | 80 | 420 | 520 | 600 | 2000 | 4000 | 5000 | 6000
        ) =>
        {
            Kepler
        }
        "k" if matches!(n, 620 | 1200 | 2200) => Maxwell,
        // Tesla M4/M6/M10/M40/M60 and Quadro M2000/M4000/M5000/M6000.
        "m" if matches!(n, 4 | 6 | 10 | 40 | 60 | 2000 | 4000 | 5000 | 6000) => Maxwell,
        // Tesla P4/P6/P40/P100 and Quadro P400 … P6000. No suffix: "p4d" is an AWS instance
        // type (A100), not a Tesla P4.
        "p" if t.suffix.is_empty()
            && matches!(
                n,
                4 | 6 | 40 | 100 | 400 | 600 | 620 | 1000 | 2000 | 2200 | 4000 | 5000 | 6000
            ) =>
        {
            Pascal
        }
        "v" if n == 100 => Volta,
        // T4 plus the Turing Quadro T-series (T400 … T2000).
        "t" if matches!(n, 4 | 400 | 500 | 550 | 600 | 1000 | 1200 | 2000) => Turing,
        // Data-centre Ampere (A2 … A800) and RTX A-series workstation cards.
        "a" if matches!(
            n,
            2 | 10 | 16 | 30 | 40 | 100 | 800 | 400 | 500 | 1000 | 2000 | 3000 | 4000 | 4500 | 5000 | 5500 | 6000
        ) =>
        {
            Ampere
        }
        "l" if matches!(n, 2 | 4 | 20 | 40) => Ada,
        "h" if matches!(n, 20 | 100 | 200 | 800) => Hopper,
        "b" if matches!(n, 30 | 40 | 100 | 200 | 300) => Blackwell,
        _ => return None,
    };
    // Suffixes seen in the wild; anything longer is more likely a different
    // product line than a variant, so refuse rather than guess.
    if t.suffix.len() > 3 {
        return None;
    }
    Some(g)
}

/// Consumer / Quadro RTX numbers ("RTX 4090", "Quadro RTX 8000", "GTX 1660", "GTX 780").
fn classify_consumer_number(n: u32) -> Option<GpuGeneration> {
    use GpuGeneration::*;
    match n {
        // GeForce 600/700 (GTX 650 … 690, 760 … 780 Ti) are Kepler, except the GTX 745/750 (Ti)
        // which were the first Maxwell chips (GM107); the 900 series is Maxwell.
        745 | 750 => Some(Maxwell),
        650..=699 | 760..=799 => Some(Kepler),
        900..=999 => Some(Maxwell),
        // GTX 1050 … 1080 Ti are Pascal; GTX 1630/1650/1660 are Turing.
        1000..=1099 => Some(Pascal),
        1600..=1699 => Some(Turing),
        // Quadro RTX 3000/4000/5000/6000/8000 are Turing; the Ada and
        // Blackwell workstation cards carry an "Ada"/"Blackwell"/"PRO" marker
        // that is handled before we get here.
        3000 | 4000 | 5000 | 6000 | 8000 => Some(Turing),
        2000..=2099 => Some(Turing),
        3000..=3099 => Some(Ampere),
        4000..=4099 => Some(Ada),
        5000..=5099 => Some(Blackwell),
        _ => None,
    }
}

/// Map a reported GPU model name to its architecture generation.
///
/// Case-insensitive; vendor prefixes ("NVIDIA", "Tesla", "GeForce", "Quadro"),
/// form factors ("SXM4", "PCIe", "NVL") and memory suffixes ("80GB", "HBM3")
/// are tolerated. Unrecognised input yields [`GpuGeneration::Unknown`].
pub fn generation_of(model: &str) -> GpuGeneration {
    use GpuGeneration::*;
    let lower = model.to_ascii_lowercase();
    let tokens: Vec<&str> = lower
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|t| !t.is_empty())
        .collect();
    if tokens.is_empty() {
        return Unknown;
    }

    // An explicit architecture word wins: "RTX 6000 Ada Generation" must not
    // fall through to the Turing "Quadro RTX 6000" rule below.
    for t in &tokens {
        match *t {
            "kepler" => return Kepler,
            "maxwell" => return Maxwell,
            "pascal" => return Pascal,
            "volta" => return Volta,
            "turing" => return Turing,
            "ampere" => return Ampere,
            "ada" | "lovelace" => return Ada,
            "hopper" => return Hopper,
            "blackwell" => return Blackwell,
            _ => {}
        }
    }

    for t in &tokens {
        if let Some(g) = split_model_token(t).and_then(|mt| classify_model_token(&mt)) {
            return g;
        }
    }

    let has = |w: &str| tokens.contains(&w);
    // Brand words may be glued to the number ("RTX3060").
    let branded = tokens
        .iter()
        .any(|t| t.starts_with("rtx") || t.starts_with("gtx") || matches!(*t, "geforce" | "quadro" | "titan"));
    if branded {
        // "RTX PRO" is a Blackwell-only workstation line.
        if has("rtx") && has("pro") {
            return Blackwell;
        }
        for (i, t) in tokens.iter().enumerate() {
            // Bare numbers ("rtx", "4090") or glued ("rtx4090").
            let num = if t.bytes().all(|c| c.is_ascii_digit()) {
                // Only trust a bare number right after a brand word, so that
                // e.g. a bus id or "24" (GB) elsewhere cannot match.
                let prev = if i > 0 { tokens[i - 1] } else { "" };
                // Three-digit numbers only after "gtx" ("GTX 780"), where they are models.
                let len_ok = t.len() == 4 || (t.len() == 3 && prev == "gtx");
                if matches!(prev, "rtx" | "gtx" | "geforce" | "quadro") && len_ok {
                    t.parse::<u32>().ok()
                } else {
                    None
                }
            } else {
                split_model_token(t)
                    .filter(|mt| matches!(mt.prefix, "rtx" | "gtx") && mt.suffix.is_empty())
                    .map(|mt| mt.number)
            };
            if let Some(g) = num.and_then(classify_consumer_number) {
                return g;
            }
        }
        if has("titan") {
            if has("v") {
                return Volta;
            }
            if has("rtx") {
                return Turing;
            }
            // "TITAN Xp" and the 2016 "NVIDIA TITAN X" (nvidia-smi: "TITAN X (Pascal)") are Pascal;
            // the 2015 "GeForce GTX TITAN X" is Maxwell; GTX TITAN / Black / Z are Kepler.
            if has("xp") {
                return Pascal;
            }
            if has("x") {
                return if has("gtx") { Maxwell } else { Pascal };
            }
            if has("gtx") {
                return Kepler;
            }
        }
    }
    Unknown
}

#[cfg(test)]
mod tests {
    use super::GpuGeneration::*;
    use super::*;

    #[test]
    fn generation_names_sort_by_age_not_alphabet() {
        let mut names = vec![
            "hopper",
            "ada",
            "unknown",
            "volta",
            "blackwell",
            "zeta",
            "ampere",
            "kepler",
            "turing",
        ];
        names.sort_by(|a, b| GpuGeneration::age_order(a, b));
        assert_eq!(
            names,
            [
                "kepler",
                "volta",
                "turing",
                "ampere",
                "ada",
                "hopper",
                "blackwell",
                "unknown",
                "zeta"
            ]
        );
    }

    fn check(cases: &[(&str, GpuGeneration)]) {
        let mut bad = Vec::new();
        for (name, want) in cases {
            let got = generation_of(name);
            if got != *want {
                bad.push(format!("{name:?}: got {got:?}, want {want:?}"));
            }
        }
        assert!(bad.is_empty(), "mismatches:\n{}", bad.join("\n"));
    }

    #[test]
    fn as_str_parse_round_trip() {
        for g in GpuGeneration::ALL {
            assert_eq!(GpuGeneration::parse(g.as_str()), Some(g));
            assert_eq!(GpuGeneration::parse(&g.as_str().to_uppercase()), Some(g));
            assert_eq!(g.to_string(), g.as_str());
        }
        assert_eq!(GpuGeneration::parse("  Hopper "), Some(Hopper));
        assert_eq!(GpuGeneration::parse("Ada Lovelace"), Some(Ada));
        assert_eq!(GpuGeneration::parse(""), None);
        assert_eq!(GpuGeneration::parse("pascal"), Some(Pascal));
        assert_eq!(GpuGeneration::parse("fermi"), None);
        assert_eq!(GpuGeneration::parse("h100"), None);
    }

    #[test]
    fn all_is_ordered_and_complete() {
        let strs: Vec<_> = GpuGeneration::ALL.iter().map(|g| g.as_str()).collect();
        assert_eq!(
            strs,
            [
                "kepler",
                "maxwell",
                "pascal",
                "volta",
                "turing",
                "ampere",
                "ada",
                "hopper",
                "blackwell",
                "unknown"
            ]
        );
        let mut sorted = GpuGeneration::ALL;
        sorted.sort();
        assert_eq!(sorted, GpuGeneration::ALL);
        assert!(Volta < Blackwell);
        assert!(Kepler < Maxwell && Maxwell < Pascal && Pascal < Volta);
    }

    #[test]
    fn hopper_names() {
        check(&[
            ("NVIDIA H100 80GB HBM3", Hopper),
            ("H100-SXM5-80GB", Hopper),
            ("NVIDIA H100 PCIe", Hopper),
            ("NVIDIA H100 NVL", Hopper),
            ("NVIDIA H100NVL", Hopper),
            ("GH100", Hopper),
            ("NVIDIA H800", Hopper),
            ("NVIDIA H800 PCIe", Hopper),
            ("H20", Hopper),
            ("NVIDIA H20", Hopper),
            ("NVIDIA H200", Hopper),
            ("NVIDIA H200 NVL", Hopper),
            ("NVIDIA H200 141GB HBM3e", Hopper),
            ("GH200 480GB", Hopper),
            ("NVIDIA GH200 480GB", Hopper),
            ("NVIDIA-H100-80GB-HBM3", Hopper),
            ("NVIDIA-H100-80GB-HBM3-MIG-1g.10gb", Hopper),
            ("h100", Hopper),
            ("DGX H100", Hopper),
        ]);
    }

    #[test]
    fn ampere_names() {
        check(&[
            ("A100-SXM4-80GB", Ampere),
            ("NVIDIA A100-SXM4-40GB", Ampere),
            ("NVIDIA A100-PCIE-40GB", Ampere),
            ("NVIDIA A100 80GB PCIe", Ampere),
            ("NVIDIA A100X", Ampere),
            ("NVIDIA A800 80GB PCIe", Ampere),
            ("NVIDIA A800-SXM4-80GB", Ampere),
            ("A10", Ampere),
            ("NVIDIA A10", Ampere),
            ("NVIDIA A10G", Ampere),
            ("NVIDIA A10M", Ampere),
            ("A30", Ampere),
            ("NVIDIA A30X", Ampere),
            ("A40", Ampere),
            ("NVIDIA A40-48Q", Ampere),
            ("A16", Ampere),
            ("A2", Ampere),
            ("NVIDIA A2", Ampere),
            ("NVIDIA RTX A6000", Ampere),
            ("A6000", Ampere),
            ("RTX A5000", Ampere),
            ("NVIDIA RTX A4000", Ampere),
            ("NVIDIA RTX A2000 12GB", Ampere),
            ("RTX 3090", Ampere),
            ("NVIDIA GeForce RTX 3090", Ampere),
            ("GeForce RTX 3080 Ti", Ampere),
            ("RTX3060", Ampere),
            ("GA100", Ampere),
            ("GA102GL [A40]", Ampere),
        ]);
    }

    #[test]
    fn volta_and_turing_names() {
        check(&[
            ("Tesla V100-SXM2-32GB", Volta),
            ("Tesla V100-SXM2-16GB", Volta),
            ("Tesla V100-PCIE-32GB", Volta),
            ("V100S", Volta),
            ("Tesla V100S-PCIE-32GB", Volta),
            ("NVIDIA V100", Volta),
            ("GV100GL [Tesla V100 SXM2 32GB]", Volta),
            ("Quadro GV100", Volta),
            ("NVIDIA TITAN V", Volta),
            ("Tesla T4", Turing),
            ("T4", Turing),
            ("NVIDIA T4G", Turing),
            ("TU104GL [Tesla T4]", Turing),
            ("Quadro RTX 8000", Turing),
            ("Quadro RTX 6000", Turing),
            ("Quadro RTX 5000", Turing),
            ("RTX 6000", Turing),
            ("NVIDIA T1000 8GB", Turing),
            ("NVIDIA GeForce RTX 2080 Ti", Turing),
            ("GeForce GTX 1660 SUPER", Turing),
            ("NVIDIA TITAN RTX", Turing),
        ]);
    }

    #[test]
    fn kepler_maxwell_pascal_names() {
        check(&[
            // Kepler: Tesla K-series as nvidia-smi / DCGM report them, PCI names, GRID, Quadro, GeForce.
            ("Tesla K20", Kepler),
            ("Tesla K20X", Kepler),
            ("Tesla K20Xm", Kepler),
            ("Tesla K20m", Kepler),
            ("Tesla K20c", Kepler),
            ("Tesla K40m", Kepler),
            ("Tesla K40c", Kepler),
            ("Tesla K40", Kepler),
            ("Tesla K80", Kepler),
            ("Tesla K10", Kepler),
            ("K80", Kepler),
            ("GK210GL [Tesla K80]", Kepler),
            ("GK110BGL [Tesla K40m]", Kepler),
            ("GRID K520", Kepler),
            ("GRID K2", Kepler),
            ("Quadro K6000", Kepler),
            ("Quadro K4000", Kepler),
            ("GeForce GTX 780 Ti", Kepler),
            ("GeForce GTX 680", Kepler),
            ("GeForce GTX TITAN Black", Kepler),
            ("GeForce GTX TITAN", Kepler),
            // Maxwell.
            ("Tesla M40", Maxwell),
            ("Tesla M40 24GB", Maxwell),
            ("Tesla M60", Maxwell),
            ("Tesla M4", Maxwell),
            ("Tesla M10", Maxwell),
            ("GRID M60-8Q", Maxwell),
            ("GM200GL [Tesla M40]", Maxwell),
            ("Quadro M6000 24GB", Maxwell),
            ("Quadro M4000", Maxwell),
            ("Quadro K1200", Maxwell),
            ("Quadro K2200", Maxwell),
            ("GeForce GTX 980 Ti", Maxwell),
            ("GeForce GTX 970", Maxwell),
            ("GeForce GTX 750 Ti", Maxwell),
            ("GeForce GTX TITAN X", Maxwell),
            // Pascal.
            ("Tesla P100-PCIE-16GB", Pascal),
            ("Tesla P100-SXM2-16GB", Pascal),
            ("Tesla P100-PCIE-12GB", Pascal),
            ("Tesla P40", Pascal),
            ("Tesla P4", Pascal),
            ("P100", Pascal),
            ("GP100GL [Tesla P100 PCIe 16GB]", Pascal),
            ("GP102GL [Tesla P40]", Pascal),
            ("Quadro P6000", Pascal),
            ("Quadro GP100", Pascal),
            ("Quadro P4000", Pascal),
            ("GeForce GTX 1080 Ti", Pascal),
            ("GeForce GTX 1080", Pascal),
            ("NVIDIA GeForce GTX 1070", Pascal),
            ("GeForce GTX 1060 6GB", Pascal),
            ("GTX1080", Pascal),
            ("NVIDIA TITAN Xp", Pascal),
            ("NVIDIA TITAN X (Pascal)", Pascal),
            ("TITAN X", Pascal),
            // The Volta forms next to them stay Volta.
            ("Tesla V100-SXM2-16GB", Volta),
        ]);
    }

    #[test]
    fn ada_names() {
        check(&[
            ("NVIDIA L4", Ada),
            ("L4", Ada),
            ("L40", Ada),
            ("NVIDIA L40", Ada),
            ("L40S", Ada),
            ("NVIDIA L40S", Ada),
            ("NVIDIA L20", Ada),
            ("NVIDIA RTX 6000 Ada Generation", Ada),
            ("RTX 6000 Ada", Ada),
            ("NVIDIA RTX 4000 SFF Ada Generation", Ada),
            ("NVIDIA RTX 2000 Ada Generation", Ada),
            ("GeForce RTX 4090", Ada),
            ("NVIDIA GeForce RTX 4090 D", Ada),
            ("RTX 4080 SUPER", Ada),
            ("AD102GL [L40S]", Ada),
        ]);
    }

    #[test]
    fn blackwell_names() {
        check(&[
            ("B100", Blackwell),
            ("B200", Blackwell),
            ("NVIDIA B200", Blackwell),
            ("NVIDIA GB200", Blackwell),
            ("GB200", Blackwell),
            ("GB300", Blackwell),
            ("NVIDIA GB300", Blackwell),
            ("B300", Blackwell),
            ("NVIDIA B300 SXM6 AC", Blackwell),
            ("NVIDIA B200 180GB HBM3e", Blackwell),
            ("NVIDIA-B200", Blackwell),
            ("HGX B200", Blackwell),
            ("RTX PRO 6000 Blackwell", Blackwell),
            ("NVIDIA RTX PRO 6000 Blackwell Server Edition", Blackwell),
            ("NVIDIA RTX PRO 6000", Blackwell),
            ("RTX 5090", Blackwell),
            ("NVIDIA GeForce RTX 5090", Blackwell),
            ("NVIDIA GB10", Blackwell),
            ("GB202", Blackwell),
        ]);
    }

    #[test]
    fn near_miss_names_are_not_confused() {
        // Whole-token matching: each of these contains another model as a
        // substring.
        assert_eq!(generation_of("A100"), Ampere);
        assert_eq!(generation_of("A10"), Ampere);
        assert_eq!(generation_of("L40S"), Ada);
        assert_eq!(generation_of("L4"), Ada);
        assert_eq!(generation_of("H20"), Hopper);
        assert_eq!(generation_of("H200"), Hopper);
        assert_eq!(generation_of("GB200"), Blackwell);
        assert_eq!(generation_of("B200"), Blackwell);
        // Same digits, different generation by marker word.
        assert_eq!(generation_of("Quadro RTX 6000"), Turing);
        assert_eq!(generation_of("NVIDIA RTX A6000"), Ampere);
        assert_eq!(generation_of("NVIDIA RTX 6000 Ada Generation"), Ada);
        assert_eq!(generation_of("NVIDIA RTX PRO 6000 Blackwell"), Blackwell);
        // Memory sizes must not be taken as model numbers.
        assert_eq!(generation_of("NVIDIA 80GB"), Unknown);
        assert_eq!(generation_of("GeForce RTX 24GB"), Unknown);
    }

    #[test]
    fn case_and_separator_insensitive() {
        check(&[
            ("nvidia h100 80gb hbm3", Hopper),
            ("NVIDIA_H100_80GB_HBM3", Hopper),
            ("  tesla   v100s  ", Volta),
            ("nvidia/a100", Ampere),
            ("Nvidia GeForce Rtx 4090", Ada),
            ("H100 (SXM5, 80 GB)", Hopper),
        ]);
    }

    #[test]
    fn unknown_and_garbage() {
        check(&[
            ("", Unknown),
            ("   ", Unknown),
            ("---", Unknown),
            ("NVIDIA", Unknown),
            ("Tesla", Unknown),
            ("garbage", Unknown),
            ("A", Unknown),
            ("A1", Unknown),
            ("A99", Unknown),
            ("H1000", Unknown),
            ("L400", Unknown),
            ("X100", Unknown),
            ("GeForce GTX 480", Unknown),
            ("Tesla C2050", Unknown),
            ("k8s", Unknown),
            ("p4d.24xlarge", Unknown),
            ("K30", Unknown),
            ("P200", Unknown),
            ("AMD Instinct MI300X", Unknown),
            ("Intel Data Center GPU Max 1550", Unknown),
            ("99999999999999999999", Unknown),
            ("a99999999999999999999", Unknown),
            ("ÄÖÜ h100", Hopper),
            ("日本語", Unknown),
        ]);
    }
}
