//! trec_eval's measures: names, parameters, per-query computation and averaging.
//!
//! Each measure is ported from its `m_<name>.c` in trec_eval 10.0 so that the
//! printed values agree digit for digit, including trec_eval's edge cases.
//! The measures shared with the rest of ragmeter (AP, RR, P, recall, success,
//! NDCG@k) call the kernels in [`crate::metrics`].

use rustc_hash::FxHashMap;

use crate::error::{Error, Result};
use crate::metrics;
use crate::metrics::rank_log2 as log2;

use super::ResRels;

const MIN_GEO_MEAN: f64 = 0.00001;
const INFAP_EPSILON: f64 = 0.00001;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Runid,
    NumQ,
    NumRet,
    NumRel,
    NumRelRet,
    Map,
    GmMap,
    Rprec,
    Bpref,
    RecipRank,
    IprecAtRecall,
    P,
    Relstring,
    Recall,
    InfAP,
    GmBpref,
    RprecMult,
    Utility,
    Pt11Avg,
    BinG,
    G,
    Dcg,
    IdealDcg,
    Ndcg,
    NdcgRel,
    Rndcg,
    NdcgCut,
    MapCut,
    RelativeP,
    Success,
    SetP,
    SetRelativeP,
    SetRecall,
    SetMap,
    SetF,
    NumNonrelJudgedRet,
    Rbp,
    RbpResid,
    Unj,
}

/// How a measure takes parameters (`-m name.params`).
#[derive(Clone, Copy, Debug, PartialEq)]
enum ParamStyle {
    None,
    LongCutoffs(&'static [i64]),
    DoubleCutoffs(&'static [f64]),
    Doubles(&'static [f64]),
    Pairs,
}

/// How per-query values become the summary value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Average {
    Mean,
    Geometric,
    Sum,
    NumQ,
    NumRel,
    Nothing,
}

/// How values are printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Print {
    Double,
    Long,
    /// Summary only (gm_map, gm_bpref, num_q).
    SummaryOnly,
    Relstring,
    Runid,
}

struct Def {
    name: &'static str,
    kind: Kind,
    params: ParamStyle,
    average: Average,
    print: Print,
}

const CUTS: &[i64] = &[5, 10, 15, 20, 30, 100, 200, 500, 1000];
const RECALL_POINTS: &[f64] = &[0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0];

macro_rules! def {
    ($name:expr, $kind:ident, $params:expr, $avg:ident, $print:ident) => {
        Def { name: $name, kind: Kind::$kind, params: $params, average: Average::$avg, print: Print::$print }
    };
}

/// trec_eval's measure table, in its order: measures are computed and printed in this order.
const TABLE: &[Def] = &[
    def!("runid", Runid, ParamStyle::None, Nothing, Runid),
    def!("num_q", NumQ, ParamStyle::None, NumQ, SummaryOnly),
    def!("num_ret", NumRet, ParamStyle::None, Sum, Long),
    def!("num_rel", NumRel, ParamStyle::None, NumRel, Long),
    def!("num_rel_ret", NumRelRet, ParamStyle::None, Sum, Long),
    def!("map", Map, ParamStyle::None, Mean, Double),
    def!("gm_map", GmMap, ParamStyle::None, Geometric, SummaryOnly),
    def!("Rprec", Rprec, ParamStyle::None, Mean, Double),
    def!("bpref", Bpref, ParamStyle::None, Mean, Double),
    def!("recip_rank", RecipRank, ParamStyle::None, Mean, Double),
    def!("iprec_at_recall", IprecAtRecall, ParamStyle::DoubleCutoffs(RECALL_POINTS), Mean, Double),
    def!("P", P, ParamStyle::LongCutoffs(CUTS), Mean, Double),
    def!("relstring", Relstring, ParamStyle::Doubles(&[10.0]), Nothing, Relstring),
    def!("recall", Recall, ParamStyle::LongCutoffs(CUTS), Mean, Double),
    def!("infAP", InfAP, ParamStyle::None, Mean, Double),
    def!("gm_bpref", GmBpref, ParamStyle::None, Geometric, SummaryOnly),
    def!("Rprec_mult", RprecMult, ParamStyle::DoubleCutoffs(&[0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 1.8, 2.0]), Mean, Double),
    def!("utility", Utility, ParamStyle::Doubles(&[1.0, -1.0, 0.0, 0.0]), Mean, Double),
    def!("11pt_avg", Pt11Avg, ParamStyle::Doubles(RECALL_POINTS), Mean, Double),
    def!("binG", BinG, ParamStyle::None, Mean, Double),
    def!("G", G, ParamStyle::Pairs, Mean, Double),
    def!("dcg", Dcg, ParamStyle::Pairs, Mean, Double),
    def!("ideal_dcg", IdealDcg, ParamStyle::Pairs, Mean, Double),
    def!("ndcg", Ndcg, ParamStyle::Pairs, Mean, Double),
    def!("ndcg_rel", NdcgRel, ParamStyle::Pairs, Mean, Double),
    def!("Rndcg", Rndcg, ParamStyle::Pairs, Mean, Double),
    def!("ndcg_cut", NdcgCut, ParamStyle::LongCutoffs(CUTS), Mean, Double),
    def!("map_cut", MapCut, ParamStyle::LongCutoffs(CUTS), Mean, Double),
    def!("relative_P", RelativeP, ParamStyle::LongCutoffs(CUTS), Mean, Double),
    def!("success", Success, ParamStyle::LongCutoffs(&[1, 5, 10]), Mean, Double),
    def!("set_P", SetP, ParamStyle::None, Mean, Double),
    def!("set_relative_P", SetRelativeP, ParamStyle::None, Mean, Double),
    def!("set_recall", SetRecall, ParamStyle::None, Mean, Double),
    def!("set_map", SetMap, ParamStyle::None, Mean, Double),
    def!("set_F", SetF, ParamStyle::Doubles(&[1.0]), Mean, Double),
    def!("num_nonrel_judged_ret", NumNonrelJudgedRet, ParamStyle::None, Sum, Long),
    def!("rbp", Rbp, ParamStyle::Pairs, Mean, Double),
    def!("rbp_resid", RbpResid, ParamStyle::Pairs, Mean, Double),
    def!("unj", Unj, ParamStyle::LongCutoffs(&[5, 10, 20]), Mean, Double),
];

const OFFICIAL: &[&str] =
    &["runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "map", "gm_map", "Rprec", "bpref", "recip_rank", "iprec_at_recall", "P"];
const ALL_TREC: &[&str] = &[
    "runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "map", "gm_map", "Rprec", "bpref", "recip_rank",
    "iprec_at_recall", "P", "relstring", "recall", "unj", "rbp", "rbp_resid", "infAP", "gm_bpref", "utility",
    "11pt_avg", "ndcg", "relative_P", "Rprec_mult", "success", "map_cut", "ndcg_cut", "ndcg_rel", "Rndcg", "binG",
    "G", "set_P", "set_recall", "set_relative_P", "set_map", "set_F", "num_nonrel_judged_ret",
];
const SET: &[&str] =
    &["runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "utility", "set_P", "set_recall", "set_relative_P", "set_map", "set_F"];
const NICKNAMES: &[(&str, &[&str])] = &[("official", OFFICIAL), ("set", SET), ("all_trec", ALL_TREC)];

/// Every measure name and nickname that `-m` accepts.
pub fn known_measures() -> Vec<&'static str> {
    NICKNAMES.iter().map(|(n, _)| *n).chain(TABLE.iter().map(|d| d.name)).collect()
}

/// One requested measure with its parameters and the names of its values.
#[derive(Clone, Debug)]
pub struct Measure {
    pub kind: Kind,
    pub average: Average,
    pub print: Print,
    /// Printed names of this measure's values (one per cutoff for array measures).
    pub names: Vec<String>,
    long_cutoffs: Vec<i64>,
    double_cutoffs: Vec<f64>,
    doubles: Vec<f64>,
    pairs: Vec<(String, f64)>,
    /// Index of this measure's first value in a query's value vector.
    pub offset: usize,
}

/// Resolve `-m` arguments (`all_trec`, `P.5,10`, `ndcg.1=3,2=9` …) into measures
/// in trec_eval's table order. With no arguments, trec_eval's `official` set.
pub fn resolve(args: &[String]) -> Result<Vec<Measure>> {
    let mut marked = vec![false; TABLE.len()];
    let mut params: Vec<(String, String)> = Vec::new();
    let defaults = [String::from("official")];
    let args = if args.is_empty() { &defaults[..] } else { args };
    for arg in args {
        let (name, param) = match arg.split_once('.') {
            Some((n, p)) => {
                if p.is_empty() {
                    return Err(Error::measure(format!("measure '{arg}': empty parameter after '.'")));
                }
                (n, Some(p))
            }
            None => (arg.as_str(), None),
        };
        if let Some(p) = param {
            params.push((name.to_string(), p.to_string()));
        }
        if let Some((_, list)) = NICKNAMES.iter().find(|(n, _)| *n == name) {
            for m in list.iter() {
                marked[TABLE.iter().position(|d| d.name == *m).expect("nickname lists name table measures")] = true;
            }
        } else if let Some(i) = TABLE.iter().position(|d| d.name == name) {
            marked[i] = true;
        } else {
            return Err(Error::measure(format!(
                "unknown measure '{name}'; known measures: {}",
                known_measures().join(", ")
            )));
        }
    }
    let mut out = Vec::new();
    let mut offset = 0;
    for (def, _) in TABLE.iter().zip(&marked).filter(|(_, m)| **m) {
        // As trec_eval: the first parameter string given for a measure wins.
        let given = params.iter().find(|(n, _)| n == def.name).map(|(_, p)| p.as_str());
        let mut m = build(def, given)?;
        m.offset = offset;
        offset += m.names.len();
        out.push(m);
    }
    Ok(out)
}

fn build(def: &Def, given: Option<&str>) -> Result<Measure> {
    let mut m = Measure {
        kind: def.kind,
        average: def.average,
        print: def.print,
        names: vec![def.name.to_string()],
        long_cutoffs: vec![],
        double_cutoffs: vec![],
        doubles: vec![],
        pairs: vec![],
        offset: 0,
    };
    let bad = |what: &str| Error::measure(format!("measure '{}': {what}", def.name));
    match def.params {
        ParamStyle::None => {
            if given.is_some() {
                return Err(bad("takes no parameters"));
            }
        }
        ParamStyle::LongCutoffs(default) => {
            let mut cuts: Vec<i64> = match given {
                Some(p) => p.split(',').map(atol).collect(),
                None => default.to_vec(),
            };
            cuts.sort_unstable();
            if cuts[0] <= 0 {
                return Err(bad("cutoffs must be positive"));
            }
            if cuts.windows(2).any(|w| w[0] == w[1]) {
                return Err(bad("duplicate cutoffs"));
            }
            m.names = cuts.iter().map(|c| format!("{}_{c}", def.name)).collect();
            m.long_cutoffs = cuts;
        }
        ParamStyle::DoubleCutoffs(default) => {
            let mut cuts: Vec<f64> = match given {
                Some(p) => p.split(',').map(atof).collect(),
                None => default.to_vec(),
            };
            // A NaN has no place among the cutoffs (with 20 or more of them the sort panicked:
            // no total order), and C casts it, or an infinity, to a count of documents as UB.
            if let Some(c) = cuts.iter().find(|c| !c.is_finite()) {
                let shown = if c.is_nan() { "nan".to_string() } else { c.to_string() };
                return Err(bad(&format!("cutoff {shown} is not a finite number")));
            }
            cuts.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
            if cuts.windows(2).any(|w| w[0] == w[1]) {
                return Err(bad("duplicate cutoffs"));
            }
            m.names = cuts.iter().map(|c| format!("{}_{}", def.name, c_fixed(*c, 2))).collect();
            m.double_cutoffs = cuts;
        }
        ParamStyle::Doubles(default) => {
            m.doubles = match given {
                Some(p) => {
                    m.names = vec![format!("{}_{p}", def.name)];
                    p.split(',').map(atof).collect()
                }
                None => default.to_vec(),
            };
            if def.kind == Kind::Utility && m.doubles.len() != 4 {
                return Err(bad("needs exactly 4 parameters (rel_ret, nonrel_ret, rel_unret, nonrel_unret)"));
            }
            if def.kind == Kind::Pt11Avg && m.doubles.is_empty() {
                return Err(bad("needs recall points"));
            }
            // trec_eval reads "nan" as NaN and then casts it to a count (11pt_avg, relstring):
            // undefined; ragmeter gave a plausible number (11pt_avg.nan,0.5: 0.5).
            if m.doubles.iter().any(|d| d.is_nan()) {
                return Err(bad("parameter nan is not a number"));
            }
        }
        ParamStyle::Pairs => {
            if let Some(p) = given {
                m.pairs = parse_pairs(p).ok_or_else(|| bad(&format!("malformed name=value pairs in '{p}'")))?;
                if let Some((name, _)) = m.pairs.iter().find(|(_, v)| v.is_nan()) {
                    return Err(bad(&format!("the value of {name} is not a number (nan)")));
                }
                m.names = vec![format!("{}_{p}", def.name)];
            }
        }
    }
    Ok(m)
}

fn parse_pairs(p: &str) -> Option<Vec<(String, f64)>> {
    p.split(',')
        .map(|item| {
            let (name, value) = item.split_once('=')?;
            if name.is_empty() || value.contains('=') {
                return None;
            }
            Some((name.to_string(), atof(value)))
        })
        .collect()
}

/// C's `atol`: leading white space, an optional sign, digits; the rest ignored.
fn atol(s: &str) -> i64 {
    let s = s.trim_start();
    let (neg, digits) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let end = digits.bytes().position(|b| !b.is_ascii_digit()).unwrap_or(digits.len());
    let v = digits[..end].parse::<i64>().unwrap_or(0);
    if neg {
        -v
    } else {
        v
    }
}

/// C's `atof` on the longest numeric prefix ("23.4" -> 23.4, ".5" -> 0.5, "x" -> 0).
fn atof(s: &str) -> f64 {
    let s = s.trim_start();
    (1..=s.len()).rev().filter(|&n| s.is_char_boundary(n)).find_map(|n| s[..n].parse::<f64>().ok()).unwrap_or(0.0)
}

/// C's `%.Nf`.
pub fn c_fixed(v: f64, decimals: usize) -> String {
    if v.is_nan() {
        return if v.is_sign_negative() { "-nan".into() } else { "nan".into() };
    }
    if v.is_infinite() {
        return if v < 0.0 { "-inf".into() } else { "inf".into() };
    }
    format!("{v:.decimals$}")
}

fn valid_int(s: &str) -> bool {
    let digits = s.strip_prefix('-').unwrap_or(s);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

/// Relevance level -> gain table of trec_eval's `setup_gains` (gain_init.c).
struct Gains {
    /// (rel_level, gain, num_at_level), sorted by increasing gain.
    levels: Vec<(i64, f64, i64)>,
    /// Per level `0..num_rel_levels` (each is in `levels`), the index in `levels`
    /// of its first entry: what trec_eval's search of the table finds.
    dense: Vec<usize>,
    /// The same for the other levels given as parameters (a negative one, or one
    /// above every judged level).
    sparse: FxHashMap<i64, usize>,
}

impl Gains {
    fn new(pairs: &[(String, f64)], rr: &ResRels) -> Gains {
        let mut levels: Vec<(i64, f64, i64)> =
            pairs.iter().filter(|(n, _)| valid_int(n)).map(|(n, g)| (atol(n), *g, 0)).collect();
        // The first parameter given for a level, found without a scan of the parameters
        // per judged level (there are up to MAX_GRADE + 1 levels).
        let mut first_given: FxHashMap<i64, usize> = FxHashMap::default();
        for (j, l) in levels.iter().enumerate() {
            first_given.entry(l.0).or_insert(j);
        }
        for (level, &count) in rr.rel_levels.iter().enumerate().take(rr.num_rel_levels) {
            let level = level as i64;
            match first_given.get(&level) {
                Some(&j) => levels[j].2 = count,
                None => levels.push((level, level as f64, count)),
            }
        }
        // trec_eval sorts with qsort and compares gains as `(int)(g1 - g2)`, which is no
        // total order when gains differ by less than 1 (0.5 ~ 1.2 ~ 1.9 but 0.5 < 1.9):
        // Rust's sort may then panic. glibc's qsort is a merge sort, as this one is.
        // Gains in non-decreasing order (the default, a gain per level equal to it) are what
        // that sort leaves as they are: skip it (a grade of 1,000,000 makes 1,000,001 levels).
        if !levels.windows(2).all(|w| w[0].1 <= w[1].1) {
            merge_sort_by(&mut levels, |a, b| ((a.1 - b.1) as i64) <= 0);
        }
        let n = rr.num_rel_levels;
        let mut dense = vec![usize::MAX; n];
        let mut sparse = FxHashMap::default();
        for (j, l) in levels.iter().enumerate() {
            match usize::try_from(l.0) {
                Ok(d) if d < n => {
                    if dense[d] == usize::MAX {
                        dense[d] = j;
                    }
                }
                _ => {
                    sparse.entry(l.0).or_insert(j);
                }
            }
        }
        Gains { levels, dense, sparse }
    }

    fn gain(&self, rel: i64) -> f64 {
        let at = match usize::try_from(rel) {
            Ok(d) if d < self.dense.len() => Some(self.dense[d]),
            _ => self.sparse.get(&rel).copied(),
        };
        at.map_or(0.0, |j| self.levels[j].1)
    }

    /// Walks the ideal ranking: gains in decreasing order, each repeated num_at_level times.
    fn ideal(&self) -> IdealWalk<'_> {
        let cur = self.levels.len() as i64 - 1;
        IdealWalk { gains: self, cur, num_at_level: 0 }
    }
}

/// Sort `v` as glibc's `qsort` does (a top-down merge sort that takes from the left
/// run while `left_first(left, right)`): the same order as a stable sort for any
/// consistent comparison, and no panic for an inconsistent one.
fn merge_sort_by<T: Copy>(v: &mut [T], left_first: impl Fn(&T, &T) -> bool + Copy) {
    let mut tmp = Vec::with_capacity(v.len());
    merge_sort_rec(v, &mut tmp, left_first);
}

fn merge_sort_rec<T: Copy>(v: &mut [T], tmp: &mut Vec<T>, left_first: impl Fn(&T, &T) -> bool + Copy) {
    let n = v.len();
    if n <= 1 {
        return;
    }
    let n1 = n / 2;
    merge_sort_rec(&mut v[..n1], tmp, left_first);
    merge_sort_rec(&mut v[n1..], tmp, left_first);
    tmp.clear();
    let (mut i, mut j) = (0, n1);
    while i < n1 && j < n {
        if left_first(&v[i], &v[j]) {
            tmp.push(v[i]);
            i += 1;
        } else {
            tmp.push(v[j]);
            j += 1;
        }
    }
    tmp.extend_from_slice(&v[i..n1]);
    // What is left of the right run is in place already.
    v[..tmp.len()].copy_from_slice(tmp);
}

struct IdealWalk<'g> {
    gains: &'g Gains,
    cur: i64,
    num_at_level: i64,
}

impl IdealWalk<'_> {
    fn current(&self) -> f64 {
        if self.cur >= 0 {
            self.gains.levels[self.cur as usize].1
        } else {
            0.0
        }
    }
    /// Advance one rank and return the ideal gain there (trec_eval's inner loop).
    fn step(&mut self) -> f64 {
        self.num_at_level += 1;
        while self.cur >= 0 && self.num_at_level > self.gains.levels[self.cur as usize].2 {
            self.num_at_level = 1;
            self.cur -= 1;
        }
        self.current()
    }
}

/// Compute every value of `m` for one query into `out` (pre-zeroed).
pub fn compute(m: &Measure, rr: &ResRels, level: i64, num_docs_in_coll: i64, out: &mut [f64]) {
    let rel = &rr.rel_list;
    let grades = &rr.grades;
    let lvl = level as f64;
    let num_ret = rr.num_ret();
    match m.kind {
        Kind::Runid | Kind::Relstring => {}
        Kind::NumQ => out[0] = 1.0,
        Kind::NumRet => out[0] = num_ret as f64,
        Kind::NumRel => out[0] = rr.num_rel as f64,
        Kind::NumRelRet => out[0] = rr.num_rel_ret as f64,
        Kind::Map => out[0] = metrics::average_precision(grades, lvl, rr.num_rel as usize, None),
        Kind::GmMap => {
            let ap = metrics::average_precision(grades, lvl, rr.num_rel as usize, None);
            out[0] = ap.max(MIN_GEO_MEAN).ln();
        }
        Kind::Rprec => out[0] = metrics::r_precision(grades, lvl, rr.num_rel as usize),
        Kind::Bpref => out[0] = bpref(rr, level),
        Kind::GmBpref => out[0] = bpref(rr, level).max(MIN_GEO_MEAN).ln(),
        Kind::RecipRank => out[0] = metrics::reciprocal_rank(grades, lvl, None),
        Kind::IprecAtRecall => iprec_at_recall(rr, level, &m.double_cutoffs, out),
        Kind::P => {
            for (o, &k) in out.iter_mut().zip(&m.long_cutoffs) {
                *o = metrics::precision_at(grades, lvl, k as usize);
            }
        }
        Kind::Recall => {
            for (o, &k) in out.iter_mut().zip(&m.long_cutoffs) {
                *o = metrics::recall_at(grades, lvl, rr.num_rel as usize, Some(k as usize));
            }
        }
        Kind::InfAP => out[0] = infap(rr, level),
        Kind::RprecMult => rprec_mult(rr, level, &m.double_cutoffs, out),
        Kind::Utility => {
            let p = &m.doubles;
            let (ret, rel_ret, nrel) = (num_ret as f64, rr.num_rel_ret as f64, rr.num_rel as f64);
            out[0] = p[0] * rel_ret
                + p[1] * (ret - rel_ret)
                + p[2] * (nrel - rel_ret)
                + p[3] * (num_docs_in_coll as f64 + rel_ret - ret - nrel);
        }
        Kind::Pt11Avg => out[0] = pt11_avg(rr, level, &m.doubles),
        Kind::BinG => {
            let mut found = 0i64;
            let mut sum = 0.0;
            for (i, &r) in rel.iter().enumerate() {
                if r >= level {
                    found += 1;
                    sum += 1.0 / log2((3 + i as i64 - found) as usize);
                }
            }
            if found > 0 {
                out[0] = sum / rr.num_rel as f64;
            }
        }
        Kind::G => out[0] = g_measure(rr, &Gains::new(&m.pairs, rr)),
        Kind::Dcg | Kind::IdealDcg | Kind::Ndcg => {
            let (dcg, ideal) = dcg_full(rr, &Gains::new(&m.pairs, rr));
            out[0] = match m.kind {
                Kind::Dcg => dcg,
                Kind::IdealDcg => ideal,
                _ if ideal > 0.0 => dcg / ideal,
                _ => 0.0,
            };
        }
        Kind::NdcgRel => out[0] = ndcg_rel(rr, &Gains::new(&m.pairs, rr)),
        Kind::Rndcg => {
            if rr.num_rel > 0 {
                out[0] = rndcg(rr, &Gains::new(&m.pairs, rr));
            }
        }
        Kind::NdcgCut => {
            let ideal = rr.ideal_grades();
            for (o, &k) in out.iter_mut().zip(&m.long_cutoffs) {
                *o = metrics::ndcg(grades, ideal, Some(k as usize), metrics::Gain::Linear);
            }
        }
        Kind::MapCut => {
            if rr.num_rel > 0 {
                for (o, &k) in out.iter_mut().zip(&m.long_cutoffs) {
                    *o = metrics::average_precision(grades, lvl, rr.num_rel as usize, Some(k as usize));
                }
            }
        }
        Kind::RelativeP => {
            if rr.num_rel > 0 {
                for (o, &k) in out.iter_mut().zip(&m.long_cutoffs) {
                    let hits = metrics::hits(grades, lvl, Some(k as usize));
                    *o = hits as f64 / k.min(rr.num_rel) as f64;
                }
            }
        }
        Kind::Success => {
            for (o, &k) in out.iter_mut().zip(&m.long_cutoffs) {
                *o = metrics::success_at(grades, lvl, Some(k as usize));
            }
        }
        Kind::SetP => {
            if num_ret > 0 {
                out[0] = rr.num_rel_ret as f64 / num_ret as f64;
            }
        }
        Kind::SetRelativeP => {
            if num_ret > 0 && rr.num_rel > 0 {
                out[0] = rr.num_rel_ret as f64 / num_ret.min(rr.num_rel) as f64;
            }
        }
        Kind::SetRecall => {
            if rr.num_rel > 0 {
                out[0] = rr.num_rel_ret as f64 / rr.num_rel as f64;
            }
        }
        Kind::SetMap => {
            if num_ret > 0 && rr.num_rel > 0 {
                let rr_f = rr.num_rel_ret as f64;
                out[0] = (rr_f * rr_f) / (num_ret as f64 * rr.num_rel as f64);
            }
        }
        Kind::SetF => {
            if rr.num_rel_ret > 0 {
                let p = rr.num_rel_ret as f64 / num_ret as f64;
                let r = rr.num_rel_ret as f64 / rr.num_rel as f64;
                let x = m.doubles[0];
                out[0] = (x + 1.0) * p * r / (x * p + r);
            }
        }
        Kind::NumNonrelJudgedRet => {
            out[0] = (num_ret - rr.num_nonpool - rr.num_unjudged_in_pool - rr.num_rel_ret) as f64;
        }
        Kind::Rbp => out[0] = rbp(rr, &m.pairs),
        Kind::RbpResid => {
            let p = persistence(&m.pairs);
            let mut unj = 0;
            let mut sum = 0.0;
            let mut cur_p = 1.0;
            for &r in rel {
                if r < 0 {
                    unj += 1;
                    sum += cur_p;
                }
                cur_p *= p;
            }
            if unj > 0 {
                out[0] = cur_p + (1.0 - p) * sum;
            }
        }
        Kind::Unj => {
            for (o, &k) in out.iter_mut().zip(&m.long_cutoffs) {
                let unj = rel.iter().take(k as usize).filter(|&&r| r < 0).count();
                *o = unj as f64 / k as f64;
            }
        }
    }
}

/// trec_eval's `relstring`: one character per retrieved document.
pub fn relstring(m: &Measure, rr: &ResRels) -> String {
    let len = (m.doubles[0] as i64).min(rr.num_ret()).max(0) as usize;
    rr.rel_list[..len]
        .iter()
        .map(|&r| match r {
            r if r > 9 => '>',
            r if r >= 0 => (b'0' + r as u8) as char,
            -1 => '-',
            -2 => '.',
            _ => '<',
        })
        .collect()
}

fn bpref(rr: &ResRels, level: i64) -> f64 {
    let num_nonrel: i64 = rr.rel_levels.iter().take(level.max(0) as usize).sum();
    let mut nonrel_so_far = 0i64;
    let mut bpref = 0.0;
    for &r in &rr.rel_list {
        if r < 0 {
            continue;
        }
        if r < level {
            nonrel_so_far += 1;
        } else if nonrel_so_far > 0 {
            bpref += 1.0 - nonrel_so_far.min(rr.num_rel) as f64 / num_nonrel.min(rr.num_rel) as f64;
        } else {
            bpref += 1.0;
        }
    }
    if rr.num_rel > 0 {
        bpref /= rr.num_rel as f64;
    }
    bpref
}

fn infap(rr: &ResRels, level: i64) -> f64 {
    let (mut nonrel, mut rel_so_far, mut unjudged) = (0i64, 0i64, 0i64);
    let mut inf_ap = 0.0;
    for (j, &r) in rr.rel_list.iter().enumerate() {
        if r == super::RELVALUE_NONPOOL {
            continue;
        }
        if r == super::RELVALUE_UNJUDGED {
            unjudged += 1;
            continue;
        }
        if r >= 0 && r < level {
            nonrel += 1;
            continue;
        }
        rel_so_far += 1;
        if j == 0 {
            inf_ap += 1.0;
        } else {
            let fj = j as f64;
            inf_ap += 1.0 / (fj + 1.0)
                + (fj / (fj + 1.0))
                    * ((rel_so_far - 1 + nonrel + unjudged) as f64 / fj)
                    * ((rel_so_far - 1) as f64 + INFAP_EPSILON)
                    / ((rel_so_far - 1 + nonrel) as f64 + 2.0 * INFAP_EPSILON);
        }
    }
    if rr.num_rel > 0 {
        inf_ap /= rr.num_rel as f64;
    }
    inf_ap
}

/// Shared walk of iprec_at_recall and 11pt_avg: interpolated precision at each
/// recall cutoff (given as numbers of relevant documents), highest first.
fn interpolated_precisions(rr: &ResRels, level: i64, cutoffs: &[i64], mut emit: impl FnMut(usize, f64)) {
    let num_ret = rr.num_ret();
    let mut current = cutoffs.len() as i64 - 1;
    while current >= 0 && cutoffs[current as usize] > rr.num_rel_ret {
        current -= 1;
    }
    let mut int_precis = rr.num_rel_ret as f64 / num_ret as f64;
    let mut rel_so_far = rr.num_rel_ret;
    let mut i = num_ret;
    while i > 0 && rel_so_far > 0 {
        let precis = rel_so_far as f64 / i as f64;
        if int_precis < precis {
            int_precis = precis;
        }
        if rr.rel_list[(i - 1) as usize] >= level {
            while current >= 0 && rel_so_far == cutoffs[current as usize] {
                emit(current as usize, int_precis);
                current -= 1;
            }
            rel_so_far -= 1;
        }
        i -= 1;
    }
    while current >= 0 {
        emit(current as usize, int_precis);
        current -= 1;
    }
}

fn recall_cutoffs(points: &[f64], num_rel: i64) -> Vec<i64> {
    // trec_eval 10 rounds (lround); v9 added 0.9 and truncated.
    points.iter().map(|p| (p * num_rel as f64).round() as i64).collect()
}

fn iprec_at_recall(rr: &ResRels, level: i64, points: &[f64], out: &mut [f64]) {
    let cutoffs = recall_cutoffs(points, rr.num_rel);
    interpolated_precisions(rr, level, &cutoffs, |i, v| out[i] = v);
}

fn pt11_avg(rr: &ResRels, level: i64, points: &[f64]) -> f64 {
    let cutoffs = recall_cutoffs(points, rr.num_rel);
    let mut sum = 0.0;
    interpolated_precisions(rr, level, &cutoffs, |_, v| sum += v);
    sum / points.len() as f64
}

fn rprec_mult(rr: &ResRels, level: i64, mults: &[f64], out: &mut [f64]) {
    let num_ret = rr.num_ret();
    let cutoffs: Vec<i64> = mults.iter().map(|m| (m * rr.num_rel as f64 + 0.9) as i64).collect();
    let mut current = cutoffs.len() as i64 - 1;
    while current >= 0 && cutoffs[current as usize] > num_ret {
        out[current as usize] = rr.num_rel_ret as f64 / cutoffs[current as usize] as f64;
        current -= 1;
    }
    let mut rel_so_far = rr.num_rel_ret;
    let mut i = num_ret;
    while i > 0 && rel_so_far > 0 {
        let precis = rel_so_far as f64 / i as f64;
        while current >= 0 && i == cutoffs[current as usize] {
            out[current as usize] = precis;
            current -= 1;
        }
        if rr.rel_list[(i - 1) as usize] >= level {
            rel_so_far -= 1;
        }
        i -= 1;
    }
}

fn dcg_full(rr: &ResRels, gains: &Gains) -> (f64, f64) {
    let mut walk = gains.ideal();
    let mut ideal_gain = walk.current();
    let (mut dcg, mut ideal) = (0.0, 0.0);
    let mut i = 0usize;
    let n = rr.rel_list.len();
    while i < n && ideal_gain > 0.0 {
        let g = gains.gain(rr.rel_list[i]);
        if g != 0.0 {
            dcg += g / log2(i + 2);
        }
        ideal_gain = walk.step();
        if ideal_gain > 0.0 {
            ideal += ideal_gain / log2(i + 2);
        }
        i += 1;
    }
    while i < n {
        let g = gains.gain(rr.rel_list[i]);
        if g != 0.0 {
            dcg += g / log2(i + 2);
        }
        i += 1;
    }
    while ideal_gain > 0.0 {
        ideal_gain = walk.step();
        if ideal_gain > 0.0 {
            ideal += ideal_gain / log2(i + 2);
        }
        i += 1;
    }
    (dcg, ideal)
}

fn ndcg_rel(rr: &ResRels, gains: &Gains) -> f64 {
    let mut walk = gains.ideal();
    let mut ideal_gain = walk.current();
    let (mut dcg, mut ideal, mut sum) = (0.0, 0.0, 0.0);
    let (mut num_rel, mut num_rel_ret) = (0i64, 0i64);
    let n = rr.rel_list.len();
    let mut i = 0usize;
    while i < n && ideal_gain > 0.0 {
        let g = gains.gain(rr.rel_list[i]);
        if g != 0.0 {
            dcg += g / log2(i + 2);
        }
        ideal_gain = walk.step();
        if ideal_gain > 0.0 {
            num_rel += 1;
            ideal += ideal_gain / log2(i + 2);
        }
        if g > 0.0 {
            sum += dcg / ideal;
            num_rel_ret += 1;
        }
        i += 1;
    }
    while i < n {
        let g = gains.gain(rr.rel_list[i]);
        if g != 0.0 {
            dcg += g / log2(i + 2);
        }
        if g > 0.0 {
            sum += dcg / ideal;
            num_rel_ret += 1;
        }
        i += 1;
    }
    while ideal_gain > 0.0 {
        ideal_gain = walk.step();
        if ideal_gain > 0.0 {
            num_rel += 1;
            ideal += ideal_gain / log2(i + 2);
        }
        i += 1;
    }
    sum += (num_rel - num_rel_ret) as f64 * dcg / ideal;
    if sum > 0.0 {
        sum / num_rel as f64
    } else {
        0.0
    }
}

fn rndcg(rr: &ResRels, gains: &Gains) -> f64 {
    let mut walk = gains.ideal();
    let mut ideal_gain = walk.current();
    let mut old_ideal_gain = ideal_gain;
    let (mut dcg, mut ideal, mut sum) = (0.0, 0.0, 0.0);
    let mut changes = 0i64;
    let n = rr.rel_list.len();
    let mut i = 0usize;
    while i < n && ideal_gain > 0.0 {
        let g = gains.gain(rr.rel_list[i]);
        ideal_gain = walk.step();
        if old_ideal_gain != ideal_gain {
            if ideal > 0.0 {
                sum += dcg / ideal;
                changes += 1;
            }
            old_ideal_gain = ideal_gain;
        }
        if g != 0.0 {
            dcg += g / log2(i + 2);
        }
        if ideal_gain > 0.0 {
            ideal += ideal_gain / log2(i + 2);
        }
        i += 1;
    }
    if i < n {
        while i < n {
            let g = gains.gain(rr.rel_list[i]);
            if g != 0.0 {
                dcg += g / log2(i + 2);
            }
            i += 1;
        }
        if ideal > 0.0 {
            sum += dcg / ideal;
            changes += 1;
        }
    }
    while ideal_gain > 0.0 {
        ideal_gain = walk.step();
        if old_ideal_gain != ideal_gain {
            if ideal > 0.0 {
                sum += dcg / ideal;
                changes += 1;
            }
            old_ideal_gain = ideal_gain;
        }
        if ideal_gain > 0.0 {
            ideal += ideal_gain / log2(i + 2);
        }
        i += 1;
    }
    sum / changes as f64
}

fn g_measure(rr: &ResRels, gains: &Gains) -> f64 {
    let mut walk = gains.ideal();
    let mut ideal_gain = walk.current();
    let (mut results_g, mut sum_results, mut sum_ideal, mut sum_cost) = (0.0, 0.0, 0.0, 0.0);
    let min_cost = 1.0;
    let n = rr.rel_list.len();
    let mut i = 0usize;
    while i < n && ideal_gain > 0.0 {
        let g = gains.gain(rr.rel_list[i]);
        sum_results += g;
        ideal_gain = walk.step();
        if ideal_gain > 0.0 {
            sum_ideal += ideal_gain;
        }
        sum_cost += if ideal_gain >= min_cost { ideal_gain } else { min_cost };
        if g != 0.0 {
            results_g += g / (2.0 + sum_cost - sum_results).log2();
        }
        i += 1;
    }
    while i < n {
        let g = gains.gain(rr.rel_list[i]);
        sum_results += g;
        sum_cost += min_cost;
        if g != 0.0 {
            results_g += g / (2.0 + sum_cost - sum_results).log2();
        }
        i += 1;
    }
    while ideal_gain > 0.0 {
        ideal_gain = walk.step();
        if ideal_gain > 0.0 {
            sum_ideal += ideal_gain;
        }
    }
    if sum_ideal > 0.0 {
        results_g / sum_ideal
    } else {
        0.0
    }
}

fn persistence(pairs: &[(String, f64)]) -> f64 {
    pairs.iter().rev().find(|(n, _)| n == "p").map_or(0.9, |(_, v)| *v)
}

fn rbp(rr: &ResRels, pairs: &[(String, f64)]) -> f64 {
    let p = persistence(pairs);
    let mut gains = Gains::new(pairs, rr);
    let min = gains.levels.iter().map(|l| l.1).fold(f64::INFINITY, f64::min);
    let max = gains.levels.iter().map(|l| l.1).fold(f64::NEG_INFINITY, f64::max);
    if min < 0.0 || max > 1.0 {
        for l in &mut gains.levels {
            l.1 = (l.1 - min) / (max - min);
        }
    }
    let mut sum = 0.0;
    let mut cur_p = 1.0;
    for &r in &rr.rel_list {
        let g = gains.gain(r);
        if g != 0.0 {
            sum += g * cur_p;
        }
        cur_p *= p;
    }
    (1.0 - p) * sum
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolve_names_and_params() {
        let ms = resolve(&["P.5,7,3".into(), "ndcg_cut.10,20,23.4".into(), "Rprec_mult.5.0,0.2,0.35".into()]).unwrap();
        let names: Vec<_> = ms.iter().flat_map(|m| m.names.clone()).collect();
        assert_eq!(
            names,
            ["P_3", "P_5", "P_7", "Rprec_mult_0.20", "Rprec_mult_0.35", "Rprec_mult_5.00", "ndcg_cut_10", "ndcg_cut_20", "ndcg_cut_23"]
                .iter()
                .map(|s| s.to_string())
                .collect::<Vec<_>>()
        );
        let ms = resolve(&["ndcg.1=3,2=9,4=4.5".into(), "utility.2,-1,0,0".into()]).unwrap();
        assert_eq!(ms[0].names, ["utility_2,-1,0,0"]);
        assert_eq!(ms[1].names, ["ndcg_1=3,2=9,4=4.5"]);
        assert!(resolve(&["nope".into()]).unwrap_err().to_string().contains("known measures"));
        assert!(resolve(&["P.0".into()]).is_err());
        assert!(resolve(&["P.5,5".into()]).is_err());
        assert!(resolve(&["ndcg.1".into()]).is_err());
    }

    #[test]
    fn a_recall_point_or_multiplier_that_is_not_a_number_is_refused() {
        // 34 cutoffs with NaNs among them panicked in the sort (no total order); fewer gave
        // a column named iprec_at_recall_nan.
        let nans = "0.312,nan,0.749,nan,0.606,0.909,0.435,nan,0.653,nan,nan,nan,0.073,0.017,0.841,0.75,0.479,0.019,\
                    0.895,0.575,0.099,0.003,0.217,0.323,0.113,0.82,0.896,0.114,0.286,nan,0.759,0.513,0.14,0.134";
        for m in ["iprec_at_recall", "Rprec_mult"] {
            let err = resolve(&[format!("{m}.{nans}")]).unwrap_err().to_string();
            assert_eq!(err, format!("measure '{m}': cutoff nan is not a finite number"));
            for bad in ["nan,0.5", "0.5,inf", "-infinity"] {
                assert!(resolve(&[format!("{m}.{bad}")]).is_err(), "{m}.{bad}");
            }
        }
        assert_eq!(resolve(&["iprec_at_recall.0.5,0.25".into()]).unwrap()[0].names.len(), 2);
        for (arg, said) in [
            ("11pt_avg.nan,0.5", "measure '11pt_avg': parameter nan is not a number"),
            ("relstring.nan", "measure 'relstring': parameter nan is not a number"),
            ("utility.1,nan,0,0", "measure 'utility': parameter nan is not a number"),
            ("ndcg.1=nan,2=3", "measure 'ndcg': the value of 1 is not a number (nan)"),
            ("rbp.p=nan", "measure 'rbp': the value of p is not a number (nan)"),
        ] {
            assert_eq!(resolve(&[arg.into()]).unwrap_err().to_string(), said);
        }
        assert!(resolve(&["utility.1,-inf,0,0".into(), "ndcg.1=inf".into()]).is_ok());
    }

    #[test]
    fn c_parsers() {
        assert_eq!(atol("23.4"), 23);
        assert_eq!(atof(".25"), 0.25);
        assert_eq!(atof("5.0"), 5.0);
        assert_eq!(c_fixed(0.125, 2), "0.12");
    }
}
