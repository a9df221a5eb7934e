//! A layout's map: where each stripe's chunks live (`hetraid layout`), as
//! text (the first stripes as a table) and as JSON (every stripe listed).

use super::say;
use hetraid_core::layout::{Layout, Stripe};
use hetraid_core::units::format_size;
use hetraid_core::MemberKind;
use serde_json::json;

/// The layout and `stripes` (of its `stripe_count()`) as one JSON document.
pub fn layout_json(l: &dyn Layout, kinds: &[MemberKind], stripes: &[Stripe]) -> serde_json::Value {
    let count = l.stripe_count();
    let spec_kinds: Vec<&str> = kinds.iter().map(|k| k.as_str()).collect();
    let mut v = json!({
        "layout": l.name(),
        "devices": l.members(),
        "chunk_bytes": l.chunk_bytes(),
        "capacity_bytes": l.capacity_bytes(),
        "stripe_count": count,
        "data_per_stripe": l.data_per_stripe(),
        "parity_cycle": l.parity_cycle(),
        "kinds": spec_kinds,
        "stripes": stripes,
    });
    if let Some(b) = l.bundles() {
        v["bundles"] = json!(b);
    }
    let logs = l.log_regions();
    if !logs.is_empty() {
        v["log"] = json!(logs);
    }
    v
}

/// The layout and `stripes` (the first of its `stripe_count()`) as a table.
pub fn layout_text(l: &dyn Layout, stripes: &[Stripe]) -> String {
    let (count, listed) = (l.stripe_count(), stripes.len() as u64);
    let mut out = String::new();
    let out = &mut out;
    // Stripes of one width, or (RAIDX placed to its bound) from the
    // narrowest to the widest.
    let narrowest = match l.bundles() {
        Some(_) => (0..count).map(|s| l.data_in_stripe(s)).min().unwrap_or(0),
        None => l.data_per_stripe(),
    };
    let widths = match narrowest == l.data_per_stripe() {
        true => format!("{}", l.data_per_stripe()),
        false => format!("{narrowest} to {}", l.data_per_stripe()),
    };
    say!(
        out,
        "{}: {} members, chunk {}, capacity {} ({} bytes), {} stripes of {} data chunks",
        l.name(),
        l.members(),
        format_size(l.chunk_bytes()),
        format_size(l.capacity_bytes()),
        l.capacity_bytes(),
        count,
        widths
    );
    if let Some(b) = l.bundles() {
        say!(out, "bundles: {b}");
    }
    for r in l.log_regions() {
        say!(
            out,
            "log copy: member {} offset {} length {}",
            r.member,
            r.offset,
            format_size(r.length)
        );
    }
    let n = l.members();
    say!(
        out,
        "{:>8}  {}",
        "stripe",
        (0..n)
            .map(|d| format!("{:>10}", format!("m{d}")))
            .collect::<String>()
    );
    for st in stripes {
        let mut cells = vec![String::from("."); n];
        for (i, c) in st.data.iter().enumerate() {
            cells[c.member] = format!("D{i}@{}", format_size(c.offset));
        }
        for (j, c) in st.parity.iter().enumerate() {
            cells[c.member] = format!(
                "{}@{}",
                if j == 0 { "P" } else { "Q" },
                format_size(c.offset)
            );
        }
        for (i, m) in st.mirrors.iter().enumerate() {
            for c in m {
                cells[c.member] = format!("C{i}@{}", format_size(c.offset));
            }
        }
        say!(
            out,
            "{:>8}  {}",
            st.index,
            cells.iter().map(|c| format!("{c:>10}")).collect::<String>()
        );
    }
    if listed < count {
        say!(
            out,
            "({} more stripes; --stripes N lists more)",
            count - listed
        );
    }
    std::mem::take(out)
}
