//! Qrels and runs that are not UTF-8 (Latin-1 ids): trec_eval reads them as bytes,
//! comparing ids with `strcmp`, and so does `read_pair` (both files, when either is
//! not UTF-8). Before, they were refused: `FILE:LINE: not valid UTF-8 text`.

use ragmeter_core::trec::{evaluate_texts, format_trec, latin1_bytes, read_pair, NotUtf8, Options, Source};

fn measures(list: &[&str]) -> Vec<String> {
    list.iter().map(|m| m.to_string()).collect()
}

fn bytes<'a>(name: &'a str, text: &[u8]) -> Source<'a> {
    Source::Bytes { name, bytes: text.to_vec() }
}

/// `-q` output of a pair of byte strings as `ragmeter trec` writes it (its bytes), and where a file is not UTF-8.
fn output(qrels: &[u8], run: &[u8], m: &[&str]) -> (Vec<u8>, Option<NotUtf8>) {
    let texts = read_pair(bytes("q", qrels), bytes("r", run)).unwrap();
    let eval = evaluate_texts(texts.qrels.as_str(), texts.run.as_str(), &measures(m), &Options::default(), "q", "r").unwrap();
    let text = format_trec(&eval, true, true);
    (if texts.not_utf8.is_some() { latin1_bytes(&text) } else { text.into_bytes() }, texts.not_utf8)
}

/// Every non-ASCII byte replaced by an ASCII one above all the ASCII the tests use ('{' '|' '}' '~'), in the
/// same order: trec_eval gives the same numbers, since equality and `strcmp` order are kept.
fn stand_ins(texts: &[&[u8]]) -> Vec<(u8, u8)> {
    let mut high: Vec<u8> = texts.iter().flat_map(|t| t.iter().copied()).filter(|&b| b >= 0x80).collect();
    high.sort_unstable();
    high.dedup();
    assert!(high.len() <= 4 && texts.iter().all(|t| !t.iter().any(|b| b"{|}~".contains(b))));
    high.into_iter().zip(*b"{|}~").collect()
}

fn swap(text: &[u8], pairs: &[(u8, u8)], back: bool) -> Vec<u8> {
    text.iter()
        .map(|&b| pairs.iter().find(|p| if back { p.1 == b } else { p.0 == b }).map_or(b, |p| if back { p.0 } else { p.1 }))
        .collect()
}

#[test]
fn latin1_ids_tie_in_strcmp_order_and_are_printed_as_their_bytes() {
    // caf\xe9 ties four documents: strcmp descending is d\xff (unjudged) > d\xe9 (1) > dz (1) > de (0).
    let qrels: &[u8] = b"caf\xe9 0 d\xe9 1\ncaf\xe9 0 dz 1\ncaf\xe9 0 de 0\nq2 0 \xe0 1\nq2 0 b 0\n";
    let run: &[u8] = b"caf\xe9 Q0 de 1 0.5 r\xe9\ncaf\xe9 Q0 dz 2 0.5 r\xe9\ncaf\xe9 Q0 d\xff 3 0.5 r\xe9\n\
caf\xe9 Q0 d\xe9 4 0.5 r\xe9\nq2 Q0 b 1 0.9 r\xe9\nq2 Q0 \xe0 2 0.1 r\xe9\n";
    let (got, not_utf8) = output(qrels, run, &["all_trec"]);
    assert_eq!(not_utf8, Some(NotUtf8 { path: "q".to_string(), line: 1 }));
    let pairs = stand_ins(&[qrels, run]);
    let (want, ascii) = output(&swap(qrels, &pairs, false), &swap(run, &pairs, false), &["all_trec"]);
    assert_eq!(ascii, None);
    assert_eq!(got, swap(&want, &pairs, true));
    // By hand: AP of [unjudged, 1, 1, 0] with R = 2 is (1/2 + 2/3) / 2; RR 1/2.
    let lines: Vec<&[u8]> = got.split(|&b| b == b'\n').collect();
    assert!(lines.contains(&&b"map                   \tcaf\xe9\t0.5833"[..]));
    assert!(lines.contains(&&b"recip_rank            \tcaf\xe9\t0.5000"[..]));
    assert!(lines.contains(&&b"runid                 \tall\tr\xe9"[..]));
}

#[test]
fn a_utf8_file_and_a_latin1_partner_match_byte_for_byte() {
    // The qrels' UTF-8 caf\xc3\xa9 is the run's caf\xc3\xa9, not its Latin-1 caf\xe9 (a document of its own).
    let qrels = "1 0 café 1\n1 0 x 0\n".as_bytes();
    let run: &[u8] = b"1 Q0 caf\xc3\xa9 2 0.5 r\n1 Q0 caf\xe9 1 0.9 r\n1 Q0 x 3 0.1 r\n";
    let (got, not_utf8) = output(qrels, run, &["recip_rank", "num_rel_ret"]);
    assert_eq!(not_utf8, Some(NotUtf8 { path: "r".to_string(), line: 2 }));
    let text = String::from_utf8_lossy(&got);
    assert!(text.contains("recip_rank            \t1\t0.5000\n") && text.contains("num_rel_ret           \t1\t1\n"), "{text}");
}

#[test]
fn utf8_files_are_read_as_text_with_no_note() {
    let (got, not_utf8) = output("é 0 dé 1\n".as_bytes(), "é Q0 dé 1 1 r\n".as_bytes(), &["map"]);
    assert_eq!(not_utf8, None);
    assert!(String::from_utf8(got).unwrap().starts_with("map                   \té\t1.0000\n"));
}

#[test]
fn a_file_that_is_not_utf8_and_holds_a_nul_byte_is_refused_as_before() {
    for (q, r, name) in [(&b"1 0 d1 1\n\x89P\x00\n"[..], &b"1 Q0 d\xe9 1 1 r\n"[..], "q"), (b"1 0 d\xe9 1\n", b"1 Q0 d1 1 1 r\n\xff\x00\n", "r")] {
        let err = read_pair(bytes("q", q), bytes("r", r)).err().expect("refused");
        assert_eq!(err.to_string(), format!("{name}:2: not valid UTF-8 text"));
    }
}

#[test]
fn errors_in_a_latin1_file_name_the_file_and_line() {
    let texts = read_pair(bytes("q", b"1 0 d\xe9 1\n"), bytes("r", b"1 Q0 d\xe9 1 1 r\n1 Q0 d\xe9 2 x r\n")).unwrap();
    let err = evaluate_texts(texts.qrels.as_str(), texts.run.as_str(), &measures(&["map"]), &Options::default(), "q", "r").unwrap_err();
    assert_eq!(err.to_string(), "r:2: score \"x\" is not a number");
}

#[test]
fn files_on_disk_are_read_as_the_bytes_they_hold() {
    let dir = std::env::temp_dir().join(format!("ragmeter-bytes-h34-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (q, r) = (dir.join("q"), dir.join("r"));
    std::fs::write(&q, b"1 0 d\xe9 1\n1 0 x 0\n").unwrap();
    std::fs::write(&r, b"1 Q0 x 1 1 r\n1 Q0 d\xe9 2 1 r\n").unwrap();
    let (qp, rp) = (q.to_str().unwrap(), r.to_str().unwrap());
    let texts = read_pair(Source::File(qp), Source::File(rp)).unwrap();
    assert_eq!(texts.not_utf8, Some(NotUtf8 { path: qp.to_string(), line: 1 }));
    let eval = evaluate_texts(texts.qrels.as_str(), texts.run.as_str(), &measures(&["recip_rank"]), &Options::default(), qp, rp).unwrap();
    // tie: x (0x78) sorts above d\xe9 (0x64 first): the relevant document is second
    assert_eq!(eval.summary, vec![0.5]);
    std::fs::remove_dir_all(&dir).unwrap();
}
