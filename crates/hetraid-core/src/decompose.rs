//! RAIDE's write decomposition ([Wacha 2012] ch. 5): a write of k chunks starting at data
//! position i of an n-data-chunk stripe splits into at most a leading partial stripe,
//! full stripes, and a trailing partial stripe.

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Piece {
    /// Data positions `first .. first + count` of one stripe.
    Partial { first: usize, count: usize },
    /// `stripes` whole stripes.
    Full { stripes: u64 },
}

/// The five cases of the thesis, by which pieces occur.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Case {
    FullOnly,
    PartialOnly,
    FullThenPartial,
    PartialThenFull,
    /// Partial, zero or more full stripes, partial.
    PartialFullPartial,
}

/// Decompose a write of `k >= 1` chunks starting at data position `i < n`.
pub fn decompose(n: usize, i: usize, k: u64) -> (Case, Vec<Piece>) {
    assert!(
        n > 0 && i < n && k > 0,
        "decompose needs n > 0, i < n, k > 0"
    );
    let mut out = Vec::new();
    let mut left = k;
    if i > 0 {
        let count = ((n - i) as u64).min(left) as usize;
        out.push(Piece::Partial { first: i, count });
        left -= count as u64;
    }
    let full = left / n as u64;
    if full > 0 {
        out.push(Piece::Full { stripes: full });
        left -= full * n as u64;
    }
    if left > 0 {
        out.push(Piece::Partial {
            first: 0,
            count: left as usize,
        });
    }
    let case = match out.as_slice() {
        [Piece::Full { .. }] => Case::FullOnly,
        [Piece::Partial { .. }] => Case::PartialOnly,
        [Piece::Full { .. }, Piece::Partial { .. }] => Case::FullThenPartial,
        [Piece::Partial { .. }, Piece::Full { .. }] => Case::PartialThenFull,
        _ => Case::PartialFullPartial,
    };
    (case, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn five_cases() {
        assert_eq!(decompose(4, 0, 8).0, Case::FullOnly);
        assert_eq!(decompose(4, 1, 2).0, Case::PartialOnly);
        assert_eq!(decompose(4, 0, 6).0, Case::FullThenPartial);
        assert_eq!(decompose(4, 2, 6).0, Case::PartialThenFull);
        assert_eq!(
            decompose(4, 3, 6),
            (
                Case::PartialFullPartial,
                vec![
                    Piece::Partial { first: 3, count: 1 },
                    Piece::Full { stripes: 1 },
                    Piece::Partial { first: 0, count: 1 },
                ]
            )
        );
        // Two partials with zero full stripes between them (crossing one boundary).
        assert_eq!(decompose(4, 3, 2).0, Case::PartialFullPartial);
        assert_eq!(
            decompose(4, 3, 2).1,
            vec![
                Piece::Partial { first: 3, count: 1 },
                Piece::Partial { first: 0, count: 1 }
            ]
        );
    }
}
