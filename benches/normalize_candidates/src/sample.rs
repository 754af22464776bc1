//! Test strings: every scalar value in a few contexts, and random strings
//! drawn from every 16-code-point range of every plane (Unicode blocks start
//! and end on multiples of 16, so every block is sampled).

/// Contexts a code point is put in: alone, after a letter (composition with
/// what precedes), before a combining acute (composition with what follows),
/// and between a line-break hyphen and a letter (the hyphen rule).
const CONTEXTS: [(&str, &str); 4] = [("", ""), ("A", ""), ("", "\u{301}"), ("x-\n", "b")];

pub fn every_code_point_alone(mut f: impl FnMut(&str)) {
    let mut s = String::new();
    for c in (0u32..0x11_0000).filter_map(char::from_u32) {
        for (before, after) in CONTEXTS {
            s.clear();
            s.push_str(before);
            s.push(c);
            s.push_str(after);
            f(&s);
        }
    }
}

/// xorshift64*: a fixed seed, so a difference found is found again.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u32) -> u32 {
        (self.next() % n as u64) as u32
    }
}

/// Characters mixed into every range's strings: the ones the normaliser treats
/// specially (white space, hyphens, invisible characters, sigma) and the ones
/// that compose or reorder with their neighbours.
const MIXED_IN: &[(u32, u32)] = &[
    (0x20, 0x7F),     // ASCII, including space and '-'
    (0x09, 0x0E),     // tab, line breaks
    (0x300, 0x370),   // combining diacritics
    (0x1100, 0x1200), // Hangul jamo (leading, vowel, trailing)
    (0xAC00, 0xAC40), // Hangul syllables
    (0x3040, 0x30A0), // hiragana and the voicing marks U+3099/U+309A
    (0x2F00, 0x2FE0), // Kangxi radicals
    (0xFF00, 0xFFF0), // full-width and half-width forms
    (0x2000, 0x2070), // general punctuation: spaces, U+2010, zero-width, U+2028/9
    (0x3A3, 0x3A4),   // Σ
    (0x3C2, 0x3C3),   // ς
    (0xAD, 0xAE),     // soft hyphen
    (0x85, 0x86),     // NEL
    (0x3000, 0x3001), // ideographic space
];

fn mixed_in(rng: &mut Rng) -> char {
    loop {
        let (lo, hi) = MIXED_IN[rng.below(MIXED_IN.len() as u32) as usize];
        if let Some(c) = char::from_u32(lo + rng.below(hi - lo)) {
            return c;
        }
    }
}

fn anywhere(rng: &mut Rng) -> char {
    loop {
        if let Some(c) = char::from_u32(rng.below(0x11_0000)) {
            return c;
        }
    }
}

pub fn random_strings(per_range: usize, mut f: impl FnMut(&str)) {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut s = String::new();
    for base in (0u32..0x11_0000).step_by(16) {
        if (0xD800..0xE000).contains(&base) {
            continue;
        }
        for _ in 0..per_range {
            s.clear();
            let len = 1 + rng.below(12);
            for _ in 0..len {
                let c = match rng.below(8) {
                    0..=3 => char::from_u32(base + rng.below(16)).expect("not a surrogate"),
                    4..=6 => mixed_in(&mut rng),
                    _ => anywhere(&mut rng),
                };
                s.push(c);
            }
            f(&s);
        }
    }
}
