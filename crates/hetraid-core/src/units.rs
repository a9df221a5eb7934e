//! Sizes: the 4 KiB page that parity decisions are made on, and `64K`-style parsing.

/// Parity decisions are made per 4 KiB page row, like Linux MD.
pub const PAGE: u64 = 4096;

/// Parse `4096`, `4K`, `64k`, `1M`, `2G`, `1T` (binary multiples, optional `B`/`iB`).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let t = t
        .strip_suffix("iB")
        .or_else(|| t.strip_suffix('B'))
        .unwrap_or(t);
    let (num, mult) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let m: u64 = match c.to_ascii_uppercase() {
                'K' => 1 << 10,
                'M' => 1 << 20,
                'G' => 1 << 30,
                'T' => 1 << 40,
                _ => return Err(format!("size '{s}' has an unknown unit; use K, M, G or T")),
            };
            (&t[..i], m)
        }
        _ => (t, 1),
    };
    let n: f64 = num
        .parse()
        .map_err(|_| format!("'{s}' is not a size; write it like 4096, 64K, 1M or 2G"))?;
    if n.is_nan() || n < 0.0 || !n.is_finite() {
        return Err(format!("size '{s}' must be a non-negative number"));
    }
    let v = n * mult as f64;
    if v > u64::MAX as f64 / 2.0 || v.fract() != 0.0 {
        return Err(format!(
            "size '{s}' is not a whole number of bytes below 2^63"
        ));
    }
    Ok(v as u64)
}

/// Parse `OFFSET+LENGTH` (each a size, e.g. `0+128K`).
pub fn parse_extent(s: &str) -> Result<(u64, u64), String> {
    let (a, b) = s
        .split_once('+')
        .ok_or_else(|| format!("'{s}' is not OFFSET+LENGTH; write it like 0+128K or 1M+4K"))?;
    Ok((parse_size(a)?, parse_size(b)?))
}

/// `65536` -> `64K`, for tables.
pub fn format_size(b: u64) -> String {
    for (unit, m) in [
        ("T", 1u64 << 40),
        ("G", 1 << 30),
        ("M", 1 << 20),
        ("K", 1 << 10),
    ] {
        if b >= m && b.is_multiple_of(m) {
            return format!("{}{unit}", b / m);
        }
    }
    format!("{b}")
}

/// `b` for people: in the largest binary unit it reaches, whole when it is a
/// multiple (`64M`, as [`format_size`]), else to one decimal (`412.8M`,
/// where `format_size` says `422656K`). Not parseable back exactly: show
/// the bytes beside it where they matter.
pub fn human_size(b: u64) -> String {
    for (unit, m) in [
        ("T", 1u64 << 40),
        ("G", 1 << 30),
        ("M", 1 << 20),
        ("K", 1 << 10),
    ] {
        if b >= m {
            return match b.is_multiple_of(m) {
                true => format!("{}{unit}", b / m),
                false => format!("{:.1}{unit}", b as f64 / m as f64),
            };
        }
    }
    format!("{b}")
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn human_sizes_keep_one_unit() {
        assert_eq!(human_size(64 << 20), "64M");
        assert_eq!(human_size(422656 << 10), "412.8M");
        assert_eq!(human_size(6291072 << 10), "6.0G");
        assert_eq!(human_size(1536), "1.5K");
        assert_eq!(human_size(512), "512");
    }

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_size("4K"), Ok(4096));
        assert_eq!(parse_size("64k"), Ok(65536));
        assert_eq!(parse_size("1M"), Ok(1 << 20));
        assert_eq!(parse_size("2GiB"), Ok(2 << 30));
        assert_eq!(parse_size("1.5K"), Ok(1536));
        assert_eq!(parse_size("123"), Ok(123));
        assert!(parse_size("x").is_err());
        assert!(parse_size("4Q").is_err());
        assert!(parse_size("-1").is_err());
        assert!(parse_size("").is_err());
        assert_eq!(format_size(65536), "64K");
        assert_eq!(format_size(1000), "1000");
    }
}
