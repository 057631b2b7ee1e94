//! Mutation helpers on a dirty page buffer that the engine owns: they trust the buffer
//! (the engine wrote it, or checked it whole before taking it over) and assert their
//! invariants.

use super::page::*;

/// Initialises an empty page of type `flags`.
pub fn init(page: &mut [u8], pgno: u64, flags: u16) {
    page[..PAGE_HEADER_SIZE].fill(0);
    write_u64(page, 0, pgno);
    write_u16(page, 10, flags);
    write_u16(page, 12, PAGE_HEADER_SIZE as u16);
    write_u16(page, 14, page.len() as u16);
    debug_assert!(page.len() <= MAX_PAGE_SIZE);
}

/// Initialises an empty LEAF2 page (DUPFIXED) of keys of `fixed` bytes.
pub fn init_leaf2(page: &mut [u8], pgno: u64, flags: u16, fixed: usize) {
    debug_assert!(flags & page_flags::LEAF2 != 0 && fixed > 0);
    page[..PAGE_HEADER_SIZE].fill(0);
    write_u64(page, 0, pgno);
    write_u16(page, 8, fixed as u16);
    write_u16(page, 10, flags);
    set_leaf2_count(page, 0);
}

/// LEAF2 bookkeeping, as LMDB keeps it: `lower` = 16 + 2n and `upper - lower` = the
/// bytes not used by keys (so `upper` is a counter that may pass the page size).
fn set_leaf2_count(page: &mut [u8], n: usize) {
    let fixed = read_u16(page, 8) as usize;
    let lower = PAGE_HEADER_SIZE + 2 * n;
    let free = page.len() - PAGE_HEADER_SIZE - n * fixed;
    write_u16(page, 12, lower as u16);
    write_u16(page, 14, (lower + free) as u16);
}

#[inline]
fn leaf2_size(page: &[u8]) -> Option<usize> {
    (read_u16(page, 10) & page_flags::LEAF2 != 0).then(|| read_u16(page, 8) as usize)
}

/// Sets the page number in the header.
pub fn set_pgno(page: &mut [u8], pgno: u64) {
    write_u64(page, 0, pgno);
}

/// Number of nodes on the page.
#[inline]
pub fn num_keys(page: &[u8]) -> usize {
    (read_u16(page, 12) as usize - PAGE_HEADER_SIZE) / 2
}

/// Free bytes on the page.
#[inline]
pub fn free_space(page: &[u8]) -> usize {
    if let Some(fixed) = leaf2_size(page) {
        return page.len() - PAGE_HEADER_SIZE - num_keys(page) * fixed;
    }
    (read_u16(page, 14) - read_u16(page, 12)) as usize
}

/// Makes `out` a copy of a sub-page (a page the size of its bytes, as in a DUPSORT
/// node) with `extra` more bytes of free space, its nodes and slots moved accordingly.
pub fn with_room(page: &[u8], extra: usize, out: &mut Vec<u8>) {
    let len = page.len() + extra;
    out.clear();
    out.resize(len, 0);
    if leaf2_size(page).is_some() {
        // Keys packed after the header; the free space is the tail.
        let n = num_keys(page);
        out[..page.len()].copy_from_slice(page);
        set_leaf2_count(out, n);
        return;
    }
    let lower = read_u16(page, 12) as usize;
    let upper = read_u16(page, 14) as usize;
    out[..lower].copy_from_slice(&page[..lower]);
    out[upper + extra..].copy_from_slice(&page[upper..]);
    shift_slots(&mut out[PAGE_HEADER_SIZE..lower], usize::MAX, extra as u16);
    write_u16(out, 14, (upper + extra) as u16);
    debug_assert!(len <= MAX_PAGE_SIZE);
}

/// Makes the sub-page held in the last `data.len() - extra` bytes of `data` (as a node
/// grown by [`resize_inline_data`] holds its old data) that sub-page with `extra` more
/// bytes of free space, filling `data`, in place: what [`with_room`] copies out. Its
/// header and slots move to the front and its nodes stay where they are, now `extra`
/// bytes further from its start; a LEAF2 sub-page (keys packed after the header, the free
/// space last) moves whole.
pub fn regrow_subpage(data: &mut [u8], extra: usize) {
    debug_assert!(extra <= data.len() && extra.is_multiple_of(2));
    debug_assert!(data.len() <= MAX_PAGE_SIZE);
    if leaf2_size(&data[extra..]).is_some() {
        let n = num_keys(&data[extra..]);
        data.copy_within(extra.., 0);
        set_leaf2_count(data, n);
        return;
    }
    let lower = read_u16(data, extra + 12) as usize;
    let upper = read_u16(data, extra + 14) as usize;
    debug_assert!(PAGE_HEADER_SIZE <= lower && lower <= upper && extra + upper <= data.len());
    data.copy_within(extra..extra + lower, 0);
    shift_slots(&mut data[PAGE_HEADER_SIZE..lower], usize::MAX, extra as u16);
    write_u16(data, 14, (upper + extra) as u16);
}

/// Writes into `page`, just [`init`]ed, one node per key of `keys`, in order, each with no
/// data (the values of a DUPSORT sub-page): the nodes [`insert_node`] would write one
/// after another, in one pass. Returns false (the page as it was) if they do not fit.
pub fn fill_key_nodes(page: &mut [u8], keys: &[&[u8]]) -> bool {
    debug_assert!(leaf2_size(page).is_none() && num_keys(page) == 0);
    let need: usize = keys
        .iter()
        .map(|k| 2 + even(NODE_HEADER_SIZE + k.len()))
        .sum();
    if need > free_space(page) {
        return false;
    }
    let mut upper = read_u16(page, 14) as usize;
    for (i, key) in keys.iter().enumerate() {
        upper -= even(NODE_HEADER_SIZE + key.len());
        let header = NodeValue::Inline {
            flags: 0,
            data: &[],
        }
        .header(key.len());
        page[upper..upper + NODE_HEADER_SIZE].copy_from_slice(&header);
        page[upper + NODE_HEADER_SIZE..upper + NODE_HEADER_SIZE + key.len()].copy_from_slice(key);
        write_u16(page, PAGE_HEADER_SIZE + 2 * i, upper as u16);
    }
    write_u16(page, 12, (PAGE_HEADER_SIZE + 2 * keys.len()) as u16);
    write_u16(page, 14, upper as u16);
    true
}

/// Adds `delta` to every node offset in `slots` (a page's slot array) that is at most
/// `at_most`: the nodes stored up to there moved by `delta` bytes (modulo 2^16: a move
/// down the page is a wrapped negative; the offsets it gives stay within the page). One
/// pass without bounds checks, which the compiler vectorises.
#[inline]
fn shift_slots(slots: &mut [u8], at_most: usize, delta: u16) {
    debug_assert!(slots.len().is_multiple_of(2));
    let at_most = at_most.min(u16::MAX as usize) as u16;
    // Eight slots at a time, the choice made with a mask: a form the compiler turns into
    // vector instructions.
    let shift = |off: u16| off.wrapping_add(delta & 0u16.wrapping_sub(u16::from(off <= at_most)));
    let mut eights = slots.chunks_exact_mut(16);
    for chunk in &mut eights {
        let mut offs = [0u16; 8];
        for (off, b) in offs.iter_mut().zip(chunk.chunks_exact(2)) {
            *off = shift(u16::from_le_bytes([b[0], b[1]]));
        }
        for (off, b) in offs.iter().zip(chunk.chunks_exact_mut(2)) {
            b.copy_from_slice(&off.to_le_bytes());
        }
    }
    for slot in eights.into_remainder().chunks_exact_mut(2) {
        let off = shift(u16::from_le_bytes([slot[0], slot[1]]));
        slot.copy_from_slice(&off.to_le_bytes());
    }
}

/// Inserts a node at slot `idx`. Returns false (changing nothing) if it does not fit.
pub fn insert_node(page: &mut [u8], idx: usize, key: &[u8], value: NodeValue<'_>) -> bool {
    let n = num_keys(page);
    if let Some(fixed) = leaf2_size(page) {
        // LEAF2: keys packed in order, no nodes, no data.
        debug_assert_eq!(key.len(), fixed);
        if fixed > free_space(page) {
            return false;
        }
        let at = PAGE_HEADER_SIZE + idx * fixed;
        let end = PAGE_HEADER_SIZE + n * fixed;
        page.copy_within(at..end, at + fixed);
        page[at..at + fixed].copy_from_slice(key);
        set_leaf2_count(page, n + 1);
        return true;
    }
    debug_assert!(idx <= n);
    let size = value.footprint(key.len());
    if size + 2 > free_space(page) {
        return false;
    }
    let lower = read_u16(page, 12) as usize;
    let upper = read_u16(page, 14) as usize - size;
    let slot = PAGE_HEADER_SIZE + 2 * idx;
    page.copy_within(slot..lower, slot + 2);
    write_u16(page, slot, upper as u16);
    write_u16(page, 12, (lower + 2) as u16);
    write_u16(page, 14, upper as u16);
    page[upper..upper + NODE_HEADER_SIZE].copy_from_slice(&value.header(key.len()));
    let key_end = upper + NODE_HEADER_SIZE + key.len();
    page[upper + NODE_HEADER_SIZE..key_end].copy_from_slice(key);
    match value {
        NodeValue::Overflow { pgno, .. } => write_u64(page, key_end, pgno),
        NodeValue::Inline { data, .. } => {
            page[key_end..key_end + data.len()].copy_from_slice(data);
        }
        NodeValue::Child(_) => {}
    }
    true
}

/// Footprint of the node at slot `idx` (the engine wrote it, so it is well formed).
#[inline(always)]
fn node_footprint(page: &[u8], idx: usize) -> (usize, usize) {
    let off = read_u16(page, PAGE_HEADER_SIZE + 2 * idx) as usize;
    let flags = read_u16(page, 10);
    let ksize = read_u16(page, off + 6) as usize;
    let stored = if flags & page_flags::BRANCH != 0 {
        0
    } else if read_u16(page, off + 4) & node_flags::BIGDATA != 0 {
        8
    } else {
        read_u16(page, off) as usize | (read_u16(page, off + 2) as usize) << 16
    };
    (off, even(NODE_HEADER_SIZE + ksize + stored))
}

/// Appends a node given as its stored bytes (header, key, data) after the last slot.
/// Returns false if it does not fit.
pub fn append_raw(page: &mut [u8], raw: &[u8]) -> bool {
    if leaf2_size(page).is_some() {
        // A LEAF2 "node" is just its key.
        return insert_node(
            page,
            num_keys(page),
            raw,
            NodeValue::Inline {
                flags: 0,
                data: &[],
            },
        );
    }
    // One node: the whole run is all or nothing.
    append_raws(page, [raw])
}

/// Appends nodes given as their stored bytes after the last slot of a page that is not
/// LEAF2: [`append_raw`] for a run of nodes, with the page's bounds read and written once.
/// Returns false if they do not all fit (the page then holds those that did). Inlined
/// into its callers, which build whole pages with it (left to the optimizer, it was
/// sometimes not, at some 50 instructions a page).
#[inline]
pub fn append_raws<'r>(page: &mut [u8], raws: impl IntoIterator<Item = &'r [u8]>) -> bool {
    debug_assert!(leaf2_size(page).is_none(), "LEAF2 pages have no nodes");
    let mut lower = read_u16(page, 12) as usize;
    let mut upper = read_u16(page, 14) as usize;
    let mut all = true;
    for raw in raws {
        let size = even(raw.len());
        if lower + 2 + size > upper {
            all = false;
            break;
        }
        upper -= size;
        page[upper..upper + raw.len()].copy_from_slice(raw);
        write_u16(page, lower, upper as u16);
        lower += 2;
    }
    write_u16(page, 12, lower as u16);
    write_u16(page, 14, upper as u16);
    all
}

/// Removes the node at slot `idx`, compacting the node area.
pub fn delete_node(page: &mut [u8], idx: usize) {
    let n = num_keys(page);
    assert!(idx < n, "delete_node: index {idx} out of {n}");
    if let Some(fixed) = leaf2_size(page) {
        let at = PAGE_HEADER_SIZE + idx * fixed;
        let end = PAGE_HEADER_SIZE + n * fixed;
        page.copy_within(at + fixed..end, at);
        set_leaf2_count(page, n - 1);
        return;
    }
    let (off, size) = node_footprint(page, idx);
    let lower = read_u16(page, 12) as usize;
    let upper = read_u16(page, 14) as usize;
    // Nodes stored below `off` move up by `size` to close the gap.
    page.copy_within(upper..off, upper + size);
    shift_slots(&mut page[PAGE_HEADER_SIZE..lower], off - 1, size as u16);
    let slot = PAGE_HEADER_SIZE + 2 * idx;
    page.copy_within(slot + 2..lower, slot);
    write_u16(page, 12, (lower - 2) as u16);
    write_u16(page, 14, (upper + size) as u16);
}

/// Gives leaf node `idx`, whose data is inline, room for `len` bytes of data instead of
/// what it holds, in place: the node keeps its end, and its start moves by the difference,
/// with the nodes stored below it (only its header and key when it is the lowest node of
/// the page, a DUPSORT sub-page taking one value after another). One move of those bytes,
/// where a delete and an insert would move them twice and shift the slots twice. The
/// data's bytes are then undefined; the caller writes them ([`overwrite_inline_data`]).
/// Returns false (changing nothing) if the page lacks room.
pub fn resize_inline_data(page: &mut [u8], idx: usize, len: usize) -> bool {
    debug_assert!(leaf2_size(page).is_none(), "a LEAF2 item has no data");
    let (off, old) = node_footprint(page, idx);
    debug_assert_eq!(read_u16(page, off + 4) & node_flags::BIGDATA, 0);
    let ksize = read_u16(page, off + 6) as usize;
    let new = even(NODE_HEADER_SIZE + ksize + len);
    if new > old && new - old > free_space(page) {
        return false;
    }
    let upper = read_u16(page, 14) as usize;
    // Everything from `upper` to the end of this node's key moves by `old - new` bytes
    // (down the page when the node grows); the slots of the nodes moved follow.
    let (new_upper, new_off) = (upper + old - new, off + old - new);
    page.copy_within(upper..off + NODE_HEADER_SIZE + ksize, new_upper);
    if off == upper {
        write_u16(page, PAGE_HEADER_SIZE + 2 * idx, new_off as u16);
    } else {
        let lower = read_u16(page, 12) as usize;
        shift_slots(
            &mut page[PAGE_HEADER_SIZE..lower],
            off,
            (old as u16).wrapping_sub(new as u16),
        );
    }
    write_u16(page, 14, new_upper as u16);
    write_u16(page, new_off, len as u16);
    write_u16(page, new_off + 2, (len >> 16) as u16);
    true
}

/// [`resize_inline_data`] only if node `idx` is the lowest of the page (stored at
/// `upper`): only its header and key move. Returns false (changing nothing) otherwise, or
/// if the page lacks room; a delete and an insert then resize it, and leave it the lowest,
/// so that a value rewritten again and again takes this path next time.
pub fn resize_lowest_inline_data(page: &mut [u8], idx: usize, len: usize) -> bool {
    let off = read_u16(page, PAGE_HEADER_SIZE + 2 * idx) as usize;
    off == read_u16(page, 14) as usize && resize_inline_data(page, idx, len)
}

/// Overwrites the inline data of leaf node `idx` in place; `data` must have the size of
/// the data stored there now.
pub fn overwrite_inline_data(page: &mut [u8], idx: usize, data: &[u8]) {
    let off = read_u16(page, PAGE_HEADER_SIZE + 2 * idx) as usize;
    let ksize = read_u16(page, off + 6) as usize;
    let start = off + NODE_HEADER_SIZE + ksize;
    debug_assert_eq!(read_u16(page, off + 4) & node_flags::BIGDATA, 0);
    debug_assert_eq!(
        read_u16(page, off) as usize | (read_u16(page, off + 2) as usize) << 16,
        data.len()
    );
    page[start..start + data.len()].copy_from_slice(data);
}

/// Sets the flags of leaf node `idx` whose data is inline (the node's kind: plain,
/// DUPSORT sub-page or sub-DB record), the data staying as it is.
pub fn set_node_flags(page: &mut [u8], idx: usize, flags: u16) {
    debug_assert_eq!(flags & node_flags::BIGDATA, 0, "an inline node");
    let off = read_u16(page, PAGE_HEADER_SIZE + 2 * idx) as usize;
    debug_assert_eq!(read_u16(page, off + 4) & node_flags::BIGDATA, 0);
    write_u16(page, off + 4, flags);
}

/// Mutable access to the inline data of leaf node `idx`.
pub fn inline_data_mut(page: &mut [u8], idx: usize) -> &mut [u8] {
    let off = read_u16(page, PAGE_HEADER_SIZE + 2 * idx) as usize;
    let ksize = read_u16(page, off + 6) as usize;
    let len = read_u16(page, off) as usize | (read_u16(page, off + 2) as usize) << 16;
    let start = off + NODE_HEADER_SIZE + ksize;
    &mut page[start..start + len]
}

/// Points branch node `idx` at `child`.
pub fn set_child(page: &mut [u8], idx: usize, child: u64) {
    let off = read_u16(page, PAGE_HEADER_SIZE + 2 * idx) as usize;
    write_u16(page, off, child as u16);
    write_u16(page, off + 2, (child >> 16) as u16);
    write_u16(page, off + 4, (child >> 32) as u16);
}

/// Writes the header of the first page of an overflow run of `pages` pages.
pub fn init_overflow(page: &mut [u8], pgno: u64, pages: u32) {
    page[..PAGE_HEADER_SIZE].fill(0);
    write_u64(page, 0, pgno);
    write_u16(page, 10, page_flags::OVERFLOW);
    write_u32(page, 12, pages);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A leaf of 4 KiB with `n` nodes: key `k{i}`, data of `3 + i` bytes of `i`.
    fn leaf(n: usize) -> Vec<u8> {
        let mut page = vec![0u8; 4096];
        init(&mut page, 7, page_flags::LEAF);
        for i in 0..n {
            let data = vec![i as u8; 3 + i];
            let value = NodeValue::Inline {
                flags: 0,
                data: &data,
            };
            assert!(insert_node(
                &mut page,
                i,
                format!("k{i:02}").as_bytes(),
                value
            ));
        }
        page
    }

    /// Stores plain node `idx` again as the page's lowest (deleted and inserted again).
    fn make_lowest(page: &mut [u8], idx: usize) {
        let (key, data) = items(page)[idx].clone();
        delete_node(page, idx);
        let value = NodeValue::Inline {
            flags: 0,
            data: &data,
        };
        assert!(insert_node(page, idx, &key, value));
    }

    /// Every node's key and data, checked whole first.
    fn items(page: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
        let view = PageView::parse(page, 7).unwrap();
        view.validate_all().unwrap();
        (0..view.num_keys())
            .map(|i| {
                let node = view.node(i).unwrap();
                (node.key.to_vec(), node.data.to_vec())
            })
            .collect()
    }

    #[test]
    fn resizing_a_node_keeps_every_other_node() {
        // Node 5 of 9 in the middle of the node area, and again as the lowest node (deleted
        // and inserted again), grown, shrunk and emptied.
        for lowest in [false, true] {
            for len in [40, 1, 200, 0, 8] {
                let mut page = leaf(9);
                if lowest {
                    make_lowest(&mut page, 5);
                }
                let mut want = items(&page);
                let free = free_space(&page);
                assert_eq!(
                    resize_lowest_inline_data(&mut page.clone(), 5, len),
                    lowest,
                    "the lowest-only resize takes the lowest node only"
                );
                assert!(resize_inline_data(&mut page, 5, len));
                let data = vec![0xAB; len];
                overwrite_inline_data(&mut page, 5, &data);
                want[5].1 = data;
                assert_eq!(
                    items(&page),
                    want,
                    "node 5 to {len} bytes (lowest: {lowest})"
                );
                let grown = even(NODE_HEADER_SIZE + 3 + len) as isize
                    - even(NODE_HEADER_SIZE + 3 + 8) as isize;
                assert_eq!(free_space(&page) as isize, free as isize - grown);
            }
        }
    }

    /// A tightly packed sub-page of the values `v{i}` (`3 + i % 4` bytes), as a DUPSORT
    /// node holds them.
    fn subpage(values: usize) -> Vec<u8> {
        let size = |i: usize| 2 + even(NODE_HEADER_SIZE + 3 + i % 4);
        let mut sub = vec![0u8; PAGE_HEADER_SIZE + (0..values).map(size).sum::<usize>()];
        init(&mut sub, 0, page_flags::LEAF | page_flags::SUBP);
        for i in 0..values {
            let value = format!("v{i:0w$}", w = 2 + i % 4);
            assert!(insert_node(&mut sub, i, value.as_bytes(), NO_DATA));
        }
        assert_eq!(free_space(&sub), 0);
        sub
    }

    const NO_DATA: NodeValue<'static> = NodeValue::Inline {
        flags: 0,
        data: &[],
    };

    #[test]
    fn shifting_slots_moves_those_at_most_the_limit() {
        // Every length around the groups of eight, offsets on both sides of the limit
        // and at it, moves up and (wrapped) down.
        for n in 0..26usize {
            let offs: Vec<u16> = (0..n).map(|i| 1000 + (i as u16 * 37) % 64).collect();
            for (at_most, delta) in [(1030, 24u16), (1030, 0u16.wrapping_sub(40)), (0, 8)] {
                let mut slots: Vec<u8> = offs.iter().flat_map(|o| o.to_le_bytes()).collect();
                shift_slots(&mut slots, at_most, delta);
                let got: Vec<u16> = slots
                    .chunks_exact(2)
                    .map(|b| u16::from_le_bytes([b[0], b[1]]))
                    .collect();
                let want: Vec<u16> = offs
                    .iter()
                    .map(|&o| {
                        if usize::from(o) <= at_most {
                            o.wrapping_add(delta)
                        } else {
                            o
                        }
                    })
                    .collect();
                assert_eq!(got, want, "{n} slots, at most {at_most}, delta {delta}");
            }
        }
    }

    #[test]
    fn filling_key_nodes_writes_what_inserting_them_does() {
        let keys: Vec<Vec<u8>> = (0..7).map(|i| vec![b'a' + i as u8; 1 + i % 4]).collect();
        let keys: Vec<&[u8]> = keys.iter().map(|k| &k[..]).collect();
        let size: usize = PAGE_HEADER_SIZE
            + keys
                .iter()
                .map(|k| 2 + even(NODE_HEADER_SIZE + k.len()))
                .sum::<usize>();
        for len in [size, size + 10] {
            let mut inserted = vec![0u8; len];
            init(&mut inserted, 0, page_flags::LEAF | page_flags::SUBP);
            let mut filled = inserted.clone();
            for (i, k) in keys.iter().enumerate() {
                assert!(insert_node(&mut inserted, i, k, NO_DATA));
            }
            assert!(fill_key_nodes(&mut filled, &keys));
            assert_eq!(filled, inserted, "a page of {len} bytes");
        }
        // Too many for the page: nothing written.
        let mut page = vec![0u8; size - 2];
        init(&mut page, 0, page_flags::LEAF | page_flags::SUBP);
        let before = page.clone();
        assert!(!fill_key_nodes(&mut page, &keys));
        assert_eq!(page, before);
    }

    #[test]
    fn a_subpage_grows_where_it_is() {
        // Node 5 of 9 holds a sub-page: in the middle of the node area and as the lowest
        // node; grown by the room of one more value, and by more; its key of 3 bytes makes
        // the node's size odd, so its last byte is padding.
        for lowest in [false, true] {
            for extra in [14, 16, 40] {
                let sub = subpage(6);
                let mut page = leaf(9);
                delete_node(&mut page, 5);
                let value = NodeValue::Inline {
                    flags: node_flags::DUPDATA,
                    data: &sub,
                };
                assert!(insert_node(&mut page, 5, b"k05", value));
                if !lowest {
                    // Node 6 moves below it.
                    make_lowest(&mut page, 6);
                }
                let mut want = items(&page);
                let mut grown = Vec::new();
                with_room(&sub, extra, &mut grown);
                assert!(resize_inline_data(&mut page, 5, sub.len() + extra));
                regrow_subpage(inline_data_mut(&mut page, 5), extra);
                let data = inline_data_mut(&mut page, 5);
                // As the copy `with_room` makes, less its zeroed free space.
                let lower = read_u16(&grown, 12) as usize;
                let upper = read_u16(&grown, 14) as usize;
                assert_eq!(data.len(), grown.len());
                assert_eq!(data[..lower], grown[..lower], "header and slots");
                assert_eq!(data[upper..], grown[upper..], "nodes");
                assert_eq!(free_space(data), extra);
                // And it takes a value.
                let new_value = b"v4a";
                assert!(insert_node(data, 5, new_value, NO_DATA));
                let view = PageView::parse(data, 0).unwrap();
                let values: Vec<Vec<u8>> = (0..view.num_keys())
                    .map(|i| view.key(i).unwrap().to_vec())
                    .collect();
                let mut expected: Vec<Vec<u8>> = (0..6)
                    .map(|i| format!("v{i:0w$}", w = 2 + i % 4).into_bytes())
                    .collect();
                expected.insert(5, new_value.to_vec());
                assert_eq!(values, expected, "lowest: {lowest}, extra: {extra}");
                // The other nodes are as they were.
                want[5].1 = inline_data_mut(&mut page, 5).to_vec();
                assert_eq!(items(&page), want);
            }
        }
    }

    #[test]
    fn a_leaf2_subpage_grows_where_it_is() {
        // Five 8-byte values, grown by room for one and for three more.
        for extra in [8, 24] {
            let mut sub = vec![0u8; PAGE_HEADER_SIZE + 5 * 8];
            init_leaf2(
                &mut sub,
                0,
                page_flags::LEAF | page_flags::LEAF2 | page_flags::SUBP,
                8,
            );
            for i in 0..5u64 {
                let key = (10 * i).to_be_bytes();
                assert!(insert_node(&mut sub, i as usize, &key, NO_DATA));
            }
            let mut grown = Vec::new();
            with_room(&sub, extra, &mut grown);
            // The old sub-page last, as a resized node leaves it; the front undefined.
            let mut data = vec![0xEE; extra];
            data.extend_from_slice(&sub);
            regrow_subpage(&mut data, extra);
            assert_eq!(data[..sub.len()], grown[..sub.len()], "header and keys");
            assert_eq!(read_u16(&data, 12), read_u16(&grown, 12));
            assert_eq!(read_u16(&data, 14), read_u16(&grown, 14));
            assert_eq!(free_space(&data), extra);
            assert!(insert_node(&mut data, 2, &15u64.to_be_bytes(), NO_DATA));
            let view = PageView::parse(&data, 0).unwrap();
            let keys: Vec<u64> = (0..view.num_keys())
                .map(|i| u64::from_be_bytes(view.key(i).unwrap().try_into().unwrap()))
                .collect();
            assert_eq!(keys, [0, 10, 15, 20, 30, 40]);
        }
    }

    #[test]
    fn resizing_past_the_free_space_changes_nothing() {
        let mut page = leaf(9);
        // Node 8, inserted last, is the lowest; node 2 is not.
        let before = page.clone();
        let free = free_space(&page);
        assert!(!resize_inline_data(&mut page, 8, 11 + free + 2));
        assert!(!resize_inline_data(&mut page, 2, 5 + free + 2));
        assert_eq!(page, before);
        // Exactly the free space is room enough.
        let len = 11 + free;
        assert!(resize_inline_data(&mut page, 8, len));
        assert_eq!(free_space(&page), 0);
        overwrite_inline_data(&mut page, 8, &vec![1; len]);
        assert_eq!(items(&page)[8].1, vec![1; len]);
    }
}
