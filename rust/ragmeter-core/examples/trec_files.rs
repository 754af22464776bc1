//! Time reading and evaluating a qrels/run pair as `ragmeter trec` does (for profiling the file
//! path, UTF-8 or read byte for byte): `cargo run --release --example trec_files -- QRELS RUN [REPEATS]`.

use std::time::Instant;

use ragmeter_core::trec::{format_trec, read_pair, Options, Source};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (qrels, run) = (&args[1], &args[2]);
    let repeats: usize = args.get(3).map_or(5, |s| s.parse().expect("REPEATS is a number"));
    let measures: Vec<String> =
        ["map", "recip_rank", "ndcg_cut.10", "P.5", "recall.10", "success.5"].iter().map(|s| s.to_string()).collect();
    for _ in 0..repeats {
        let t = Instant::now();
        let texts = read_pair(Source::File(qrels), Source::File(run)).unwrap();
        let read = t.elapsed();
        let eval = texts.evaluate(&measures, &Options::default(), qrels, run).unwrap();
        let out = format_trec(&eval, false, true);
        println!(
            "{:.3} s (read {:.3} s, as bytes: {}), {} lines",
            t.elapsed().as_secs_f64(),
            read.as_secs_f64(),
            texts.not_utf8.is_some(),
            out.lines().count()
        );
    }
}
