//! Error messages about files read byte for byte (one is not UTF-8) show the fields they
//! quote as the files' bytes: printable ASCII as it is, any other byte as `\xNN`. Before,
//! they showed each byte as its Latin-1 character: a Shift-JIS '質問' (8e bf 96 e2) was
//! `\u{8e}¿\u{96}â`, control characters and letters that are not in the file.
//! UTF-8 files keep their messages.

use ragmeter_core::trec::{read_one, read_pair, Options, Source};

const SJIS_QUERY: &[u8] = b"\x8e\xbf\x96\xe2"; // 質問
const SJIS_DOC: &[u8] = b"\x95\xb6\x8f\x91"; // 文書

fn line(fields: &[&[u8]]) -> Vec<u8> {
    let mut out = fields.join(&b' ');
    out.push(b'\n');
    out
}

/// The error `ragmeter trec` gives for a qrels and a run held in memory.
fn error(qrels: &[u8], run: &[u8], complete: bool) -> String {
    let texts = read_pair(Source::Bytes { name: "q", bytes: qrels.to_vec() }, Source::Bytes { name: "r", bytes: run.to_vec() })
        .expect("read");
    let opts = Options { complete, ..Options::default() };
    texts.evaluate(&["map".to_string()], &opts, "q", "r").expect_err("refused").to_string()
}

fn sjis_qrels() -> Vec<u8> {
    [line(&[SJIS_QUERY, b"0", SJIS_DOC, b"1"]), line(&[b"q2", b"0", b"d", b"1"])].concat()
}

fn sjis_run() -> Vec<u8> {
    [line(&[SJIS_QUERY, b"Q0", SJIS_DOC, b"1", b"0.5", b"r"]), line(&[b"q2", b"Q0", b"d", b"1", b"0.5", b"r"])].concat()
}

#[test]
fn a_bad_relevance_in_a_file_read_as_bytes_is_shown_as_its_bytes() {
    let qrels = [sjis_qrels(), line(&[b"q2", b"0", b"e", b"\x8d\x82"])].concat(); // relevance '高'
    assert_eq!(error(&qrels, &sjis_run(), false), "q:3: relevance \"\\x8d\\x82\" is not an integer");
}

#[test]
fn a_bad_score_in_a_file_read_as_bytes_is_shown_as_its_bytes() {
    let run = [sjis_run(), line(&[b"q2", b"Q0", b"e", b"2", b"\x8e\xbf", b"r"])].concat();
    assert_eq!(error(&sjis_qrels(), &run, false), "r:3: score \"\\x8e\\xbf\" is not a number");
}

#[test]
fn a_judged_query_missing_from_the_run_is_named_by_its_bytes() {
    let run = line(&[b"q2", b"Q0", b"d", b"1", b"0.5", b"r"]);
    let err = error(&sjis_qrels(), &run, false);
    assert!(err.starts_with("r: query \\x8e\\xbf\\x96\\xe2 has judgements in q but no ranking in the run; pass -c"), "{err}");
}

#[test]
fn documents_judged_or_ranked_twice_are_named_by_their_bytes() {
    let twice = [sjis_qrels(), line(&[SJIS_QUERY, b"0", SJIS_DOC, b"0"])].concat();
    assert_eq!(
        error(&twice, &sjis_run(), false),
        "q:3: document \\x95\\xb6\\x8f\\x91 is judged twice for query \\x8e\\xbf\\x96\\xe2 (first at line 1)"
    );
    let run = [sjis_run(), line(&[SJIS_QUERY, b"Q0", SJIS_DOC, b"2", b"0.1", b"r"])].concat();
    assert_eq!(
        error(&sjis_qrels(), &run, true),
        "r:3: document \\x95\\xb6\\x8f\\x91 appears twice in the ranking of query \\x8e\\xbf\\x96\\xe2 (first at line 1)"
    );
}

#[test]
fn a_utf8_partner_is_read_as_bytes_too_and_shown_so() {
    // Both files are read as bytes: the UTF-8 file's 'é' is its two bytes.
    let qrels = "q 0 d é\n".as_bytes();
    assert_eq!(error(qrels, &sjis_run(), false), "q:1: relevance \"\\xc3\\xa9\" is not an integer");
}

#[test]
fn utf8_files_keep_their_messages() {
    assert_eq!(error("q 0 d é\n".as_bytes(), b"q Q0 d 1 1 r\n", false), "q:1: relevance \"é\" is not an integer");
    let missing = error("é 0 d 1\n".as_bytes(), b"q Q0 d 1 1 r\n", false);
    assert!(missing.starts_with("r: query é has judgements in q but no ranking in the run;"), "{missing}");
    assert_eq!(error(b"q 0 d 1\n", "q Q0 d 1 é r\n".as_bytes(), false), "r:1: score \"é\" is not a number");
}

#[test]
fn a_file_read_alone_as_bytes_shows_its_fields_as_bytes() {
    let dir = std::env::temp_dir().join(format!("ragmeter-bytes-h35-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (q, r) = (dir.join("q"), dir.join("r"));
    std::fs::write(&q, [sjis_qrels(), line(&[b"q2", b"0", b"e", b"\x8d\x82"])].concat()).unwrap();
    std::fs::write(&r, [sjis_run(), line(&[b"q2", b"Q0", b"e", b"2", b"\x8e\xbf", b"r"])].concat()).unwrap();
    let (qp, rp) = (q.to_str().unwrap(), r.to_str().unwrap());
    let (text, not_utf8) = read_one(qp).unwrap();
    assert_eq!(not_utf8, Some(1));
    assert_eq!(text.qrels_rows(qp).unwrap_err().to_string(), format!("{qp}:3: relevance \"\\x8d\\x82\" is not an integer"));
    let (text, _) = read_one(rp).unwrap();
    assert_eq!(text.run_rows(rp).unwrap_err().to_string(), format!("{rp}:3: score \"\\x8e\\xbf\" is not a number"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn columns_of_a_file_read_as_bytes_show_their_ids_as_bytes() {
    use ragmeter_core::trec::{evaluate_grouped, Grouped};
    let (query, doc) = ("\u{8e}\u{bf}\u{96}\u{e2}", "\u{95}\u{b6}\u{8f}\u{91}"); // 質問, 文書 read one character per byte
    let docs = [doc, doc];
    let qrels = Grouped { qids: vec![query], offsets: &[0, 2], docs: &docs[..], values: &[1i64, 0][..], name: "qrels", lines: None, not_utf8_line: Some(1) };
    let run = Grouped { qids: vec!["q2"], offsets: &[0, 1], docs: &docs[..1], values: &[0.5][..], name: "run", lines: None, not_utf8_line: None };
    let err = |opts: Options| evaluate_grouped(&qrels, &run, &["map".to_string()], &opts, "r").expect_err("refused").to_string();
    let missing = err(Options::default());
    assert!(missing.starts_with("run: query \\x8e\\xbf\\x96\\xe2 has judgements in qrels"), "{missing}");
    assert_eq!(
        err(Options { complete: true, ..Options::default() }),
        "qrels:2: document \\x95\\xb6\\x8f\\x91 is judged twice for query \\x8e\\xbf\\x96\\xe2 (first at line 1)"
    );
}
