//! Batch relevance over the columns of a whole run, in parallel over cases.

use rayon::prelude::*;

use super::copies::Probed;
use super::matcher::PhraseMatcher;
use super::normalize::{file_matches, normalize, normalize_file_name, Normalizer};
use super::run_index::{RunIndex, Seen};
use crate::error::{Error, Result};


/// Random access to a column of strings.
pub trait Strings: Sync {
    fn len(&self) -> usize;
    fn get(&self, i: usize) -> &str;
    fn is_empty(&self) -> bool {
        self.len() == 0
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
    /// What probing the run-wide index cost ([`RunIndex::scan`]'s work) and
    /// the normalised bytes it probed.
    probe_work: usize,
    probe_bytes: usize,
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

/// The run-wide index to probe and, when given, the texts of the batch
/// probed so far: a later copy of a text is not probed again (see [`Probed`]).
#[derive(Clone, Copy)]
struct Probing<'r> {
    index: &'r RunIndex,
    probed: Option<&'r Probed>,
}

/// Match case `c`; with `run` also probe the run-wide index with each chunk
/// text, normalised once for both.
fn match_case<S: Strings + ?Sized>(
    b: &EvidenceBatch<'_, S>,
    norm_phrases: &[String],
    c: usize,
    scratch: &mut Scratch,
    run: Option<Probing<'_>>,
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
        probe_work: 0,
        probe_bytes: 0,
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
        let probe = run.filter(|r| !r.index.all_found());
        if has_phrases || probe.is_some() {
            scratch.norm.run(b.chunk_texts.get(k));
            let probe = probe.filter(|r| r.probed.map_or(true, |p| p.first(b.chunk_texts, k))).map(|r| r.index);
            let dehyphenated = scratch.norm.has_soft_hyphens();
            if dehyphenated {
                scratch.norm.dehyphenated_into(&mut scratch.dehy);
            }
            if let Some(r) = probe {
                out.probe_work += r.scan(&scratch.norm.out);
                out.probe_bytes += scratch.norm.out.len();
                if dehyphenated {
                    out.probe_work += r.scan(&scratch.dehy);
                    out.probe_bytes += scratch.dehy.len();
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
            matcher.scan(&scratch.norm.out, &mut scratch.pat);
            if dehyphenated {
                matcher.scan(&scratch.dehy, &mut scratch.pat);
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

/// Decide relevance for every retrieved chunk of every case, in parallel over
/// cases. See the module docs for the rules and [`EvidenceResult`] for the
/// outputs.
pub fn match_evidence<S: Strings + ?Sized>(b: &EvidenceBatch<'_, S>) -> Result<EvidenceResult> {
    match_evidence_with(b, false)
}

/// [`match_evidence`], and with `run_wide` also
/// [`EvidenceResult::phrase_in_run`]: which phrases occur in any retrieved
/// chunk of the whole batch (evidence no chunk of the run contains is often an
/// annotation slip). Decided in the same pass: each chunk text is normalised
/// once, matched against its case's phrases and probed with a [`RunIndex`].
/// Cases go in batches of growing size, between which the index drops the
/// phrases already found from its filters ([`RunIndex::refresh`]).
///
/// The index first holds all the batch's phrases. Where the phrases share the
/// texts' vocabulary (windows of phrases not found yet occurring everywhere),
/// probing with it can cost more than normalising the texts again: once a
/// batch's probes cost more than [`PROBE_BYTES_PER_WORK`] allows, the later
/// batches are probed only with the *orphans*: the phrases of the cases
/// matched so far that neither their own case's chunks nor any probed text
/// contain (an index over them, rebuilt when new ones appear). An orphan first
/// seen in a batch after that switch was not looked for in the texts between
/// the switch and the end of its batch; the orphans still not found at the end
/// are searched for in those texts alone, in a last pass that ends once all
/// are found. (Should probing for the orphans cost too much as well, the rest
/// is matched without probing and the last pass covers every text after the
/// switch.)
pub fn match_evidence_with<S: Strings + ?Sized>(b: &EvidenceBatch<'_, S>, run_wide: bool) -> Result<EvidenceResult> {
    match_probing(b, run_wide, PROBE_BYTES_PER_WORK, PROBE_BYTES_PER_WORK)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Probe {
    /// With the index over every phrase.
    All,
    /// With an index over the orphans found so far.
    Orphans,
    /// Not at all.
    Off,
}

/// Phrases of matched cases found in no probed text yet (see
/// [`match_evidence_with`]), and the index over them.
struct Orphans {
    /// Input phrase index, and the case up to which (from the switch on) the
    /// texts were not probed for it.
    listed: Vec<(usize, usize)>,
    /// Per pattern id of the run index: listed already.
    seen: Vec<bool>,
    /// The index over the orphans not found when it was built, and the input
    /// phrase index of each of its phrases.
    index: Option<(RunIndex, Vec<usize>)>,
    /// `listed.len()` when the index was built.
    built_with: usize,
}

impl Orphans {
    /// List the phrases of `phrases` not found in `run`, as not looked for in
    /// texts before case `uncovered_until`.
    fn list(&mut self, run: &RunIndex, phrases: std::ops::Range<usize>, uncovered_until: usize) {
        for i in phrases {
            if run.is_unfound(i) {
                let id = run.pattern_of(i).expect("an unfound phrase is not empty") as usize;
                if !self.seen[id] {
                    self.seen[id] = true;
                    self.listed.push((i, uncovered_until));
                }
            }
        }
    }

    /// Record in `run` what the orphan index found.
    fn transfer(&self, run: &RunIndex) {
        if let Some((index, owners)) = &self.index {
            for (found, &i) in index.phrases_found().iter().zip(owners) {
                if *found {
                    run.mark_found(i);
                }
            }
        }
    }

    /// An index over the listed orphans `run` has not found (`None` when there are none).
    fn build(run: &RunIndex, listed: impl Iterator<Item = usize>, norm_phrases: &[String], common: &Seen) -> Result<Option<(RunIndex, Vec<usize>)>> {
        let owners: Vec<usize> = listed.filter(|&i| run.is_unfound(i)).collect();
        if owners.is_empty() {
            return Ok(None);
        }
        let phrases: Vec<&str> = owners.iter().map(|&i| norm_phrases[i].as_str()).collect();
        Ok(Some((RunIndex::from_normalized_with(&phrases, common)?, owners)))
    }
}

/// [`match_evidence_with`], giving up probing with all phrases when a
/// batch's probes cost more than one unit of work per `bytes_per_work`
/// normalised bytes, and probing with the orphans at `orphan_bytes_per_work`.
pub(super) fn match_probing<S: Strings + ?Sized>(
    b: &EvidenceBatch<'_, S>,
    run_wide: bool,
    bytes_per_work: usize,
    orphan_bytes_per_work: usize,
) -> Result<EvidenceResult> {
    let n_cases = b.chunk_offsets.len().saturating_sub(1);
    check_batch(b, n_cases)?;

    let norm_phrases: Vec<String> = (0..b.phrases.len()).into_par_iter().with_min_len(1024).map(|i| normalize(b.phrases.get(i))).collect();
    let common = if run_wide { Seen::of(&text_sample(b.chunk_texts)) } else { Seen::empty() };
    let mut run = if run_wide { Some(RunIndex::from_normalized_with(&norm_phrases, &common)?) } else { None };
    let mut orphans = Orphans { listed: Vec::new(), seen: vec![false; run.as_ref().map_or(0, RunIndex::patterns)], index: None, built_with: 0 };
    let mut per_case: Vec<CaseOut> = Vec::with_capacity(n_cases);
    let mut mode = if run_wide { Probe::All } else { Probe::Off };
    // Cases from here on were not probed with every phrase.
    let mut switched_at = n_cases;
    let mut start = 0;
    while start < n_cases {
        let end = if mode == Probe::Off { n_cases } else { (start + run_batch(start)).min(n_cases) };
        let index = match mode {
            Probe::All => run.as_ref(),
            Probe::Orphans => orphans.index.as_ref().map(|(index, _)| index),
            Probe::Off => None,
        };
        let batch = match_cases(b, &norm_phrases, start..end, index.map(|index| Probing { index, probed: None }))?;
        if let Some(r) = run.as_mut() {
            let work: usize = batch.iter().map(|o| o.probe_work).sum();
            let bytes: usize = batch.iter().map(|o| o.probe_bytes).sum();
            mark_found_in_own_case(r, None, b.phrase_offsets, start, &batch);
            match mode {
                Probe::All => {
                    if work.saturating_mul(bytes_per_work) > bytes {
                        switched_at = end;
                        mode = Probe::Orphans;
                        // Every text so far was probed with these.
                        orphans.list(r, 0..b.phrase_offsets[end], end);
                    } else {
                        r.refresh();
                    }
                }
                Probe::Orphans => {
                    orphans.transfer(r);
                    orphans.list(r, b.phrase_offsets[start]..b.phrase_offsets[end], end);
                    if work.saturating_mul(orphan_bytes_per_work) > bytes {
                        mode = Probe::Off;
                    }
                }
                Probe::Off => orphans.list(r, b.phrase_offsets[start]..b.phrase_offsets[end], end),
            }
            if mode == Probe::Orphans && orphans.listed.len() > orphans.built_with {
                orphans.index = Orphans::build(r, orphans.listed.iter().map(|&(i, _)| i), &norm_phrases, &common)?;
                orphans.built_with = orphans.listed.len();
            }
        }
        per_case.extend(batch);
        start = end;
    }
    if let Some(r) = run.as_mut() {
        let mut unfound = orphans.listed.iter().filter(|&&(i, _)| r.is_unfound(i)).peekable();
        // Once probing was off, no orphan was looked for in the texts after it.
        let last = if mode == Probe::Off && unfound.peek().is_some() { n_cases } else { unfound.map(|&(_, until)| until).max().unwrap_or(0) };
        if last > switched_at {
            if let Some((index, owners)) = Orphans::build(r, orphans.listed.iter().map(|&(i, _)| i), &norm_phrases, &common)? {
                scan_texts(&index, b.chunk_texts, b.chunk_offsets[switched_at]..b.chunk_offsets[last]);
                orphans.index = Some((index, owners));
                orphans.transfer(r);
            }
        }
    }

    let mut res = collect(per_case, b);
    if let Some(r) = run {
        res.phrase_in_run = r.phrases_found();
    }
    Ok(res)
}

/// Match cases `cases` in parallel, probing `run` with their texts.
fn match_cases<S: Strings + ?Sized>(
    b: &EvidenceBatch<'_, S>,
    norm_phrases: &[String],
    cases: std::ops::Range<usize>,
    run: Option<Probing<'_>>,
) -> Result<Vec<CaseOut>> {
    cases
        .into_par_iter()
        .with_min_len(16)
        .map_init(
            || Scratch { norm: Normalizer::new(), dehy: Vec::new(), pat: Vec::new() },
            |scratch, c| match_case(b, norm_phrases, c, scratch, run),
        )
        .collect()
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

/// Probing the run-wide index is given up when a batch of cases costs more than
/// one unit of [`RunIndex::scan`]'s work (a window lookup or a phrase
/// comparison, a few times the cost of normalising a byte) per this many
/// normalised bytes: it would then cost about as much as normalising the
/// texts again.
pub(super) const PROBE_BYTES_PER_WORK: usize = 4;

/// A few texts spread over the batch, normalised: the windows the run-wide
/// index should not choose (frequent words).
fn text_sample<S: Strings + ?Sized>(texts: &S) -> Vec<Vec<u8>> {
    const SAMPLE: usize = 256;
    let n = texts.len();
    let mut norm = Normalizer::new();
    (0..SAMPLE.min(n))
        .map(|j| {
            norm.run(texts.get(j * n / SAMPLE.min(n)));
            norm.out.clone()
        })
        .collect()
}

/// Mark in `run` the phrases of cases `first..` (`outs`) found in their own
/// case's chunks; phrase `i` of the batch is `run`'s phrase `ids[i]` (`i`
/// itself without `ids`).
fn mark_found_in_own_case(run: &RunIndex, ids: Option<&[usize]>, phrase_offsets: &[usize], first: usize, outs: &[CaseOut]) {
    for (c, o) in (first..).zip(outs) {
        for (i, &rank) in (phrase_offsets[c]..phrase_offsets[c + 1]).zip(&o.phrase_any_rank) {
            if rank > 0 {
                run.mark_found(ids.map_or(i, |ids| ids[i]));
            }
        }
    }
}

/// Cases matched before the run-wide index is next refreshed, `done` cases
/// into the batch: small batches first, where most phrases a run shares are
/// found, then growing by half so that the number of batches stays logarithmic.
fn run_batch(done: usize) -> usize {
    (done / 2).clamp(RUN_BATCH_MIN, 1 << 14)
}

/// The first batches of cases between refreshes of the run-wide index.
pub(super) const RUN_BATCH_MIN: usize = 256;

/// Probe `index` with the texts `range`, normalised (and once more without soft hyphens
/// when it has some), in parallel; texts left once every phrase is found are skipped.
fn scan_texts<T: Strings + ?Sized>(index: &RunIndex, texts: &T, range: std::ops::Range<usize>) {
    range.into_par_iter().with_min_len(64).for_each_init(
        || (Normalizer::new(), Vec::new()),
        |(norm, dehy), i| {
            if index.all_found() {
                return;
            }
            norm.run(texts.get(i));
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
/// contains ([`match_evidence_with`] answers the same during matching).
pub fn phrases_in_texts<S: Strings + ?Sized, T: Strings + ?Sized>(phrases: &S, texts: &T) -> Result<Vec<bool>> {
    let norms: Vec<String> = (0..phrases.len()).map(|i| normalize(phrases.get(i))).collect();
    let index = RunIndex::from_normalized(&norms)?;
    scan_texts(&index, texts, 0..texts.len());
    Ok(index.phrases_found())
}

/// The run-wide check of a run matched a batch of cases at a time (for example
/// a Parquet run read slice by slice): which of a golden set's phrases occur
/// in some retrieved chunk of any batch. Built once from all the golden set's
/// phrases; [`RunPhrases::match_batch`] matches a batch like
/// [`match_evidence`] and probes the index with each chunk text in the same
/// pass (normalised once for both; a text repeated in the batch is probed
/// once, see [`Probed`]); nothing of a batch's texts is kept.
/// Phrases found in their own case's chunks are dropped from the index as the
/// batches go, so later texts are probed with fewer phrases. Unlike
/// [`match_evidence_with`], probing is never given up (a later batch's texts
/// are gone by the end): where the phrases share the texts' vocabulary, the
/// check costs what probing with every phrase not found yet costs.
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
        // Runs retrieve the same chunks for many questions: probe each text of the batch once.
        let probed = Probed::new();
        let mut per_case: Vec<CaseOut> = Vec::with_capacity(n_cases);
        let mut start = 0;
        while start < n_cases {
            let end = (start + run_batch(start)).min(n_cases);
            let probing = (!run.all_found()).then_some(Probing { index: &*run, probed: Some(&probed) });
            let batch = match_cases(b, &norm_phrases, start..end, probing)?;
            mark_found_in_own_case(run, Some(ids), b.phrase_offsets, start, &batch);
            run.refresh();
            per_case.extend(batch);
            start = end;
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
