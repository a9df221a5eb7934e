//! A flash SSD: channels → packages → dies → planes, a page-mapped FTL with
//! over-provisioning and greedy garbage collection, per-block erase counts.
//!
//! Timing is by resource reservation: the controller, each channel bus and each
//! plane is busy until some time; an operation's pages take the earliest slots on
//! the resources they need. Every operation therefore starts at once and its
//! finish time is known when it is submitted.

use super::{Counters, DevIo, Device, Started, Wear};
use crate::kernel::Ns;
use crate::memory::{huge_zeroed, populate_for_writes, prefetch_line};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SsdParams {
    #[serde(default = "one")]
    pub channels: u32,
    #[serde(default = "one")]
    pub packages_per_channel: u32,
    pub dies_per_package: u32,
    pub planes_per_die: u32,
    pub blocks_per_plane: u32,
    pub pages_per_block: u32,
    #[serde(default = "page")]
    pub page_bytes: u64,
    pub read_ms: f64,
    pub program_ms: f64,
    pub erase_ms: f64,
    /// Channel bus rate, MB/s: each page crosses it once.
    pub channel_mbps: f64,
    /// Controller time per read / write command (serialised), ms.
    #[serde(default)]
    pub read_overhead_ms: f64,
    #[serde(default)]
    pub write_overhead_ms: f64,
    /// Share of the flash hidden from the host for garbage collection.
    #[serde(default = "op")]
    pub overprovision: f64,
    /// Collect a plane when its free blocks fall to this many.
    #[serde(default = "gc_min")]
    pub gc_free_blocks: u32,
    /// Or: keep this share of each plane's blocks free, in percent (DiskSim
    /// keeps 5 %); overrides `gc_free_blocks`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gc_free_percent: Option<f64>,
    /// What garbage collection keeps busy: `plane` (the plane it cleans) or
    /// `element` (every plane of its package, as DiskSim's cleaning does).
    #[serde(default)]
    pub gc_occupies: GcScope,
    /// How the planes of one die share it: `same-op` (default: a die runs
    /// one command at a time, and a multi-plane command lets its planes do
    /// the same operation together, so a read waits for a program on
    /// another plane of its die) or `independent` (every plane on its own).
    #[serde(default)]
    pub multiplane: Multiplane,
    /// The host interface's rate, MB/s (a SATA 6 Gb/s link moves about
    /// 560-600): every command's data crosses it once, one command at a
    /// time — writes before their pages are programmed, reads after theirs
    /// are read. None: no limit past the channels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interface_mbps: Option<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Multiplane {
    #[default]
    SameOp,
    Independent,
}

/// The operation a die is running (multi-plane commands join only the same).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FlashOp {
    Read,
    Program,
    Erase,
}

/// A die: busy with one kind of operation until some time.
#[derive(Debug, Clone, Copy)]
struct Die {
    busy_until: Ns,
    op: FlashOp,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum GcScope {
    #[default]
    Plane,
    Element,
}

fn one() -> u32 {
    1
}
fn page() -> u64 {
    4096
}
fn op() -> f64 {
    0.07
}
fn gc_min() -> u32 {
    2
}

impl SsdParams {
    pub fn planes(&self) -> u64 {
        self.channels as u64
            * self.packages_per_channel as u64
            * self.dies_per_package as u64
            * self.planes_per_die as u64
    }
    /// Free blocks per plane below which it is collected.
    pub fn gc_threshold(&self) -> u32 {
        match self.gc_free_percent {
            Some(p) => ((self.blocks_per_plane as f64 * p / 100.0).ceil() as u32).max(1),
            None => self.gc_free_blocks,
        }
    }

    pub fn raw_pages(&self) -> u64 {
        self.planes() * self.blocks_per_plane as u64 * self.pages_per_block as u64
    }
    /// Bytes the host sees.
    pub fn capacity(&self) -> u64 {
        let pages = (self.raw_pages() as f64 * (1.0 - self.overprovision)) as u64;
        pages * self.page_bytes
    }
    pub fn validate(&self) -> Result<(), String> {
        let pos = |v: f64, what: &str| {
            if v.is_finite() && v > 0.0 {
                Ok(())
            } else {
                Err(format!("ssd {what} must be a positive number"))
            }
        };
        for (v, w) in [
            (self.channels as f64, "channels"),
            (self.packages_per_channel as f64, "packages_per_channel"),
            (self.dies_per_package as f64, "dies_per_package"),
            (self.planes_per_die as f64, "planes_per_die"),
            (self.blocks_per_plane as f64, "blocks_per_plane"),
            (self.pages_per_block as f64, "pages_per_block"),
            (self.page_bytes as f64, "page_bytes"),
            (self.read_ms, "read_ms"),
            (self.program_ms, "program_ms"),
            (self.erase_ms, "erase_ms"),
            (self.channel_mbps, "channel_mbps"),
        ] {
            pos(v, w)?;
        }
        if let Some(v) = self.interface_mbps {
            pos(v, "interface_mbps")?;
        }
        if !(0.01..0.9).contains(&self.overprovision) {
            return Err("ssd overprovision must be between 0.01 and 0.9".into());
        }
        if self.gc_free_blocks < 1 || self.gc_free_blocks + 2 > self.blocks_per_plane {
            return Err("ssd gc_free_blocks must be at least 1 and leave blocks to write".into());
        }
        if let Some(p) = self.gc_free_percent {
            if !(p > 0.0 && p < 50.0) || self.gc_threshold() + 2 > self.blocks_per_plane {
                return Err(
                    "ssd gc_free_percent must be above 0 and below 50, and leave blocks to write"
                        .into(),
                );
            }
        }
        if self.raw_pages() >= u32::MAX as u64 {
            return Err("ssd has more than 2^32 pages; use larger pages or fewer blocks".into());
        }
        if !self.page_bytes.is_multiple_of(512) {
            return Err("ssd page_bytes must be a multiple of 512".into());
        }
        Ok(())
    }
}

/// Per-plane allocation state.
struct Plane {
    /// Erased blocks: taken from the back, erased ones put at the front.
    free: std::collections::VecDeque<u32>,
    /// Full blocks (neither free nor active), by valid pages.
    full: FullBlocks,
    /// Block being written and its next page.
    active: u32,
    next_page: u32,
    busy_until: Ns,
}

/// A plane's full blocks by valid page count: one bitset of the plane's
/// blocks per count. Greedy GC's victim (the fewest valid pages, of those
/// the lowest block, as a scan of the plane would pick) is the first set bit
/// of the first non-empty count, and an overwrite moves its block down one
/// count: O(1) per page write instead of a scan of the plane per collection.
struct FullBlocks {
    base: u32,
    words: usize,
    /// Blocks per count.
    counts: Vec<u32>,
    bits: Vec<u64>,
}

impl FullBlocks {
    fn new(base: u32, blocks: u32, pages_per_block: u32) -> Self {
        let words = (blocks as usize).div_ceil(64);
        let counts = pages_per_block as usize + 1;
        Self {
            base,
            words,
            counts: vec![0; counts],
            bits: vec![0; counts * words],
        }
    }

    /// Put block `b` with `valid` pages in or out; whether it was in before.
    fn set(&mut self, valid: u16, b: u32, on: bool) -> bool {
        let i = (b - self.base) as usize;
        let w = &mut self.bits[valid as usize * self.words + i / 64];
        let mask = 1u64 << (i % 64);
        let was = *w & mask != 0;
        if on && !was {
            *w |= mask;
            self.counts[valid as usize] += 1;
        } else if !on && was {
            *w &= !mask;
            self.counts[valid as usize] -= 1;
        }
        was
    }

    /// The word holding block `b`'s bit in the row of `valid` pages.
    fn word(&self, valid: u16, b: u32) -> Option<&u64> {
        let i = b.checked_sub(self.base)? as usize;
        self.bits.get(valid as usize * self.words + i / 64)
    }

    /// (valid pages, block) of the full block with the fewest valid pages,
    /// the lowest of those.
    fn first(&self) -> Option<(u16, u32)> {
        let v = self.counts.iter().position(|&c| c > 0)?;
        let row = &self.bits[v * self.words..(v + 1) * self.words];
        let (w, bits) = row.iter().enumerate().find(|(_, &x)| x != 0)?;
        let i = w * 64 + bits.trailing_zeros() as usize;
        Some((v as u16, self.base + i as u32))
    }
}

pub struct Ssd {
    p: SsdParams,
    planes: Vec<Plane>,
    /// Per die, what it runs (see `Multiplane`); indexed by `die_of`.
    dies: Vec<Die>,
    channel_free: Vec<Ns>,
    ctrl_free: Ns,
    /// The host interface: free from then, and its time per byte (0: none).
    link_free: Ns,
    link_ns_per_byte: f64,
    /// Logical page -> physical page + 1 (0 = never written). Zeroed allocation, so
    /// untouched parts of a large SSD cost no memory.
    map: Vec<u32>,
    /// Physical page -> logical page + 1, written when the page is
    /// programmed; meaningful only while the page's `live` bit is set.
    rmap: Vec<u32>,
    /// Physical pages holding valid data, a bit each: an overwrite clears
    /// the old page's bit here (1 MiB for a 32 GiB SSD, in the cache) rather
    /// than its `rmap` entry (tens of MiB, a miss to memory every time).
    live: Vec<u64>,
    valid: Vec<u16>,
    erase_count: Vec<u32>,
    next_plane: usize,
    page_ns: [Ns; 3],
    xfer_ns: Ns,
    host_pages: u64,
    flash_pages: u64,
    gc_copies: u64,
    /// Page writes that read the page first (the write covered part of it).
    sub_page_rmw: u64,
    /// Mapped pages unmapped by discards.
    discarded_pages: u64,
    counters: Counters,
    /// `SsdParams::gc_threshold`, as a length.
    gc_threshold: usize,
}

impl Ssd {
    pub fn new(p: SsdParams) -> Self {
        let planes = p.planes() as usize;
        let bpp = p.blocks_per_plane;
        let ms = |v: f64| (v * 1e6) as Ns;
        let raw = p.raw_pages() as usize;
        Self {
            planes: (0..planes)
                .map(|i| {
                    let base = i as u32 * bpp;
                    // Block `base` is active; the rest are free (popped from the end).
                    Plane {
                        free: (base + 1..base + bpp).rev().collect(),
                        full: FullBlocks::new(base, bpp, p.pages_per_block),
                        active: base,
                        next_page: 0,
                        busy_until: 0,
                    }
                })
                .collect(),
            dies: vec![
                Die {
                    busy_until: 0,
                    op: FlashOp::Read,
                };
                planes / p.planes_per_die as usize
            ],
            channel_free: vec![0; p.channels as usize],
            ctrl_free: 0,
            link_free: 0,
            link_ns_per_byte: p.interface_mbps.map_or(0.0, |m| 1e3 / m),
            map: huge_zeroed((p.capacity() / p.page_bytes) as usize),
            rmap: huge_zeroed(raw),
            live: vec![0; raw.div_ceil(64)],
            valid: vec![0; planes * bpp as usize],
            erase_count: vec![0; planes * bpp as usize],
            next_plane: 0,
            page_ns: [ms(p.read_ms), ms(p.program_ms), ms(p.erase_ms)],
            xfer_ns: (p.page_bytes as f64 * 1e3 / p.channel_mbps) as Ns,
            host_pages: 0,
            flash_pages: 0,
            gc_copies: 0,
            sub_page_rmw: 0,
            discarded_pages: 0,
            counters: Counters::default(),
            gc_threshold: p.gc_threshold() as usize,
            p,
        }
    }

    /// The planes garbage collection of plane `pl` keeps busy.
    fn gc_planes(&self, pl: usize) -> Vec<usize> {
        match self.p.gc_occupies {
            GcScope::Plane => vec![pl],
            // Planes share a package when they share its channel and index.
            GcScope::Element => {
                let ch = self.p.channels as usize;
                let per_pkg = (self.p.dies_per_package * self.p.planes_per_die) as usize;
                let pkg = pl / ch % self.p.packages_per_channel as usize;
                (0..self.planes.len())
                    .filter(|&q| {
                        q % ch == pl % ch && q / ch % self.p.packages_per_channel as usize == pkg
                    })
                    .take(per_pkg)
                    .collect()
            }
        }
    }

    fn plane_of_block(&self, b: u32) -> usize {
        (b / self.p.blocks_per_plane) as usize
    }
    fn channel_of_plane(&self, pl: usize) -> usize {
        pl % self.p.channels as usize
    }

    /// The die of plane `pl`. Planes are numbered channel first, then
    /// package on the channel, then plane within the package (dies in
    /// order), as `gc_planes` walks them.
    fn die_of(&self, pl: usize) -> usize {
        let per_round = (self.p.channels * self.p.packages_per_channel) as usize;
        let j = pl / per_round;
        pl % per_round + per_round * (j / self.p.planes_per_die as usize)
    }

    /// Reserve the plane for `d` ns of `op` from no earlier than `t`;
    /// returns the end. Under `same-op` the plane's die must be idle or
    /// running the same operation (a multi-plane command).
    fn on_plane(&mut self, pl: usize, t: Ns, d: Ns, op: FlashOp) -> Ns {
        let mut s = t.max(self.planes[pl].busy_until);
        if self.p.multiplane == Multiplane::SameOp {
            let di = self.die_of(pl);
            let die = &mut self.dies[di];
            if die.op != op {
                s = s.max(die.busy_until);
                die.op = op;
            }
            die.busy_until = die.busy_until.max(s + d);
        }
        self.planes[pl].busy_until = s + d;
        s + d
    }
    fn on_channel(&mut self, pl: usize, t: Ns) -> Ns {
        let ch = self.channel_of_plane(pl);
        let s = t.max(self.channel_free[ch]);
        self.channel_free[ch] = s + self.xfer_ns;
        s + self.xfer_ns
    }

    /// Next free physical page on plane `pl`, collecting garbage first if the plane
    /// is short of free blocks. Returns the page.
    fn allocate(&mut self, pl: usize, t: Ns) -> u32 {
        let ppb = self.p.pages_per_block;
        if self.planes[pl].next_page == ppb && self.planes[pl].free.len() <= self.gc_threshold {
            self.collect(pl, t);
        }
        // GC may have opened a block for its copies: keep filling it.
        if self.planes[pl].next_page == ppb {
            let next = self.planes[pl]
                .free
                .pop_back()
                .expect("garbage collection leaves a free block");
            self.activate(pl, next);
        }
        let plane = &mut self.planes[pl];
        let ppn = plane.active * ppb + plane.next_page;
        plane.next_page += 1;
        ppn
    }

    /// Greedy GC: erase the full block with the fewest valid pages, copying them
    /// inside the plane, until the plane has more than the threshold free.
    fn collect(&mut self, pl: usize, t: Ns) {
        let bpp = self.p.blocks_per_plane;
        let ppb = self.p.pages_per_block;
        // Each round frees a block; bounded by the plane's block count.
        for _ in 0..bpp {
            if self.planes[pl].free.len() > self.gc_threshold {
                return;
            }
            let Some((valid, victim)) = self.planes[pl].full.first() else {
                return;
            };
            if valid as u32 == ppb {
                // Nothing to reclaim: the host filled all flash (cannot happen with
                // over-provisioning, kept as a bound).
                return;
            }
            self.planes[pl].full.set(valid, victim, false);
            // On the stack for blocks of up to 256 pages (no allocation per
            // collection).
            let moves: smallvec::SmallVec<[(u32, u32); 256]> = (victim * ppb..(victim + 1) * ppb)
                .filter(|&ppn| self.is_live(ppn))
                .map(|ppn| (ppn, self.rmap[ppn as usize] - 1))
                .collect();
            // Each move rewrites a map entry at random: ask for them all
            // before the first is needed, so the misses overlap.
            for &(_, lpn) in &moves {
                prefetch_line(&self.map[lpn as usize]);
            }
            let mut end = t;
            for (old, lpn) in moves {
                self.set_live(old, false);
                let new = self.allocate_in_active(pl);
                self.rmap[new as usize] = lpn + 1;
                self.set_live(new, true);
                self.map[lpn as usize] = new + 1;
                self.valid[(new / ppb) as usize] += 1;
                let d = self.page_ns[0] + self.page_ns[1];
                end = self.on_plane(pl, end, d, FlashOp::Program);
                self.gc_copies += 1;
                self.flash_pages += 1;
            }
            self.valid[victim as usize] = 0;
            let end = self.on_plane(pl, end, self.page_ns[2], FlashOp::Erase);
            // Cleaning the element keeps its other planes busy as long.
            for q in self.gc_planes(pl) {
                if q != pl {
                    let b = &mut self.planes[q].busy_until;
                    *b = (*b).max(end);
                    let die = self.die_of(q);
                    let d = &mut self.dies[die].busy_until;
                    *d = (*d).max(end);
                }
            }
            self.erase_count[victim as usize] += 1;
            self.counters.erases += 1;
            self.planes[pl].free.push_front(victim);
        }
    }

    /// Block `next` (just taken from the free list) becomes plane `pl`'s
    /// active block; the one it replaces is full.
    fn activate(&mut self, pl: usize, next: u32) {
        let plane = &mut self.planes[pl];
        let old = plane.active;
        plane.full.set(self.valid[old as usize], old, true);
        plane.active = next;
        plane.next_page = 0;
    }

    fn is_live(&self, ppn: u32) -> bool {
        self.live[ppn as usize / 64] & (1 << (ppn % 64)) != 0
    }
    fn set_live(&mut self, ppn: u32, on: bool) {
        let w = &mut self.live[ppn as usize / 64];
        if on {
            *w |= 1 << (ppn % 64);
        } else {
            *w &= !(1 << (ppn % 64));
        }
    }

    /// One page of block `b` no longer valid (overwritten or discarded).
    fn invalidate(&mut self, b: u32) {
        let v = self.valid[b as usize];
        self.valid[b as usize] = v - 1;
        let pl = self.plane_of_block(b);
        let full = &mut self.planes[pl].full;
        if full.set(v, b, false) {
            full.set(v - 1, b, true);
        }
    }

    /// A page in the plane's active block for GC copies (the active block always
    /// has room: GC runs only when a block was just filled, and takes a fresh one).
    fn allocate_in_active(&mut self, pl: usize) -> u32 {
        let ppb = self.p.pages_per_block;
        if self.planes[pl].next_page == ppb {
            let next = self.planes[pl]
                .free
                .pop_back()
                .expect("a free block for GC copies");
            self.activate(pl, next);
        }
        let plane = &mut self.planes[pl];
        let ppn = plane.active * ppb + plane.next_page;
        plane.next_page += 1;
        ppn
    }

    fn write_page(&mut self, lpn: u64, t: Ns) -> Ns {
        let pl = self.place_page(lpn, t);
        let x = self.on_channel(pl, t);
        self.on_plane(pl, x, self.page_ns[1], FlashOp::Program)
    }

    /// The flash translation of a page write (the old page invalid, a new
    /// one allocated, collecting garbage first if due, and mapped): what a
    /// write does but its time. The plane written.
    fn place_page(&mut self, lpn: u64, t: Ns) -> usize {
        let ppb = self.p.pages_per_block;
        let old = self.map[lpn as usize];
        if old != 0 {
            let o = old - 1;
            self.set_live(o, false);
            self.invalidate(o / ppb);
        }
        let pl = self.next_plane;
        self.next_plane = (self.next_plane + 1) % self.planes.len();
        let ppn = self.allocate(pl, t);
        self.map[lpn as usize] = ppn + 1;
        self.rmap[ppn as usize] = lpn as u32 + 1;
        self.set_live(ppn, true);
        self.valid[(ppn / ppb) as usize] += 1;
        self.host_pages += 1;
        self.flash_pages += 1;
        pl
    }

    /// `bytes` over the host interface from `t` on (one command at a time);
    /// when they are across. `t` itself without an interface limit.
    fn over_link(&mut self, t: Ns, bytes: u64) -> Ns {
        if self.link_ns_per_byte == 0.0 {
            return t;
        }
        let end = t.max(self.link_free) + (bytes as f64 * self.link_ns_per_byte) as Ns;
        self.link_free = end;
        end
    }

    fn read_page(&mut self, lpn: u64, t: Ns) -> Ns {
        let ppb = self.p.pages_per_block as u64;
        let pl = match self.map[lpn as usize] {
            0 => (lpn % self.planes.len() as u64) as usize,
            p => self.plane_of_block(((p - 1) as u64 / ppb) as u32),
        };
        let r = self.on_plane(pl, t, self.page_ns[0], FlashOp::Read);
        self.on_channel(pl, r)
    }

    /// Fill every logical page once, sequentially (a "fresh out of box" SSD made
    /// steady: later writes overwrite and GC has work). Takes no simulated time.
    pub fn precondition(&mut self) {
        // Every entry of both maps is written below: have the kernel map
        // them written (zeroed pages) at once, instead of each page first
        // read (the shared zero page) and then copied on write.
        populate_for_writes(&self.map);
        populate_for_writes(&self.rmap);
        // Timing aside: the resources' clocks are reset after.
        for lpn in 0..self.map.len() as u64 {
            self.place_page(lpn, 0);
        }
        for p in &mut self.planes {
            p.busy_until = 0;
        }
        for d in &mut self.dies {
            d.busy_until = 0;
        }
        self.channel_free.iter_mut().for_each(|c| *c = 0);
        self.host_pages = 0;
        self.flash_pages = 0;
        self.gc_copies = 0;
        self.sub_page_rmw = 0;
        self.discarded_pages = 0;
        self.counters = Counters::default();
        self.erase_count.iter_mut().for_each(|e| *e = 0);
    }

    pub fn erase_counts(&self) -> &[u32] {
        &self.erase_count
    }
}

impl Device for Ssd {
    fn submit(&mut self, now: Ns, io: DevIo, started: &mut Started) {
        self.counters.count(&io);
        let ms = |v: f64| (v * 1e6) as Ns;
        let oh = ms(if io.write {
            self.p.write_overhead_ms
        } else {
            self.p.read_overhead_ms
        });
        let mut t = now.max(self.ctrl_free) + oh;
        self.ctrl_free = t;
        if io.write {
            // The data arrives over the interface before a page is programmed.
            t = self.over_link(t, io.len);
        }
        let pb = self.p.page_bytes;
        let first = io.offset / pb;
        let last = (io.offset + io.len.max(1)).div_ceil(pb);
        let mut end = t;
        for lpn in first..last.min(self.map.len() as u64) {
            let e = if io.write {
                // A write that covers part of a page holding data rewrites the
                // whole page: the page is read first (read-modify-write), as
                // a flash page is programmed whole.
                let (a, b) = (lpn * pb, (lpn + 1) * pb);
                let covered = (io.offset + io.len).min(b) - io.offset.max(a);
                let at = if covered < pb && self.map[lpn as usize] != 0 {
                    self.sub_page_rmw += 1;
                    self.read_page(lpn, t)
                } else {
                    t
                };
                self.write_page(lpn, at)
            } else {
                self.read_page(lpn, t)
            };
            end = end.max(e);
        }
        if !io.write {
            end = self.over_link(end, io.len);
        }
        self.counters.busy(now, end, io.write);
        started.push((io.tag, end));
    }
    fn complete(&mut self, _now: Ns, _started: &mut Started) {}
    fn capacity(&self) -> u64 {
        self.p.capacity()
    }
    fn counters(&self) -> &Counters {
        &self.counters
    }
    fn counters_mut(&mut self) -> &mut Counters {
        &mut self.counters
    }
    /// Pages the discard covers whole are unmapped: their flash page turns
    /// invalid, as an overwrite makes it, without a new page programmed.
    fn discard(&mut self, offset: u64, len: u64) {
        self.counters.count_discard(len);
        let pb = self.p.page_bytes;
        let ppb = self.p.pages_per_block;
        let (first, end) = (
            offset.div_ceil(pb),
            ((offset + len) / pb).min(self.map.len() as u64),
        );
        for lpn in first..end.max(first) {
            let old = self.map[lpn as usize];
            if old != 0 {
                let o = old - 1;
                self.set_live(o, false);
                self.invalidate(o / ppb);
                self.map[lpn as usize] = 0;
                self.discarded_pages += 1;
            }
        }
    }
    /// What an overwrite of the page at `offset` touches, one level per
    /// stage: 0 its map entry; 1 the old page's live bit and its
    /// block's valid count; 2 the block's bits in the full-block rows it
    /// leaves and joins. Tens of MiB touched at random, each first touch a
    /// miss to memory: half a replay's time before the runner looked ahead.
    fn prefetches(&self) -> bool {
        true
    }
    fn prefetch(&self, offset: u64, stage: u32) {
        let Some(e) = self.map.get((offset / self.p.page_bytes) as usize) else {
            return;
        };
        if stage == 0 || *e == 0 {
            prefetch_line(e);
            return;
        }
        let old = *e - 1;
        let b = old / self.p.pages_per_block;
        if stage == 1 {
            prefetch_line(&self.live[old as usize / 64]);
            prefetch_line(&self.valid[b as usize]);
            return;
        }
        let v = self.valid[b as usize];
        let full = &self.planes[self.plane_of_block(b)].full;
        for w in [full.word(v, b), full.word(v.wrapping_sub(1), b)]
            .into_iter()
            .flatten()
        {
            prefetch_line(w);
        }
    }
    fn service_model(&self) -> hetraid_core::ServiceModel {
        hetraid_core::ServiceModel {
            position_ns: ((self.p.read_ms + self.p.read_overhead_ms) * 1e6) as u64,
            bytes_per_s: ((self.p.channel_mbps * self.p.channels as f64)
                .min(self.p.interface_mbps.unwrap_or(f64::INFINITY))
                * 1e6) as u64,
        }
    }
    fn wear(&self) -> Option<Wear> {
        Some(Wear {
            erases: self.counters.erases,
            erase_max: self.erase_count.iter().copied().max().unwrap_or(0) as u64,
            write_amplification: if self.host_pages == 0 {
                1.0
            } else {
                self.flash_pages as f64 / self.host_pages as f64
            },
            gc_page_copies: self.gc_copies,
            sub_page_rmw: self.sub_page_rmw,
            discarded_pages: self.discarded_pages,
        })
    }
}
