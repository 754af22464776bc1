//! trec_eval's own test suite (`shared/conformance/trec_eval`, beside the
//! repository): every expected output must be reproduced byte for byte.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Once;

use ragmeter_core::trec::{evaluate, evaluate_texts, format_trec, parse_qrels, parse_run, read_text, Options};

fn dir() -> PathBuf {
    if let Ok(d) = std::env::var("RAGMETER_CONFORMANCE_DIR") {
        return PathBuf::from(d);
    }
    // `shared/` beside the repository (rust/ragmeter-core is two levels down).
    let manifest = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.ancestors().nth(3).unwrap_or(manifest).join("shared/conformance/trec_eval")
}

/// Whether the suite is there. A fresh clone has no `../shared`: then every test
/// here passes without checking anything and one line says so, except in CI
/// (`CI` set and not `false`), where a missing suite must fail the build.
fn suite_present() -> bool {
    let d = dir();
    if d.join("qrels.test").exists() {
        return true;
    }
    let ci = std::env::var("CI").map(|v| !v.is_empty() && v != "false" && v != "0").unwrap_or(false);
    assert!(!ci, "CI is set but trec_eval's test suite is not at {} (set RAGMETER_CONFORMANCE_DIR)", d.display());
    static SAID: Once = Once::new();
    SAID.call_once(|| {
        // Straight to stderr: libtest captures only the print macros, and this line must be seen.
        let _ = writeln!(
            std::io::stderr(),
            "skipped: trec_eval conformance tests (suite not found at {}; to run them, put trec_eval's \
             test/ files there or set RAGMETER_CONFORMANCE_DIR, see README.md#layout)",
            d.display()
        );
    });
    false
}

fn run_case(qrels: &str, run: &str, measures: &[&str], opts: Options, per_query: bool) -> String {
    let d = dir();
    let (qp, rp) = (d.join(qrels), d.join(run));
    let (qp, rp) = (qp.to_str().unwrap(), rp.to_str().unwrap());
    let qtext = read_text(qp).expect("conformance data present (shared/ beside the repository)");
    let rtext = read_text(rp).unwrap();
    let q = parse_qrels(&qtext, qp).unwrap();
    let r = parse_run(&rtext, rp).unwrap();
    let m: Vec<String> = measures.iter().map(|s| s.to_string()).collect();
    let from_rows = format_trec(&evaluate(&q, &r, &m, &opts, qp, rp).unwrap(), per_query, true);
    // The file fast path (what `ragmeter trec` runs) must print exactly the same.
    let from_text = format_trec(&evaluate_texts(&qtext, &rtext, &m, &opts, qp, rp).unwrap(), per_query, true);
    assert_eq!(from_rows, from_text);
    from_text
}

fn expect(name: &str, got: String) {
    let want = read_text(dir().join(name).to_str().unwrap()).unwrap();
    if got != want {
        let diff: Vec<String> = want
            .lines()
            .zip(got.lines())
            .filter(|(a, b)| a != b)
            .take(10)
            .map(|(a, b)| format!("want {a:?}\n got {b:?}"))
            .collect();
        panic!("{name}: {} of {} lines differ (got {} lines)\n{}", diff.len(), want.lines().count(), got.lines().count(), diff.join("\n"));
    }
}

#[test]
fn out_test() {
    if !suite_present() {
        return;
    }
    expect("out.test", run_case("qrels.test", "results.test", &[], Options::default(), false));
}

#[test]
fn out_test_with_comments() {
    if !suite_present() {
        return;
    }
    expect("out.test", run_case("qrels.test.with-comments", "results.test", &[], Options::default(), false));
}

#[test]
fn out_test_a() {
    if !suite_present() {
        return;
    }
    expect("out.test.a", run_case("qrels.test", "results.test", &["all_trec"], Options::default(), false));
}

#[test]
fn out_test_aq() {
    if !suite_present() {
        return;
    }
    expect("out.test.aq", run_case("qrels.test", "results.test", &["all_trec"], Options::default(), true));
}

#[test]
fn out_test_aqc() {
    if !suite_present() {
        return;
    }
    let opts = Options { complete: true, ..Options::default() };
    expect("out.test.aqc", run_case("qrels.test", "results.trunc", &["all_trec"], opts, true));
}

#[test]
fn out_test_aqcm() {
    if !suite_present() {
        return;
    }
    let opts = Options { complete: true, max_docs_per_query: Some(100), ..Options::default() };
    expect("out.test.aqcM", run_case("qrels.test", "results.trunc", &["all_trec"], opts, true));
}

#[test]
fn out_test_aql() {
    if !suite_present() {
        return;
    }
    let opts = Options { relevance_level: 2, ..Options::default() };
    expect("out.test.aql", run_case("qrels.rel_level", "results.test", &["all_trec", "relstring.20"], opts, true));
}

#[test]
fn out_test_meas_params() {
    if !suite_present() {
        return;
    }
    let m = [
        "iprec_at_recall..10,.20,.25,.75,.50",
        "P.5,7,3",
        "recall.20,2000",
        "Rprec_mult.5.0,0.2,0.35",
        "utility.2,-1,0,0",
        "11pt_avg..25,.5,.75",
        "ndcg.1=3,2=9,4=4.5",
        "ndcg_cut.10,20,23.4",
        "success.2,5,20",
    ];
    expect("out.test.meas_params", run_case("qrels.test", "results.test", &m, Options::default(), true));
}
