use super::*;

fn seg(addr: u64, len: u64) -> Segment {
    Segment { addr, len }
}

#[test]
fn bad_segments_are_refused() {
    assert_eq!(Region::new(&[]).err(), Some(Error::Invalid));
    assert_eq!(Region::new(&[seg(0x1000, 0)]).err(), Some(Error::Invalid));
    assert_eq!(
        Region::new(&[seg(u64::MAX - 10, 100)]).err(),
        Some(Error::Invalid),
        "an end that overflows"
    );
    assert_eq!(
        Region::new(&[seg(USER_END - PAGE, PAGE + 1)]).err(),
        Some(Error::Invalid),
        "kernel addresses"
    );
    assert_eq!(
        Region::new(&[seg(0xffff_8880_0000_0000, 64)]).err(),
        Some(Error::Invalid)
    );
    let many = [seg(0x1000, 1); MAX_SEGMENTS + 1];
    assert_eq!(Region::new(&many).err(), Some(Error::Invalid));
    assert!(Region::new(&many[..MAX_SEGMENTS]).is_ok());
    // 2^32 pages and more cannot be counted.
    assert_eq!(
        Region::new(&[seg(0, (1 << 32) * PAGE)]).err(),
        Some(Error::Invalid)
    );
}

#[test]
fn pages_follow_the_segments_in_order() {
    // 100 bytes straddling a page boundary, then two whole pages.
    let r = Region::new(&[seg(0x1000 + 4050, 100), seg(0x9000, 2 * PAGE)]).unwrap();
    assert_eq!((r.bytes(), r.pages()), (100 + 2 * PAGE, 4));
    assert_eq!(r.page_run(0), Some((0x1000, 2)));
    assert_eq!(r.page_run(1), Some((0x2000, 1)));
    assert_eq!(r.page_run(2), Some((0x9000, 2)));
    assert_eq!(r.page_run(3), Some((0xa000, 1)));
    assert_eq!(r.page_run(4), None);
    assert_eq!(r.pages_of(0, 1), Some((0, 1)));
    assert_eq!(r.pages_of(45, 2), Some((0, 2)), "the byte at 0x2000");
    assert_eq!(r.pages_of(99, 2), Some((1, 3)));
    assert_eq!(r.pages_of(100 + PAGE, PAGE), Some((3, 4)));
    assert_eq!(r.pages_of(0, r.bytes() + 1), None);
    assert_eq!(r.pages_of(u64::MAX, 2), None);
    assert_eq!(r.pages_of(3, 0), None);
    assert_eq!(r.hull(), (0x1000 + 4050, 0xb000));
    assert!(r.overlaps(0xa000, 0xa001));
    assert!(!r.overlaps(0x3000, 0x9000), "the gap between segments");
}

#[test]
fn every_byte_is_located_in_its_page_and_pieces_tile_the_region() {
    // Two segments sharing page 0x3000, the first starting mid-page.
    let r = Region::new(&[seg(0x1ff0, 0x1100), seg(0x3100, 0x20)]).unwrap();
    assert_eq!(
        r.locate(0),
        Some(Piece {
            page: 0,
            at: 0xff0,
            len: 0x10
        })
    );
    assert_eq!(
        r.locate(0x10),
        Some(Piece {
            page: 1,
            at: 0,
            len: 0x1000
        })
    );
    // The first segment's last bytes stop at its end, not the page's.
    assert_eq!(
        r.locate(0x1010),
        Some(Piece {
            page: 2,
            at: 0,
            len: 0xf0
        })
    );
    // The second segment's page counts again.
    assert_eq!(
        r.locate(0x1100),
        Some(Piece {
            page: 3,
            at: 0x100,
            len: 0x20
        })
    );
    assert_eq!(r.locate(0x1120), None);
    assert_eq!(r.locate(u64::MAX), None);
    // Walking by pieces covers every byte once, in pages that agree with
    // pages_of.
    let mut off = 0;
    while let Some(p) = r.locate(off) {
        assert!(p.len > 0 && u64::from(p.at + p.len) <= PAGE);
        assert_eq!(r.pages_of(off, 1), Some((p.page, p.page + 1)));
        off += u64::from(p.len);
    }
    assert_eq!(off, r.bytes());
}
