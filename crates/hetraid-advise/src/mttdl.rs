//! The MTTDL of a simulated configuration: its failure sets read from its
//! stripes, each member's MTBF by kind, and `hetraid-model`'s chain. Shared
//! by `hetraid analyze mttdl` and the advisor.

use hetraid_model::{mttdl_per_member, FailureSets};
use hetraid_sim::setup::Setup;

/// Hours in a (Julian) year.
pub const HOURS_PER_YEAR: f64 = 8766.0;

/// Stripes a layout may have for its failure sets to be read from every stripe.
const SHAPE_STRIPES_MAX: u64 = 1 << 20;

/// The failure sets of the configuration, from every stripe. Layouts of large
/// members are read at a proportionally smaller size: their stripe shapes do not
/// depend on the scale (RAID4/5/6/10/H repeat; S2-RAID's partitions and RAIDX's
/// bundles keep their proportions), while the first stripes of a full-size S2-RAID
/// would show only its first band of sub-arrays.
pub fn failure_sets(setup: &Setup) -> Result<FailureSets, String> {
    let layout = setup.layout.as_ref();
    // The failure sets are member bit masks of 64 bits.
    if layout.members() > 64 {
        return Err(format!(
            "the reliability model takes at most 64 members; this array has {}",
            layout.members()
        ));
    }
    let stripes = layout.stripe_count();
    if stripes <= SHAPE_STRIPES_MAX {
        return Ok(FailureSets::of(layout));
    }
    let f = stripes.div_ceil(SHAPE_STRIPES_MAX);
    let c = &setup.cfg;
    let chunk = c.chunk.0;
    let sizes: Vec<u64> = setup
        .specs
        .iter()
        .map(|s| {
            let full = c.member_size.map_or(s.capacity(), |m| m.0);
            (full / f / chunk).max(1) * chunk
        })
        .collect();
    let kind = hetraid_sim::setup::layout_kind(c)?;
    let small = hetraid_core::layout::build(&hetraid_core::layout::LayoutSpec {
        kind,
        chunk_bytes: chunk,
        sizes,
        kinds: setup.specs.iter().map(|s| s.kind).collect(),
    })
    .map_err(|e| format!("scaling the layout down to read its stripe shapes: {e}"))?;
    Ok(FailureSets::of(small.as_ref()))
}

/// Each member's MTBF in hours: by kind, an SSD holding parity worn
/// `parity_wear` times faster (its writes).
pub fn member_mtbf_h(
    setup: &Setup,
    sets: &FailureSets,
    (hdd, ssd, nvram): (f64, f64, f64),
    parity_wear: f64,
) -> Vec<f64> {
    let parity = sets.parity_members();
    setup
        .specs
        .iter()
        .enumerate()
        .map(|(i, s)| match s.kind {
            hetraid_core::MemberKind::Hdd => hdd,
            hetraid_core::MemberKind::Ssd if parity >> i & 1 == 1 => ssd / parity_wear,
            hetraid_core::MemberKind::Ssd => ssd,
            hetraid_core::MemberKind::Nvram => nvram,
        })
        .collect()
}

/// MTTDL in hours with `analyze mttdl`'s default device figures (HDD 50,000
/// h, SSD and NVRAM 200,000 h, parity wear 2) and every member repaired in
/// `mttr_h` hours (`hetraid advise`).
pub fn default_mttdl_h(setup: &Setup, mttr_h: f64) -> Result<f64, String> {
    let sets = failure_sets(setup)?;
    let mtbf = member_mtbf_h(setup, &sets, (50_000.0, 200_000.0, 200_000.0), 2.0);
    let rates: Vec<f64> = mtbf.iter().map(|h| 1.0 / h).collect();
    let repair = vec![1.0 / mttr_h.max(1e-9); rates.len()];
    mttdl_per_member(&sets, &rates, &repair)
        .map(|m| m.hours)
        .map_err(|e| e.to_string())
}
