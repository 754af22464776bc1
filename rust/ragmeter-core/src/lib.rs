//! ragmeter-core: the pure-Rust engine behind ragmeter.
//!
//! * [`metrics`]: rank-metric kernels on one ranked list of relevance grades.
//! * [`batch`]: the same kernels over column-oriented batches, in parallel.
//! * [`trec`]: a trec_eval 10.0 compatible evaluator (parsing, measures, output).
//! * [`evidence`]: NFKC-normalised evidence-phrase matching for RAG chunks.

pub mod batch;
pub mod error;
pub mod evidence;
pub mod metrics;
pub mod stats;
pub mod trec;
pub use error::{Error, Result};
