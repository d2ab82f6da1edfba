//! Tables supplied by the embedder: sized at run time, checked, and of any
//! container (heap, borrowed slices, arrays).

use rmx_core::config::TableName;
use rmx_core::storage::{
    Fixed, HoldEntry, Peer, PostedEntry, RequestEntry, Slices, SlotEntry, UnexpectedEntry,
    WorkEntry, MAX_TABLE,
};
use rmx_core::*;
use rmx_proptest::heap::{sizes, Heap};
use rmx_proptest::memnic::MemNic;

const CFG: Config = Config::reliable(256, 8);

/// Sends `bytes` from `a` (rank `from`) to `b` (rank `to`) and returns what
/// `b` received, by way of an unexpected message when `early` says so.
/// In a large job the sender starts without credit and asks for it.
fn exchange<S: Storage, T: Storage>(
    a: &mut Endpoint<S>,
    from: u16,
    b: &mut Endpoint<T>,
    to: u16,
    bytes: &[u8],
    early: bool,
) -> Vec<u8> {
    let (mut an, mut bn) = (MemNic::new(16, 1024), MemNic::new(16, 1024));
    let src = an.user_buf(bytes.to_vec());
    let dst = bn.user_buf(vec![0; 64]);
    let recv = |b: &mut Endpoint<T>, bn: &mut MemNic| {
        b.irecv(0, bn, Source::Rank(from), TagSel::Tag(7), 0, dst, 64)
            .unwrap()
    };
    let mut r = (!early).then(|| recv(b, &mut bn));
    let s = a
        .isend(0, &mut an, to, 7, 0, src, bytes.len() as u32)
        .unwrap();
    for _ in 0..8 {
        for (_, p) in an.outbox.drain(..) {
            let buf = bn.deliver(p);
            b.on_receive(0, &mut bn, buf);
        }
        if r.is_none() && b.queue_lens().1 > 0 {
            r = Some(recv(b, &mut bn));
        }
        for (_, p) in bn.outbox.drain(..) {
            let buf = an.deliver(p);
            a.on_receive(0, &mut an, buf);
        }
    }
    assert!(a.test(s).unwrap().is_some(), "the send completed");
    let st = b.test(r.expect("arrived")).unwrap().expect("received");
    assert_eq!((st.source, st.len), (from, bytes.len() as u32));
    bn.user[0][..bytes.len()].to_vec()
}

#[test]
fn one_build_serves_two_ranks_and_eight_thousand() {
    for ranks in [2u16, 8192] {
        let s = Sizes::for_job(ranks, &CFG);
        let mut first = Endpoint::<Heap>::new(CFG, 0, ranks, Tables::new(&s)).unwrap();
        let mut last = Endpoint::<Heap>::new(CFG, ranks - 1, ranks, Tables::new(&s)).unwrap();
        let got = exchange(&mut first, 0, &mut last, ranks - 1, b"far", true);
        assert_eq!(got, b"far", "{ranks} ranks");
        let lent = first.stats().credit_requests_out > 0;
        assert_eq!(lent, ranks > 2, "only the large job starts without credit");
        assert_eq!(last.held_buffers(), 0);
    }
    // The endpoint itself holds no table: it is small wherever it lives.
    assert!(core::mem::size_of::<Endpoint<Heap>>() < 2048);
}

#[test]
fn borrowed_slices_and_arrays_serve_as_tables() {
    let mut peers = [Peer::UNUSED; 2];
    let mut posted = [PostedEntry::FREE; 4];
    let mut unexpected = [UnexpectedEntry::FREE; 8];
    let mut holds = [HoldEntry::UNUSED; 8];
    let mut slots = [SlotEntry::UNUSED; 4];
    let mut requests = [RequestEntry::UNUSED; 8];
    let mut work = [WorkEntry::UNUSED; 8];
    let tables: Tables<Slices> = Tables {
        peers: &mut peers,
        posted: &mut posted,
        unexpected: &mut unexpected,
        holds: &mut holds,
        slots: &mut slots,
        requests: &mut requests,
        work: &mut work,
    };
    let mut b = Endpoint::new(CFG, 1, 2, tables).unwrap();
    let fixed = Tables::<Fixed<8>>::new(&sizes(0, 0, 0, 0, 0));
    let mut a = Endpoint::new(CFG, 0, 2, fixed).unwrap();
    assert_eq!(exchange(&mut a, 0, &mut b, 1, b"posted", false), b"posted");
    assert_eq!(exchange(&mut a, 0, &mut b, 1, b"held", true), b"held");
}

#[test]
fn a_table_outside_its_bounds_is_refused_by_name() {
    let good = sizes(2, 4, 8, 4, 8);
    let cases = [
        (Sizes { slots: 1, ..good }, TableName::Slots, 2),
        (
            Sizes {
                unexpected: 0,
                ..good
            },
            TableName::Unexpected,
            1,
        ),
        (Sizes { holds: 0, ..good }, TableName::Holds, 1),
        (
            Sizes {
                posted: MAX_TABLE + 1,
                ..good
            },
            TableName::Posted,
            0,
        ),
        (
            Sizes {
                requests: MAX_TABLE + 1,
                ..good
            },
            TableName::Requests,
            0,
        ),
    ];
    for (s, table, min) in cases {
        let e = Endpoint::<Heap>::new(CFG, 0, 2, Tables::new(&s)).err();
        let want = ConfigError::TableSize {
            table,
            min,
            max: MAX_TABLE,
        };
        assert_eq!(e, Some(want), "{s:?}");
    }
    // The work table is at least as long as the request table.
    let mut short: Tables<Heap> = Tables::new(&good);
    short.work.pop();
    let e = Endpoint::<Heap>::new(CFG, 0, 2, short).err();
    let want = ConfigError::TableSize {
        table: TableName::Work,
        min: good.requests,
        max: MAX_TABLE,
    };
    assert_eq!(e, Some(want));
    // The largest tables are accepted, and a full table is a typed error.
    let big = Sizes {
        posted: MAX_TABLE,
        ..good
    };
    assert!(Endpoint::<Heap>::new(CFG, 0, 2, Tables::new(&big)).is_ok());
    let tiny = sizes(2, 1, 8, 4, 2);
    let mut ep = Endpoint::<Heap>::new(CFG, 0, 2, Tables::new(&tiny)).unwrap();
    let mut nic = MemNic::new(4, 1024);
    let d = nic.user_buf(vec![0; 8]);
    let any = |ep: &mut Endpoint<Heap>, nic: &mut MemNic| {
        ep.irecv(0, nic, Source::Any, TagSel::Any, 0, d, 8)
    };
    let first = any(&mut ep, &mut nic).unwrap();
    assert_eq!(any(&mut ep, &mut nic), Err(RecvError::PostedQueueFull));
    assert_eq!(ep.cancel(first), Ok(true));
    assert!(
        any(&mut ep, &mut nic).is_ok(),
        "the cancelled entry is free again"
    );
}

#[test]
fn the_request_table_runs_out_and_comes_back() {
    let s = sizes(2, 4, 8, 4, 2);
    let mut ep = Endpoint::<Heap>::new(CFG, 0, 2, Tables::new(&s)).unwrap();
    let mut nic = MemNic::new(4, 1024);
    let d = nic.user_buf(vec![0; 8]);
    let post = |ep: &mut Endpoint<Heap>, nic: &mut MemNic| {
        ep.irecv(0, nic, Source::Rank(1), TagSel::Any, 0, d, 8)
    };
    let (r1, _r2) = (
        post(&mut ep, &mut nic).unwrap(),
        post(&mut ep, &mut nic).unwrap(),
    );
    assert_eq!(post(&mut ep, &mut nic), Err(RecvError::RequestTableFull));
    ep.cancel(r1).unwrap();
    assert!(ep.test(r1).unwrap().is_some());
    assert!(post(&mut ep, &mut nic).is_ok());
}
