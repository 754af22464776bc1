//! Normalisation candidates side by side (issue 15 item 1), one thread.
//!
//! ```text
//! normalize_candidates check DIR VECTORS [SAMPLES_PER_RANGE]
//! normalize_candidates bench DIR [REPEAT]
//! ```
//!
//! DIR holds `ascii.txt`, `cjk-pdf.txt` and `mix.txt`, each a NUL-separated
//! list of texts (`python benches/bench_normalize.py --candidates` writes them
//! and runs both commands). VECTORS is `testdata/evidence_vectors.json`.
//!
//! Candidates, all producing ragmeter's matching form (NFKC, `White_Space` and
//! the listed invisible characters removed, lower-cased per character, final
//! sigma folded; line-break hyphens recorded for the second variant):
//! * `ragmeter`: `ragmeter_core::evidence::Normalizer` (table-driven quick
//!   checks, NFKC through `unicode-normalization` only where needed);
//! * `icu4x+fold`: ICU4X's NFKC (`ComposingNormalizerBorrowed::new_nfkc`,
//!   `normalize_to` into a reused `String`), then [`Fold`] over its output;
//! * reference points, not the definition: `icu4x nfkc`, `unic-norm nfkc`
//!   (NFKC alone) and `fold` alone (on NFKC output computed beforehand).

mod fold;
mod sample;

use std::time::Instant;

use fold::Fold;
use icu_normalizer::ComposingNormalizerBorrowed;
use ragmeter_core::evidence::Normalizer;
use unicode_normalization::UnicodeNormalization;

const KINDS: [&str; 3] = ["ascii", "cjk-pdf", "mix"];

/// ICU4X's NFKC followed by the per-character fold: candidate (2).
struct IcuPipeline {
    nfkc: ComposingNormalizerBorrowed<'static>,
    composed: String,
    fold: Fold,
}

impl IcuPipeline {
    fn new() -> Self {
        IcuPipeline { nfkc: ComposingNormalizerBorrowed::new_nfkc(), composed: String::new(), fold: Fold::default() }
    }

    fn run(&mut self, text: &str) {
        self.composed.clear();
        self.nfkc.normalize_to(text, &mut self.composed).expect("writing to a String cannot fail");
        self.fold.run(&self.composed);
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: normalize_candidates check DIR VECTORS [SAMPLES_PER_RANGE] | bench DIR [REPEAT]";
    match args.get(1).map(String::as_str) {
        Some("check") if args.len() >= 4 => {
            let per_range = args.get(4).map_or(24, |s| s.parse().expect("SAMPLES_PER_RANGE is a number"));
            let failures = check(&args[2], &args[3], per_range);
            if failures > 0 {
                eprintln!("{failures} differences");
                std::process::exit(1);
            }
        }
        Some("bench") if args.len() >= 3 => {
            let repeat = args.get(3).map_or(5, |s| s.parse().expect("REPEAT is a number"));
            bench(&args[2], repeat);
        }
        _ => {
            eprintln!("{usage}");
            std::process::exit(2);
        }
    }
}

fn read_texts(dir: &str, kind: &str) -> String {
    let path = format!("{dir}/{kind}.txt");
    std::fs::read_to_string(&path).unwrap_or_else(|e| {
        eprintln!("{path}: {e}");
        std::process::exit(2)
    })
}

/// Compare the ICU4X pipeline with ragmeter's normaliser (both variants) on
/// `text`; print the first differences. Returns whether they agree.
fn same(ours: &mut Normalizer, icu: &mut IcuPipeline, text: &str, label: &str, printed: &mut usize) -> bool {
    ours.run(text);
    icu.run(text);
    let mut ours_dehyphenated = Vec::new();
    ours.dehyphenated_into(&mut ours_dehyphenated);
    let equal = ours.out == icu.fold.out
        && ours.has_soft_hyphens() == icu.fold.has_soft_hyphens()
        && ours_dehyphenated == icu.fold.dehyphenated();
    if !equal && *printed < 20 {
        *printed += 1;
        let code_points: Vec<String> = text.chars().map(|c| format!("U+{:04X}", c as u32)).collect();
        eprintln!(
            "{label}: {} -> ragmeter {:?} / icu4x {:?} (unicode-normalization NFKC {:?}, ICU4X NFKC {:?})",
            code_points.join(" "),
            String::from_utf8_lossy(&ours.out),
            String::from_utf8_lossy(&icu.fold.out),
            text.nfkc().collect::<String>(),
            icu.composed
        );
    }
    equal
}

fn check(dir: &str, vectors_path: &str, per_range: usize) -> usize {
    let mut ours = Normalizer::new();
    let mut icu = IcuPipeline::new();
    let mut printed = 0;
    let mut failures = 0;
    for kind in KINDS {
        let raw = read_texts(dir, kind);
        let texts: Vec<&str> = raw.split('\0').collect();
        let bad = texts.iter().filter(|t| !same(&mut ours, &mut icu, t, kind, &mut printed)).count();
        println!("{kind}: {} texts, {bad} differ", texts.len());
        failures += bad;
    }
    let vectors: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(vectors_path).expect("vectors file")).expect("vectors JSON");
    let mut inputs: Vec<String> = Vec::new();
    for case in vectors["normalize"].as_array().expect("normalize vectors") {
        inputs.push(case["input"].as_str().expect("input").to_owned());
    }
    for case in vectors["match"].as_array().expect("match vectors") {
        inputs.push(case["text"].as_str().expect("text").to_owned());
        inputs.extend(case["phrases"].as_array().expect("phrases").iter().map(|p| p.as_str().expect("phrase").to_owned()));
    }
    let bad = inputs.iter().filter(|t| !same(&mut ours, &mut icu, t, "vector", &mut printed)).count();
    println!("shared vectors: {} strings, {bad} differ", inputs.len());
    failures += bad;
    let mut n = 0usize;
    let mut bad = 0usize;
    let mut differing = std::collections::BTreeSet::new();
    sample::every_code_point_alone(|s| {
        n += 1;
        if !same(&mut ours, &mut icu, s, "alone", &mut printed) {
            bad += 1;
            differing.extend(s.chars().map(|c| c as u32));
        }
    });
    println!("every scalar value alone: {n} strings, {bad} differ");
    failures += bad;
    let (mut n, mut bad) = (0usize, 0usize);
    sample::random_strings(per_range, |s| {
        n += 1;
        if !same(&mut ours, &mut icu, s, "random", &mut printed) {
            bad += 1;
        }
    });
    println!("random strings ({per_range} per 16-code-point range, all planes): {n} strings, {bad} differ");
    failures += bad;
    if !differing.is_empty() {
        let listed: Vec<String> = differing.iter().take(50).map(|c| format!("U+{c:04X}")).collect();
        println!("code points differing alone: {}", listed.join(" "));
    }
    failures
}

/// Best and worst MB/s of `f` over the texts, `repeat` times.
fn measure(texts: &[&str], repeat: usize, mut f: impl FnMut(&str) -> usize) -> (f64, f64, usize) {
    let mb = texts.iter().map(|t| t.len()).sum::<usize>() as f64 / 1e6;
    let mut rates = Vec::new();
    let mut out_len = 0;
    for _ in 0..repeat {
        let t0 = Instant::now();
        out_len = texts.iter().map(|t| f(t)).sum();
        rates.push(mb / t0.elapsed().as_secs_f64());
    }
    let best = rates.iter().cloned().fold(f64::MIN, f64::max);
    let worst = rates.iter().cloned().fold(f64::MAX, f64::min);
    (best, worst, out_len)
}

fn bench(dir: &str, repeat: usize) {
    println!("MB/s of input UTF-8, one thread, best (worst) of {repeat}");
    println!("{:8} {:>6} {:>16} {:>16} {:>16} {:>16} {:>16}", "kind", "MB", "ragmeter", "icu4x+fold", "icu4x nfkc", "unic-norm nfkc", "fold alone");
    let mut ours = Normalizer::new();
    ours.run("warm the table up: ⼤");
    let mut icu = IcuPipeline::new();
    let mut composed = String::new();
    for kind in KINDS {
        let raw = read_texts(dir, kind);
        let texts: Vec<&str> = raw.split('\0').collect();
        let mb = raw.len() as f64 / 1e6;
        let r_ours = measure(&texts, repeat, |t| {
            ours.run(t);
            ours.out.len()
        });
        let r_icu = measure(&texts, repeat, |t| {
            icu.run(t);
            icu.fold.out.len()
        });
        assert_eq!(r_ours.2, r_icu.2, "{kind}: output sizes differ (run `check` first)");
        let nfkc = ComposingNormalizerBorrowed::new_nfkc();
        let r_icu_nfkc = measure(&texts, repeat, |t| {
            composed.clear();
            nfkc.normalize_to(t, &mut composed).expect("String sink");
            composed.len()
        });
        let r_unic = measure(&texts, repeat, |t| {
            composed.clear();
            composed.extend(t.nfkc());
            composed.len()
        });
        // The fold's rate is reported against the input size too (the NFKC
        // output is computed beforehand, outside the timing).
        let composed_texts: Vec<String> = texts.iter().map(|t| nfkc.normalize(t).into_owned()).collect();
        let composed_refs: Vec<&str> = composed_texts.iter().map(String::as_str).collect();
        let scale = raw.len() as f64 / composed_refs.iter().map(|t| t.len()).sum::<usize>() as f64;
        let mut fold = Fold::default();
        let r_fold = measure(&composed_refs, repeat, |t| {
            fold.run(t);
            fold.out.len()
        });
        let r_fold = (r_fold.0 * scale, r_fold.1 * scale, r_fold.2);
        let cell = |r: (f64, f64, usize)| format!("{:.0} ({:.0})", r.0, r.1);
        println!(
            "{kind:8} {mb:6.1} {:>16} {:>16} {:>16} {:>16} {:>16}",
            cell(r_ours),
            cell(r_icu),
            cell(r_icu_nfkc),
            cell(r_unic),
            cell(r_fold)
        );
    }
}
