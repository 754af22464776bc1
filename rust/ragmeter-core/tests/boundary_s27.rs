//! Inputs at the edges of what the engines take: each must give a clear error or
//! the right number, never a panic, an abort or a computation that does not end.


use ragmeter_core::trec::{evaluate, evaluate_texts, parse_qrels, parse_run, Options};

fn measures(list: &[&str]) -> Vec<String> {
    list.iter().map(|m| m.to_string()).collect()
}

#[test]
fn gains_closer_than_one_apart_sort_without_a_panic() {
    // trec_eval compares gains as `(int)(g1 - g2)`: with gains less than 1 apart that is
    // no total order, and Rust's sort of 34 levels panicked ("user-provided comparison
    // function does not correctly implement a total order").
    let pairs = "0=2.06,1=1.248,2=3.412,3=1.224,4=2.996,5=0.804,6=3.612,7=2.424,8=2.18,9=3.636,10=0.336,11=1.74,12=0.78,13=0.152,14=2.612,15=1.036,16=0.22,17=3.916,18=1.036,19=0.292,20=3.432,21=0.068,22=3.112,23=3.364,24=2.832,25=3,26=3.02,27=1.916,28=1.424,29=0.076,30=1.54,31=3.58,32=2.6,33=2.3";
    let qrels: String = (0..34).map(|i| format!("1 0 d{i} {i}\n")).collect();
    let run: String = (0..34).map(|i| format!("1 Q0 d{i} {i} {} r\n", 100 - i)).collect();
    for m in ["ndcg", "G", "ndcg_rel", "Rndcg", "rbp"] {
        let eval = evaluate_texts(&qrels, &run, &measures(&[&format!("{m}.{pairs}")]), &Options::default(), "q", "r").unwrap();
        assert!(eval.summary[0].is_finite(), "{m}: {}", eval.summary[0]);
    }
}

#[test]
fn a_grade_of_a_million_does_not_make_gain_measures_quadratic() {
    // Gain measures looked the gain of every ranked document up in a table of every
    // level 0..=1,000,000: an unjudged document read the whole table, 10^9 steps per
    // 1,000 documents and measure (-m ndcg on 20 such queries: 25 s in a release build).
    let mut qrels = String::new();
    let mut run = String::new();
    for q in 0..4 {
        qrels.push_str(&format!("q{q} 0 judged 1000000\nq{q} 0 other 2\n"));
        for d in 0..1000 {
            run.push_str(&format!("q{q} Q0 d{d} {d} {} r\n", 2000 - d));
        }
    }
    // Speed is not asserted here (benchmarks only): the quadratic lookup made this test slow, not failing.
    let ms = measures(&["ndcg", "G", "ndcg_rel", "Rndcg", "rbp", "ndcg.1000000=3,-1=0.5"]);
    let eval = evaluate_texts(&qrels, &run, &ms, &Options::default(), "q", "r").unwrap();
    assert_eq!(eval.queries.len(), 4);
    assert!(eval.summary.iter().all(|v| v.is_finite()), "{:?}", eval.summary);
}

#[test]
fn measures_asking_for_more_values_than_memory_holds_are_refused() {
    // Every query keeps a value per cutoff: 300,000 cutoffs on 2,000 queries was a
    // 4.8 GB allocation (an abort, rc 134).
    let qrels: String = (0..2000).map(|q| format!("q{q} 0 d 1\n")).collect();
    let run: String = (0..2000).map(|q| format!("q{q} Q0 d 1 1 r\n")).collect();
    let cutoffs: Vec<String> = (1..=300_000).map(|k| k.to_string()).collect();
    let m = vec![format!("P.{}", cutoffs.join(","))];
    let want = "the measures ask for 300000 values per query, 2000 queries: more than the 268435456 values (2 GiB) ragmeter holds";
    let err = evaluate_texts(&qrels, &run, &m, &Options::default(), "q", "r").unwrap_err().to_string();
    assert!(err.starts_with(want), "{err}");
    let (q, r) = (parse_qrels(&qrels, "q").unwrap(), parse_run(&run, "r").unwrap());
    let err = evaluate(&q, &r, &m, &Options::default(), "q", "r").unwrap_err().to_string();
    assert!(err.starts_with(want), "{err}");
    // 100 queries of the same cutoffs: 30 million values, evaluated.
    let qrels: String = (0..100).map(|q| format!("q{q} 0 d 1\n")).collect();
    let run: String = (0..100).map(|q| format!("q{q} Q0 d 1 1 r\n")).collect();
    let eval = evaluate_texts(&qrels, &run, &m, &Options::default(), "q", "r").unwrap();
    assert_eq!(eval.summary.len(), 300_000);
}

#[test]
fn gains_less_than_one_apart_are_ordered_as_glibc_qsort_orders_them() {
    // trec_eval sorts its gain table with qsort and `(int)(g1 - g2)`; glibc 2.36's qsort
    // (a merge sort) orders these seven levels 2 3 6 4 0 1 5 (checked with a C program
    // calling qsort with that comparison), so the ideal ranking is levels 5, 1, 0, 4 and
    // the ideal DCG 1.19657 + 0.89175/log2(3) + 1.828/2 + 0.313/log2(5) = 2.8080. Rust's
    // stable sort ordered them otherwise: 2.6272 (and panicked from 21 levels up).
    let pairs = "0=1.828,1=0.8917538718275559,2=-4.487,3=-3.206,4=0.313,5=1.1965730201508278,6=-3.0";
    let qrels: String = (0..7).map(|i| format!("1 0 d{i} {i}\n")).collect();
    let run: String = [3, 0, 6, 1, 5, 2, 4].iter().enumerate().map(|(r, i)| format!("1 Q0 d{i} {r} {} r\n", 10 - r)).collect();
    let eval = evaluate_texts(&qrels, &run, &measures(&[&format!("ideal_dcg.{pairs}")]), &Options::default(), "q", "r").unwrap();
    assert_eq!(format!("{:.4}", eval.summary[0]), "2.8080");
}
