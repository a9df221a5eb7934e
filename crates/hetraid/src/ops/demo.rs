//! `hetraid demo`: the whole life of an array in a temporary directory — create a
//! RAID4S array (four emulated disks, one emulated SSD as parity), write and
//! verify real data, fail a member, keep going degraded, replace and rebuild,
//! scrub, reassemble from the member files alone and verify again.

pub use crate::cli::demo::*;
use hetraid_core::units::format_size;
use hetraid_core::{MemberKind, WritePolicy};
use hetraid_engine::format::LayoutOptions;
use hetraid_engine::member::{FileMember, Member, SlowMember};
use hetraid_engine::{Array, CreateOptions, RebuildOptions};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

struct Rng(u64);
impl Rng {
    fn fill(&mut self, buf: &mut [u8]) {
        for c in buf.chunks_mut(8) {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            let b = (z ^ (z >> 31)).to_le_bytes();
            c.copy_from_slice(&b[..c.len()]);
        }
    }
}

fn member(path: &Path, kind: MemberKind, emulate: bool) -> Result<Arc<dyn Member>, String> {
    let f: Arc<dyn Member> =
        Arc::new(FileMember::open(path).map_err(|e| format!("{}: {e}", path.display()))?);
    Ok(if emulate {
        Arc::new(SlowMember::new(f, kind.default_service()))
    } else {
        f
    })
}

fn verify(a: &Array, reference: &[u8]) -> Result<(), String> {
    let mut buf = vec![0u8; 4 << 20];
    let mut off = 0usize;
    while off < reference.len() {
        let n = (reference.len() - off).min(buf.len());
        a.read(off as u64, &mut buf[..n])
            .map_err(|e| e.to_string())?;
        if buf[..n] != reference[off..off + n] {
            let i = (0..n).find(|&i| buf[i] != reference[off + i]).unwrap();
            return Err(format!("verification failed: byte {} differs", off + i));
        }
        off += n;
    }
    Ok(())
}

fn step(name: &str, t: Instant, detail: String) {
    println!(
        "  {:<34} {:>8.2} s   {}",
        name,
        t.elapsed().as_secs_f64(),
        detail
    );
}

impl DemoCmd {
    pub fn run(&self) -> Result<(), String> {
        let tmp;
        let dir = match &self.dir {
            Some(d) => {
                std::fs::create_dir_all(d)
                    .map_err(|e| format!("cannot create {}: {e}", d.display()))?;
                d.clone()
            }
            None => {
                tmp = tempfile::tempdir()
                    .map_err(|e| format!("cannot make a temporary directory: {e}"))?;
                tmp.path().to_path_buf()
            }
        };
        let emulate = !self.no_emulation;
        let kinds = [
            MemberKind::Hdd,
            MemberKind::Hdd,
            MemberKind::Hdd,
            MemberKind::Hdd,
            MemberKind::Ssd,
        ];
        let names = ["disk0", "disk1", "disk2", "disk3", "ssd0"];
        let paths: Vec<PathBuf> = names.iter().map(|n| dir.join(format!("{n}.img"))).collect();
        println!(
            "hetraid demo: RAID4S (4 disks + 1 SSD holding parity), 64K chunks, modthresh policy, members of {} in {}{}",
            format_size(self.size),
            dir.display(),
            if emulate { ", disk and SSD service times emulated" } else { "" }
        );
        let total = Instant::now();
        let t = Instant::now();
        let a = self.create_array(&paths, &kinds, emulate)?;
        let cap = a.capacity() as usize;
        step("create", t, format!("capacity {}", format_size(cap as u64)));

        // Fill with seeded random data in 1 MiB writes (full stripes).
        let t = Instant::now();
        let mut rng = Rng(self.seed);
        let mut reference = vec![0u8; cap];
        rng.fill(&mut reference);
        for (i, c) in reference.chunks(1 << 20).enumerate() {
            a.write((i << 20) as u64, c).map_err(|e| e.to_string())?;
        }
        a.flush().map_err(|e| e.to_string())?;
        step(
            "write (1M full-stripe writes)",
            t,
            format!("{:.1} MB/s", cap as f64 / t.elapsed().as_secs_f64() / 1e6),
        );
        let t = Instant::now();
        verify(&a, &reference)?;
        step("read back and verify", t, "all bytes match".into());

        // Small random writes: RMW with parity on the SSD.
        let t = Instant::now();
        let small = 48;
        let offs = random_offsets(&mut rng, small, cap);
        writes_at(&a, &mut rng, &mut reference, &offs, 4096)?;
        step(
            "4K random writes (RMW)",
            t,
            format!(
                "{small} writes, {:.0} IOPS",
                small as f64 / t.elapsed().as_secs_f64()
            ),
        );

        // A disk fails.
        let t = Instant::now();
        a.fail(1).map_err(|e| e.to_string())?;
        step(
            "fail member 1 (disk1)",
            t,
            format!("array {}", a.status().state),
        );
        let t = Instant::now();
        let offs = spread_offsets(small, cap);
        writes_at(&a, &mut rng, &mut reference, &offs, 20000)?;
        verify(&a, &reference)?;
        step(
            "degraded writes + verify",
            t,
            format!("{small} writes; all bytes reconstruct"),
        );
        a.close().map_err(|e| e.to_string())?;
        drop(a);

        // Replace the failed disk with a blank one and rebuild.
        let t = Instant::now();
        let (a, new, r) = self.replace_and_rebuild(&dir, &paths, &kinds, emulate)?;
        step(
            "replace + rebuild member 1",
            t,
            format!(
                "{} in {:.2} s, {:.1} MB/s",
                format_size(r.bytes),
                r.seconds,
                r.bytes as f64 / r.seconds.max(1e-9) / 1e6
            ),
        );
        let t = Instant::now();
        let s = a.scrub(None).map_err(|e| e.to_string())?;
        step(
            "scrub",
            t,
            format!(
                "{} stripes checked, {} mismatches",
                s.stripes_checked, s.mismatches
            ),
        );
        a.close().map_err(|e| e.to_string())?;
        drop(a);

        // Reassemble from the files alone, in another order, and verify.
        let t = Instant::now();
        let mut order: Vec<PathBuf> = paths.clone();
        order[1] = new.clone();
        order.reverse();
        let members: Vec<Arc<dyn Member>> = order
            .iter()
            .map(|p| member(p, MemberKind::Ssd, false))
            .collect::<Result<_, _>>()?;
        let a = Array::assemble(members).map_err(|e| e.to_string())?;
        verify(&a, &reference)?;
        let st = a.status();
        step(
            "reassemble from files + verify",
            t,
            format!("{}, {} members", st.state, st.members),
        );
        a.close().map_err(|e| e.to_string())?;
        if s.mismatches != 0 || st.state != "optimal" {
            return Err(format!(
                "demo ended {} with {} scrub mismatches",
                st.state, s.mismatches
            ));
        }
        simulate_models()?;
        println!(
            "summary: {} of random data survived a disk failure, degraded writes and a rebuild; scrub clean; {:.1} s in all",
            format_size(cap as u64),
            total.elapsed().as_secs_f64()
        );
        Ok(())
    }

    /// The member files, created, and the RAID4S array over them.
    fn create_array(
        &self,
        paths: &[PathBuf],
        kinds: &[MemberKind],
        emulate: bool,
    ) -> Result<Array, String> {
        for p in paths {
            FileMember::create(p, self.size).map_err(|e| format!("{}: {e}", p.display()))?;
        }
        let members: Vec<Arc<dyn Member>> = paths
            .iter()
            .zip(kinds)
            .map(|(p, &k)| member(p, k, emulate))
            .collect::<Result<_, _>>()?;
        let opts = CreateOptions {
            layout: LayoutOptions {
                name: "raid4s".into(),
                ..Default::default()
            },
            chunk_bytes: 64 << 10,
            policy: WritePolicy::Modthresh,
            kinds: kinds.to_vec(),
            assume_clean: true,
            force: false,
            checksums: true,
            read_policy: None,
            log: None,
        };
        Array::create(members, &opts).map_err(|e| e.to_string())
    }

    /// Replace the failed disk (member 1) with a blank file and rebuild it:
    /// the array rebuilt, the new file, the rebuild's report.
    fn replace_and_rebuild(
        &self,
        dir: &Path,
        paths: &[PathBuf],
        kinds: &[MemberKind],
        emulate: bool,
    ) -> Result<(Array, PathBuf, hetraid_engine::RebuildReport), String> {
        let new = dir.join("disk1-new.img");
        FileMember::create(&new, self.size).map_err(|e| e.to_string())?;
        let mut live: Vec<Arc<dyn Member>> = Vec::new();
        for (i, p) in paths.iter().enumerate() {
            if i != 1 {
                live.push(member(p, kinds[i], emulate)?);
            }
        }
        let a = Array::assemble(live.clone()).map_err(|e| e.to_string())?;
        a.replace(1, member(&new, MemberKind::Hdd, emulate)?, false)
            .map_err(|e| e.to_string())?;
        drop(a);
        live.insert(1, member(&new, MemberKind::Hdd, emulate)?);
        let a = Array::assemble(live).map_err(|e| e.to_string())?;
        let r = a
            .rebuild(
                RebuildOptions {
                    max_speed: 0,
                    ..Default::default()
                },
                &|_| {},
            )
            .map_err(|e| e.to_string())?;
        Ok((a, new, r))
    }
}

/// `count` offsets at random in an array of `cap` bytes, room left for a
/// 4 KiB write (read-modify-writes, parity on the SSD).
fn random_offsets(rng: &mut Rng, count: usize, cap: usize) -> Vec<usize> {
    let mut offs = vec![0u8; count * 8];
    rng.fill(&mut offs);
    offs.chunks(8)
        .map(|c| (u64::from_le_bytes(c.try_into().unwrap()) % (cap as u64 - 8192)) as usize)
        .collect()
}

/// `count` offsets spread over an array of `cap` bytes, room left for an
/// unaligned 20000-byte write.
fn spread_offsets(count: usize, cap: usize) -> Vec<usize> {
    (0..count)
        .map(|i| (i * 7919 * 4096) % (cap - 65536))
        .collect()
}

/// A write of `len` random bytes at each offset, kept in `reference` too,
/// then a flush.
fn writes_at(
    a: &Array,
    rng: &mut Rng,
    reference: &mut [u8],
    offsets: &[usize],
    len: usize,
) -> Result<(), String> {
    for &off in offsets {
        let mut d = vec![0u8; len];
        rng.fill(&mut d);
        a.write(off as u64, &d).map_err(|e| e.to_string())?;
        reference[off..off + len].copy_from_slice(&d);
    }
    a.flush().map_err(|e| e.to_string())
}

/// The same controller in simulated time: the thesis hardware, RAID4S
/// against RAID5, random 4K writes at queue depth 10.
fn simulate_models() -> Result<(), String> {
    let t = Instant::now();
    let sim = |layout: &str, members: &str| -> Result<f64, String> {
        let mut c = hetraid_sim::RunConfig::new(layout, members);
        c.qd = 10;
        c.total = Some(hetraid_sim::Size(16 << 20));
        c.member_size = Some(hetraid_sim::Size(60_000_000_000));
        Ok(hetraid_sim::run(&c)?.iops)
    };
    let r4s = sim("raid4s", "caviar-black-640*4,x25e-64")?;
    let r5 = sim("raid5", "caviar-black-640*5")?;
    step(
        "simulate RAID4S vs RAID5 (models)",
        t,
        format!(
            "4K random writes: {r4s:.0} vs {r5:.0} IOPS, {:.2}x",
            r4s / r5
        ),
    );
    Ok(())
}
