//! Evidence-phrase matching for RAG chunks.
//!
//! A golden case names the files that hold its answer and short *evidence
//! phrases* that must appear in the answer chunk. Text extracted from PDFs and
//! OCR rarely matches a phrase byte for byte, so both sides are normalised
//! before matching (see [`normalize`]):
//!
//! 1. Unicode NFKC (Kangxi radical `⼤` U+2F24 becomes `大`, full-width `Ａ１`
//!    becomes `A1`, ligatures split, …);
//! 2. every Unicode `White_Space` character is removed (spaces, tabs, line
//!    breaks, U+3000 ideographic space, NBSP, …), and so are the invisible
//!    format characters PDF extractors leave behind: soft hyphen U+00AD,
//!    zero-width space/non-joiner/joiner U+200B..U+200D, word joiner U+2060
//!    and the byte-order mark U+FEFF;
//! 3. lower-casing, character by character (`char::to_lowercase`), with the
//!    Greek final sigma `ς` folded to `σ` so that a phrase matches wherever the
//!    word ends.
//!
//! **Line-break hyphenation.** A chunk's text is matched in two variants: the
//! normalised text above, and — only when it contains one — the same text with
//! every *line-break hyphen* dropped. A line-break hyphen is a `-` (U+002D, or
//! U+2010 HYPHEN; full-width and other compatibility hyphens become U+002D
//! through NFKC) that directly follows a non-space character and is followed
//! by optional spaces, a line break (`\n`, `\r`, VT, FF, U+0085, U+2028,
//! U+2029), optional further white space and then a non-space character. So
//! `retrie-\nval` matches the phrase `retrieval`, while `state-of-the-\nart`
//! still matches `state-of-the-art` (the first variant). Phrases themselves are
//! normalised without this step. A phrase is found in a chunk when it occurs in
//! either variant.
//!
//! **Files.** File names are compared after [`normalize_file_name`] (NFC,
//! trimmed, `\` to `/`, leading `./` dropped, lower-cased) by
//! [`file_matches`]: equal, or one is a suffix of the other on a `/` boundary,
//! so the bare name `Guide.pdf` matches `docs/guide.pdf`, `a/guide.pdf` matches
//! `/kb/a/guide.pdf`, but `a/guide.pdf` does not match `b/guide.pdf`.
//!
//! **Relevance** ([`match_evidence`]): a retrieved chunk is relevant when its
//! file is one of the case's expected files (any file when none are given)
//! and its normalised text contains at least one normalised evidence phrase
//! (any chunk of an expected file when no phrase is given). Phrases that
//! normalise to the empty string are ignored (flagged in
//! [`EvidenceResult::phrase_empty`], never found); a case left with neither
//! files nor non-empty phrases is *unlabelled* and none of its chunks is
//! relevant (the scorer reports nulls for it).
//!
//! Matching uses one Aho-Corasick automaton per case over its unique
//! normalised phrases (see [`PhraseMatcher::scan`]: every phrase present in a
//! chunk is seen, overlapping or not), and runs in parallel over cases with
//! rayon. Runs retrieve the same chunks for many questions: cases are matched
//! in blocks of about 64 MB of chunk text, and a block whose texts repeat is
//! normalised once per distinct text (every copy checked byte for byte
//! against the text whose normal forms it takes; see `shared::SharedNorms`).
//! A dictionary-encoded column ([`DictStrings`], as Parquet readers give a
//! column written with dictionary pages) names its copies itself: they are
//! grouped by value index, with no hashing and no comparison.

mod batch;
mod copies;
mod matcher;
mod normalize;
mod prefilter;
mod run_index;
mod shared;
#[cfg(test)]
mod tests;

pub use batch::{match_evidence, match_evidence_with, phrases_in_texts, DictStrings, EvidenceBatch, EvidenceResult, RunPhrases, Strings};
pub use matcher::{PhraseMatcher, FEW_PATTERNS, PACKED_PATTERNS};
pub use normalize::{file_matches, normalize, normalize_dehyphenated, normalize_file_name, Normalizer};
pub use run_index::RunIndex;
