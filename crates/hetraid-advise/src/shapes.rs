//! The shapes the advisor tries: every layout that fits the members, with
//! the members in the order each wants, and the members resolved (presets,
//! device files, or real devices probed first).

use super::*;

impl Request {
    /// Real files and block devices among the members are measured
    /// (read-only) and replaced by the device files written into `dir`;
    /// presets and device files pass as they are.
    #[allow(clippy::type_complexity)]
    pub(crate) fn resolve_members(
        &self,
        dir: &Path,
    ) -> Result<(String, Vec<String>, Vec<(String, String)>), String> {
        let mut out = Vec::new();
        let mut notes = Vec::new();
        let mut probed: Vec<(String, String)> = Vec::new();
        // Every member understood before any is probed: a preset, a device
        // file, or a real file or block device (`PATH:kind` as `create`
        // takes it: the kind the probe says, overridden).
        let mut parts = Vec::new();
        for part in self.members.split(',').map(str::trim) {
            let (name, rep) = match part.rsplit_once('*') {
                Some((n, r)) => (n.trim(), Some(r.trim())),
                None => (part, None),
            };
            let known =
                name.ends_with(".toml") || hetraid_sim::preset::DeviceSpec::lookup(name).is_ok();
            let (path, kind) = crate::probe::split_member(name)?;
            let is_device = !known && std::fs::metadata(&path).is_ok_and(|m| !m.is_dir());
            if !known && !is_device {
                // The preset parser says what is wrong (and lists presets).
                hetraid_sim::preset::DeviceSpec::lookup(name)?;
            }
            parts.push((name, rep, is_device, path.display().to_string(), kind));
        }
        for (name, rep, is_device, path, kind) in parts {
            let name = if is_device {
                if let Some((_, f)) = probed.iter().find(|(p, _)| *p == path) {
                    f.clone()
                } else {
                    let stem = Path::new(&path)
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_else(|| "device".into());
                    let file = dir.join(format!("probe-{}-{stem}.toml", probed.len()));
                    let (text, summary) =
                        crate::probe::probe_member(&path, &stem, self.probe_seconds, false, kind)?;
                    std::fs::write(&file, text).map_err(|e| format!("{}: {e}", file.display()))?;
                    notes.push(summary);
                    let f = file.display().to_string();
                    probed.push((path.clone(), f.clone()));
                    f
                }
            } else {
                name.to_string()
            };
            out.push(match rep {
                Some(r) => format!("{name}*{r}"),
                None => name,
            });
        }
        Ok((out.join(","), notes, probed))
    }

    /// Every layout that fits the members, with its members in the order it
    /// wants.
    pub(crate) fn shapes(
        &self,
        tokens: &[String],
        kinds: &[MemberKind],
        mixed: bool,
    ) -> Vec<Shape> {
        let n = tokens.len();
        let same = tokens.join(",");
        let ssds = kinds.iter().filter(|k| **k != MemberKind::Hdd).count();
        let mut out: Vec<Shape> = Vec::new();
        if self.redundancy == 1 {
            // Heterogeneous placements first: on a tie the one built for
            // the hardware is named (the sort is stable).
            // The thesis's placements: members reordered to the preset's
            // canonical kinds when the counts match.
            for p in ["raid4s", "raid5s", "raidf5", "raide", "raid4n", "raid5nss"] {
                let Some(preset) = hetraid_core::layout::Preset::parse(p) else {
                    continue;
                };
                let want = preset.default_kinds(n);
                let mut pool: Vec<(MemberKind, String)> =
                    kinds.iter().copied().zip(tokens.iter().cloned()).collect();
                let mut order = Vec::new();
                for k in &want {
                    match pool.iter().position(|(pk, _)| pk == k) {
                        Some(i) => order.push(pool.remove(i).1),
                        None => break,
                    }
                }
                if order.len() == n && preset.check_kinds(&want).is_ok() {
                    out.push(Shape::new(p, &order.join(",")));
                }
            }
            if ssds > 0 && ssds < n {
                let mut s = Shape::new("raidh", &same);
                s.weights = Some(Weights::Auto);
                out.push(s);
            }
            out.push(Shape::new("raid5", &same));
            out.push(Shape::new("raid4", &same));
            if n.is_multiple_of(2) {
                out.push(Shape::new("raid10", &same));
            }
            // S²-RAID5: a prime group G dividing the members into 2..=G groups.
            for g in
                (2..=n / 2).filter(|&g| hetraid_core::layout::is_prime(g) && n.is_multiple_of(g))
            {
                if (2..=g).contains(&(n / g)) {
                    for spare in [0, 1] {
                        let mut s = Shape::new("s2raid5", &same);
                        s.group = Some(g);
                        s.spare_partitions = spare;
                        out.push(s);
                    }
                }
            }
            if n >= 4 && n.is_multiple_of(2) {
                for spare in [0, 1] {
                    let mut s = Shape::new("s2raid10", &same);
                    s.spare_partitions = spare;
                    out.push(s);
                }
            }
            // RAIDX: for members of different sizes (what it is for).
            for (c, level) in [(2, "1"), (3, "5")].into_iter().filter(|_| mixed) {
                let mut s = Shape::new("raidx", &same);
                s.chunks_per_bundle = Some(c);
                s.raidx_level = Some(level.into());
                out.push(s);
            }
            // And with each bundle's width chosen where it is placed: the
            // capacity bound (all but the largest member) on any sizes.
            if mixed {
                let mut s = Shape::new("raidx", &same);
                s.raidx_level = Some("5".into());
                out.push(s);
            }
            // HPDA: its own roles from the kinds (pruned when they do not fit).
            if ssds > 0 {
                out.push(Shape::new("hpda", &same));
            }
            // Declustered with one spare chunk a row, groups narrower than
            // the array (a group as wide as the members left is RAID5 with a
            // rotating spare).
            for g in [3usize, 5, 9].into_iter().filter(|&g| g + 2 <= n) {
                out.push(Shape::declustered(&same, g, 1));
            }
        } else {
            out.push(Shape::new("raid6", &same));
            if ssds >= 2 && 2 * ssds <= n + ssds {
                let w: Vec<u64> = kinds
                    .iter()
                    .map(|k| u64::from(*k != MemberKind::Hdd))
                    .collect();
                let mut s = Shape::new("raidh6", &same);
                s.weights = Some(Weights::List(w));
                out.push(s);
            }
            for g in [5usize, 9].into_iter().filter(|&g| g + 2 <= n) {
                out.push(Shape::declustered(&same, g, 2));
            }
            let mut s = Shape::new("raidx", &same);
            s.chunks_per_bundle = Some(4);
            if !mixed {
                return out;
            }
            s.raidx_level = Some("6".into());
            out.push(s);
            // Widths per bundle: all but the two largest members.
            let mut s = Shape::new("raidx", &same);
            s.raidx_level = Some("6".into());
            out.push(s);
        }
        out
    }
}

/// One layout to try: name, members in its order, and its parameters.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Shape {
    pub(crate) layout: String,
    pub(crate) members: String,
    pub(crate) weights: Option<Weights>,
    pub(crate) group: Option<usize>,
    pub(crate) spare_partitions: usize,
    pub(crate) chunks_per_bundle: Option<usize>,
    pub(crate) raidx_level: Option<String>,
    pub(crate) width: Option<usize>,
    pub(crate) parity: Option<usize>,
}

impl Shape {
    pub(crate) fn new(layout: &str, members: &str) -> Self {
        Self {
            layout: layout.into(),
            members: members.into(),
            weights: None,
            group: None,
            spare_partitions: 0,
            chunks_per_bundle: None,
            raidx_level: None,
            width: None,
            parity: None,
        }
    }

    pub(crate) fn declustered(members: &str, width: usize, parity: usize) -> Self {
        let mut s = Self::new("declustered", members);
        s.width = Some(width);
        s.parity = Some(parity);
        s
    }

    /// Layouts whose copies are whole chunks: the write policy does not apply.
    pub(crate) fn mirrored(&self) -> bool {
        matches!(self.layout.as_str(), "raid10" | "s2raid10" | "hpda")
            || self.raidx_level.as_deref() == Some("1")
    }
}
