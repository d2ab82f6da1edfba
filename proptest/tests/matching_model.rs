//! Matching against a reference model: random sequences of arrivals, receives
//! (with ANY_SOURCE / ANY_TAG), cancels and completions, run through the real
//! endpoint and through a plain list-based model of MPI matching. Both must
//! pair the same messages with the same receives.

use proptest::prelude::*;
use rmx_core::wire::{Header, Kind, HEADER_LEN};
use rmx_core::{Config, Endpoint, RecvFault, Request, Source, TagSel, UserBuf};
use rmx_core::{Sizes, Tables};
use rmx_proptest::heap::{sizes, Heap};
use rmx_proptest::memnic::MemNic;

type Ep = Endpoint<Heap>;
const SIZES: Sizes = sizes(4, 64, 256, 8, 256);

#[derive(Clone, Copy, Debug)]
enum Op {
    /// A message from `src` with `tag` in `ctx` arrives.
    Arrive { src: u16, tag: u32, ctx: u16 },
    /// A receive is posted.
    Post {
        src: Option<u16>,
        tag: Option<u32>,
        ctx: u16,
    },
    /// The k-th oldest still-pending receive is cancelled.
    Cancel { k: usize },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (1u16..4, 0u32..3, 0u16..2).prop_map(|(src, tag, ctx)| Op::Arrive { src, tag, ctx }),
        (
            proptest::option::of(1u16..4),
            proptest::option::of(0u32..3),
            0u16..2
        )
            .prop_map(|(src, tag, ctx)| Op::Post { src, tag, ctx }),
        (0usize..4).prop_map(|k| Op::Cancel { k }),
    ]
}

/// The model: pending receives and unexpected messages as plain lists.
#[derive(Default)]
struct Model {
    posted: Vec<(usize, Option<u16>, Option<u32>, u16)>,
    unexpected: Vec<(usize, u16, u32, u16)>,
}

fn fits(p: (Option<u16>, Option<u32>, u16), m: (u16, u32, u16)) -> bool {
    p.0.is_none_or(|s| s == m.0) && p.1.is_none_or(|t| t == m.1) && p.2 == m.2
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    #[test]
    fn endpoint_matches_like_the_model(ops in proptest::collection::vec(op(), 1..120)) {
        let mut ep = Ep::new(Config::reliable(64, 64), 0, 4, Tables::new(&SIZES)).unwrap();
        let mut nic = MemNic::new(8, 128);
        let mut model = Model::default();
        // Receive id -> (request, buffer); message ids are carried in the payload.
        let mut recvs: Vec<Option<(Request, UserBuf)>> = Vec::new();
        let mut pending: Vec<usize> = Vec::new();
        let mut seq = [0u32; 4];
        let mut msg_id = 0usize;
        let mut model_pairs = Vec::new();
        for op in ops {
            match op {
                Op::Arrive { src, tag, ctx } => {
                    let id = msg_id;
                    msg_id += 1;
                    let mut b = vec![0u8; HEADER_LEN + 8];
                    Header { kind: Kind::Eager, src, context: ctx, tag, len: 8,
                             seq: seq[src as usize], ack: 0, credit: 0 }.encode(&mut b).unwrap();
                    seq[src as usize] += 1;
                    b[HEADER_LEN..].copy_from_slice(&(id as u64).to_le_bytes());
                    let rb = nic.deliver(b);
                    ep.on_receive(0, &mut nic, rb);
                    match model.posted.iter().position(|&(_, s, t, c)| fits((s, t, c), (src, tag, ctx))) {
                        Some(i) => { let r = model.posted.remove(i); model_pairs.push((r.0, id)); }
                        None => model.unexpected.push((id, src, tag, ctx)),
                    }
                }
                Op::Post { src, tag, ctx } => {
                    let rid = recvs.len();
                    let buf = nic.user_buf(vec![0; 8]);
                    let source = src.map_or(Source::Any, Source::Rank);
                    let tagsel = tag.map_or(TagSel::Any, TagSel::Tag);
                    let req = ep.irecv(0, &mut nic, source, tagsel, ctx, buf, 8).unwrap();
                    recvs.push(Some((req, buf)));
                    pending.push(rid);
                    match model.unexpected.iter().position(|&(_, s, t, c)| fits((src, tag, ctx), (s, t, c))) {
                        Some(i) => { let m = model.unexpected.remove(i); model_pairs.push((rid, m.0)); }
                        None => model.posted.push((rid, src, tag, ctx)),
                    }
                }
                Op::Cancel { k } => {
                    if let Some(&rid) = pending.get(k) {
                        let (req, _) = recvs[rid].unwrap();
                        let cancelled = ep.cancel(req).unwrap();
                        let in_model = model.posted.iter().position(|p| p.0 == rid);
                        prop_assert_eq!(cancelled, in_model.is_some(), "cancel of receive {}", rid);
                        if let Some(i) = in_model { model.posted.remove(i); }
                    }
                }
            }
            // Collect completions, as an application polling would.
            let mut still = Vec::new();
            for rid in pending.drain(..) {
                let (req, buf) = recvs[rid].unwrap();
                match ep.test(req).unwrap() {
                    Some(st) if st.fault == Some(RecvFault::Cancelled) => {}
                    Some(st) => {
                        let id = u64::from_le_bytes(nic.user[buf.0 as usize][..8].try_into().unwrap()) as usize;
                        prop_assert_eq!(st.len, 8);
                        let want = model_pairs.iter().find(|p| p.0 == rid).map(|p| p.1);
                        prop_assert_eq!(Some(id), want, "receive {} got message {}", rid, id);
                    }
                    None => still.push(rid),
                }
            }
            pending = still;
        }
        let (p, u) = ep.queue_lens();
        prop_assert_eq!((p, u), (model.posted.len(), model.unexpected.len()));
    }
}
