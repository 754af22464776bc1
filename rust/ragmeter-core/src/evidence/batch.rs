//! Batch relevance over the columns of a whole run, in parallel over cases.

use rayon::prelude::*;
use rustc_hash::FxHashMap;

use super::matcher::PhraseMatcher;
use super::normalize::{file_matches, normalize, normalize_file_name, Normalizer};
use super::prefilter::RawPrefilter;
use super::run_index::{RunIndex, Seen};
use super::shared::SharedNorms;
use crate::error::{Error, Result};


/// Random access to a column of strings.
pub trait Strings: Sync {
    fn len(&self) -> usize;
    fn get(&self, i: usize) -> &str;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// For a dictionary-encoded column ([`DictStrings`]): per string, the
    /// index of its value, and the number of values. Strings with the same
    /// index are equal, so copies are known without hashing or comparing a
    /// byte (see `shared::SharedNorms`).
    fn value_ids(&self) -> Option<(&[u32], usize)> {
        None
    }
}

impl<T: AsRef<str> + Sync> Strings for [T] {
    fn len(&self) -> usize {
        <[T]>::len(self)
    }
    fn get(&self, i: usize) -> &str {
        self[i].as_ref()
    }
}

impl<T: AsRef<str> + Sync> Strings for Vec<T> {
    fn len(&self) -> usize {
        <[T]>::len(self)
    }
    fn get(&self, i: usize) -> &str {
        self[i].as_ref()
    }
}

impl<S: Strings + ?Sized> Strings for &S {
    fn len(&self) -> usize {
        (**self).len()
    }
    fn get(&self, i: usize) -> &str {
        (**self).get(i)
    }
    fn value_ids(&self) -> Option<(&[u32], usize)> {
        (**self).value_ids()
    }
}

/// A dictionary-encoded string column (as a Parquet reader gives a column
/// written with dictionary pages): string `i` is value `ids[i]` of `values`.
pub struct DictStrings<V, I = Vec<u32>> {
    values: V,
    ids: I,
}

impl<V: Strings, I: AsRef<[u32]>> DictStrings<V, I> {
    /// Fails when an index is not one of `values`'.
    pub fn new(values: V, ids: I) -> Result<Self> {
        let n = values.len();
        if let Some(i) = ids.as_ref().par_iter().position_first(|&id| id as usize >= n) {
            return Err(Error::input(format!("dictionary index {} of string {i} is past the {n} values", ids.as_ref()[i])));
        }
        Ok(DictStrings { values, ids })
    }

    /// The values (to validate them in place, say).
    pub fn values_mut(&mut self) -> &mut V {
        &mut self.values
    }
}

impl<V: Strings, I: AsRef<[u32]> + Sync> Strings for DictStrings<V, I> {
    fn len(&self) -> usize {
        self.ids.as_ref().len()
    }
    fn get(&self, i: usize) -> &str {
        self.values.get(self.ids.as_ref()[i] as usize)
    }
    fn value_ids(&self) -> Option<(&[u32], usize)> {
        Some((self.ids.as_ref(), self.values.len()))
    }
}

/// Column inputs for [`match_evidence`]. All offsets have `n_cases + 1`
/// entries, start at 0, never decrease and end at the length of their column.
pub struct EvidenceBatch<'a, S: Strings + ?Sized> {
    /// Case `c`'s expected files are `expected_files[file_offsets[c]..file_offsets[c + 1]]`.
    pub file_offsets: &'a [usize],
    pub expected_files: &'a S,
    /// Case `c`'s evidence phrases are `phrases[phrase_offsets[c]..phrase_offsets[c + 1]]`.
    pub phrase_offsets: &'a [usize],
    pub phrases: &'a S,
    /// Case `c`'s retrieved chunks, in rank order, are `chunk_offsets[c]..chunk_offsets[c + 1]`.
    pub chunk_offsets: &'a [usize],
    pub chunk_files: &'a S,
    pub chunk_texts: &'a S,
}

/// Output of [`match_evidence`]. Ranks are 1-based positions within the case's
/// retrieved list; 0 means "never". To restrict to the top k, compare a rank
/// with k (`0 < rank <= k`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EvidenceResult {
    /// Per case: has expected files or at least one non-empty phrase.
    pub labeled: Vec<bool>,
    /// Per chunk: its file is one of the case's expected files (always true when none are given).
    pub file_match: Vec<bool>,
    /// Per chunk: number of the case's (non-empty) phrases its text contains, whatever its file.
    pub phrases_found: Vec<u32>,
    /// Per chunk: relevant by the rule in the module docs (false in unlabelled cases).
    pub relevant: Vec<bool>,
    /// Per phrase: rank of the first chunk *of an expected file* containing it.
    pub phrase_first_rank: Vec<u32>,
    /// Per phrase: rank of the first chunk of *any* file containing it.
    pub phrase_any_rank: Vec<u32>,
    /// Per phrase: normalises to the empty string (ignored).
    pub phrase_empty: Vec<bool>,
    /// Per expected file: rank of the first chunk from that file.
    pub file_first_rank: Vec<u32>,
    /// Per phrase: occurs in at least one retrieved chunk of *any* case of the
    /// batch (false for empty phrases). Filled by [`match_evidence_with`] with
    /// `run_wide`, empty otherwise.
    pub phrase_in_run: Vec<bool>,
}

struct CaseOut {
    labeled: bool,
    file_match: Vec<bool>,
    phrases_found: Vec<u32>,
    relevant: Vec<bool>,
    phrase_first_rank: Vec<u32>,
    phrase_any_rank: Vec<u32>,
    phrase_empty: Vec<bool>,
    file_first_rank: Vec<u32>,
}

fn check_offsets(offsets: &[usize], n_cases: usize, total: usize, name: &str) -> Result<()> {
    if offsets.len() != n_cases + 1 {
        return Err(Error::input(format!("{name}: expected {} offsets (cases + 1), got {}", n_cases + 1, offsets.len())));
    }
    if offsets[0] != 0 || offsets.windows(2).any(|w| w[0] > w[1]) || offsets[n_cases] != total {
        return Err(Error::input(format!("{name}: offsets must start at 0, never decrease and end at {total}")));
    }
    Ok(())
}

/// The offsets and lengths of `b`'s columns agree (`n_cases` cases).
fn check_batch<S: Strings + ?Sized>(b: &EvidenceBatch<'_, S>, n_cases: usize) -> Result<()> {
    if b.chunk_offsets.is_empty() {
        return Err(Error::input("chunk offsets: expected cases + 1 entries, got 0"));
    }
    check_offsets(b.file_offsets, n_cases, b.expected_files.len(), "expected-file offsets")?;
    check_offsets(b.phrase_offsets, n_cases, b.phrases.len(), "phrase offsets")?;
    check_offsets(b.chunk_offsets, n_cases, b.chunk_texts.len(), "chunk offsets")?;
    if b.chunk_files.len() != b.chunk_texts.len() {
        return Err(Error::input(format!(
            "chunk files and chunk texts differ in length ({} vs {})",
            b.chunk_files.len(),
            b.chunk_texts.len()
        )));
    }
    Ok(())
}

struct Scratch {
    norm: Normalizer,
    dehy: Vec<u8>,
    pat: Vec<bool>,
}


/// Match case `c`; with `run` also probe the run-wide index with each chunk
/// text, normalised once for both (and once for all its copies with `shared`).
fn match_case<S: Strings + ?Sized>(
    b: &EvidenceBatch<'_, S>,
    norm_phrases: &[String],
    c: usize,
    scratch: &mut Scratch,
    run: Option<&RunIndex>,
    shared: Option<&SharedNorms>,
) -> Result<CaseOut> {
    let files: Vec<String> = (b.file_offsets[c]..b.file_offsets[c + 1])
        .map(|i| normalize_file_name(b.expected_files.get(i)))
        .collect();
    let matcher = PhraseMatcher::from_normalized(norm_phrases[b.phrase_offsets[c]..b.phrase_offsets[c + 1]].iter().map(String::as_str))?;
    let chunks = b.chunk_offsets[c]..b.chunk_offsets[c + 1];
    let n_chunks = chunks.len();
    let has_files = !files.is_empty();
    let has_phrases = matcher.has_phrases();
    let labeled = has_files || has_phrases;

    let mut out = CaseOut {
        labeled,
        file_match: Vec::with_capacity(n_chunks),
        phrases_found: Vec::with_capacity(n_chunks),
        relevant: Vec::with_capacity(n_chunks),
        phrase_first_rank: vec![0; matcher.len()],
        phrase_any_rank: vec![0; matcher.len()],
        phrase_empty: matcher.empty_flags().to_vec(),
        file_first_rank: vec![0; files.len()],
    };
    // First rank per unique pattern (any file / expected file).
    let n_pat = matcher.patterns_len();
    let mut pat_any = vec![0u32; n_pat];
    let mut pat_first = vec![0u32; n_pat];

    for (r, k) in chunks.enumerate() {
        let rank = (r + 1) as u32;
        let fm = if has_files {
            let name = normalize_file_name(b.chunk_files.get(k));
            let mut any = false;
            for (j, f) in files.iter().enumerate() {
                if file_matches(f, &name) {
                    any = true;
                    if out.file_first_rank[j] == 0 {
                        out.file_first_rank[j] = rank;
                    }
                }
            }
            any
        } else {
            true
        };
        let mut n_found = 0u32;
        // Asked before normalising: a case without phrases then normalises a text only for its first copy.
        // A text of no group (the block is not grouped, or the text only shares its group's hash) is probed.
        let probe = run.filter(|r| !r.all_found() && shared.and_then(|s| s.claim(k)).unwrap_or(true));
        if has_phrases || probe.is_some() {
            let (text, dehyphenated) = normal_forms(b.chunk_texts, k, shared, &mut scratch.norm, &mut scratch.dehy);
            if let Some(r) = probe {
                r.scan(text);
                if let Some(d) = dehyphenated {
                    r.scan(d);
                }
            }
            if !has_phrases {
                out.file_match.push(fm);
                out.phrases_found.push(0);
                out.relevant.push(labeled && fm);
                continue;
            }
            scratch.pat.clear();
            scratch.pat.resize(n_pat, false);
            matcher.scan(text, &mut scratch.pat);
            if let Some(d) = dehyphenated {
                matcher.scan(d, &mut scratch.pat);
            }
            for (p, &f) in scratch.pat.iter().enumerate() {
                if f {
                    n_found += matcher.owners(p).len() as u32;
                    if pat_any[p] == 0 {
                        pat_any[p] = rank;
                    }
                    if fm && pat_first[p] == 0 {
                        pat_first[p] = rank;
                    }
                }
            }
        }
        out.file_match.push(fm);
        out.phrases_found.push(n_found);
        out.relevant.push(labeled && fm && (!has_phrases || n_found > 0));
    }
    for p in 0..n_pat {
        for &o in matcher.owners(p) {
            out.phrase_any_rank[o as usize] = pat_any[p];
            out.phrase_first_rank[o as usize] = pat_first[p];
        }
    }
    Ok(out)
}

/// Text `k`'s normal form, and its form without line-break hyphens when it
/// has some: from `shared` when it holds them, else normalised into `norm`
/// and `dehy`.
fn normal_forms<'a, S: Strings + ?Sized>(
    texts: &S,
    k: usize,
    shared: Option<&'a SharedNorms>,
    norm: &'a mut Normalizer,
    dehy: &'a mut Vec<u8>,
) -> (&'a [u8], Option<&'a [u8]>) {
    if let Some(n) = shared.and_then(|s| s.get(texts, k, norm)) {
        return (&n.out, n.dehyphenated.as_deref());
    }
    norm.run(texts.get(k));
    let dehyphenated = norm.has_soft_hyphens();
    if dehyphenated {
        norm.dehyphenated_into(dehy);
    }
    (&norm.out, dehyphenated.then_some(&dehy[..]))
}

/// Decide relevance for every retrieved chunk of every case, in parallel over
/// cases. See the module docs for the rules and [`EvidenceResult`] for the
/// outputs.
pub fn match_evidence<S: Strings + ?Sized>(b: &EvidenceBatch<'_, S>) -> Result<EvidenceResult> {
    match_evidence_with(b, false)
}

/// [`match_evidence`], and with `run_wide` also
/// [`EvidenceResult::phrase_in_run`]: which phrases occur in any retrieved
/// chunk of the whole batch (evidence no chunk of the run contains is often an
/// annotation slip).
///
/// A phrase found in its own case's chunks is in the run; only the others
/// (the *orphans*) need a search of every text, so the check runs after the
/// match, once the orphans are known: one [`RunIndex`] over the distinct
/// orphans, probed with every chunk text that may hold one. A text is
/// normalised again for this only when its raw bytes pass the
/// [`RawPrefilter`] (it has a character that can normalise to a character
/// each orphan needs); where the orphans have characters the texts lack (an
/// identifier, a number, a word of another script) most texts are skipped
/// unread by the normaliser. The search ends once every orphan is found.
pub fn match_evidence_with<S: Strings + ?Sized>(b: &EvidenceBatch<'_, S>, run_wide: bool) -> Result<EvidenceResult> {
    match_evidence_sharing(b, run_wide, true)
}

/// [`match_evidence_with`], normalising every text where it is used (no
/// [`SharedNorms`]): what sharing must not change.
#[cfg(test)]
pub(super) fn match_evidence_unshared<S: Strings + ?Sized>(b: &EvidenceBatch<'_, S>, run_wide: bool) -> Result<EvidenceResult> {
    match_evidence_sharing(b, run_wide, false)
}

fn match_evidence_sharing<S: Strings + ?Sized>(b: &EvidenceBatch<'_, S>, run_wide: bool, share: bool) -> Result<EvidenceResult> {
    let n_cases = b.chunk_offsets.len().saturating_sub(1);
    check_batch(b, n_cases)?;
    let norm_phrases: Vec<String> = (0..b.phrases.len()).into_par_iter().with_min_len(1024).map(|i| normalize(b.phrases.get(i))).collect();
    let mut per_case = Vec::with_capacity(n_cases);
    for block in case_blocks(b.chunk_offsets, b.chunk_texts) {
        let shared = if share { SharedNorms::of(b.chunk_texts, b.chunk_offsets[block.start]..b.chunk_offsets[block.end], false) } else { None };
        per_case.extend(match_cases(b, &norm_phrases, block, None, shared.as_ref())?);
    }
    let mut res = collect(per_case, b);
    if run_wide {
        res.phrase_in_run = phrases_in_run(b.chunk_texts, &norm_phrases, &res.phrase_any_rank)?;
    }
    Ok(res)
}

/// Per phrase: non-empty and found in its own case (`any_rank > 0`) or, for
/// the others, in any of `texts` (see [`match_evidence_with`]). Equal
/// normalised phrases share the answer.
fn phrases_in_run<S: Strings + ?Sized>(texts: &S, norm_phrases: &[String], any_rank: &[u32]) -> Result<Vec<bool>> {
    let mut ids: FxHashMap<&str, usize> = FxHashMap::default();
    let mut distinct: Vec<&str> = Vec::new();
    let mut in_own_case: Vec<bool> = Vec::new();
    let phrase_ids: Vec<Option<usize>> = norm_phrases
        .iter()
        .zip(any_rank)
        .map(|(p, &rank)| {
            if p.is_empty() {
                return None;
            }
            let id = *ids.entry(p.as_str()).or_insert_with(|| {
                distinct.push(p.as_str());
                in_own_case.push(false);
                distinct.len() - 1
            });
            in_own_case[id] |= rank > 0;
            Some(id)
        })
        .collect();
    let orphan_ids: Vec<usize> = (0..distinct.len()).filter(|&id| !in_own_case[id]).collect();
    let mut in_run = in_own_case;
    if !orphan_ids.is_empty() {
        let orphans: Vec<&str> = orphan_ids.iter().map(|&id| distinct[id]).collect();
        let sample = text_sample(texts);
        let mut index = RunIndex::from_normalized_with(&orphans, &Seen::of(&sample))?;
        let raw_sample: Vec<&str> = sample_indices(texts.len()).map(|i| texts.get(i)).collect();
        let prefilter = RawPrefilter::new(&orphans, &sample, &raw_sample);
        // In batches of growing size, between which the orphans found leave the
        // index's filters: where they share the texts' vocabulary, most are
        // found in the first texts and would otherwise be verified everywhere.
        let mut start = 0;
        while start < texts.len() && !index.all_found() {
            let end = (start + run_batch(start)).min(texts.len());
            scan_texts(&index, texts, start..end, Some(&prefilter));
            index.refresh();
            start = end;
        }
        for (&id, found) in orphan_ids.iter().zip(index.phrases_found()) {
            in_run[id] = found;
        }
    }
    Ok(phrase_ids.iter().map(|id| id.is_some_and(|id| in_run[id])).collect())
}

/// Match cases `cases` in parallel, probing `run` with their texts, with the
/// normal forms of `shared` (grouped over texts that include theirs).
fn match_cases<S: Strings + ?Sized>(
    b: &EvidenceBatch<'_, S>,
    norm_phrases: &[String],
    cases: std::ops::Range<usize>,
    run: Option<&RunIndex>,
    shared: Option<&SharedNorms>,
) -> Result<Vec<CaseOut>> {
    cases
        .into_par_iter()
        .with_min_len(16)
        .map_init(
            || Scratch { norm: Normalizer::new(), dehy: Vec::new(), pat: Vec::new() },
            |scratch, c| match_case(b, norm_phrases, c, scratch, run, shared),
        )
        .collect()
}

/// Raw chunk text a block of cases holds at most (but for a single case
/// larger than this): the normal forms [`SharedNorms`] keeps alive are those
/// of one block.
const BLOCK_BYTES: usize = 64 << 20;

/// The cases, cut into consecutive blocks of at most [`BLOCK_BYTES`] of chunk
/// text each (at least one case a block).
fn case_blocks<S: Strings + ?Sized>(chunk_offsets: &[usize], texts: &S) -> Vec<std::ops::Range<usize>> {
    let n_cases = chunk_offsets.len().saturating_sub(1);
    let mut blocks = Vec::new();
    let (mut start, mut bytes) = (0, 0);
    for c in 0..n_cases {
        let case_bytes: usize = (chunk_offsets[c]..chunk_offsets[c + 1]).map(|k| texts.get(k).len()).sum();
        if c > start && bytes + case_bytes > BLOCK_BYTES {
            blocks.push(start..c);
            (start, bytes) = (c, 0);
        }
        bytes += case_bytes;
    }
    if start < n_cases {
        blocks.push(start..n_cases);
    }
    blocks
}

/// The per-case outputs as one result (without `phrase_in_run`).
fn collect<S: Strings + ?Sized>(per_case: Vec<CaseOut>, b: &EvidenceBatch<'_, S>) -> EvidenceResult {
    let n_chunks = b.chunk_texts.len();
    let n_cases = per_case.len();
    let mut res = EvidenceResult {
        labeled: Vec::with_capacity(n_cases),
        file_match: Vec::with_capacity(n_chunks),
        phrases_found: Vec::with_capacity(n_chunks),
        relevant: Vec::with_capacity(n_chunks),
        phrase_first_rank: Vec::with_capacity(b.phrases.len()),
        phrase_any_rank: Vec::with_capacity(b.phrases.len()),
        phrase_empty: Vec::with_capacity(b.phrases.len()),
        file_first_rank: Vec::with_capacity(b.expected_files.len()),
        phrase_in_run: Vec::new(),
    };
    for o in per_case {
        res.labeled.push(o.labeled);
        res.file_match.extend(o.file_match);
        res.phrases_found.extend(o.phrases_found);
        res.relevant.extend(o.relevant);
        res.phrase_first_rank.extend(o.phrase_first_rank);
        res.phrase_any_rank.extend(o.phrase_any_rank);
        res.phrase_empty.extend(o.phrase_empty);
        res.file_first_rank.extend(o.file_first_rank);
    }
    res
}

/// A few texts spread over the batch, normalised: the windows the run-wide
/// index should not choose (frequent words).
fn text_sample<S: Strings + ?Sized>(texts: &S) -> Vec<Vec<u8>> {
    let mut norm = Normalizer::new();
    sample_indices(texts.len())
        .map(|i| {
            norm.run(texts.get(i));
            norm.out.clone()
        })
        .collect()
}

/// The indices of the texts of [`text_sample`] among `n`.
fn sample_indices(n: usize) -> impl Iterator<Item = usize> {
    const SAMPLE: usize = 256;
    let size = SAMPLE.min(n);
    (0..size).map(move |j| j * n / size)
}

/// Mark in `run` the phrases of cases `first..` (`outs`) found in their own
/// case's chunks; phrase `i` of the batch is `run`'s phrase `ids[i]`.
fn mark_found_in_own_case(run: &RunIndex, ids: &[usize], phrase_offsets: &[usize], first: usize, outs: &[CaseOut]) {
    for (c, o) in (first..).zip(outs) {
        for (i, &rank) in (phrase_offsets[c]..phrase_offsets[c + 1]).zip(&o.phrase_any_rank) {
            if rank > 0 {
                run.mark_found(ids[i]);
            }
        }
    }
}

/// Items (cases matched, or texts searched) handled before the run-wide index
/// is next refreshed, `done` items in: small batches first, where most phrases
/// a run shares are found, then growing by half so that the number of batches
/// stays logarithmic.
fn run_batch(done: usize) -> usize {
    (done / 2).clamp(RUN_BATCH_MIN, 1 << 14)
}

/// The first batches of items between refreshes of the run-wide index.
pub(super) const RUN_BATCH_MIN: usize = 256;

/// Probe `index` with the texts `range`, normalised (and once more without soft hyphens
/// when it has some), in parallel; texts left once every phrase is found, and texts
/// `prefilter` rules out, are skipped.
fn scan_texts<T: Strings + ?Sized>(index: &RunIndex, texts: &T, range: std::ops::Range<usize>, prefilter: Option<&RawPrefilter>) {
    range.into_par_iter().with_min_len(64).for_each_init(
        || (Normalizer::new(), Vec::new()),
        |(norm, dehy), i| {
            if index.all_found() {
                return;
            }
            let text = texts.get(i);
            if prefilter.is_some_and(|p| !p.may_contain(text)) {
                return;
            }
            norm.run(text);
            index.scan(&norm.out);
            if norm.has_soft_hyphens() {
                norm.dehyphenated_into(dehy);
                index.scan(dehy);
            }
        },
    );
}

/// For each phrase, does it occur (after normalisation) in at least one of
/// `texts`? One [`RunIndex`] over all unique phrases, parallel over texts.
/// Used to flag evidence phrases that no retrieved chunk of a whole run
/// contains ([`match_evidence_with`] answers the same, searching only for the
/// phrases its cases' own chunks lack).
pub fn phrases_in_texts<S: Strings + ?Sized, T: Strings + ?Sized>(phrases: &S, texts: &T) -> Result<Vec<bool>> {
    let norms: Vec<String> = (0..phrases.len()).map(|i| normalize(phrases.get(i))).collect();
    let index = RunIndex::from_normalized(&norms)?;
    scan_texts(&index, texts, 0..texts.len(), None);
    Ok(index.phrases_found())
}

/// The run-wide check of a run matched a batch of cases at a time (for example
/// a Parquet run read slice by slice): which of a golden set's phrases occur
/// in some retrieved chunk of any batch. Built once from all the golden set's
/// phrases; [`RunPhrases::match_batch`] matches a batch like
/// [`match_evidence`] and probes the index with each chunk text in the same
/// pass (normalised once for both; a text repeated in a block of the batch
/// is probed once, see `SharedNorms::of`); nothing of a batch's texts is kept.
/// Phrases found in their own case's chunks are dropped from the index as the
/// batches go, so later texts are probed with fewer phrases. Unlike
/// [`match_evidence_with`], which searches for the phrases not found in their
/// own case after the match (every text is at hand), a batch is probed with
/// every phrase not found yet, later batches' included (a batch's texts are
/// gone by the end): where the phrases share the texts' vocabulary, the check
/// costs what that probing costs.
pub struct RunPhrases {
    phrases: Vec<String>,
    /// Built on the first batch, from a sample of its texts ([`Seen`]).
    index: Option<RunIndex>,
}

impl RunPhrases {
    /// Index `phrases` (not normalised yet): every evidence phrase of the golden set.
    pub fn new<S: Strings + ?Sized>(phrases: &S) -> Self {
        let phrases = (0..phrases.len()).into_par_iter().with_min_len(1024).map(|i| normalize(phrases.get(i))).collect();
        RunPhrases { phrases, index: None }
    }

    /// Number of phrases indexed.
    pub fn len(&self) -> usize {
        self.phrases.len()
    }

    pub fn is_empty(&self) -> bool {
        self.phrases.is_empty()
    }

    /// [`match_evidence`] of `b`, whose phrase `i` is this index's phrase
    /// `ids[i]` (an error when it does not normalise alike), recording the
    /// phrases its chunks contain.
    pub fn match_batch<S: Strings + ?Sized>(&mut self, b: &EvidenceBatch<'_, S>, ids: &[usize]) -> Result<EvidenceResult> {
        let n_cases = b.chunk_offsets.len().saturating_sub(1);
        check_batch(b, n_cases)?;
        if ids.len() != b.phrases.len() {
            return Err(Error::input(format!("run phrases: expected one index per phrase ({}), got {}", b.phrases.len(), ids.len())));
        }
        let norm_phrases: Vec<String> = (0..b.phrases.len()).into_par_iter().with_min_len(1024).map(|i| normalize(b.phrases.get(i))).collect();
        if let Some(i) = (0..ids.len()).find(|&i| <[String]>::get(&self.phrases, ids[i]) != Some(&norm_phrases[i])) {
            return Err(Error::input(format!("run phrases: phrase {i} of the batch is not phrase {} of the index", ids[i])));
        }
        if self.index.is_none() {
            self.index = Some(RunIndex::from_normalized_with(&self.phrases, &Seen::of(&text_sample(b.chunk_texts)))?);
        }
        let run = self.index.as_mut().expect("built above");
        let mut per_case: Vec<CaseOut> = Vec::with_capacity(n_cases);
        for block in case_blocks(b.chunk_offsets, b.chunk_texts) {
            let shared = SharedNorms::of(b.chunk_texts, b.chunk_offsets[block.start]..b.chunk_offsets[block.end], !run.all_found());
            let mut start = block.start;
            while start < block.end {
                let end = (start + run_batch(start)).min(block.end);
                let probing = (!run.all_found()).then_some(&*run);
                let batch = match_cases(b, &norm_phrases, start..end, probing, shared.as_ref())?;
                mark_found_in_own_case(run, ids, b.phrase_offsets, start, &batch);
                run.refresh();
                per_case.extend(batch);
                start = end;
            }
        }
        Ok(collect(per_case, b))
    }

    /// Per phrase: found in some chunk text of the batches matched so far
    /// (false for phrases that normalise to the empty string).
    pub fn found(&self) -> Vec<bool> {
        match &self.index {
            Some(index) => index.phrases_found(),
            None => vec![false; self.phrases.len()],
        }
    }
}
