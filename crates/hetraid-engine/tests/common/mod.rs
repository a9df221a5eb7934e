#![allow(dead_code)]
use hetraid_core::WritePolicy;
use hetraid_engine::format::LayoutOptions;
use hetraid_engine::member::{FaultMember, Member};
use hetraid_engine::CreateOptions;
use std::sync::Arc;

pub const MIB: u64 = 1 << 20;

pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        // splitmix64
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut v = Vec::with_capacity(n + 8);
        while v.len() < n {
            v.extend_from_slice(&self.next().to_le_bytes());
        }
        v.truncate(n);
        v
    }
}

/// In-memory members named `{prefix}{i}`, member i seeded with `seed_of(i)`:
/// the fault handles (crash, error injection) and the same members as `dyn Member`.
pub fn fault_members_sized(
    prefix: &str,
    sizes: &[u64],
    seed_of: impl Fn(usize) -> u64,
) -> (Vec<Arc<FaultMember>>, Vec<Arc<dyn Member>>) {
    let f: Vec<Arc<FaultMember>> = sizes
        .iter()
        .enumerate()
        .map(|(i, &s)| Arc::new(FaultMember::new(&format!("{prefix}{i}"), s, seed_of(i))))
        .collect();
    let d: Vec<Arc<dyn Member>> = f.iter().map(|m| m.clone() as Arc<dyn Member>).collect();
    (f, d)
}

pub fn fault_members(
    n: usize,
    size: u64,
    seed: u64,
) -> (Vec<Arc<FaultMember>>, Vec<Arc<dyn Member>>) {
    fault_members_sized("mem", &vec![size; n], |i| seed ^ i as u64)
}

pub fn opts(name: &str, chunk: u64) -> CreateOptions {
    CreateOptions {
        layout: LayoutOptions {
            name: name.into(),
            ..Default::default()
        },
        chunk_bytes: chunk,
        policy: WritePolicy::Md,
        kinds: vec![],
        assume_clean: true,
        force: false,
        checksums: false,
        read_policy: None,
        log: None,
    }
}

/// HPDA of three SSDs, HDD-1 and HDD-2 (the kinds its layout needs).
#[allow(dead_code)]
pub fn hpda_opts(chunk: u64) -> CreateOptions {
    use hetraid_core::MemberKind::{Hdd, Ssd};
    let mut o = opts("hpda", chunk);
    o.kinds = vec![Ssd, Ssd, Ssd, Hdd, Hdd];
    o
}

/// Layouts the randomized tests drive: (record, member count).
pub fn all_layouts() -> Vec<(LayoutOptions, usize)> {
    let r = |name: &str| LayoutOptions {
        name: name.into(),
        ..Default::default()
    };
    vec![
        (r("raid0"), 3),
        (r("raid1"), 3),
        (r("raid10"), 4),
        (r("raid4"), 5),
        (r("raid5"), 5),
        (r("raid6"), 6),
        (
            LayoutOptions {
                name: "raidh".into(),
                weights: Some(vec![0, 0, 1, 1, 2]),
                ..Default::default()
            },
            5,
        ),
        // Weighted RAID6: P and Q by weight, the two heavy members (SSDs in
        // a real array) holding most of them.
        (
            LayoutOptions {
                name: "raidh6".into(),
                weights: Some(vec![0, 1, 0, 1, 2, 2]),
                ..Default::default()
            },
            6,
        ),
        (r("raid4s"), 5),
        (r("raide"), 5),
        (
            LayoutOptions {
                name: "s2raid5".into(),
                group: Some(3),
                ..Default::default()
            },
            9,
        ),
        (r("s2raid10"), 6),
        (
            LayoutOptions {
                name: "raidx".into(),
                chunks_per_bundle: Some(3),
                ..Default::default()
            },
            5,
        ),
        (
            LayoutOptions {
                name: "raidx".into(),
                chunks_per_bundle: Some(4),
                raidx_level: Some("6".into()),
                ..Default::default()
            },
            5,
        ),
        (r("hpda"), 5),
        // Declustered (issue 20).
        (declustered(4, 1, 1), 7),
        (declustered(5, 2, 1), 8),
    ]
}

/// HPDA members (the last two are HDD-1 and HDD-2): HDD-1 holds the parity
/// and a log copy past it, HDD-2 the log's mirror; both get 2 MiB more than
/// the SSDs, room for the smallest log.
#[allow(dead_code)]
pub fn hpda_room(sizes: &mut [u64]) {
    let n = sizes.len();
    sizes[n - 2] += 2 * MIB;
    sizes[n - 1] += 2 * MIB;
}

/// Sets its flag when dropped, also while a panic unwinds: threads looping
/// until the flag is set then end, and `thread::scope` returns the panic
/// instead of waiting for them forever.
pub struct SetOnDrop<'a>(pub &'a std::sync::atomic::AtomicBool);

impl Drop for SetOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

/// The declustered layout (dRAID): groups of `width` chunks with `parity`
/// of them parity, `spares` spare chunks a row.
#[allow(dead_code)]
pub fn declustered(width: usize, parity: usize, spares: usize) -> LayoutOptions {
    LayoutOptions {
        name: "declustered".into(),
        declustered: hetraid_core::layout::DeclusterParams {
            width: Some(width),
            parity: Some(parity),
            spares: Some(spares),
        },
        ..Default::default()
    }
}

/// Blocks that failed their checksum on any member of `a` so far.
#[allow(dead_code)]
pub fn checksum_errors(a: &hetraid_engine::Array) -> u32 {
    a.status()
        .member_states
        .iter()
        .map(|m| m.checksum_errors)
        .sum()
}

/// Rebuild what `a` has to rebuild, with no speed limit.
pub fn rebuild_unthrottled(a: &hetraid_engine::Array) {
    a.rebuild(
        hetraid_engine::RebuildOptions {
            max_speed: 0,
            ..Default::default()
        },
        &|_| {},
    )
    .unwrap();
}

/// Each slot's data area in chunks of `chunk` (what a RAIDX table spans).
pub fn chunk_caps(a: &hetraid_engine::Array, chunk: u64) -> Vec<u64> {
    a.superblock()
        .roles
        .iter()
        .map(|r| r.data_size / chunk)
        .collect()
}
