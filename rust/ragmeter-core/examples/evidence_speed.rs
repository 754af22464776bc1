//! Normalise + match per core on texts dumped to files (profiling aid).
//!
//! `cargo run --release --example evidence_speed -- TEXTS PHRASES [REPEAT] [run_wide|streamed]`:
//! TEXTS holds the chunk texts and PHRASES the evidence phrases, each
//! NUL-separated; cases of 20 chunks and 3 phrases, no expected files (as in
//! `benches/bench_normalize.py`). Prints MB/s of normalising alone and of
//! `match_evidence_with` (or, with `streamed`, of `RunPhrases::match_batch`, the
//! run-wide check of a Parquet run read in slices), on the threads rayon is
//! given (`RAYON_NUM_THREADS`). `DICT=1`: the texts given dictionary-encoded
//! ([`DictStrings`], as a Parquet reader gives a column stored in dictionary
//! pages), copies known by their index.

use std::time::Instant;

use std::collections::HashMap;

use ragmeter_core::evidence::{self, match_evidence_with, DictStrings, EvidenceBatch, Normalizer, RunPhrases};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let texts_raw = std::fs::read_to_string(&args[1]).expect("texts");
    let phrases_raw = std::fs::read_to_string(&args[2]).expect("phrases");
    let repeat: usize = args.get(3).map_or(3, |r| r.parse().expect("repeat"));
    let run_wide = args.get(4).is_some_and(|a| a == "run_wide");
    let streamed = args.get(4).is_some_and(|a| a == "streamed");
    // For profiling the matcher alone.
    let match_only = std::env::var_os("MATCH_ONLY").is_some();
    let texts: Vec<&str> = texts_raw.split('\0').collect();
    let phrases: Vec<&str> = phrases_raw.split('\0').collect();
    let per_case = phrases.len() / (texts.len() / 20);
    let n_cases = texts.len() / 20;
    let mb = texts.iter().map(|t| t.len()).sum::<usize>() as f64 / 1e6;
    let chunk_offsets: Vec<usize> = (0..=n_cases).map(|c| c * 20).collect();
    let phrase_offsets: Vec<usize> = (0..=n_cases).map(|c| c * per_case).collect();
    let file_offsets = vec![0usize; n_cases + 1];
    let files: Vec<&str> = vec!["f.md"; texts.len()];
    let no_files: Vec<&str> = Vec::new();
    let mut values: Vec<&str> = Vec::new();
    let mut value_ids: Vec<u32> = Vec::new();
    if std::env::var_os("DICT").is_some() {
        let mut index: HashMap<&str, u32> = HashMap::new();
        for &t in &texts {
            let next = values.len() as u32;
            value_ids.push(*index.entry(t).or_insert_with(|| {
                values.push(t);
                next
            }));
        }
        println!("dictionary of {} values for {} texts", values.len(), texts.len());
    }
    let dict = DictStrings::new(&values, &value_ids).expect("dictionary");
    let chunk_texts: &dyn evidence::Strings = if values.is_empty() { &texts } else { &dict };
    let batch: EvidenceBatch<'_, dyn evidence::Strings> = EvidenceBatch {
        file_offsets: &file_offsets,
        expected_files: &no_files,
        phrase_offsets: &phrase_offsets,
        phrases: &phrases,
        chunk_offsets: &chunk_offsets,
        chunk_files: &files,
        chunk_texts,
    };
    let mut norm = Normalizer::new();
    norm.run("warm the table up");
    for _ in 0..repeat {
        let t0 = Instant::now();
        let mut total = 0;
        for t in texts.iter().filter(|_| !match_only) {
            norm.run(t);
            total += norm.out.len();
        }
        let norm_s = t0.elapsed().as_secs_f64();
        let t0 = Instant::now();
        let res = if streamed {
            let ids: Vec<usize> = (0..phrases.len()).collect();
            let mut run = RunPhrases::new(&phrases);
            let mut res = run.match_batch(&batch, &ids).expect("match");
            res.phrase_in_run = run.found();
            res
        } else {
            match_evidence_with(&batch, run_wide).expect("match")
        };
        let match_s = t0.elapsed().as_secs_f64();
        let found: u64 = res.phrases_found.iter().map(|&f| f as u64).sum();
        println!(
            "{mb:.1} MB: normalise {:.0} MB/s ({total} bytes out), match{} {:.0} MB/s (found {found}, in run {})",
            mb / norm_s,
            if streamed { "+streamed run-wide" } else if run_wide { "+run-wide" } else { "" },
            mb / match_s,
            res.phrase_in_run.iter().filter(|&&f| f).count()
        );
    }
}
