//! The per-character part of ragmeter's matching form, applied to text that
//! is already NFKC: written here from the definition in
//! `rust/ragmeter-core/src/evidence/mod.rs`, independently of ragmeter's
//! fused normaliser, so that comparing the two checks both.

/// Line-break hyphen tracking: a `-` or U+2010 right after a non-space,
/// then optional white space containing a line break, then a non-space.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Hyphen {
    None,
    /// Byte range (start, len) in the output of a hyphen after a non-space.
    Seen(usize, usize),
    /// ... followed by white space with a line break.
    Broken(usize, usize),
}

/// Reusable fold: white space and invisible characters dropped, lower-cased,
/// final sigma folded, line-break hyphens recorded.
pub struct Fold {
    pub out: Vec<u8>,
    soft: Vec<(usize, usize)>,
    state: Hyphen,
    after_space: bool,
}

impl Default for Fold {
    fn default() -> Self {
        Fold { out: Vec::new(), soft: Vec::new(), state: Hyphen::None, after_space: true }
    }
}

impl Fold {
    pub fn run(&mut self, nfkc: &str) {
        self.out.clear();
        self.soft.clear();
        self.state = Hyphen::None;
        // At the start of a text a hyphen is not a line-break hyphen.
        self.after_space = true;
        let b = nfkc.as_bytes();
        let mut i = 0;
        while i < b.len() {
            if b[i] < 0x80 {
                i = self.ascii_run(b, i);
                continue;
            }
            let c = nfkc[i..].chars().next().expect("inside the text");
            self.char(c);
            i += c.len_utf8();
        }
    }

    /// ASCII bytes from `b[i]` on, up to the first non-ASCII byte.
    #[inline]
    fn ascii_run(&mut self, b: &[u8], mut i: usize) -> usize {
        while i < b.len() && b[i] < 0x80 {
            match b[i] {
                b' ' | b'\t' => self.white(false),
                b'\n' | 0x0B | 0x0C | b'\r' => self.white(true),
                b'-' => self.hyphen("-"),
                other => {
                    self.non_space();
                    self.out.push(other.to_ascii_lowercase());
                }
            }
            i += 1;
        }
        i
    }

    #[inline]
    fn char(&mut self, c: char) {
        match c {
            '\u{85}' | '\u{2028}' | '\u{2029}' => self.white(true),
            c if c.is_whitespace() => self.white(false),
            '\u{AD}' | '\u{200B}' | '\u{200C}' | '\u{200D}' | '\u{2060}' | '\u{FEFF}' => self.non_space(),
            '\u{2010}' => self.hyphen("\u{2010}"),
            'ς' => {
                self.non_space();
                self.out.extend_from_slice("σ".as_bytes());
            }
            c => {
                self.non_space();
                let mut buf = [0u8; 4];
                for lower in c.to_lowercase() {
                    self.out.extend_from_slice(lower.encode_utf8(&mut buf).as_bytes());
                }
            }
        }
    }

    /// Any character that is not white space, emitted or not.
    #[inline]
    fn non_space(&mut self) {
        if let Hyphen::Broken(start, len) = self.state {
            self.soft.push((start, len));
        }
        self.state = Hyphen::None;
        self.after_space = false;
    }

    #[inline]
    fn white(&mut self, line_break: bool) {
        if let Hyphen::Seen(start, len) = self.state {
            if line_break {
                self.state = Hyphen::Broken(start, len);
            }
        }
        self.after_space = true;
    }

    #[inline]
    fn hyphen(&mut self, hyphen: &str) {
        let after_space = self.after_space;
        self.non_space();
        let start = self.out.len();
        self.out.extend_from_slice(hyphen.as_bytes());
        if !after_space {
            self.state = Hyphen::Seen(start, hyphen.len());
        }
    }

    pub fn has_soft_hyphens(&self) -> bool {
        !self.soft.is_empty()
    }

    /// The output without its line-break hyphens.
    pub fn dehyphenated(&self) -> Vec<u8> {
        let mut buf = Vec::with_capacity(self.out.len());
        let mut from = 0;
        for &(start, len) in &self.soft {
            buf.extend_from_slice(&self.out[from..start]);
            from = start + len;
        }
        buf.extend_from_slice(&self.out[from..]);
        buf
    }
}
