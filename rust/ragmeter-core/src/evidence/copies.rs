//! Copies of a text among a batch's, by content: runs retrieve the same
//! chunks for many questions. A later copy of a text cannot hold a phrase its
//! first copy did not, and has its normal forms (see `shared::SharedNorms`).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;

use rustc_hash::FxHashMap;

/// The first item recorded with each hash, numbered in the order first
/// recorded (its *group*), shared by threads.
pub(super) struct FirstByHash {
    shards: Vec<Mutex<FxHashMap<u64, (usize, u32)>>>,
    groups: AtomicU32,
}

const SHARDS: usize = 64;

impl FirstByHash {
    pub(super) fn new() -> Self {
        FirstByHash { shards: (0..SHARDS).map(|_| Mutex::new(FxHashMap::default())).collect(), groups: AtomicU32::new(0) }
    }

    /// The first item recorded with hash `h`, and its group; `i` and a new
    /// group when none was (then `i` is recorded).
    pub(super) fn first(&self, h: u64, i: usize) -> (usize, u32) {
        let mut shard = self.shards[(h % SHARDS as u64) as usize].lock().unwrap_or_else(|e| e.into_inner());
        *shard.entry(h).or_insert_with(|| (i, self.groups.fetch_add(1, Ordering::Relaxed)))
    }

    /// Number of groups recorded.
    pub(super) fn groups(&self) -> usize {
        self.groups.load(Ordering::Relaxed) as usize
    }
}

/// A hash of all of `t`'s bytes, 32 bytes a step in four independent lanes.
pub(super) fn content_hash(t: &[u8]) -> u64 {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut lanes = [t.len() as u64, 0x243F_6A88_85A3_08D3, 0x1319_8A2E_0370_7344, 0xA409_3822_299F_31D0];
    let mut blocks = t.chunks_exact(32);
    for block in &mut blocks {
        for (j, lane) in lanes.iter_mut().enumerate() {
            let w = u64::from_le_bytes(block[j * 8..j * 8 + 8].try_into().expect("8 bytes"));
            *lane = (*lane ^ w).wrapping_mul(K).rotate_left(31);
        }
    }
    let mut h = lanes[0] ^ lanes[1].rotate_left(16) ^ lanes[2].rotate_left(32) ^ lanes[3].rotate_left(48);
    for &b in blocks.remainder() {
        h = (h ^ b as u64).wrapping_mul(K);
    }
    (h ^ (h >> 29)).wrapping_mul(K) ^ (h >> 32)
}
