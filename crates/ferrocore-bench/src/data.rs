//! Test data: a seeded generator (so every engine sees the same keys) and keys stored flat
//! in one buffer (no allocation per key, the same iteration cost for every engine).

/// splitmix64.
#[derive(Clone)]
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn fill(&mut self, out: &mut [u8]) {
        for chunk in out.chunks_mut(8) {
            let r = self.next().to_be_bytes();
            chunk.copy_from_slice(&r[..chunk.len()]);
        }
    }
}

/// Owned keys, all `len` bytes long, back to back.
pub struct KeyBuf {
    buf: Vec<u8>,
    len: usize,
}

/// A borrowed run of keys of one length.
#[derive(Clone, Copy)]
pub struct Keys<'a> {
    buf: &'a [u8],
    len: usize,
}

impl KeyBuf {
    /// `n` random keys of `len` bytes from `seed`.
    pub fn random(n: u64, len: usize, seed: u64) -> KeyBuf {
        let mut rng = Rng(seed);
        let mut buf = vec![0u8; n as usize * len];
        for k in buf.chunks_mut(len) {
            rng.fill(k);
        }
        KeyBuf { buf, len }
    }

    /// `n` keys of `len` bytes in ascending order (big-endian counter at the end, the rest
    /// a fixed prefix), for sorted loads.
    pub fn sorted(n: u64, len: usize) -> KeyBuf {
        assert!(len >= 8);
        let mut buf = vec![0x4Bu8; n as usize * len];
        for (i, k) in buf.chunks_mut(len).enumerate() {
            k[len - 8..].copy_from_slice(&(i as u64).to_be_bytes());
        }
        KeyBuf { buf, len }
    }

    /// `n` keys of `len` bytes in ascending order, spread evenly over the whole key space
    /// (first 8 bytes `i * 2^64 / n`, the rest random), so random keys inserted later land
    /// in random places among them.
    pub fn spread(n: u64, len: usize, seed: u64) -> KeyBuf {
        assert!(len >= 8);
        let mut rng = Rng(seed);
        let step = u64::MAX / n.max(1);
        let mut buf = vec![0u8; n as usize * len];
        for (i, k) in buf.chunks_mut(len).enumerate() {
            k[..8].copy_from_slice(&(i as u64 * step).to_be_bytes());
            rng.fill(&mut k[8..]);
        }
        KeyBuf { buf, len }
    }

    pub fn keys(&self) -> Keys<'_> {
        Keys {
            buf: &self.buf,
            len: self.len,
        }
    }
}

impl<'a> Keys<'a> {
    pub fn count(&self) -> usize {
        self.buf.len() / self.len
    }

    pub fn iter(&self) -> std::slice::ChunksExact<'a, u8> {
        self.buf.chunks_exact(self.len)
    }

    /// Runs of at most `n` keys.
    pub fn chunks(&self, n: usize) -> impl Iterator<Item = Keys<'a>> + 'a {
        let len = self.len;
        self.buf.chunks(n * len).map(move |buf| Keys { buf, len })
    }

    /// `parts` runs of about equal size.
    pub fn split(&self, parts: usize) -> Vec<Keys<'a>> {
        let per = self.count().div_ceil(parts.max(1)).max(1);
        self.chunks(per).collect()
    }

    /// The first `n` keys.
    pub fn take(&self, n: usize) -> Keys<'a> {
        Keys {
            buf: &self.buf[..(n * self.len).min(self.buf.len())],
            len: self.len,
        }
    }
}

/// A value of `len` bytes (the same for every key: none of the engines compresses).
pub fn value(len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    Rng(7).fill(&mut v);
    v
}

/// One entry of the W7 indexed load: an ID (8-byte big-endian main-DB key), its record,
/// and its key in each index.
pub struct IndexedEntry {
    pub id: [u8; 8],
    pub index_keys: Vec<[u8; 4]>,
}

/// Index `i`'s attribute has `cardinality(i)` distinct values out of `n` entries, from 2
/// (like objectClass) up to about one per entry (like uid or mail).
fn cardinality(i: usize, n: u64) -> u64 {
    match i {
        0 => 2,
        1 => 10,
        2 => 100,
        3 => 1_000,
        4 => 10_000,
        _ => n.max(1),
    }
}

/// `n` W7 entries with `indexes` index keys each: 4-byte hashes of the attribute value, as
/// back-mdb's equality indexes store them.
pub fn indexed_entries(n: u64, indexes: usize) -> Vec<IndexedEntry> {
    let mut rng = Rng(1001);
    (0..n)
        .map(|id| IndexedEntry {
            id: (id + 1).to_be_bytes(),
            index_keys: (0..indexes)
                .map(|i| {
                    let v = rng.next() % cardinality(i, n);
                    let h = Rng(v ^ ((i as u64) << 56)).next();
                    (h as u32).to_be_bytes()
                })
                .collect(),
        })
        .collect()
}

pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}
