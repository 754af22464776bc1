//! Time `evaluate_texts` on a qrels/run pair (for profiling the file fast path):
//! `cargo run --release --example trec_files -- QRELS RUN [REPEATS]`.

use std::time::Instant;

use ragmeter_core::trec::{evaluate_texts, format_trec, FileText, Options};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (qrels, run) = (&args[1], &args[2]);
    let repeats: usize = args.get(3).map_or(5, |s| s.parse().expect("REPEATS is a number"));
    let measures: Vec<String> =
        ["map", "recip_rank", "ndcg_cut.10", "P.5", "recall.10", "success.5"].iter().map(|s| s.to_string()).collect();
    for _ in 0..repeats {
        let t = Instant::now();
        let (q, r) = (FileText::open(qrels).unwrap(), FileText::open(run).unwrap());
        let opened = t.elapsed();
        let eval = evaluate_texts(q.as_str(), r.as_str(), &measures, &Options::default(), qrels, run).unwrap();
        let out = format_trec(&eval, false, true);
        println!("{:.3} s (open {:.3} s), {} lines", t.elapsed().as_secs_f64(), opened.as_secs_f64(), out.lines().count());
    }
}
