//! Which copy a read goes to, on layouts that keep copies (RAID1, RAID10,
//! S²-RAID10, RAIDX1/10): a decision from a snapshot of the members' state,
//! made per chunk, the same in the engine (its members' in-flight counts and
//! last positions) and in the simulator (its devices').
//!
//! Policies:
//! - `first`: always the first live copy (what hetraid did before; the
//!   engine-vs-simulator tests use it, since the others depend on timing);
//! - `md`: Linux MD's `read_balance` — a read that continues where a copy's
//!   last operation ended stays on it; else the least busy solid-state copy;
//!   else an idle disk copy, the one whose head is closest; else the closest;
//! - `raidx1`..`raidx4`: the RAIDX paper's four, starting from the copy the
//!   previous chunk of the request used (the first copy for the first chunk):
//!   (1) switch to a copy at least twice as fast, or idle while the current
//!   one is busy, or with a shorter seek; (2) as 1 ignoring speed; (3) as 1
//!   ignoring busy state; (4) the shortest estimated seek only.
//!
//! "Seek" is the distance in bytes between a copy's head (where its last
//! operation ended) and the read; it orders disks, and is what a head
//! travels. Ties keep the earlier copy, so decisions are deterministic.

use crate::layout::ChunkLoc;

/// How reads choose among copies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub enum ReadPolicy {
    First,
    #[default]
    Md,
    Raidx1,
    Raidx2,
    Raidx3,
    Raidx4,
}

impl ReadPolicy {
    pub const NAMES: [&'static str; 6] = ["first", "md", "raidx1", "raidx2", "raidx3", "raidx4"];

    pub fn parse(s: &str) -> Result<Self, String> {
        Ok(match s {
            "first" => Self::First,
            "md" => Self::Md,
            "raidx1" => Self::Raidx1,
            "raidx2" => Self::Raidx2,
            "raidx3" => Self::Raidx3,
            "raidx4" => Self::Raidx4,
            _ => {
                return Err(format!(
                    "read policy '{s}' is not known; use one of {}",
                    Self::NAMES.join(", ")
                ))
            }
        })
    }

    pub fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }

    /// Byte code (superblock).
    pub fn code(self) -> u8 {
        self as u8
    }

    pub fn from_code(c: u8) -> Option<Self> {
        Self::NAMES.get(c as usize).map(|n| Self::parse(n).unwrap())
    }
}

/// Does `layout` keep copies a read may choose among?
pub fn keeps_copies(layout: &dyn crate::layout::Layout) -> bool {
    matches!(
        layout.redundancy(),
        crate::layout::Redundancy::Mirror { .. }
    )
}

/// A read policy applies to layouts that keep copies; the sentence saying
/// why not otherwise (the caller names its option).
pub fn applies(layout: &dyn crate::layout::Layout) -> Result<(), String> {
    if keeps_copies(layout) {
        return Ok(());
    }
    Err(format!(
        "applies to layouts that keep copies (raid1, raid10, s2raid10, raidx1/10); {} has none",
        layout.name()
    ))
}

/// One member's state when a read is placed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MemberLoad {
    /// Operations in flight on the member.
    pub pending: u32,
    /// Where its last operation ended (byte offset in its data area).
    pub head: u64,
    /// Disks seek; SSDs and NVRAM do not.
    pub rotational: bool,
    /// Sustained transfer rate, bytes per second.
    pub bytes_per_s: u64,
}

/// The copy (an index into `copies`) a read at each copy's offset goes to.
/// `copies` are live copies (at least one); `loads` is indexed by member;
/// `current` is the copy the previous chunk of the same request used.
pub fn choose(
    policy: ReadPolicy,
    copies: &[ChunkLoc],
    loads: &[MemberLoad],
    current: Option<usize>,
) -> usize {
    assert!(!copies.is_empty(), "a read needs a live copy");
    if copies.len() == 1 {
        return 0;
    }
    let load = |i: usize| loads.get(copies[i].member).copied().unwrap_or_default();
    let dist = |i: usize| load(i).head.abs_diff(copies[i].offset);
    match policy {
        ReadPolicy::First => 0,
        ReadPolicy::Md => {
            if let Some(i) = (0..copies.len()).find(|&i| load(i).head == copies[i].offset) {
                return i;
            }
            let solid: Vec<usize> = (0..copies.len()).filter(|&i| !load(i).rotational).collect();
            if let Some(&i) = solid.iter().min_by_key(|&&i| (load(i).pending, i)) {
                return i;
            }
            if let Some(i) = (0..copies.len())
                .filter(|&i| load(i).pending == 0)
                .min_by_key(|&i| (dist(i), i))
            {
                return i;
            }
            (0..copies.len()).min_by_key(|&i| (dist(i), i)).unwrap()
        }
        ReadPolicy::Raidx4 => (0..copies.len()).min_by_key(|&i| (dist(i), i)).unwrap(),
        p => {
            let (speed, busy) = match p {
                ReadPolicy::Raidx1 => (true, true),
                ReadPolicy::Raidx2 => (false, true),
                _ => (true, false),
            };
            let mut cur = current.filter(|&c| c < copies.len()).unwrap_or(0);
            // One pass over the candidates: each may take over from the
            // current one (bounded by the copy count).
            for i in 0..copies.len() {
                if i == cur {
                    continue;
                }
                let (c, x) = (load(cur), load(i));
                let faster = speed && x.bytes_per_s >= c.bytes_per_s.saturating_mul(2);
                let idle = busy && x.pending == 0 && c.pending > 0;
                let closer = dist(i) < dist(cur);
                if faster || idle || closer {
                    cur = i;
                }
            }
            cur
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(member: usize, offset: u64) -> ChunkLoc {
        ChunkLoc { member, offset }
    }

    fn disk(pending: u32, head: u64) -> MemberLoad {
        MemberLoad {
            pending,
            head,
            rotational: true,
            bytes_per_s: 100_000_000,
        }
    }

    #[test]
    fn md_keeps_sequential_reads_then_prefers_ssds_then_idle_close_disks() {
        let copies = [at(0, 1000), at(1, 1000), at(2, 1000)];
        // Copy 2 ended where this read starts: it stays there.
        let loads = [disk(3, 0), disk(0, 50), disk(5, 1000)];
        assert_eq!(choose(ReadPolicy::Md, &copies, &loads, None), 2);
        // No sequential copy: the idle disk.
        let loads = [disk(3, 990), disk(0, 1 << 30), disk(5, 1010)];
        assert_eq!(choose(ReadPolicy::Md, &copies, &loads, None), 1);
        // All busy: the closest head.
        let loads = [disk(3, 1 << 20), disk(1, 1 << 30), disk(5, 900)];
        assert_eq!(choose(ReadPolicy::Md, &copies, &loads, None), 2);
        // An SSD copy wins over idle disks; the least busy SSD.
        let mut ssd = disk(4, 0);
        ssd.rotational = false;
        let mut ssd2 = ssd;
        ssd2.pending = 1;
        let loads = [disk(0, 1000 - 1), ssd, ssd2];
        assert_eq!(choose(ReadPolicy::Md, &copies, &loads, None), 2);
    }

    #[test]
    fn the_raidx_policies_switch_for_speed_idleness_or_seek() {
        let copies = [at(0, 5000), at(1, 5000)];
        let mut fast = disk(3, 0);
        fast.bytes_per_s = 250_000_000;
        // Copy 1 twice as fast (but busy and farther): policies 1 and 3
        // switch, 2 (no speed) and 4 (seek only) do not.
        let loads = [disk(0, 5000 - 10), fast];
        assert_eq!(choose(ReadPolicy::Raidx1, &copies, &loads, Some(0)), 1);
        assert_eq!(choose(ReadPolicy::Raidx3, &copies, &loads, Some(0)), 1);
        assert_eq!(choose(ReadPolicy::Raidx2, &copies, &loads, Some(0)), 0);
        assert_eq!(choose(ReadPolicy::Raidx4, &copies, &loads, Some(0)), 0);
        // Copy 1 idle while copy 0 is busy (equal speed, farther): 1 and 2
        // switch, 3 (no busy state) does not.
        let loads = [disk(2, 5000 - 10), disk(0, 0)];
        assert_eq!(choose(ReadPolicy::Raidx1, &copies, &loads, Some(0)), 1);
        assert_eq!(choose(ReadPolicy::Raidx2, &copies, &loads, Some(0)), 1);
        assert_eq!(choose(ReadPolicy::Raidx3, &copies, &loads, Some(0)), 0);
        // A shorter seek: every policy switches.
        let loads = [disk(1, 0), disk(1, 4999)];
        for p in [
            ReadPolicy::Raidx1,
            ReadPolicy::Raidx2,
            ReadPolicy::Raidx3,
            ReadPolicy::Raidx4,
        ] {
            assert_eq!(choose(p, &copies, &loads, Some(0)), 1, "{p:?}");
        }
        // `first` never moves; one copy is that copy.
        assert_eq!(choose(ReadPolicy::First, &copies, &loads, Some(1)), 0);
        assert_eq!(choose(ReadPolicy::Md, &copies[..1], &loads, None), 0);
    }

    #[test]
    fn names_round_trip() {
        for n in ReadPolicy::NAMES {
            let p = ReadPolicy::parse(n).unwrap();
            assert_eq!(p.name(), n);
            assert_eq!(ReadPolicy::from_code(p.code()), Some(p));
        }
        assert!(ReadPolicy::parse("fastest").unwrap_err().contains("raidx4"));
    }
}
