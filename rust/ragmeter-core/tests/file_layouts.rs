//! The file fast path (`evaluate_texts`) and the grouped-columns path
//! (`evaluate_grouped`) must give exactly what the row path gives, whatever the
//! layout of the input: queries in blocks, blocks cut across the pieces that are
//! read in parallel, or lines of all queries interleaved.

use ragmeter_core::trec::{
    consecutive_groups, evaluate, evaluate_grouped, evaluate_texts, format_trec, parse_qrels, parse_run, Evaluation, Grouped,
    Options, QrelsRow, RunRow,
};

/// xorshift64: reproducible pseudo-random numbers.
fn next(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// Qrels and run lines for `n` queries (some run-only, some judged-only), with ties.
fn generate(n: usize, seed: u64) -> (String, Vec<String>) {
    let mut state = seed;
    let mut qrels = String::from("# judgements\n");
    let mut run = Vec::new();
    for q in 0..n {
        if q % 17 != 5 {
            for d in 0..(3 + next(&mut state) % 30) {
                let doc = next(&mut state) % 400;
                if d == 0 || !next(&mut state).is_multiple_of(9) {
                    qrels.push_str(&format!("q{q} 0 doc{doc:03}{d} {}\n", next(&mut state) % 4));
                }
            }
        }
        if q % 23 == 7 {
            continue; // judged, never ranked
        }
        let tied = q % 5 == 0;
        for d in 0..(1 + next(&mut state) % 120) {
            let doc = format!("doc{:03}{}", next(&mut state) % 400, d % 30);
            let score = if tied { format!("{}", next(&mut state) % 4) } else { format!("{}.{:04}", 50 - d as i64, next(&mut state) % 10_000) };
            run.push(format!("q{q}\tQ0 {doc}x{d} {d} {score} run{}", q % 3));
        }
    }
    (qrels, run)
}

fn both_paths(qrels: &str, run: &str, opts: &Options) -> (String, String) {
    let measures = vec!["all_trec".to_string()];
    let rows = evaluate(&parse_qrels(qrels, "q").unwrap(), &parse_run(run, "r").unwrap(), &measures, opts, "q", "r").unwrap();
    let text = evaluate_texts(qrels, run, &measures, opts, "q", "r").unwrap();
    assert_eq!(rows.run_only_queries, text.run_only_queries);
    (format_trec(&rows, true, true), format_trec(&text, true, true))
}

#[test]
fn blocks_spread_over_pieces_give_the_row_results() {
    let (qrels, run) = generate(1500, 11);
    let mut text = run.join("\n");
    text.push('\n');
    assert!(text.len() > 1 << 20, "several pieces are read in parallel");
    let opts = Options { complete: true, ..Options::default() };
    let (rows, fast) = both_paths(&qrels, &text, &opts);
    assert_eq!(rows, fast);
}

#[test]
fn interleaved_lines_give_the_row_results() {
    let (qrels, mut run) = generate(600, 29);
    let mut state = 5;
    for i in (1..run.len()).rev() {
        run.swap(i, (next(&mut state) % (i as u64 + 1)) as usize);
    }
    // Comments and blank lines between the data lines, and no final newline.
    let text = run.iter().enumerate().map(|(i, l)| if i % 50 == 0 { format!("# c\n\n{l}") } else { l.clone() }).collect::<Vec<_>>().join("\n");
    let opts = Options { complete: true, ..Options::default() };
    let (rows, fast) = both_paths(&qrels, &text, &opts);
    assert_eq!(rows, fast);
}

#[test]
fn shuffled_judgements_give_the_row_results() {
    // Judgements are read again from their lines as each query is evaluated, except
    // for queries whose lines are spread out: those are gathered once.
    let (qrels, run) = generate(1500, 17);
    let (header, lines) = qrels.split_once('\n').unwrap();
    let mut lines: Vec<&str> = lines.lines().collect();
    let mut state = 23;
    // The first half shuffled, the second half left in blocks that cross the pieces' bounds.
    let half = lines.len() / 2;
    for i in (1..half).rev() {
        lines.swap(i, (next(&mut state) % (i as u64 + 1)) as usize);
    }
    let shuffled = format!("{header}\n{}\n", lines.join("\n"));
    assert!(shuffled.len() > 1 << 18, "several pieces are read in parallel");
    let text = run.join("\n");
    for relevance_level in [1, 2] {
        let opts = Options { complete: true, relevance_level, ..Options::default() };
        let (rows, fast) = both_paths(&shuffled, &text, &opts);
        assert_eq!(rows, fast);
    }
    // A document judged twice is reported with both lines, wherever they are.
    let twice = format!("{shuffled}{}\n", lines[half + 3]);
    let measures = ["map".to_string()];
    let opts = Options { complete: true, ..Options::default() };
    let want = evaluate(&parse_qrels(&twice, "q").unwrap(), &parse_run(&text, "r").unwrap(), &measures, &opts, "q", "r");
    let got = evaluate_texts(&twice, &text, &measures, &opts, "q", "r");
    assert_eq!(got.unwrap_err().to_string(), want.unwrap_err().to_string());
}

#[test]
fn a_malformed_line_is_reported_wherever_it_is() {
    let (qrels, mut run) = generate(800, 3);
    let bad = run.len() * 2 / 3;
    let mut fields: Vec<&str> = run[bad].split_whitespace().collect();
    fields[4] = "1.5x";
    run[bad] = fields.join(" ");
    let text = run.join("\n");
    let opts = Options { complete: true, ..Options::default() };
    let err = evaluate_texts(&qrels, &text, &["map".to_string()], &opts, "q", "r.txt").unwrap_err();
    assert_eq!(err.to_string(), format!("r.txt:{}: score \"1.5x\" is not a number", bad + 1));
}

/// `evaluate_grouped` on columns built from rows, each query's rows in groups of consecutive rows.
fn grouped(qrels: &[QrelsRow<'_>], run: &[RunRow<'_>], measures: &[String], opts: &Options) -> ragmeter_core::Result<Evaluation> {
    let (q_ids, r_ids): (Vec<&str>, Vec<&str>) = (qrels.iter().map(|r| r.qid).collect(), run.iter().map(|r| r.qid).collect());
    let (q_docs, r_docs): (Vec<&str>, Vec<&str>) = (qrels.iter().map(|r| r.docno).collect(), run.iter().map(|r| r.docno).collect());
    let (rels, scores): (Vec<i64>, Vec<f64>) = (qrels.iter().map(|r| r.rel).collect(), run.iter().map(|r| r.score).collect());
    let ((q_qids, q_offsets), (r_qids, r_offsets)) = (consecutive_groups(&q_ids[..]), consecutive_groups(&r_ids[..]));
    let q = Grouped { qids: q_qids, offsets: &q_offsets, docs: &q_docs[..], values: &rels[..], name: "qrels", lines: None, not_utf8_line: None };
    let r = Grouped { qids: r_qids, offsets: &r_offsets, docs: &r_docs[..], values: &scores[..], name: "run", lines: None, not_utf8_line: None };
    evaluate_grouped(&q, &r, measures, opts, run.last().map_or("", |r| r.run_id))
}

#[test]
fn grouped_columns_give_the_row_results_in_blocks_and_interleaved() {
    let (qrels, mut run) = generate(700, 41);
    let measures = vec!["all_trec".to_string()];
    let opts = Options { complete: true, ..Options::default() };
    for shuffle in [false, true] {
        if shuffle {
            let mut state = 9;
            for i in (1..run.len()).rev() {
                run.swap(i, (next(&mut state) % (i as u64 + 1)) as usize);
            }
        }
        let text = run.join("\n");
        let (q, r) = (parse_qrels(&qrels, "qrels").unwrap(), parse_run(&text, "run").unwrap());
        let rows = evaluate(&q, &r, &measures, &opts, "qrels", "run").unwrap();
        let columns = grouped(&q, &r, &measures, &opts).unwrap();
        assert_eq!(rows.run_only_queries, columns.run_only_queries);
        assert!(!rows.run_only_queries.is_empty());
        assert_eq!(format_trec(&rows, true, true), format_trec(&columns, true, true), "shuffled: {shuffle}");
    }
}

#[test]
fn grouped_columns_report_the_errors_of_the_row_path() {
    let (qrels, run) = generate(300, 8);
    let measures = vec!["map".to_string()];
    let text = run.join("\n");
    let (q, mut r) = (parse_qrels(&qrels, "qrels").unwrap(), parse_run(&text, "run").unwrap());
    // Without -c a judged query missing from the run is an error; with a document ranked twice, so is that.
    let strict = Options::default();
    let want = evaluate(&q, &r, &measures, &strict, "qrels", "run").unwrap_err().to_string();
    assert_eq!(grouped(&q, &r, &measures, &strict).unwrap_err().to_string(), want);
    let opts = Options { complete: true, ..Options::default() };
    let at = r.len() / 2;
    r[at + 1].docno = r[at].docno;
    r[at + 1].qid = r[at].qid;
    let want = evaluate(&q, &r, &measures, &opts, "qrels", "run").unwrap_err().to_string();
    assert!(want.contains("appears twice"), "{want}");
    assert_eq!(grouped(&q, &r, &measures, &opts).unwrap_err().to_string(), want);
    r[at].score = f64::NAN;
    assert_eq!(grouped(&q, &r, &measures, &opts).unwrap_err().to_string(), format!("run:{}: score is NaN", at + 1));
}

#[test]
fn a_grade_beyond_the_largest_counted_is_refused_on_every_path_not_allocated() {
    // Measures count judgements per grade, 0 to the highest: a grade of 10^9 sized
    // that count at 8 GB (an abort), 2^62 overflowed it (a panic).
    let run = "q1 Q0 d1 1 0.5 r\nq1 Q0 d2 2 0.4 r\n";
    let measures = vec!["all_trec".to_string()];
    let opts = Options::default();
    for grade in ["1000000000", "4611686018427387904", "9223372036854775807"] {
        let qrels = format!("q1 0 d2 0\nq1 0 d1 {grade}\n");
        let want = format!("q:2: relevance {grade} is above 1000000, the largest grade ragmeter evaluates");
        let (q, r) = (parse_qrels(&qrels, "q").unwrap(), parse_run(run, "r").unwrap());
        let rows = evaluate(&q, &r, &measures, &opts, "q", "r").unwrap_err().to_string();
        assert!(rows.starts_with(&want), "{rows}");
        assert_eq!(evaluate_texts(&qrels, run, &measures, &opts, "q", "r").unwrap_err().to_string(), rows);
        let columns = grouped(&q, &r, &measures, &opts).unwrap_err().to_string();
        assert!(columns.starts_with(&want.replace("q:2", "qrels:2")), "{columns}");
    }
    let qrels = "q1 0 d1 1000000\nq1 0 d2 0\n";
    let eval = evaluate_texts(qrels, run, &measures, &opts, "q", "r").unwrap();
    assert_eq!(eval.queries.len(), 1);
}
