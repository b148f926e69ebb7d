//! The dispatch output as the device kernels leave it (`nvl` and the GIN impls share the layout)
//! and its checks against the host reference: LL rows packed per local expert, HT rows in
//! (source rank, token) order with their top-k metadata.
use super::device::{self, Args, Buf, ExpertSel, RowSet};
use super::reference::{undesc, Layout};
use super::{Ctx, Received};
use crate::error::Result;

/// Bytes of one HT metadata row: descriptor, K local expert indices, K weights, 16-aligned.
pub fn ht_meta_bytes(topk: usize) -> usize {
    (4 + 8 * topk).next_multiple_of(16)
}

/// Where the metadata rows start in the HT receive window: after R x maxT dispatched rows.
pub fn ht_meta_offset(c: &Ctx, a: &Args) -> u64 {
    (a.ranks as usize * c.max_tokens * a.row as usize) as u64
}

/// LL dispatch output : rows packed per local expert in `out`, their
/// descriptors in `src_info`, rows per expert in `recv_count`.
pub fn ll_received(c: &Ctx, a: &Args, out: &Buf, src_info: &Buf, recv_count: &Buf, y: u64) -> Received {
    Received {
        rows: out.ptr,
        desc: src_info.ptr,
        set: RowSet {
            groups: a.local,
            counts: recv_count.ptr,
            count0: 0,
            group_rows: (a.ranks as usize * c.max_tokens) as u64,
        },
        y,
        sel: 0,
        per_row: 0,
        keep: vec![],
    }
}

/// LL layout check: each expert's rows are its (expert, source) segments in source-rank order,
/// the rows inside a segment in arrival order (not deterministic), so compared as a sorted list.
/// `ranges`, where the impl keeps them on the receiver (the GIN impls: `[L][R]` (first, count),
/// by which they pad their combine signals), must give each segment.
pub fn ll_check(
    c: &Ctx,
    a: &Args,
    layout: &Layout,
    src_info: &Buf,
    recv_count: &Buf,
    ranges: Option<&Buf>,
) -> Result<u64> {
    let (l, r) = (a.local as usize, a.ranks as usize);
    let cap = r * c.max_tokens;
    let counts = recv_count.read::<i32>(c.gpu, l)?;
    let info = src_info.read::<u32>(c.gpu, l * cap)?;
    let ranges = ranges.map(|b| b.read::<i32>(c.gpu, 2 * l * r)).transpose()?;
    Ok(ll_wrong(&layout.expert_rows(c.boot.rank()), &counts, &info, cap, r, ranges.as_deref()))
}

/// [`ll_check`] on what it read: `want` each local expert's descriptors in (source, token, slot)
/// order, `counts` its rows, `info` its descriptors `cap` apart, `ranges` `[L][R]` (first, count).
fn ll_wrong(want: &[Vec<u32>], counts: &[i32], info: &[u32], cap: usize, ranks: usize, ranges: Option<&[i32]>) -> u64 {
    let src = |d: &u32| undesc(*d).0;
    let mut wrong = 0;
    for (le, w) in want.iter().enumerate() {
        let got = &info[le * cap..le * cap + (counts[le].max(0) as usize).min(cap)];
        // A row in another source's segment is misplaced, whatever the multiset says.
        wrong += got.iter().zip(w).filter(|(g, w)| src(g) != src(w)).count() as u64;
        let mut sorted = got.to_vec();
        sorted.sort_unstable();
        wrong += diff(&sorted, w);
        if let Some(ranges) = ranges {
            let mut first = 0;
            for s in 0..ranks {
                let n = w.iter().filter(|d| src(d) == s).count() as i32;
                let at = 2 * (le * ranks + s);
                wrong += (ranges[at..at + 2] != [first, n]) as u64;
                first += n;
            }
        }
    }
    wrong
}

/// HT dispatch output: rows in reference order at `recv`, so the descriptors and the expert's
/// selections (this rank's top-k slots of each token, weighted: the combine sums the rows) come
/// from the reference; check_layout compares the descriptors that came with the rows.
pub fn ht_received(c: &Ctx, layout: &Layout, recv: u64, y: u64) -> Result<Received> {
    let me = c.boot.rank();
    let rows = layout.ht_rows(me);
    let descs: Vec<u32> = rows.iter().map(|r| r.desc).collect();
    let first = (me * layout.local_experts) as i32;
    let sel: Vec<ExpertSel> = rows
        .iter()
        .flat_map(|r| r.local_idx.iter().zip(&r.weight))
        .map(|(&le, &weight)| ExpertSel { expert: if le < 0 { -1 } else { first + le }, weight })
        .collect();
    let (descs, sel) = (Buf::upload(c.gpu, &descs)?, Buf::upload(c.gpu, &sel)?);
    Ok(Received {
        rows: recv,
        desc: descs.ptr,
        set: RowSet { groups: 1, counts: 0, count0: rows.len() as i32, group_rows: rows.len().max(1) as u64 },
        y,
        sel: sel.ptr,
        per_row: c.shape.topk as i32,
        keep: vec![descs, sel],
    })
}

/// HT layout check: the notify's offsets and rows per local expert (what a grouped GEMM would
/// size its work by), and every row's metadata, in order.
pub fn ht_check(c: &Ctx, a: &Args, layout: &Layout, offs: &Buf, per_expert: &Buf, recv: u64) -> Result<u64> {
    let me = c.boot.rank();
    let (r, l) = (a.ranks as usize, a.local as usize);
    let offs = offs.read::<i32>(c.gpu, 2 * r + 2)?;
    let mut wrong = offs.iter().zip(layout.ht_offsets(me)).filter(|(g, w)| **g != *w).count() as u64;
    let per_expert = per_expert.read::<i32>(c.gpu, l)?;
    wrong += per_expert.iter().zip(layout.expert_rows(me)).filter(|(g, w)| **g as i64 != w.len() as i64).count() as u64;
    let want = layout.ht_rows(me);
    let n = offs[r].max(0) as usize;
    let k = a.topk as usize;
    let mb = ht_meta_bytes(k);
    let n_read = n.min(r * c.max_tokens);
    let meta = device::read::<u8>(c.gpu, recv + ht_meta_offset(c, a), n_read * mb)?;
    wrong += n.abs_diff(want.len()) as u64;
    for (i, w) in want.iter().enumerate().take(n_read) {
        let m = &meta[i * mb..(i + 1) * mb];
        let word = |j: usize| u32::from_le_bytes(m[j * 4..j * 4 + 4].try_into().unwrap());
        let ok = word(0) == w.desc
            && (0..k).all(|j| word(1 + j) as i32 == w.local_idx[j])
            && (0..k).all(|j| f32::from_bits(word(1 + k + j)) == w.weight[j]);
        wrong += !ok as u64;
    }
    Ok(wrong)
}

/// Entries of `want` missing from `got` plus entries of `got` not wanted (both sorted).
pub fn diff(got: &[u32], want: &[u32]) -> u64 {
    let (mut i, mut j, mut bad) = (0, 0, 0u64);
    while i < got.len() || j < want.len() {
        match (got.get(i), want.get(j)) {
            (Some(g), Some(w)) if g == w => {
                i += 1;
                j += 1;
            }
            (Some(g), Some(w)) if g < w => {
                bad += 1;
                i += 1;
            }
            (Some(_), None) => {
                bad += 1;
                i += 1;
            }
            _ => {
                bad += 1;
                j += 1;
            }
        }
    }
    bad
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ep::reference::desc;

    #[test]
    fn sorted_list_differences() {
        assert_eq!(diff(&[1, 2, 3], &[1, 2, 3]), 0);
        assert_eq!(diff(&[1, 3], &[1, 2, 3]), 1, "one missing");
        assert_eq!(diff(&[1, 2, 2, 3], &[1, 2, 3]), 1, "one duplicated");
        assert_eq!(diff(&[0, 4], &[1, 2]), 4);
        assert_eq!(diff(&[], &[desc(0, 0, 0)]), 1);
        assert_eq!(ht_meta_bytes(8), 80);
        assert_eq!(ht_meta_bytes(2), 32);
    }

    #[test]
    fn ll_segments_must_be_in_source_order_and_ranges_must_give_them() {
        // One local expert of 2 ranks, cap 4: rows (0, 1), (0, 5) from rank 0, (1, 2) from rank 1.
        let want = vec![vec![desc(0, 1, 0), desc(0, 5, 0), desc(1, 2, 1)]];
        let ranges = [0, 2, 2, 1];
        let check = |info: &[u32], count: i32, ranges: &[i32]| ll_wrong(&want, &[count], info, 4, 2, Some(ranges));
        let right = [desc(0, 5, 0), desc(0, 1, 0), desc(1, 2, 1), 0];
        assert_eq!(check(&right, 3, &ranges), 0, "arrival order inside a segment is free");
        // The same rows with rank 1's segment first: a multiset check alone passes it.
        let swapped = [desc(1, 2, 1), desc(0, 5, 0), desc(0, 1, 0), 0];
        assert_eq!(check(&swapped, 3, &ranges), 2);
        assert_eq!(check(&right, 3, &[0, 2, 2, 0]), 1, "a wrong count in ranges");
        assert_eq!(check(&right, 3, &[1, 2, 2, 1]), 1, "a wrong first in ranges");
        assert_eq!(check(&right, 2, &ranges), 1, "one row missing");
        assert_eq!(check(&[desc(0, 5, 0), desc(0, 1, 0), desc(1, 3, 1), 0], 3, &ranges), 2, "another token");
        // Without ranges (nvl keeps them on the sources; its combine follows them), rows only.
        assert_eq!(ll_wrong(&want, &[3], &swapped, 4, 2, None), 2);
    }
}
