//! Unit tests of the evidence module (the shared vectors are also read by tests/test_evidence.py).

use unicode_normalization::UnicodeNormalization;

use super::normalize::{is_invisible, Table};
use super::*;

#[test]
fn basics() {
    assert_eq!(normalize(""), "");
    assert_eq!(normalize("  Hello\tWorld \n"), "helloworld");
    assert_eq!(normalize("⼤模型"), "大模型");
    assert_eq!(normalize("ＲＡＧ　系统"), "rag系统");
    assert_eq!(normalize("e\u{301}"), "é");
    assert_eq!(normalize("E\u{301}Z"), "éz");
    assert_eq!(normalize("ΟΔΟΣ οδος"), "οδοσοδοσ");
    assert_eq!(normalize("a\u{200B}b\u{AD}c\u{FEFF}"), "abc");
    assert_eq!(normalize("ﬁle"), "file");
    // Hangul: a syllable followed by a trailing jamo composes.
    assert_eq!(normalize("\u{AC00}\u{11A8}"), "\u{AC01}");
    assert_eq!(normalize("\u{1100}\u{1161}"), "\u{AC00}");
}

#[test]
fn hyphenation() {
    assert_eq!(normalize("retrie-\nval"), "retrie-val");
    assert_eq!(normalize_dehyphenated("retrie-\nval").as_deref(), Some("retrieval"));
    assert_eq!(normalize_dehyphenated("retrie-  \r\n  val"), Some("retrieval".into()));
    assert_eq!(normalize_dehyphenated("a - \nb"), None); // hyphen after a space
    assert_eq!(normalize_dehyphenated("a-b"), None);
    assert_eq!(normalize_dehyphenated("a-\n"), None); // nothing follows
    assert_eq!(normalize_dehyphenated("a-x\nb"), None);
    assert_eq!(normalize_dehyphenated("re\u{2010}\ntrieval"), Some("retrieval".into()));
    assert_eq!(normalize_dehyphenated("re\u{FF0D}\ntrieval"), Some("retrieval".into()));
    assert_eq!(normalize_dehyphenated("a-\n-\nb"), Some("a-b".into()));
    let m = PhraseMatcher::new(["retrieval", "state-of-the-art"]).unwrap();
    assert_eq!(m.found_in("Retrie-\nval is state-of-the-\nart"), vec![true, true]);
}

#[test]
fn table_classes_hold() {
    use unicode_normalization::char::{canonical_combining_class, compose, decompose_canonical};
    let table = Table::get();
    let bmp: Vec<char> = (0u32..0x1_0000).filter_map(char::from_u32).collect();
    // `copy_run` takes the lead bytes E4..E9 as COPY without a lookup.
    assert!((0x4000u32..0xA000).filter_map(char::from_u32).all(|c| table.is_copy(c)));
    for &c in bmp.iter().filter(|&&c| !c.is_ascii() && table.is_copy(c)) {
        let s = c.to_string();
        assert_eq!(s.nfkc().collect::<String>(), s, "{c:?} not NFKC-stable");
        assert_eq!(canonical_combining_class(c), 0);
        assert_eq!(c.to_lowercase().collect::<String>(), s);
        assert!(!c.is_whitespace() && !is_invisible(c) && c != '\u{2010}' && c != 'ς');
    }
    // A character with a boundary before it is never a non-initial element of
    // a canonical decomposition, and composes with nothing before it: checked
    // against every first element of a composition (base letters, composites
    // that compose further, Hangul LV syllables).
    let mut firsts: Vec<char> = Vec::new();
    for y in (0u32..0x11_0000).filter_map(char::from_u32) {
        let mut parts = Vec::new();
        decompose_canonical(y, |d| parts.push(d));
        if parts != [y] {
            firsts.push(parts[0]);
            firsts.push(y);
        }
        for &p in parts.iter().skip(1) {
            assert!(!table.has_boundary_before(p), "{p:?} appears inside the decomposition of {y:?}");
        }
    }
    firsts.extend((0..399).filter_map(|i| char::from_u32(0xAC00 + i * 28)));
    firsts.sort_unstable();
    firsts.dedup();
    for &b in bmp.iter().filter(|&&b| table.has_boundary_before(b) && !(0x4E00..=0x9FFF).contains(&(b as u32)) && !(0xAC00..=0xD7A3).contains(&(b as u32))) {
        for &a in &firsts {
            assert!(compose(a, b).is_none(), "{a:?} + {b:?} composes");
        }
    }
}

#[test]
fn fast_path_equals_plain_nfkc() {
    // Table characters next to combining marks, backward-combining starters
    // (Hangul jamo, Indic vowel signs), half-width voiced marks, characters
    // outside the BMP, full-width forms and ASCII.
    let pieces = [
        "a", "e\u{301}", "\u{301}", "大", "\u{3099}", "か", "Ａ", "\u{2F24}", " ", "\u{3000}", "-", "\n", "가", "\u{11A8}", "Σ", "İ",
        "，", "１", "ｶ", "\u{FF9E}", "\u{0B47}", "\u{0B3E}", "ﬁ", "\u{1161}", "ς", "\u{2010}", "\u{AD}", "😀", "𠀀", "\u{85}", "\u{212B}",
        "\u{0344}", "①", "\u{1100}", "é", "Ё",
    ];
    for a in pieces {
        for b in pieces {
            for c in pieces {
                let s = format!("{a}{b}{c}");
                let reference = plain_normalize(&s);
                assert_eq!(normalize(&s), reference, "{s:?}");
            }
        }
    }
}

/// The definition without the fast path: NFKC, white space and invisible characters dropped, lower-cased
/// per character, final sigma folded.
fn plain_normalize(s: &str) -> String {
    s.nfkc()
        .filter(|ch| !ch.is_whitespace() && !is_invisible(*ch))
        .flat_map(|ch| ch.to_lowercase())
        .map(|ch| if ch == 'ς' { 'σ' } else { ch })
        .collect()
}

/// A seeded xorshift64 stream: reproducible pseudo-random test inputs without a crate.
pub(super) fn xorshift(mut state: u64) -> impl FnMut() -> u64 {
    move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    }
}

#[test]
fn fast_path_equals_plain_nfkc_on_a_fixed_sample() {
    // Pseudo-random strings over every BMP block (one code point drawn per
    // 128-code-point range) and the supplementary planes' CJK and emoji.
    let mut next = xorshift(0x9E37_79B9_7F4A_7C15u64);
    for _ in 0..20_000 {
        let len = (next() % 12) as usize;
        let s: String = (0..len)
            .filter_map(|_| {
                let r = next();
                let cp = match r % 8 {
                    0 => (r >> 8) as u32 % 0x80,
                    1 => 0x20000 + (r >> 8) as u32 % 0x100,
                    2 => 0x1F300 + (r >> 8) as u32 % 0x300,
                    _ => ((r >> 8) as u32 % 0x200) * 0x80 + (r >> 24) as u32 % 0x80,
                };
                char::from_u32(cp)
            })
            .collect();
        let reference = plain_normalize(&s);
        assert_eq!(normalize(&s), reference, "{s:?}");
    }
}

#[test]
fn file_names() {
    let f = |a: &str, b: &str| file_matches(&normalize_file_name(a), &normalize_file_name(b));
    assert!(f("Guide.PDF", "docs/guide.pdf"));
    assert!(f("docs\\guide.pdf", "./docs/guide.pdf"));
    assert!(f("a/guide.pdf", "/kb/a/guide.pdf"));
    assert!(!f("a/guide.pdf", "b/guide.pdf"));
    assert!(!f("guide.pdf", "myguide.pdf"));
    assert!(!f("", "x"));
    assert!(f("caf\u{e9}.md", "cafe\u{301}.md"));
    // The ASCII shortcut equals the general rule.
    let general = |name: &str| {
        let s: String = name.trim().nfc().map(|c| if c == '\\' { '/' } else { c }).collect();
        let mut s = s.as_str();
        while let Some(rest) = s.strip_prefix("./") {
            s = rest;
        }
        s.trim_end_matches('/').to_lowercase()
    };
    for name in ["", " ", "\u{0B}./A/B.PDF/\t", "././x", ".\\Docs\\G.md", "./", "//", "a//", " \r\n./\u{0C}", "Kb/./X.TXT", "..//y"] {
        assert_eq!(normalize_file_name(name), general(name), "{name:?}");
    }
}

#[test]
fn batch_rules() {
    // case 0: files + evidence; case 1: evidence only; case 2: files only;
    // case 3: unlabelled; case 4: only an empty phrase + file.
    let expected_files = vec!["a.md", "b.md", "c.md", "d.md"];
    let file_offsets = [0, 2, 2, 3, 3, 4];
    let phrases = vec!["Alpha Beta", "gamma", "ＤＥＬＴＡ", "   "];
    let phrase_offsets = [0, 2, 3, 3, 3, 4];
    let chunk_files = vec!["x/b.md", "a.md", "c.md", "zz.md", "c.md", "q.md", "q.md", "D.md", "e.md"];
    let chunk_texts = vec!["gamma ray", "alpha\nbeta", "alpha beta", "the delta", "anything", "x", "y", "any", "any"];
    let chunk_offsets = [0, 3, 4, 6, 7, 9];
    let b = EvidenceBatch {
        file_offsets: &file_offsets,
        expected_files: &expected_files,
        phrase_offsets: &phrase_offsets,
        phrases: &phrases,
        chunk_offsets: &chunk_offsets,
        chunk_files: &chunk_files,
        chunk_texts: &chunk_texts,
    };
    let r = match_evidence(&b).unwrap();
    assert_eq!(r.labeled, vec![true, true, true, false, true]);
    assert_eq!(r.file_match, vec![true, true, false, true, true, false, true, true, false]);
    assert_eq!(r.relevant, vec![true, true, false, true, true, false, false, true, false]);
    assert_eq!(r.phrases_found, vec![1, 1, 1, 1, 0, 0, 0, 0, 0]);
    assert_eq!(r.phrase_first_rank, vec![2, 1, 1, 0]);
    assert_eq!(r.phrase_any_rank, vec![2, 1, 1, 0]);
    assert_eq!(r.phrase_empty, vec![false, false, false, true]);
    assert_eq!(r.file_first_rank, vec![2, 1, 1, 1]);

    let everywhere = phrases_in_texts(&phrases, &chunk_texts).unwrap();
    assert_eq!(everywhere, vec![true, true, true, false]);
    assert!(r.phrase_in_run.is_empty());
    let wide = match_evidence_with(&b, true).unwrap();
    assert_eq!(wide.phrase_in_run, everywhere);
    assert_eq!(EvidenceResult { phrase_in_run: Vec::new(), ..wide }, r);
}

#[test]
fn run_wide_index_finds_phrases_of_other_cases() {
    // Case 0's phrases occur only in case 1's chunks and vice versa; every
    // length class (short automaton, 4-byte and 8-byte windows), a phrase
    // at the very start and end of a text, a broken line, and a duplicate.
    let phrases = vec!["ab", "Wxyz", "Kangxi ⼤模型 phrase", "endofthetext", "retrieval", "nowhere at all", "wxyz"];
    let phrase_offsets = [0, 3, 7];
    let chunk_texts = vec!["nothing here", "AB wx yz", "kangxi 大模型 PHRASE in the middle", "x endofthetext", "retrie-\nval", "zz"];
    let chunk_files = vec!["f"; 6];
    let chunk_offsets = [0, 2, 6];
    let empty: Vec<&str> = vec![];
    let b = EvidenceBatch {
        file_offsets: &[0, 0, 0],
        expected_files: &empty,
        phrase_offsets: &phrase_offsets,
        phrases: &phrases,
        chunk_offsets: &chunk_offsets,
        chunk_files: &chunk_files,
        chunk_texts: &chunk_texts,
    };
    let r = match_evidence_with(&b, true).unwrap();
    assert_eq!(r.phrase_in_run, vec![true, true, true, true, true, false, true]);
    // Case 0 finds "ab" and "wxyz" in its own second chunk, not the kangxi phrase.
    assert_eq!(r.phrase_any_rank, vec![2, 2, 0, 2, 3, 0, 0]);
    assert_eq!(phrases_in_texts(&phrases, &chunk_texts).unwrap(), r.phrase_in_run);
}

#[test]
fn run_index_agrees_with_naive_search() {
    // Many phrases sharing prefixes (the greedy window choice), random texts.
    let mut next = xorshift(0x2545_F491_4F6C_DD1Du64);
    let alphabet: Vec<char> = "abcde大模型 -\n".chars().collect();
    let texts: Vec<String> = (0..300)
        .map(|_| (0..(next() % 120) as usize).map(|_| alphabet[(next() % alphabet.len() as u64) as usize]).collect())
        .collect();
    let mut phrases: Vec<String> = (0..400)
        .map(|_| (0..(1 + next() % 12) as usize).map(|_| alphabet[(next() % 8) as usize]).collect())
        .collect();
    phrases.extend((0..200).map(|i| format!("evidence{i:04}")));
    phrases.push("evidence0007".into());
    phrases.push(String::new());
    let norm_texts: Vec<(String, Option<String>)> = texts.iter().map(|t| (normalize(t), normalize_dehyphenated(t))).collect();
    let naive: Vec<bool> = phrases
        .iter()
        .map(|p| {
            let p = normalize(p);
            !p.is_empty() && norm_texts.iter().any(|(a, d)| a.contains(&p) || d.as_deref().is_some_and(|d| d.contains(&p)))
        })
        .collect();
    assert!(naive.iter().any(|&f| f) && naive.iter().any(|&f| !f));
    assert_eq!(phrases_in_texts(&phrases, &texts).unwrap(), naive);
}

#[test]
fn run_wide_check_agrees_with_a_search_of_all_texts() {
    // Enough cases for several batches between refreshes of the run index;
    // phrases of every length class drawn from the texts' own small vocabulary
    // (most found early, so the refresh drops them), plus phrases found only in
    // late cases, phrases of cases without chunks, and phrases found nowhere.
    let mut next = xorshift(0x9E37_79B9_7F4A_7C15u64);
    let words = ["ab", "rag", "模型", "retrieval", "chunk", "大", "evidence", "x-\ny"];
    let n_cases = 2 * batch::RUN_BATCH_MIN + 300;
    let mut chunk_texts = Vec::new();
    let mut chunk_offsets = vec![0usize];
    let mut phrases = Vec::new();
    let mut phrase_offsets = vec![0usize];
    for c in 0..n_cases {
        let n_chunks = if c % 97 == 5 { 0 } else { 1 + (next() % 4) as usize };
        for _ in 0..n_chunks {
            let n_words = (next() % 12) as usize;
            let mut t: String = (0..n_words).map(|_| words[(next() % words.len() as u64) as usize]).collect::<Vec<_>>().join(" ");
            if c > n_cases - 50 && next().is_multiple_of(3) {
                t.push_str(&format!(" late{}phrase", c % 7));
            }
            if c < 100 && next().is_multiple_of(3) {
                t.push_str(&format!(" early{}word", c % 11));
            }
            if (260..300).contains(&c) && next().is_multiple_of(3) {
                t.push_str(&format!(" mid{}token", c % 13));
            }
            chunk_texts.push(t);
        }
        chunk_offsets.push(chunk_texts.len());
        for _ in 0..(next() % 3) {
            let n_words = 1 + (next() % 3) as usize;
            phrases.push((0..n_words).map(|_| words[(next() % words.len() as u64) as usize]).collect::<Vec<_>>().join(""));
        }
        phrases.push(match c % 5 {
            0 => format!("Late{}Phrase", c % 7),
            1 => format!("nowhere{c}"),
            // Found only in the texts of cases matched long before.
            2 if c > 300 => format!("Early{} Word", c % 11),
            // Found only in texts of other cases of the same range of cases.
            3 if (400..500).contains(&c) => format!("Mid{} Token", c % 13),
            _ => String::new(),
        });
        phrase_offsets.push(phrases.len());
    }
    let chunk_files = vec![String::from("f"); chunk_texts.len()];
    let empty: Vec<String> = vec![];
    let b = EvidenceBatch {
        file_offsets: &vec![0; n_cases + 1],
        expected_files: &empty,
        phrase_offsets: &phrase_offsets,
        phrases: &phrases,
        chunk_offsets: &chunk_offsets,
        chunk_files: &chunk_files,
        chunk_texts: &chunk_texts,
    };
    let everywhere = phrases_in_texts(&phrases, &chunk_texts).unwrap();
    assert!(everywhere.iter().any(|&f| f) && everywhere.iter().any(|&f| !f));
    let plain = match_evidence(&b).unwrap();
    let wide = match_evidence_with(&b, true).unwrap();
    assert_eq!(wide.phrase_in_run, everywhere);
    assert_eq!(EvidenceResult { phrase_in_run: Vec::new(), ..wide }, plain);
}

#[test]
fn bulk_normalisation_matches_char_by_char() {
    // Long ASCII/CJK runs with hyphens and breaks across the bulk pieces.
    for s in ["Retrie-\nval  AND  Aug-  \r\n  mented", "abc-\n-\ndef", "-\nx", "大模型-\n大 模 型", "a -\nb", "x-\n", "ABCDEFGHIJKLMNOP-\nQRSTUVWXYZ 0123456789\t"] {
        let reference: String = s.nfkc().filter(|ch| !ch.is_whitespace()).flat_map(|ch| ch.to_lowercase()).collect();
        assert_eq!(normalize(s), reference, "{s:?}");
    }
    assert_eq!(normalize_dehyphenated("ABCDEFGHIJKLMNOP-\nQRSTUVWXYZ").as_deref(), Some("abcdefghijklmnopqrstuvwxyz"));
    assert_eq!(normalize_dehyphenated("大模型-\n大 模 型").as_deref(), Some("大模型大模型"));
    assert_eq!(normalize_dehyphenated("a -\nb"), None);
}

#[test]
fn bad_offsets() {
    let empty: Vec<&str> = vec![];
    let texts = vec!["a"];
    let b = EvidenceBatch {
        file_offsets: &[0, 1],
        expected_files: &empty,
        phrase_offsets: &[0, 0],
        phrases: &empty,
        chunk_offsets: &[0, 1],
        chunk_files: &texts,
        chunk_texts: &texts,
    };
    let err = match_evidence(&b).unwrap_err();
    assert!(err.to_string().contains("expected-file offsets"), "{err}");
}

#[test]
fn many_patterns_use_overlapping_search() {
    let mut phrases: Vec<String> = (0..40).map(|i| format!("zz{i}zz")).collect();
    phrases.extend(["abc".to_string(), "bcd".to_string(), "b".to_string()]);
    let m = PhraseMatcher::new(phrases.iter().map(String::as_str)).unwrap();
    let found = m.found_in("xABcd zz7zz");
    assert_eq!(found.iter().filter(|&&f| f).count(), 4);
    assert!(found[7] && found[40] && found[41] && found[42]);
}

#[test]
fn duplicate_and_overlapping_phrases() {
    let m = PhraseMatcher::new(["abc", "ABC", "bcd", "b", "zzz"]).unwrap();
    assert_eq!(m.found_in("xabcd"), vec![true, true, true, true, false]);
}

// -- Shared vectors (also read by tests/test_evidence.py) ----------------

const VECTORS: &str = include_str!("../../../../testdata/evidence_vectors.json");

#[test]
fn shared_vectors() {
    let root = json::parse(VECTORS).expect("valid JSON");
    let normalize_cases = root.get("normalize").and_then(json::Value::as_array).expect("normalize list");
    assert!(normalize_cases.len() >= 5);
    for case in normalize_cases {
        let name = case.get("name").and_then(json::Value::as_str).unwrap_or("?");
        let input = case.get("input").and_then(json::Value::as_str).expect("input");
        let expected = case.get("expected").and_then(json::Value::as_str).expect("expected");
        assert_eq!(normalize(input), expected, "vector {name}");
        let dehy = case.get("dehyphenated").and_then(json::Value::as_str);
        assert_eq!(normalize_dehyphenated(input).as_deref(), dehy, "vector {name} (dehyphenated)");
    }
    let match_cases = root.get("match").and_then(json::Value::as_array).expect("match list");
    assert!(match_cases.len() >= 5);
    for case in match_cases {
        let name = case.get("name").and_then(json::Value::as_str).unwrap_or("?");
        let text = case.get("text").and_then(json::Value::as_str).expect("text");
        let phrases: Vec<&str> = case.get("phrases").and_then(json::Value::as_array).expect("phrases").iter().map(|p| p.as_str().expect("phrase")).collect();
        let found: Vec<bool> = case.get("found").and_then(json::Value::as_array).expect("found").iter().map(|p| p.as_bool().expect("bool")).collect();
        let m = PhraseMatcher::new(phrases.iter().copied()).unwrap();
        assert_eq!(m.found_in(text), found, "vector {name}");
    }
}

/// A minimal JSON reader, enough for the test vectors (no dependency).
mod json {
    #[derive(Debug, Clone, PartialEq)]
    pub enum Value {
        Null,
        Bool(bool),
        Num(f64),
        Str(String),
        Arr(Vec<Value>),
        Obj(Vec<(String, Value)>),
    }

    impl Value {
        pub fn get(&self, key: &str) -> Option<&Value> {
            match self {
                Value::Obj(kv) => kv.iter().find(|(k, _)| k == key).map(|(_, v)| v),
                _ => None,
            }
        }
        pub fn as_str(&self) -> Option<&str> {
            match self {
                Value::Str(s) => Some(s),
                _ => None,
            }
        }
        pub fn as_array(&self) -> Option<&Vec<Value>> {
            match self {
                Value::Arr(a) => Some(a),
                _ => None,
            }
        }
        pub fn as_bool(&self) -> Option<bool> {
            match self {
                Value::Bool(b) => Some(*b),
                _ => None,
            }
        }
    }

    pub fn parse(s: &str) -> Result<Value, String> {
        let mut p = Parser { c: s.chars().collect(), i: 0 };
        let v = p.value()?;
        p.ws();
        if p.i != p.c.len() {
            return Err(format!("trailing data at {}", p.i));
        }
        Ok(v)
    }

    struct Parser {
        c: Vec<char>,
        i: usize,
    }

    impl Parser {
        fn ws(&mut self) {
            while self.i < self.c.len() && self.c[self.i].is_ascii_whitespace() {
                self.i += 1;
            }
        }
        fn peek(&self) -> Option<char> {
            self.c.get(self.i).copied()
        }
        fn eat(&mut self, ch: char) -> Result<(), String> {
            self.ws();
            if self.peek() == Some(ch) {
                self.i += 1;
                Ok(())
            } else {
                Err(format!("expected {ch:?} at {}", self.i))
            }
        }
        fn lit(&mut self, word: &str, v: Value) -> Result<Value, String> {
            for ch in word.chars() {
                if self.peek() != Some(ch) {
                    return Err(format!("bad literal at {}", self.i));
                }
                self.i += 1;
            }
            Ok(v)
        }
        fn value(&mut self) -> Result<Value, String> {
            self.ws();
            match self.peek().ok_or("unexpected end")? {
                '{' => {
                    self.i += 1;
                    let mut kv = Vec::new();
                    self.ws();
                    if self.peek() == Some('}') {
                        self.i += 1;
                        return Ok(Value::Obj(kv));
                    }
                    loop {
                        self.ws();
                        let k = self.string()?;
                        self.eat(':')?;
                        kv.push((k, self.value()?));
                        self.ws();
                        match self.peek() {
                            Some(',') => self.i += 1,
                            Some('}') => {
                                self.i += 1;
                                return Ok(Value::Obj(kv));
                            }
                            _ => return Err(format!("expected , or }} at {}", self.i)),
                        }
                    }
                }
                '[' => {
                    self.i += 1;
                    let mut a = Vec::new();
                    self.ws();
                    if self.peek() == Some(']') {
                        self.i += 1;
                        return Ok(Value::Arr(a));
                    }
                    loop {
                        a.push(self.value()?);
                        self.ws();
                        match self.peek() {
                            Some(',') => self.i += 1,
                            Some(']') => {
                                self.i += 1;
                                return Ok(Value::Arr(a));
                            }
                            _ => return Err(format!("expected , or ] at {}", self.i)),
                        }
                    }
                }
                '"' => Ok(Value::Str(self.string()?)),
                't' => self.lit("true", Value::Bool(true)),
                'f' => self.lit("false", Value::Bool(false)),
                'n' => self.lit("null", Value::Null),
                _ => {
                    let start = self.i;
                    while self.peek().is_some_and(|c| c.is_ascii_digit() || "+-.eE".contains(c)) {
                        self.i += 1;
                    }
                    let s: String = self.c[start..self.i].iter().collect();
                    s.parse().map(Value::Num).map_err(|_| format!("bad number at {start}"))
                }
            }
        }
        fn hex4(&mut self) -> Result<u32, String> {
            let s: String = self.c.get(self.i..self.i + 4).ok_or("short \\u escape")?.iter().collect();
            self.i += 4;
            u32::from_str_radix(&s, 16).map_err(|_| format!("bad \\u escape {s}"))
        }
        fn string(&mut self) -> Result<String, String> {
            if self.peek() != Some('"') {
                return Err(format!("expected string at {}", self.i));
            }
            self.i += 1;
            let mut out = String::new();
            loop {
                let ch = self.peek().ok_or("unterminated string")?;
                self.i += 1;
                match ch {
                    '"' => return Ok(out),
                    '\\' => {
                        let e = self.peek().ok_or("bad escape")?;
                        self.i += 1;
                        match e {
                            '"' | '\\' | '/' => out.push(e),
                            'b' => out.push('\u{8}'),
                            'f' => out.push('\u{c}'),
                            'n' => out.push('\n'),
                            'r' => out.push('\r'),
                            't' => out.push('\t'),
                            'u' => {
                                let hi = self.hex4()?;
                                let code = if (0xD800..0xDC00).contains(&hi) {
                                    if self.peek() != Some('\\') {
                                        return Err("lone surrogate".into());
                                    }
                                    self.i += 2; // \u
                                    let lo = self.hex4()?;
                                    0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
                                } else {
                                    hi
                                };
                                out.push(char::from_u32(code).ok_or("bad code point")?);
                            }
                            _ => return Err(format!("bad escape \\{e}")),
                        }
                    }
                    _ => out.push(ch),
                }
            }
        }
    }
}

/// The line-break-hyphen rule written the plain way on the NFKC characters
/// (as the Python reference's regular expression states it).
fn plain_dehyphenated(s: &str) -> Option<String> {
    let c: Vec<char> = s.nfkc().collect();
    let line_break = |ch: char| matches!(ch, '\n' | '\u{0B}' | '\u{0C}' | '\r' | '\u{85}' | '\u{2028}' | '\u{2029}');
    let mut kept = String::new();
    let mut any = false;
    let mut i = 0;
    while i < c.len() {
        if matches!(c[i], '-' | '\u{2010}') && i > 0 && !c[i - 1].is_whitespace() {
            let mut j = i + 1;
            while j < c.len() && c[j].is_whitespace() && !line_break(c[j]) {
                j += 1;
            }
            if j < c.len() && line_break(c[j]) {
                while j < c.len() && c[j].is_whitespace() {
                    j += 1;
                }
                if j < c.len() {
                    any = true;
                    i = j;
                    continue;
                }
            }
        }
        kept.push(c[i]);
        i += 1;
    }
    // Dropping the hyphen does not normalise again (a mark after the break stays apart).
    any.then(|| kept.chars().filter(|ch| !ch.is_whitespace() && !is_invisible(*ch)).flat_map(|ch| ch.to_lowercase()).map(|ch| if ch == 'ς' { 'σ' } else { ch }).collect())
}

#[test]
fn block_paths_equal_plain_nfkc_on_long_mixed_texts() {
    // Long ASCII runs (the 16-byte blocks), CJK runs, hyphens and breaks at
    // every offset, and characters without a composition boundary right after
    // a block or a run, through one reused normaliser.
    let pieces = [
        "ABCDEFGHIJKLMNOPQRSTUVWXYZ",
        "the Quick brown fox\tjumps over",
        "0123456789abcdef",
        "    \r\n  ",
        "-",
        "-\n",
        "- \n ",
        "\u{2010}\n",
        "e\u{301}",
        "\u{301}",
        "\u{3099}",
        "大模型检索增强生成",
        "⼤⼈",
        "ＡＢＣ１２３",
        "，。：（）",
        "가\u{11A8}",
        "😀",
        "ς Σ",
        "\u{AD}\u{200B}",
        "\u{3000}",
        "x",
        " ",
        "\n",
    ];
    let mut next = xorshift(0x2545_F491_4F6C_DD1Du64);
    let mut norm = Normalizer::new();
    let mut dehy = Vec::new();
    for _ in 0..30_000 {
        let len = (next() % 14) as usize;
        let s: String = (0..len).map(|_| pieces[next() as usize % pieces.len()]).collect();
        norm.run(&s);
        assert_eq!(std::str::from_utf8(&norm.out).unwrap(), plain_normalize(&s), "{s:?}");
        let got = norm.has_soft_hyphens().then(|| {
            norm.dehyphenated_into(&mut dehy);
            String::from_utf8(dehy.clone()).unwrap()
        });
        assert_eq!(got, plain_dehyphenated(&s), "{s:?}");
    }
}

#[test]
fn run_phrases_over_repeated_ascii_texts_find_phrases_only_near_copies_hold() {
    // ASCII texts drawn from a pool (grouped when the run-wide index is
    // probed), and near copies of pool texts (five bytes changed) that alone
    // hold some phrases: a near copy is not taken for a copy of its original.
    let mut next = xorshift(0x2545_F491_4F6C_DD1Du64);
    let pool: Vec<String> = (0..40).map(|i| format!("{:<300}", format!("pool text {i} on retrieval and ranking"))).collect();
    let n_cases = 3 * batch::RUN_BATCH_MIN;
    let (mut texts, mut chunk_offsets, mut phrases, mut phrase_offsets) = (Vec::new(), vec![0usize], Vec::new(), vec![0usize]);
    for c in 0..n_cases {
        for _ in 0..8 {
            let mut t = pool[(next() % 40) as usize].clone();
            if next().is_multiple_of(50) {
                t.replace_range(200..205, &format!("n{:04}", c % 10_000));
            }
            texts.push(t);
        }
        chunk_offsets.push(texts.len());
        phrases.push(format!("N{:04}", (c + 7) % n_cases));
        phrases.push(format!("Pool Text {}", c % 60));
        phrase_offsets.push(phrases.len());
    }
    let everywhere = phrases_in_texts(&phrases, &texts).unwrap();
    assert!(everywhere.iter().step_by(2).any(|&f| f) && everywhere.iter().step_by(2).any(|&f| !f));
    let mut run = RunPhrases::new(&phrases);
    for cases in (0..n_cases).collect::<Vec<_>>().chunks(200) {
        streamed_matches_alone(&mut run, &part_of(&phrase_offsets, &phrases, &chunk_offsets, &texts, cases));
    }
    assert_eq!(run.found(), everywhere);
}

#[test]
fn a_phrase_only_in_a_text_nearly_equal_to_a_repeated_one_is_found() {
    let base = "a".repeat(200);
    let mut t = base.clone().into_bytes();
    t[20..24].copy_from_slice(b"qzqz");
    let other = String::from_utf8(t).unwrap();
    let texts: Vec<&str> = vec![&base, &base, &other, &base];
    let phrases = vec!["QZQZ", "aaaa", "qzqzq"];
    assert_eq!(phrases_in_texts(&phrases, &texts).unwrap(), vec![true, true, false]);
    let files = vec!["f"; 4];
    let empty: Vec<&str> = vec![];
    let b = EvidenceBatch {
        file_offsets: &[0, 0, 0, 0],
        expected_files: &empty,
        phrase_offsets: &[0, 1, 1, 3],
        phrases: &phrases,
        chunk_offsets: &[0, 2, 3, 4],
        chunk_files: &files,
        chunk_texts: &texts,
    };
    assert_eq!(match_evidence_with(&b, true).unwrap().phrase_in_run, vec![true, true, false]);
}

/// Cases `cases` of `b` as a batch of their own: its columns, rebased.
struct Part {
    phrase_offsets: Vec<usize>,
    phrases: Vec<String>,
    chunk_offsets: Vec<usize>,
    chunk_texts: Vec<String>,
    chunk_files: Vec<String>,
    file_offsets: Vec<usize>,
    ids: Vec<usize>,
}

/// `p` matched as a slice of the run `run` streams gives what it gives alone.
fn streamed_matches_alone(run: &mut RunPhrases, p: &Part) {
    let empty: Vec<String> = vec![];
    let b = EvidenceBatch {
        file_offsets: &p.file_offsets,
        expected_files: &empty,
        phrase_offsets: &p.phrase_offsets,
        phrases: &p.phrases,
        chunk_offsets: &p.chunk_offsets,
        chunk_files: &p.chunk_files,
        chunk_texts: &p.chunk_texts,
    };
    assert_eq!(run.match_batch(&b, &p.ids).unwrap(), match_evidence(&b).unwrap());
}

fn part_of(phrase_offsets: &[usize], phrases: &[String], chunk_offsets: &[usize], texts: &[String], cases: &[usize]) -> Part {
    let mut p = Part {
        phrase_offsets: vec![0],
        phrases: Vec::new(),
        chunk_offsets: vec![0],
        chunk_texts: Vec::new(),
        chunk_files: Vec::new(),
        file_offsets: vec![0; cases.len() + 1],
        ids: Vec::new(),
    };
    for &c in cases {
        let own = phrase_offsets[c]..phrase_offsets[c + 1];
        p.phrases.extend_from_slice(&phrases[own.clone()]);
        p.ids.extend(own);
        p.phrase_offsets.push(p.phrases.len());
        let chunks = &texts[chunk_offsets[c]..chunk_offsets[c + 1]];
        p.chunk_texts.extend_from_slice(chunks);
        p.chunk_files.extend(chunks.iter().map(|_| "f".to_string()));
        p.chunk_offsets.push(p.chunk_texts.len());
    }
    p
}

#[test]
fn run_phrases_over_slices_agree_with_a_search_of_all_texts() {
    // The run of the test above in slices of random sizes and a shuffled
    // order of cases (a phrase's own case before or after the chunk holding
    // it): each slice matches as alone, and the index ends with the answer
    // of a search of every text.
    let mut next = xorshift(0x5DEE_CE66_D1CE_4E5Bu64);
    let words = ["ab", "rag", "模型", "retrieval", "chunk", "大", "evidence", "x-\ny"];
    let n_cases = 2 * batch::RUN_BATCH_MIN + 300;
    let (mut texts, mut chunk_offsets, mut phrases, mut phrase_offsets) = (Vec::new(), vec![0usize], Vec::new(), vec![0usize]);
    for c in 0..n_cases {
        for _ in 0..(if c % 97 == 5 { 0 } else { 1 + next() % 4 }) {
            let mut t: String = (0..next() % 12).map(|_| words[(next() % 8) as usize]).collect::<Vec<_>>().join(" ");
            if next().is_multiple_of(5) {
                t.push_str(&format!(" own{}case", (c + (next() % 3) as usize) % n_cases));
            }
            texts.push(t);
        }
        chunk_offsets.push(texts.len());
        for _ in 0..(next() % 3) {
            phrases.push((0..1 + next() % 3).map(|_| words[(next() % 8) as usize]).collect::<Vec<_>>().join(""));
        }
        phrases.push(match c % 4 {
            0 => format!("Own{c} Case"),
            1 => format!("nowhere{c}"),
            _ => String::new(),
        });
        phrase_offsets.push(phrases.len());
    }
    let everywhere = phrases_in_texts(&phrases, &texts).unwrap();
    assert!(everywhere.iter().any(|&f| f) && everywhere.iter().any(|&f| !f));
    let mut order: Vec<usize> = (0..n_cases).collect();
    for i in (1..n_cases).rev() {
        order.swap(i, (next() % (i as u64 + 1)) as usize);
    }
    let mut run = RunPhrases::new(&phrases);
    let mut at = 0;
    while at < n_cases {
        let size = (1 + next() % 400) as usize;
        let cases = &order[at..(at + size).min(n_cases)];
        at += cases.len();
        streamed_matches_alone(&mut run, &part_of(&phrase_offsets, &phrases, &chunk_offsets, &texts, cases));
    }
    assert_eq!(run.found(), everywhere);
}

#[test]
fn run_phrases_refuse_ids_of_other_phrases() {
    let phrases = vec!["alpha", "beta"];
    let mut run = RunPhrases::new(&phrases);
    let texts = vec!["alpha beta"];
    let files = vec!["f"];
    let empty: Vec<&str> = vec![];
    let one = vec!["Alpha"];
    let b = EvidenceBatch {
        file_offsets: &[0, 0],
        expected_files: &empty,
        phrase_offsets: &[0, 1],
        phrases: &one,
        chunk_offsets: &[0, 1],
        chunk_files: &files,
        chunk_texts: &texts,
    };
    assert!(run.match_batch(&b, &[1]).is_err());
    assert!(run.match_batch(&b, &[2]).is_err());
    assert!(run.match_batch(&b, &[]).is_err());
    assert_eq!(run.found(), vec![false, false]);
    run.match_batch(&b, &[0]).unwrap();
    assert_eq!(run.found(), vec![true, true]);
}

#[test]
fn raw_prefilter_sources_cover_every_code_point_in_context() {
    // The prefilter's soundness: a character appears in the normalised form
    // of a text only if the text has one of its sources. Every assigned-plane
    // scalar value, alone and where it can compose (after a letter, before a combining
    // acute, before a Hangul vowel, before the kana voicing mark).
    use super::prefilter::Sources;
    let sources = Sources::get();
    let targets = ['0', 'a', 'i', 'k', 'f', 'σ', '\u{307}', '大', '一', 'é', '\u{1100}', '\u{AC00}', 'が', 'ß', 'ǆ'];
    let of: Vec<Vec<char>> = targets.iter().map(|&r| sources.of(r)).collect();
    let contexts: [(&str, &str); 5] = [("", ""), ("A", ""), ("", "\u{301}"), ("", "\u{1161}"), ("", "\u{3099}")];
    let mut s = String::new();
    // Planes 0-3 and the tags/variation selectors of plane 14: planes 4-13 are
    // unassigned and 15-16 private use (no decomposition, no case), and
    // skipping them keeps the debug-build test suite fast.
    for c in (0u32..0x4_0000).chain(0xE_0000..0xE_1000).filter_map(char::from_u32) {
        for (before, after) in contexts {
            s.clear();
            s.push_str(before);
            s.push(c);
            s.push_str(after);
            let normalised = normalize(&s);
            for (r, of_r) in targets.iter().zip(&of) {
                if normalised.contains(*r) {
                    assert!(s.chars().any(|x| of_r.binary_search(&x).is_ok()), "{:?} normalises to {normalised:?} with {r:?} but has none of its sources", s);
                }
            }
        }
    }
    assert!(of[0].contains(&'０') && of[0].contains(&'⁰') && !of[0].contains(&'1'));
    assert!(of[7].contains(&'⼤'));
    assert!(of[3].contains(&'K') && of[3].contains(&'\u{212A}')); // Kelvin sign
}

#[test]
fn raw_prefilter_skips_only_texts_without_the_phrases() {
    use super::prefilter::RawPrefilter;
    let mut next = xorshift(0xD1B5_4A32_D192_ED03u64);
    let pieces = ["evidence", " ", "\n", "-\n", "0", "１", "⁴", "①", "BM25", "⼤", "大", "模型", "ｅ", "e\u{301}", "Σ", "ς", "\u{AD}", "x"];
    let phrases = ["evidence0042x", "大模型1", "σ7", "4", "é"];
    let norm: Vec<String> = phrases.iter().map(|p| normalize(p)).collect();
    let raw_sample = ["the evidence of 25 BM25", "大模型", "Evidence", "plain", "ｓｏｍｅ", "σ"];
    let sample: Vec<Vec<u8>> = raw_sample.iter().map(|t| normalize(t).into_bytes()).collect();
    for k in 1..=phrases.len() {
        let prefilter = RawPrefilter::new(&norm[..k], &sample, &raw_sample);
        if k == 1 {
            assert!(prefilter.is_useful());
        }
        let mut skipped = 0;
        for _ in 0..20_000 {
            let t: String = (0..(next() % 8)).map(|_| pieces[(next() % pieces.len() as u64) as usize]).collect();
            let forms = [Some(normalize(&t)), normalize_dehyphenated(&t)];
            let holds = norm[..k].iter().any(|p| forms.iter().flatten().any(|f| f.contains(p.as_str())));
            if !prefilter.may_contain(&t) {
                skipped += 1;
                assert!(!holds, "{t:?} skipped but holds one of {:?}", &norm[..k]);
            }
        }
        assert_eq!(skipped > 0, prefilter.is_useful(), "{k} phrases: {skipped} skipped");
    }
    // Many sources (a leading Hangul jamo: every syllable starting with it): cut to prefixes, still a test.
    assert!(super::prefilter::Sources::get().of('\u{1100}').len() > 500);
    let hangul = RawPrefilter::new(&["\u{1100}"], &sample, &raw_sample);
    assert!(hangul.is_useful() && hangul.may_contain("각") && !hangul.may_contain("abc"));
    // A phrase whose rarest character every sampled text has: no test, every text passes.
    let common = ["abc", "cab", "bca", "ab"];
    let common_norm: Vec<Vec<u8>> = common.iter().map(|t| normalize(t).into_bytes()).collect();
    let no_test = RawPrefilter::new(&["ab"], &common_norm, &common);
    assert!(!no_test.is_useful() && no_test.may_contain("xyz"));
}

#[test]
fn run_wide_finds_orphans_in_compatibility_forms_of_other_cases() {
    // Phrases not found in their own case, present in another case only in a
    // form the prefilter must let through: full-width digits, a Kangxi
    // radical, a decomposed accent, a line-break hyphen, a final sigma.
    let texts: Vec<String> = ["nothing here", "plain words", "ＩＤ００４２ and ⼤模型", "cafe\u{301}", "retrie-\nval", "ΟΔΟΣ"].iter().map(|s| s.to_string()).collect();
    let phrases: Vec<String> = ["id0042", "大模型", "café", "retrieval", "οδοσ", "nowhere9", "", "plain"].iter().map(|s| s.to_string()).collect();
    // Case 0: texts 0..2, phrases 0..3; case 1: texts 2..4, phrases 3..6; case 2: texts 4..6, phrases 6..8:
    // every non-empty phrase but "nowhere9" is only in another case's texts.
    let b = EvidenceBatch {
        file_offsets: &[0, 0, 0, 0],
        expected_files: &Vec::<String>::new(),
        phrase_offsets: &[0, 3, 6, 8],
        phrases: &phrases,
        chunk_offsets: &[0, 2, 4, 6],
        chunk_files: &vec![String::from("f"); 6],
        chunk_texts: &texts,
    };
    let r = match_evidence_with(&b, true).unwrap();
    assert_eq!(r.phrase_in_run, vec![true, true, true, true, true, false, false, true]);
    assert_eq!(r.phrase_in_run, phrases_in_texts(&phrases, &texts).unwrap());
}

/// Every text of `texts` has, from `shared`, the normal forms it has alone
/// (or none: normalised where it is used); the number of texts without.
fn own_texts_checking_forms(shared: &shared::SharedNorms, texts: &[String]) -> usize {
    let mut norm = Normalizer::new();
    let mut own = 0;
    for (k, t) in texts.iter().enumerate() {
        match shared.get(texts, k, &mut norm) {
            None => {
                assert!(shared.is_own(k));
                own += 1;
            }
            Some(n) => {
                assert_eq!(std::str::from_utf8(&n.out).unwrap(), normalize(t), "text {k}");
                let dehyphenated = n.dehyphenated.as_deref().map(|d| std::str::from_utf8(d).unwrap().to_string());
                assert_eq!(dehyphenated, normalize_dehyphenated(t), "text {k}");
            }
        }
    }
    own
}

#[test]
fn shared_norms_group_copies_and_tell_apart_texts_of_the_same_hash() {
    let base = format!("{:<100}{}", "Ｒetrie-\nval of ⼤ chunks", "模型".repeat(50));
    let mut near = base.clone().into_bytes();
    near[90] = b'q';
    let near = String::from_utf8(near).unwrap();
    let other = "ΟΔΟΣ retrie-\nval 大模型".to_string();
    let texts = vec![base.clone(), near.clone(), base.clone(), other.clone(), base.clone()];
    let shared = shared::SharedNorms::of(&texts, 0..texts.len(), false).expect("3 distinct of 5 texts");
    assert_eq!(shared.groups(), 3);
    assert_eq!(own_texts_checking_forms(&shared, &texts), 0);
    let mut norm = Normalizer::new();
    assert!(shared.get(&texts, 0, &mut norm).unwrap().dehyphenated.as_deref().is_some_and(|d| d.starts_with(b"retrieval")));
    // Copies share their slot: the same normal form, not an equal one.
    let first = shared.get(&texts, 0, &mut norm).unwrap() as *const _;
    assert_eq!(shared.get(&texts, 4, &mut norm).unwrap() as *const _, first);
    // Every text of one hash: those unlike the first are normalised where used, never given its forms.
    let collide = shared::SharedNorms::with_hash(&texts, 0..texts.len(), false, |_| 7).expect("1 group");
    assert_eq!(collide.groups(), 1);
    assert_eq!((0..5).map(|k| collide.is_own(k)).collect::<Vec<_>>(), vec![false, true, false, true, false]);
    assert_eq!(own_texts_checking_forms(&collide, &texts), 2);
    // More than 3/4 of the texts distinct: none are grouped.
    let distinct: Vec<String> = (0..8).map(|i| format!("文本 {i}")).collect();
    assert!(shared::SharedNorms::of(&distinct, 0..8, false).is_none());
    assert!(shared::SharedNorms::of(&distinct, 2..3, false).is_none());
    // A sample of 4,096 of 20,000 texts tells a pool of 1,000 from distinct texts.
    let pooled: Vec<String> = (0..20_000).map(|i| format!("文本 {}", (i * 7919) % 1000)).collect();
    assert_eq!(shared::SharedNorms::of(&pooled, 0..20_000, false).map(|s| s.groups()), Some(1000));
    let distinct: Vec<String> = (0..20_000).map(|i| format!("文本 {i}")).collect();
    assert!(shared::SharedNorms::of(&distinct, 0..20_000, false).is_none());
    // Texts mostly ASCII are normalised where used, repeated or not.
    let ascii: Vec<String> = (0..20_000).map(|i| format!("text {} of a pool in English, with one ⼤", (i * 7919) % 1000)).collect();
    assert!(shared::SharedNorms::of(&ascii, 0..20_000, false).is_none());
    // ... unless they will probe the run-wide index: then its copies are found, and probed once.
    assert_eq!(shared::SharedNorms::of(&ascii, 0..20_000, true).map(|s| s.groups()), Some(1000));
    assert!(shared::SharedNorms::of(&distinct, 0..20_000, true).is_none());
}

#[test]
fn copies_sharing_normal_forms_match_as_texts_normalised_one_by_one() {
    // Texts from a pool, with compatibility forms, line-break hyphens and near
    // copies (bytes changed outside the key's windows) holding phrases their
    // originals lack; the phrases of a case are drawn from any text.
    let mut next = xorshift(0x0DDB_A11C_AFE5_EED5u64);
    let words = ["rag", "Ｒetrie-\nval", "模型", "⼤", "chunk", "ﬁle", "ΟΔΟΣ", "evidence", "x-\ny", "12"];
    for pool_share in [10u64, 50, 90] {
        let n_cases = 600;
        let pool_size = (n_cases * 8 * pool_share as usize / 100).max(1);
        let pool: Vec<String> = (0..pool_size)
            .map(|i| {
                let head = format!("{:<120}", format!("text{i} ascii head"));
                let body: Vec<&str> = (0..10 + next() % 60).map(|_| words[(next() % 10) as usize]).collect();
                format!("{head}{}", body.join(" "))
            })
            .collect();
        let (mut texts, mut files, mut chunk_offsets) = (Vec::new(), Vec::new(), vec![0usize]);
        let (mut phrases, mut phrase_offsets, mut expected, mut file_offsets) = (Vec::new(), vec![0usize], Vec::new(), vec![0usize]);
        for c in 0..n_cases {
            for _ in 0..next() % 15 {
                let mut t = pool[(next() % pool_size as u64) as usize].clone();
                if next().is_multiple_of(7) {
                    t.replace_range(90..94, "qzqz");
                }
                texts.push(t);
                files.push(format!("doc{}.md", next() % 5));
            }
            chunk_offsets.push(texts.len());
            for _ in 0..next() % 4 {
                phrases.push(match next() % 4 {
                    0 => "QZQZ".to_string(),
                    1 => "retrieval".to_string(),
                    2 => format!("text{}ascii", next() % pool_size as u64),
                    _ => words[(next() % 10) as usize].to_string(),
                });
            }
            phrase_offsets.push(phrases.len());
            if c % 3 == 0 {
                expected.push(format!("doc{}.md", next() % 5));
            }
            file_offsets.push(expected.len());
        }
        let b: EvidenceBatch<'_, dyn Strings> = EvidenceBatch {
            file_offsets: &file_offsets,
            expected_files: &expected,
            phrase_offsets: &phrase_offsets,
            phrases: &phrases,
            chunk_offsets: &chunk_offsets,
            chunk_files: &files,
            chunk_texts: &texts,
        };
        let streamed = |batch: &EvidenceBatch<'_, dyn Strings>| {
            let mut run = RunPhrases::new(&phrases);
            let ids: Vec<usize> = (0..phrases.len()).collect();
            let mut res = run.match_batch(batch, &ids).unwrap();
            res.phrase_in_run = run.found();
            res
        };
        // The pool of 10% is grouped, the one of 90% normalised text by text.
        assert_eq!(shared::SharedNorms::of(&texts, 0..texts.len(), false).is_some(), pool_share < 50, "pool of {pool_share}%");
        // Grouped by length, near copies collide with their originals.
        if let Some(by_len) = shared::SharedNorms::with_hash(&texts, 0..texts.len(), false, |t| t.len() as u64) {
            assert!(own_texts_checking_forms(&by_len, &texts) > 0);
        }
        let shared = batch::match_evidence_with(&b, true).unwrap();
        assert_eq!(shared, batch::match_evidence_unshared(&b, true).unwrap(), "pool of {pool_share}%");
        assert!(shared.phrases_found.iter().any(|&f| f > 0) && shared.relevant.iter().any(|&r| !r));
        assert_eq!(streamed(&b), shared, "streamed, pool of {pool_share}%");
        // The same texts dictionary-encoded: the same answers, alone and streamed.
        let (values, value_ids) = dictionary_of(&texts);
        let dict = DictStrings::new(&values, &value_ids).unwrap();
        let d = EvidenceBatch { chunk_texts: &dict as &dyn Strings, ..b };
        assert_eq!(batch::match_evidence_with(&d, true).unwrap(), shared, "dictionary, pool of {pool_share}%");
        assert_eq!(streamed(&d), shared, "dictionary streamed, pool of {pool_share}%");
    }
}

/// `texts` dictionary-encoded as a Parquet reader may give them: the values in
/// another order than first seen, one of them used by no text.
fn dictionary_of(texts: &[String]) -> (Vec<String>, Vec<u32>) {
    let mut values: Vec<String> = texts.to_vec();
    values.sort();
    values.dedup();
    values.reverse();
    values.insert(values.len() / 2, "a value no text uses".to_string());
    let index: std::collections::HashMap<&str, u32> = values.iter().enumerate().map(|(i, v)| (v.as_str(), i as u32)).collect();
    let ids = texts.iter().map(|t| index[t.as_str()]).collect();
    (values, ids)
}

#[test]
fn dictionary_strings_group_copies_by_index() {
    let texts: Vec<String> = (0..4000).map(|i| format!("模型 text {}", i % 100)).collect();
    let (values, ids) = dictionary_of(&texts);
    let dict = DictStrings::new(&values, &ids).unwrap();
    assert!((0..texts.len()).all(|i| dict.get(i) == texts[i]));
    // Grouped by index whatever the text (no hashing to pay for), ASCII or not, probed or not.
    let ascii: Vec<String> = (0..4000).map(|i| format!("ascii text {}", i % 100)).collect();
    let (ascii_values, ascii_ids) = dictionary_of(&ascii);
    let ascii_dict = DictStrings::new(&ascii_values, &ascii_ids).unwrap();
    for probed in [false, true] {
        assert_eq!(shared::SharedNorms::of(&dict, 0..4000, probed).map(|s| s.groups()), Some(100));
        assert_eq!(shared::SharedNorms::of(&ascii_dict, 1000..4000, probed).map(|s| s.groups()), Some(100));
    }
    // Distinct texts are not grouped, dictionary or not.
    let distinct: Vec<String> = (0..4000).map(|i| format!("text {i}")).collect();
    let (distinct_values, distinct_ids) = dictionary_of(&distinct);
    assert!(shared::SharedNorms::of(&DictStrings::new(&distinct_values, &distinct_ids).unwrap(), 0..4000, true).is_none());
    // An index past the values is refused.
    assert!(DictStrings::new(&values, &[0, values.len() as u32]).is_err());
}

#[test]
fn a_case_with_a_hundred_thousand_phrases_is_matched_in_linear_time() {
    // Each phrase was looked up among the case's patterns so far with a scan: quadratic
    // (80,000 phrases of one case took 11 s through ragmeter.evidence.match_relevance).
    let phrases: Vec<String> = (0..100_000).map(|i| format!("phrase number {i:06} here")).chain(["phrase number 000007 here".to_string()]).collect();
    // Speed is not asserted (benchmarks only): the quadratic scan made this test slow (49 s), not failing.
    let m = PhraseMatcher::new(phrases.iter().map(String::as_str)).unwrap();
    assert_eq!((m.len(), m.patterns_len()), (100_001, 100_000));
    let found = m.found_in("… Phrase number 000007 here …");
    assert_eq!(found.iter().filter(|&&f| f).count(), 2);
    assert!(found[7] && found[100_000]);
}
