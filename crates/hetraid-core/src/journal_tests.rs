//! Tests of `journal.rs` (kept apart: the module reads in one sitting).

use super::*;

#[test]
fn records_fill_the_ring_pad_at_the_end_and_wait_for_a_checkpoint() {
    let mut r = Ring::empty(16 * PAGE, 0, 7);
    assert_eq!(r.record_bytes_max(), 4 * PAGE);
    let p = r.place(3 * PAGE).unwrap();
    assert_eq!((p.offset, p.pad, p.seq), (0, None, 7));
    r.commit(&p, 3 * PAGE);
    for _ in 0..3 {
        let p = r.place(4 * PAGE).unwrap();
        r.commit(&p, 4 * PAGE);
    }
    // 15 pages used; a 2-page record needs the last page padded and the
    // ring's start, which is still live.
    assert_eq!(r.used, 15 * PAGE);
    assert_eq!(r.place(2 * PAGE), None);
    r.checkpoint();
    let p = r.place(2 * PAGE).unwrap();
    assert_eq!(p.pad, Some((15 * PAGE, PAGE)));
    assert_eq!((p.offset, p.seq), (0, 12));
    r.commit(&p, 2 * PAGE);
    assert_eq!((r.tail, r.next_seq, r.used), (2 * PAGE, 13, 3 * PAGE));
    assert_eq!(r.live_records(), 2);
}

#[test]
fn the_ring_never_overwrites_a_live_record() {
    // Random record sizes; a shadow map of which pages are live.
    let mut x = 0x2545F4914F6CDD1Du64;
    let len = 64 * PAGE;
    let mut r = Ring::empty(len, 5 * PAGE, 0);
    let mut live: Vec<(u64, u64)> = Vec::new();
    for _ in 0..10_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let bytes = (1 + x % 16) * PAGE;
        match r.place(bytes) {
            Some(p) => {
                let mut new = vec![(p.offset, bytes)];
                if let Some(pad) = p.pad {
                    new.push(pad);
                }
                for (o, b) in &new {
                    assert!(o + b <= len);
                    for (lo, lb) in &live {
                        assert!(o + b <= *lo || lo + lb <= *o, "overlap");
                    }
                }
                live.extend(new);
                r.commit(&p, bytes);
            }
            None => {
                r.checkpoint();
                live.clear();
            }
        }
    }
}

#[test]
fn the_index_agrees_with_a_byte_model() {
    // Model: for each byte, the (seq, value) of the newest write.
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut rnd = |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    for round in 0..50 {
        let len = 200u64;
        // (seq, value, position within its write)
        let mut model: Vec<Option<(u64, u8, u64)>> = vec![None; len as usize];
        let mut idx: LogIndex<u8> = LogIndex::default();
        for seq in 1..60 {
            let start = rnd(len);
            let n = 1 + rnd(len - start).min(40);
            let v = (seq as u8).wrapping_mul(7).wrapping_add(round);
            idx.insert(start, n, seq, v, seq, seq * 10);
            for i in start..start + n {
                model[i as usize] = Some((seq, v, i - start));
            }
            if rnd(5) == 0 {
                // Reclaim a snapshot, with a write landing meanwhile.
                let snap = idx.pieces();
                let s2 = rnd(len);
                let n2 = 1 + rnd(len - s2).min(10);
                idx.insert(s2, n2, 1000 + seq, 0xee, 1000 + seq, (1000 + seq) * 10);
                for i in s2..s2 + n2 {
                    model[i as usize] = Some((1000 + seq, 0xee, i - s2));
                }
                for p in &snap {
                    if rnd(2) == 0 {
                        if idx.remove_if_unchanged(p) {
                            model[p.start as usize..p.end as usize].fill(None);
                        }
                    } else {
                        idx.remove_reclaimed(p);
                        for b in &mut model[p.start as usize..p.end as usize] {
                            if b.is_some_and(|(s, _, _)| s == p.seq) {
                                *b = None;
                            }
                        }
                    }
                }
            }
            // Every byte: the index and the model agree.
            let got = idx.overlapping(0, len);
            let mut seen: Vec<Option<(u64, u8, u64)>> = vec![None; len as usize];
            let mut last = 0;
            for p in &got {
                assert!(p.start >= last && p.end > p.start, "ordered, disjoint");
                last = p.end;
                for i in p.start..p.end {
                    seen[i as usize] = Some((p.seq, p.handle, p.at + i - p.start));
                }
            }
            assert_eq!(seen, model, "round {round} seq {seq}");
            let needed = model.iter().flatten().map(|(s, _, _)| *s).min();
            assert_eq!(idx.oldest_needed(), needed.map(|s| (s, s * 10)));
            // The reserve is the costs (here: the seq) of the records
            // still needed.
            let mut live: Vec<u64> = model.iter().flatten().map(|(s, _, _)| *s).collect();
            live.sort_unstable();
            live.dedup();
            assert_eq!(idx.reserved(), live.iter().sum::<u64>());
            // Clipped lookups agree too.
            let a = rnd(len);
            let b = a + 1 + rnd(len - a);
            for p in idx.overlapping(a, b) {
                assert!(p.start >= a && p.end <= b);
            }
        }
    }
}

#[test]
fn checkpoint_to_keeps_the_records_still_needed() {
    let mut r = Ring::empty(16 * PAGE, 0, 1);
    let mut offs = Vec::new();
    for _ in 0..3 {
        let p = r.place(2 * PAGE).unwrap();
        offs.push((p.offset, p.seq));
        r.commit(&p, 2 * PAGE);
    }
    r.checkpoint_to(offs[1].0, offs[1].1);
    assert_eq!((r.head, r.head_seq, r.used), (2 * PAGE, 2, 4 * PAGE));
    assert_eq!(r.live_records(), 2);
    r.checkpoint_to(r.tail, r.next_seq);
    assert_eq!(r.used, 0);
}

#[test]
fn batches_keep_stripe_updates_whole() {
    let u = |bytes, entries| Update { bytes, entries };
    let ups = [u(3, 2), u(3, 2), u(3, 2), u(10, 1), u(1, 250), u(1, 3)];
    assert_eq!(batches(&ups, 10).unwrap(), vec![0..3, 3..4, 4..5, 5..6]);
    assert_eq!(
        batches(&[u(11, 1)], 10),
        Err(BatchError::TooLarge { bytes: 11, max: 10 })
    );
    assert!(batches(&[], 10).unwrap().is_empty());
}

#[test]
fn a_group_is_the_records_a_write_alone_makes_cut_at_pads() {
    let reserve = Reserve {
        members: 1,
        expansion: 1,
        memory_max: INDEX_BYTES_MAX,
    };
    let mut alone = Ring::empty(256 * PAGE, 0, 1);
    let mut grouped = alone.clone();
    let writes: Vec<(u64, u64)> = [4096u64, 100, 8192, 4096 * 3, 1, 4096, 8192, 4096]
        .iter()
        .enumerate()
        .map(|(i, &l)| (i as u64 * 3 * PAGE, l))
        .collect();
    let slack = reserve.slack(alone.len);
    let mut each = Vec::new();
    let mut reserved = 0;
    for &(at, l) in &writes {
        let b = data_record_bytes(l);
        let cost = reserve.cost(at, l);
        let p = alone
            .place(b)
            .filter(|p| admits(&alone, p, b, reserved, cost, slack));
        if let Some(p) = p {
            alone.commit(&p, b);
            reserved += cost;
            each.push((p, b, cost));
        }
    }
    let (placed, groups) = place_group(&mut grouped, &reserve, &LogIndex::<()>::default(), &writes);
    assert_eq!(placed, each);
    assert_eq!(grouped, alone);
    assert_eq!(groups, vec![0..writes.len()]);
    // Near the end of the ring: a pad starts a new group.
    let mut r = Ring::empty(256 * PAGE, 253 * PAGE, 1);
    let w = [(0, 4096), (0, 4096), (0, 4096)];
    let (placed, groups) = place_group(&mut r, &reserve, &LogIndex::<()>::default(), &w);
    assert_eq!(placed.len(), 3);
    assert!(placed[1].0.pad.is_some());
    assert_eq!(groups, vec![0..1, 1..3]);
    // Ending exactly at the ring's end: the next one starts a group at 0.
    let mut r = Ring::empty(256 * PAGE, 252 * PAGE, 1);
    let (placed, groups) = place_group(&mut r, &reserve, &LogIndex::<()>::default(), &w);
    assert_eq!(placed[2].0.offset, 0);
    assert_eq!(groups, vec![0..2, 2..3]);
    // What is reserved already holds the rest back.
    let mut r = Ring::empty(256 * PAGE, 0, 1);
    let mut held = LogIndex::default();
    held.insert(0, 1, 1, (), 256 * PAGE - slack - 3 * PAGE, 0);
    let (placed, _) = place_group(&mut r, &reserve, &held, &w);
    assert!(placed.is_empty());
}

#[test]
fn the_write_back_minimum_holds_its_largest_record() {
    for members in [2usize, 3, 5, 8, 16, 64] {
        for expansion in [1u64, 2, 3, members as u64] {
            let r = Reserve {
                members,
                expansion,
                memory_max: INDEX_BYTES_MAX,
            };
            let min = r.ring_min();
            assert!(r.ring_fits(min), "{members} {expansion}");
            assert!(min == RING_MIN || !r.ring_fits(min - PAGE));
        }
    }
}
