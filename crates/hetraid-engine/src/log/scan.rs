//! Reading the log back after a crash: the scan over every copy from the
//! checkpoint, a record at a time, the probe past the end of the chain for
//! records of a cut write, and the damage it reports.

use super::*;
/// A record read at ring offset `off` as sequence `seq`: (the record, None
/// for a pad; its bytes; the first sequence of the write it went out in),
/// or None when no live record is there (torn, of an earlier lap, foreign,
/// damaged). `budget`: ring bytes left for the scan.
pub(super) fn read_record(
    d: &dyn Member,
    h: &LogHeader,
    off: u64,
    seq: u64,
    budget: u64,
) -> Option<(Option<Replayed>, u64, u64)> {
    let mut head = AlignedBuf::zeroed(PAGE as usize);
    d.read_at(&mut head, RING_OFFSET + off).ok()?;
    let bytes = u64_at(&head, 32);
    let kind = head[4];
    let n = u32_at(&head, 40) as usize;
    let live = u32_at(&head, 0) == REC_MAGIC
        && head[16..32] == h.uuid
        && u32_at(&head, 48) == h.id
        && u64_at(&head, 8) == seq
        && matches!(kind, TYPE_STRIPES | TYPE_PAD | TYPE_DATA | TYPE_INTENT)
        && n <= ENTRIES_MAX
        && journal::header_fits(h.ring_len, off, bytes)
        && bytes <= budget;
    if !live {
        return None;
    }
    let first = u64_at(&head, WRITE_FIRST_AT);
    let stated = u32_at(&head, 44);
    let mut zeroed = head.to_vec();
    zeroed[44..48].fill(0);
    let mut crc = crc32c(&zeroed);
    let mut entries = Vec::new();
    let mut data = None;
    if kind == TYPE_DATA {
        let len = u32_at(&head, ENTRY_AT + 4) as u64;
        let at = u64_at(&head, ENTRY_AT + 8);
        let padded = len.div_ceil(PAGE) * PAGE;
        if n != 1 || PAGE + padded != bytes {
            return None;
        }
        let mut buf = AlignedBuf::zeroed(padded as usize);
        if padded > 0 {
            d.read_at(&mut buf, RING_OFFSET + off + PAGE).ok()?;
        }
        crc = crc32c_append(crc, &buf);
        data = Some((at, len, off + PAGE));
    }
    let mut stripes = Vec::new();
    if kind == TYPE_INTENT {
        if bytes != PAGE {
            return None;
        }
        for i in 0..n {
            let e = ENTRY_AT + ENTRY * i;
            stripes.push((u64_at(&head, e + 8), u32_at(&head, e + 4) as u64));
        }
    }
    if kind == TYPE_STRIPES {
        let mut at = off + PAGE;
        let mut sum = PAGE;
        for i in 0..n {
            let e = ENTRY_AT + ENTRY * i;
            let member = u16_at(&head, e);
            let len = u32_at(&head, e + 4) as u64 * PAGE;
            let offset = u64_at(&head, e + 8);
            sum += len;
            if len == 0 || sum > bytes {
                return None;
            }
            let mut buf = AlignedBuf::zeroed(len as usize);
            d.read_at(&mut buf, RING_OFFSET + at).ok()?;
            crc = crc32c_append(crc, &buf);
            entries.push((member, offset, at, len));
            at += len;
        }
        if sum != bytes {
            return None;
        }
    }
    if crc != stated {
        return None;
    }
    let rec = (kind != TYPE_PAD).then_some(Replayed {
        copy: 0,
        seq,
        offset: off,
        entries,
        data,
        stripes,
    });
    Some((rec, bytes, first))
}

/// A live record found past the end of the chain by [`probe`].
pub(super) struct Beyond {
    copy: usize,
    offset: u64,
    seq: u64,
    first: u64,
}

/// The live records of a copy in the `budget` ring bytes from `from`
/// whose sequence is `seq` or later: every page is looked at (a damaged
/// header hides where the next record starts). One sequential read of at
/// most the ring, in 1 MiB pieces, plus each candidate's payload.
pub(super) fn probe(
    copy: usize,
    d: &dyn Member,
    h: &LogHeader,
    from: u64,
    seq: u64,
    budget: u64,
) -> Vec<Beyond> {
    let mut found = Vec::new();
    let piece = 1u64 << 20;
    let mut buf = AlignedBuf::zeroed(piece as usize);
    let mut done = 0u64;
    // Bounded: `done` grows by at least a page a round, up to `budget`.
    while done < budget {
        let off = (from + done) % h.ring_len;
        let n = piece.min(budget - done).min(h.ring_len - off);
        if d.read_at(&mut buf[..n as usize], RING_OFFSET + off)
            .is_err()
        {
            done += n;
            continue;
        }
        let mut skip_to = n;
        let mut p = 0u64;
        while p < n {
            let page = &buf[p as usize..(p + PAGE) as usize];
            let s = u64_at(page, 8);
            let candidate = u32_at(page, 0) == REC_MAGIC
                && page[16..32] == h.uuid
                && u32_at(page, 48) == h.id
                && s >= seq
                && s < seq + h.ring_len / PAGE;
            if candidate {
                if let Some((_, bytes, first)) = read_record(d, h, off + p, s, budget - done - p) {
                    found.push(Beyond {
                        copy,
                        offset: off + p,
                        seq: s,
                        first,
                    });
                    p += bytes;
                    skip_to = skip_to.max(p);
                    continue;
                }
            }
            p += PAGE;
        }
        done += skip_to.max(PAGE);
    }
    found
}

/// Damage found by the scan: a record no copy holds intact, with intact
/// records written after it.
#[derive(Debug, Clone)]
pub struct Damage {
    pub seq: u64,
    pub offset: u64,
    /// Intact records after it.
    pub later: u64,
}

/// Read the records from the checkpoint in `h`, every copy at once: each
/// record is taken from whichever copy holds it intact (the copies are laid
/// out alike), so a bad record on one copy costs nothing while the other
/// has it. Where no copy holds the next record the chain ends — a torn
/// tail (a crash cuts only the last write) unless an intact record written
/// in a later write follows: that is damage, and the scan goes on past it.
/// Records of the cut write found past the end are returned as leftovers
/// (cleared before the log is written again: they must never be taken for
/// records of a later write at the same place). Reads at most the ring
/// once per copy, plus the probe past the end.
pub(super) fn scan_copies(copies: &[(usize, &dyn Member)], h: &LogHeader) -> Scan {
    let (mut off, mut seq) = (h.checkpoint_offset, h.checkpoint_seq);
    let mut records = Vec::new();
    let mut total = 0u64;
    let mut damage: Option<Damage> = None;
    let mut leftovers = Vec::new();
    // Bounded: each round takes a record (at least a page of the ring
    // budget) or ends, or jumps forward past damage (also within budget).
    while total < h.ring_len {
        let got = copies
            .iter()
            .find_map(|(c, d)| read_record(*d, h, off, seq, h.ring_len - total).map(|r| (*c, r)));
        if let Some((copy, (rec, bytes, _))) = got {
            if let Some(mut r) = rec {
                r.copy = copy;
                records.push(r);
                if let Some(d) = damage.as_mut() {
                    d.later += 1;
                }
            }
            total += bytes;
            off = journal::next_offset(h.ring_len, off, bytes);
            seq += 1;
            continue;
        }
        // Far enough for a cut group write or the largest record, bounded
        // (a scan of a huge ring must not read it all).
        let window = (h.ring_len - total).min(journal::PROBE_BYTES_MAX);
        let beyond: Vec<Beyond> = copies
            .iter()
            .flat_map(|(i, d)| probe(*i, *d, h, off, seq, window))
            .collect();
        // A record whose write started after this one: this one was
        // durable before it (writes wait for the earlier ones' flush).
        let next = beyond
            .iter()
            .filter(|b| b.first > seq)
            .min_by_key(|b| b.seq);
        match next {
            Some(b) => {
                damage.get_or_insert(Damage {
                    seq,
                    offset: off,
                    later: 0,
                });
                total += (b.offset + h.ring_len - off) % h.ring_len;
                off = b.offset;
                seq = b.seq;
            }
            None => {
                leftovers = beyond.iter().map(|b| (b.copy, b.offset)).collect();
                break;
            }
        }
    }
    Scan {
        records,
        end_offset: off,
        end_seq: seq,
        bytes: total,
        damage,
        leftovers,
    }
}
