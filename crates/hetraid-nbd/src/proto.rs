//! The NBD protocol as pure functions: constants, request header parsing, the
//! decision what to do with a request, option payload parsing, reply encoding.
//! No I/O here, so a fuzzer can drive every byte a client may send.
//! Reference: the NBD protocol document (doc/proto.md of the nbd project).

pub const NBDMAGIC: u64 = 0x4e42_444d_4147_4943;
pub const IHAVEOPT: u64 = 0x4948_4156_454f_5054;
pub const OPT_REPLY_MAGIC: u64 = 0x0003_e889_0455_65a9;
pub const REQUEST_MAGIC: u32 = 0x2560_9513;
pub const SIMPLE_REPLY_MAGIC: u32 = 0x6744_6698;
pub const STRUCTURED_REPLY_MAGIC: u32 = 0x668e_33ef;

pub const REPLY_FLAG_DONE: u16 = 1 << 0;
pub const REPLY_TYPE_NONE: u16 = 0;
pub const REPLY_TYPE_OFFSET_DATA: u16 = 1;
pub const REPLY_TYPE_BLOCK_STATUS: u16 = 5;
pub const REPLY_TYPE_ERROR: u16 = (1 << 15) + 1;
/// Length of a structured reply chunk header.
pub const STRUCTURED_LEN: usize = 20;

/// The one metadata context served: every byte of an array is allocated data.
pub const META_BASE_ALLOCATION: &str = "base:allocation";
/// Its id on every connection.
pub const META_BASE_ALLOCATION_ID: u32 = 1;

pub const FLAG_FIXED_NEWSTYLE: u16 = 1 << 0;
pub const FLAG_NO_ZEROES: u16 = 1 << 1;
pub const CLIENT_FIXED_NEWSTYLE: u32 = 1 << 0;
pub const CLIENT_NO_ZEROES: u32 = 1 << 1;

pub const OPT_EXPORT_NAME: u32 = 1;
pub const OPT_ABORT: u32 = 2;
pub const OPT_STARTTLS: u32 = 5;
pub const OPT_LIST: u32 = 3;
pub const OPT_INFO: u32 = 6;
pub const OPT_GO: u32 = 7;
pub const OPT_STRUCTURED_REPLY: u32 = 8;
pub const OPT_LIST_META_CONTEXT: u32 = 9;
pub const OPT_SET_META_CONTEXT: u32 = 10;

pub const REP_ACK: u32 = 1;
pub const REP_SERVER: u32 = 2;
pub const REP_INFO: u32 = 3;
pub const REP_META_CONTEXT: u32 = 4;
pub const REP_ERR_UNSUP: u32 = 0x8000_0001;
pub const REP_ERR_POLICY: u32 = 0x8000_0002;
pub const REP_ERR_INVALID: u32 = 0x8000_0003;
pub const REP_ERR_TLS_REQD: u32 = 0x8000_0005;
pub const REP_ERR_UNKNOWN: u32 = 0x8000_0006;
pub const REP_ERR_TOO_BIG: u32 = 0x8000_0009;

pub const INFO_EXPORT: u16 = 0;
pub const INFO_NAME: u16 = 1;
pub const INFO_DESCRIPTION: u16 = 2;
pub const INFO_BLOCK_SIZE: u16 = 3;

pub const TF_HAS_FLAGS: u16 = 1 << 0;
pub const TF_READ_ONLY: u16 = 1 << 1;
pub const TF_SEND_FLUSH: u16 = 1 << 2;
pub const TF_SEND_FUA: u16 = 1 << 3;
pub const TF_SEND_TRIM: u16 = 1 << 5;
pub const TF_SEND_WRITE_ZEROES: u16 = 1 << 6;
pub const TF_CAN_MULTI_CONN: u16 = 1 << 8;
pub const TF_SEND_FAST_ZERO: u16 = 1 << 11;

pub const CMD_READ: u16 = 0;
pub const CMD_WRITE: u16 = 1;
pub const CMD_DISC: u16 = 2;
pub const CMD_FLUSH: u16 = 3;
pub const CMD_TRIM: u16 = 4;
pub const CMD_WRITE_ZEROES: u16 = 6;
pub const CMD_BLOCK_STATUS: u16 = 7;

pub const CMD_FLAG_FUA: u16 = 1 << 0;
pub const CMD_FLAG_NO_HOLE: u16 = 1 << 1;
pub const CMD_FLAG_FAST_ZERO: u16 = 1 << 4;
/// Block status: one extent is enough.
pub const CMD_FLAG_REQ_ONE: u16 = 1 << 3;

/// The flags a command may carry here (the spec: FUA on every command once
/// advertised; NO_HOLE and FAST_ZERO on WRITE_ZEROES; REQ_ONE on
/// BLOCK_STATUS; DF is not advertised). Any other bit is EINVAL.
pub fn flags_allowed(typ: u16) -> u16 {
    match typ {
        CMD_WRITE_ZEROES => CMD_FLAG_FUA | CMD_FLAG_NO_HOLE | CMD_FLAG_FAST_ZERO,
        CMD_BLOCK_STATUS => CMD_FLAG_FUA | CMD_FLAG_REQ_ONE,
        _ => CMD_FLAG_FUA,
    }
}

pub const EPERM: u32 = 1;
pub const EIO: u32 = 5;
pub const EINVAL: u32 = 22;
pub const ENOSPC: u32 = 28;
pub const ENOTSUP: u32 = 95;
pub const ESHUTDOWN: u32 = 108;

/// Largest READ/WRITE payload we accept (advertised as the maximum block size).
pub const MAX_PAYLOAD: u32 = 32 << 20;
/// Largest option payload we read; beyond it the connection is closed.
pub const MAX_OPTION: u32 = 64 << 10;
pub const REQUEST_LEN: usize = 28;

/// A transmission-phase request header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    pub flags: u16,
    pub typ: u16,
    pub handle: u64,
    pub offset: u64,
    pub length: u32,
}

/// Why a connection must be closed (the stream can no longer be trusted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fatal {
    BadMagic(u32),
    Oversize(u32),
}

impl std::fmt::Display for Fatal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::BadMagic(m) => write!(f, "request magic {m:#x} is wrong"),
            Self::Oversize(n) => write!(
                f,
                "request of {n} bytes exceeds the {MAX_PAYLOAD}-byte maximum"
            ),
        }
    }
}

pub fn parse_request(b: &[u8; REQUEST_LEN]) -> Result<Request, Fatal> {
    let magic = u32::from_be_bytes(b[0..4].try_into().unwrap());
    if magic != REQUEST_MAGIC {
        return Err(Fatal::BadMagic(magic));
    }
    Ok(Request {
        flags: u16::from_be_bytes(b[4..6].try_into().unwrap()),
        typ: u16::from_be_bytes(b[6..8].try_into().unwrap()),
        handle: u64::from_be_bytes(b[8..16].try_into().unwrap()),
        offset: u64::from_be_bytes(b[16..24].try_into().unwrap()),
        length: u32::from_be_bytes(b[24..28].try_into().unwrap()),
    })
}

/// What the export allows, and what the client negotiated.
#[derive(Debug, Clone, Copy)]
pub struct Export {
    pub size: u64,
    pub read_only: bool,
    /// NBD_OPT_STRUCTURED_REPLY was acknowledged.
    pub structured: bool,
    /// `base:allocation` was selected with NBD_OPT_SET_META_CONTEXT.
    pub base_allocation: bool,
    /// Zeroes can be made faster than written (whole stripes are discarded):
    /// NBD_FLAG_SEND_FAST_ZERO is advertised and FAST_ZERO honoured.
    pub fast_zero: bool,
}

/// What to do with a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Read {
        offset: u64,
        len: u32,
    },
    Write {
        offset: u64,
        len: u32,
        fua: bool,
    },
    Flush,
    /// Discard: whole stripes read as zeroes afterwards, the rest is kept.
    Trim {
        offset: u64,
        len: u32,
        fua: bool,
    },
    WriteZeroes {
        offset: u64,
        len: u32,
        fua: bool,
        /// No NO_HOLE flag: whole stripes may be discarded instead of written.
        may_hole: bool,
    },
    /// Extents of `base:allocation` over the range (structured reply);
    /// `one`: REQ_ONE, a single extent.
    BlockStatus {
        offset: u64,
        len: u32,
        one: bool,
    },
    /// Finish outstanding requests, then close.
    Disconnect,
    /// Reply with this error; `discard` payload bytes follow the header and must be
    /// read and dropped first.
    Error {
        errno: u32,
        discard: u32,
    },
    Close(Fatal),
}

/// Decide what a request means for `export`. Every request a client can send maps
/// to an action; none reaches the array unchecked.
pub fn decide(r: &Request, export: &Export) -> Action {
    let has_payload = r.typ == CMD_WRITE;
    if r.typ == CMD_WRITE && r.length > MAX_PAYLOAD {
        // Its payload cannot be skipped at a bounded cost.
        return Action::Close(Fatal::Oversize(r.length));
    }
    if r.typ == CMD_READ && r.length > MAX_PAYLOAD {
        // Nothing follows a read: answered, the connection kept (spec).
        return Action::Error {
            errno: EINVAL,
            discard: 0,
        };
    }
    let discard = if has_payload { r.length } else { 0 };
    if r.flags & !flags_allowed(r.typ) != 0 {
        return Action::Error {
            errno: EINVAL,
            discard,
        };
    }
    let in_range = r
        .offset
        .checked_add(r.length as u64)
        .is_some_and(|e| e <= export.size);
    let fua = r.flags & CMD_FLAG_FUA != 0;
    match r.typ {
        CMD_DISC => Action::Disconnect,
        // A flush has no range (spec: offset and length zero).
        CMD_FLUSH if r.offset != 0 || r.length != 0 => Action::Error {
            errno: EINVAL,
            discard: 0,
        },
        CMD_FLUSH => Action::Flush,
        CMD_BLOCK_STATUS => {
            if !export.base_allocation || r.length == 0 || !in_range {
                // Without a negotiated context the command is invalid (spec).
                return Action::Error {
                    errno: EINVAL,
                    discard: 0,
                };
            }
            Action::BlockStatus {
                offset: r.offset,
                len: r.length,
                one: r.flags & CMD_FLAG_REQ_ONE != 0,
            }
        }
        CMD_READ | CMD_WRITE | CMD_TRIM | CMD_WRITE_ZEROES => {
            let writes = r.typ != CMD_READ;
            if writes && export.read_only {
                return Action::Error {
                    errno: EPERM,
                    discard,
                };
            }
            if r.length == 0 {
                return Action::Error {
                    errno: EINVAL,
                    discard,
                };
            }
            if !in_range {
                // Like nbdkit: writing past the end is "no space", the rest "invalid".
                let errno = if r.typ == CMD_WRITE || r.typ == CMD_WRITE_ZEROES {
                    ENOSPC
                } else {
                    EINVAL
                };
                return Action::Error { errno, discard };
            }
            match r.typ {
                CMD_READ => Action::Read {
                    offset: r.offset,
                    len: r.length,
                },
                CMD_WRITE => Action::Write {
                    offset: r.offset,
                    len: r.length,
                    fua,
                },
                CMD_TRIM => Action::Trim {
                    offset: r.offset,
                    len: r.length,
                    fua,
                },
                _ => {
                    let may_hole = r.flags & CMD_FLAG_NO_HOLE == 0;
                    if r.flags & CMD_FLAG_FAST_ZERO != 0 && !(export.fast_zero && may_hole) {
                        // Zeroing would be no faster than writing (no
                        // discard here, or holes refused): fail fast as asked.
                        return Action::Error {
                            errno: ENOTSUP,
                            discard: 0,
                        };
                    }
                    Action::WriteZeroes {
                        offset: r.offset,
                        len: r.length,
                        fua,
                        may_hole,
                    }
                }
            }
        }
        _ => Action::Error {
            errno: EINVAL,
            discard: 0,
        },
    }
}

/// A structured reply chunk header.
pub fn structured_header(flags: u16, typ: u16, handle: u64, len: u32) -> [u8; STRUCTURED_LEN] {
    let mut b = [0u8; STRUCTURED_LEN];
    b[0..4].copy_from_slice(&STRUCTURED_REPLY_MAGIC.to_be_bytes());
    b[4..6].copy_from_slice(&flags.to_be_bytes());
    b[6..8].copy_from_slice(&typ.to_be_bytes());
    b[8..16].copy_from_slice(&handle.to_be_bytes());
    b[16..20].copy_from_slice(&len.to_be_bytes());
    b
}

/// The final error chunk of a structured reply (no message).
pub fn structured_error(errno: u32, handle: u64) -> Vec<u8> {
    let mut b = structured_header(REPLY_FLAG_DONE, REPLY_TYPE_ERROR, handle, 6).to_vec();
    b.extend_from_slice(&errno.to_be_bytes());
    b.extend_from_slice(&0u16.to_be_bytes());
    b
}

/// `base:allocation` flags: the range is not stored, and reads as zeroes.
pub const STATE_HOLE: u32 = 1;
pub const STATE_ZERO: u32 = 2;
/// Descriptors in one block status reply at most (a client asks again for
/// the rest).
pub const BLOCK_STATUS_EXTENTS_MAX: usize = 4096;

/// The reply to NBD_CMD_BLOCK_STATUS: `extents` as (length, hole) runs in
/// order, at most BLOCK_STATUS_EXTENTS_MAX of them (and one with REQ_ONE).
/// Never empty: an empty list is answered as `len` bytes of data.
pub fn block_status_reply(handle: u64, len: u32, extents: &[(u64, bool)], one: bool) -> Vec<u8> {
    let max = if one { 1 } else { BLOCK_STATUS_EXTENTS_MAX };
    let fallback = [(len as u64, false)];
    let list = if extents.is_empty() {
        &fallback[..]
    } else {
        &extents[..extents.len().min(max)]
    };
    let body = 4 + 8 * list.len();
    let mut b = structured_header(
        REPLY_FLAG_DONE,
        REPLY_TYPE_BLOCK_STATUS,
        handle,
        body as u32,
    )
    .to_vec();
    b.extend_from_slice(&META_BASE_ALLOCATION_ID.to_be_bytes());
    for &(n, hole) in list {
        let flags = if hole { STATE_HOLE | STATE_ZERO } else { 0 };
        b.extend_from_slice(&(n.min(len as u64) as u32).to_be_bytes());
        b.extend_from_slice(&flags.to_be_bytes());
    }
    b
}

/// NBD_OPT_LIST/SET_META_CONTEXT payload: export name and queries. None if
/// malformed.
pub fn parse_meta_context(data: &[u8]) -> Option<(String, Vec<String>)> {
    let mut at = 0usize;
    let mut take = |n: usize| -> Option<&[u8]> {
        let s = data.get(at..at.checked_add(n)?)?;
        at += n;
        Some(s)
    };
    let name_len = u32::from_be_bytes(take(4)?.try_into().ok()?) as usize;
    let name = String::from_utf8(take(name_len)?.to_vec()).ok()?;
    let count = u32::from_be_bytes(take(4)?.try_into().ok()?) as usize;
    let mut queries = Vec::new();
    for _ in 0..count.min(data.len()) {
        let l = u32::from_be_bytes(take(4)?.try_into().ok()?) as usize;
        queries.push(String::from_utf8(take(l)?.to_vec()).ok()?);
    }
    (queries.len() == count && at == data.len()).then_some((name, queries))
}

/// Which of `queries` select `base:allocation`: for SET, an exact name; for LIST,
/// also the namespace `base:` and an empty list (all contexts).
pub fn meta_matches(queries: &[String], list: bool) -> bool {
    if list && queries.is_empty() {
        return true;
    }
    queries
        .iter()
        .any(|q| q == META_BASE_ALLOCATION || (list && q == "base:"))
}

/// A simple reply header.
pub fn simple_reply(errno: u32, handle: u64) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[0..4].copy_from_slice(&SIMPLE_REPLY_MAGIC.to_be_bytes());
    b[4..8].copy_from_slice(&errno.to_be_bytes());
    b[8..16].copy_from_slice(&handle.to_be_bytes());
    b
}

/// An option reply: header + payload.
pub fn option_reply(option: u32, typ: u32, data: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(20 + data.len());
    b.extend_from_slice(&OPT_REPLY_MAGIC.to_be_bytes());
    b.extend_from_slice(&option.to_be_bytes());
    b.extend_from_slice(&typ.to_be_bytes());
    b.extend_from_slice(&(data.len() as u32).to_be_bytes());
    b.extend_from_slice(data);
    b
}

/// NBD_OPT_INFO / NBD_OPT_GO payload: export name and requested info types.
pub fn parse_go(data: &[u8]) -> Option<(String, Vec<u16>)> {
    let n = u32::from_be_bytes(data.get(0..4)?.try_into().ok()?) as usize;
    let name = data.get(4..4usize.checked_add(n)?)?;
    let rest = &data[4 + n..];
    let count = u16::from_be_bytes(rest.get(0..2)?.try_into().ok()?) as usize;
    if rest.len() != 2 + 2 * count {
        return None;
    }
    let infos = (0..count)
        .map(|i| u16::from_be_bytes([rest[2 + 2 * i], rest[3 + 2 * i]]))
        .collect();
    Some((String::from_utf8_lossy(name).into_owned(), infos))
}

/// NBD_INFO_EXPORT payload.
pub fn info_export(size: u64, flags: u16) -> Vec<u8> {
    let mut b = Vec::with_capacity(12);
    b.extend_from_slice(&INFO_EXPORT.to_be_bytes());
    b.extend_from_slice(&size.to_be_bytes());
    b.extend_from_slice(&flags.to_be_bytes());
    b
}

/// NBD_INFO_BLOCK_SIZE payload.
pub fn info_block_size(min: u32, preferred: u32, max: u32) -> Vec<u8> {
    let mut b = Vec::with_capacity(14);
    b.extend_from_slice(&INFO_BLOCK_SIZE.to_be_bytes());
    b.extend_from_slice(&min.to_be_bytes());
    b.extend_from_slice(&preferred.to_be_bytes());
    b.extend_from_slice(&max.to_be_bytes());
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(typ: u16, flags: u16, offset: u64, length: u32) -> Request {
        Request {
            flags,
            typ,
            handle: 7,
            offset,
            length,
        }
    }

    #[test]
    fn decisions() {
        let e = Export {
            size: 1 << 20,
            read_only: false,
            structured: true,
            base_allocation: true,
            fast_zero: false,
        };
        assert_eq!(
            decide(&req(CMD_READ, 0, 0, 4096), &e),
            Action::Read {
                offset: 0,
                len: 4096
            }
        );
        assert_eq!(
            decide(&req(CMD_READ, 0, (1 << 20) - 1, 2), &e),
            Action::Error {
                errno: EINVAL,
                discard: 0
            }
        );
        assert_eq!(
            decide(&req(CMD_WRITE, 0, 1 << 20, 10), &e),
            Action::Error {
                errno: ENOSPC,
                discard: 10
            }
        );
        assert_eq!(
            decide(&req(CMD_WRITE, 0, u64::MAX, 10), &e),
            Action::Error {
                errno: ENOSPC,
                discard: 10
            }
        );
        // Issue 37: an oversize read is answered (nothing to skip), an
        // oversize write closes; flags not applicable and a flush with a
        // range are EINVAL (a write's payload is skipped).
        assert_eq!(
            decide(&req(CMD_READ, 0, 0, MAX_PAYLOAD + 1), &e),
            Action::Error {
                errno: EINVAL,
                discard: 0
            }
        );
        assert_eq!(
            decide(&req(CMD_WRITE, 0, 0, MAX_PAYLOAD + 1), &e),
            Action::Close(Fatal::Oversize(MAX_PAYLOAD + 1))
        );
        assert_eq!(
            decide(&req(CMD_WRITE, CMD_FLAG_NO_HOLE, 0, 8), &e),
            Action::Error {
                errno: EINVAL,
                discard: 8
            }
        );
        assert_eq!(
            decide(&req(CMD_READ, 1 << 2, 0, 8), &e),
            Action::Error {
                errno: EINVAL,
                discard: 0
            }
        );
        assert_eq!(
            decide(&req(CMD_FLUSH, 0, 4096, 0), &e),
            Action::Error {
                errno: EINVAL,
                discard: 0
            }
        );
        assert_eq!(
            decide(&req(CMD_FLUSH, CMD_FLAG_FUA, 0, 0), &e),
            Action::Flush
        );
        assert_eq!(
            decide(&req(CMD_WRITE, CMD_FLAG_FUA, 0, 1), &e),
            Action::Write {
                offset: 0,
                len: 1,
                fua: true
            }
        );
        assert_eq!(
            decide(&req(CMD_WRITE_ZEROES, CMD_FLAG_FAST_ZERO, 0, 1), &e),
            Action::Error {
                errno: ENOTSUP,
                discard: 0
            }
        );
        assert_eq!(
            decide(&req(99, 0, 0, 1), &e),
            Action::Error {
                errno: EINVAL,
                discard: 0
            }
        );
        let ro = Export {
            size: 1 << 20,
            read_only: true,
            structured: true,
            base_allocation: true,
            fast_zero: false,
        };
        assert_eq!(
            decide(&req(CMD_WRITE, 0, 0, 512), &ro),
            Action::Error {
                errno: EPERM,
                discard: 512
            }
        );
        assert_eq!(
            decide(&req(CMD_TRIM, 0, 0, 512), &ro),
            Action::Error {
                errno: EPERM,
                discard: 0
            }
        );
        assert_eq!(
            decide(&req(CMD_READ, 0, 0, 512), &ro),
            Action::Read {
                offset: 0,
                len: 512
            }
        );
    }

    #[test]
    fn go_payloads() {
        let mut d = vec![0, 0, 0, 3];
        d.extend_from_slice(b"abc");
        d.extend_from_slice(&[0, 2, 0, 3, 0, 1]);
        assert_eq!(parse_go(&d), Some(("abc".into(), vec![3, 1])));
        assert_eq!(parse_go(&[0, 0, 0, 9, 1]), None);
        assert_eq!(parse_go(&[0xff, 0xff, 0xff, 0xff]), None);
        assert_eq!(parse_go(&[0, 0, 0, 0, 0, 1]), None);
    }

    #[test]
    fn meta_context_requests_parse_and_select_base_allocation() {
        let mut d = Vec::new();
        d.extend_from_slice(&0u32.to_be_bytes());
        d.extend_from_slice(&2u32.to_be_bytes());
        for q in ["qemu:dirty-bitmap:x", "base:allocation"] {
            d.extend_from_slice(&(q.len() as u32).to_be_bytes());
            d.extend_from_slice(q.as_bytes());
        }
        let (name, qs) = parse_meta_context(&d).unwrap();
        assert_eq!(name, "");
        assert!(meta_matches(&qs, false));
        assert!(!meta_matches(&qs[..1], false));
        assert!(meta_matches(&[], true) && !meta_matches(&[], false));
        assert!(meta_matches(&["base:".to_string()], true));
        // Truncated or with trailing bytes: refused.
        assert!(parse_meta_context(&d[..d.len() - 1]).is_none());
        let mut long = d.clone();
        long.push(0);
        assert!(parse_meta_context(&long).is_none());
        let r = block_status_reply(7, 4096, &[], false);
        assert_eq!(&r[0..4], &STRUCTURED_REPLY_MAGIC.to_be_bytes());
        assert_eq!(r.len(), STRUCTURED_LEN + 12);
        let r = block_status_reply(7, 8192, &[(4096, false), (4096, true)], false);
        assert_eq!(r.len(), STRUCTURED_LEN + 4 + 16);
        assert_eq!(
            &r[STRUCTURED_LEN + 12..STRUCTURED_LEN + 20],
            &[0, 0, 16, 0, 0, 0, 0, 3]
        );
        let r = block_status_reply(7, 8192, &[(4096, false), (4096, true)], true);
        assert_eq!(r.len(), STRUCTURED_LEN + 12, "REQ_ONE: one extent");
    }
}
